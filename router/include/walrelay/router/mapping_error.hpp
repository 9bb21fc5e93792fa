#pragma once

#include <string>

namespace walrelay::router {

/// Why a change could not be turned into an event (the change is not skipped: the connector stops
/// or dead-letters it, and never confirms past it).
struct MappingError {
  std::string reason;
};

}  // namespace walrelay::router
