#pragma once

// How the inbox treats a failed statement of a batch (docs/inbox.md "Decisions"), by SQLSTATE.

#include <cstdint>

#include "walrelay/pg/error.hpp"

namespace walrelay::inbox::detail {

/// What a failed statement means for the batch, from its SQLSTATE (PostgreSQL docs Appendix A).
enum class Failure : std::uint8_t {
  /// Class 22 data exception, 23 integrity constraint violation, P0 PL/pgSQL (P0001
  /// raise_exception), 54 program limit: this event's fault; it is QUARANTINED, the batch goes on.
  kEvent,
  /// pg::ErrorKind::kTransient (40001 serialization failure, 40P01 deadlock, class 08 or a lost
  /// connection, 53, 57, 58): the whole batch is rolled back and decided again.
  kRetry,
  /// Anything else (a handler's syntax error, an undefined function, a privilege): retrying
  /// cannot help and quarantining every event would hide it: the inbox stops.
  kFatal,
};
Failure classify(const pg::Error& error);

}  // namespace walrelay::inbox::detail
