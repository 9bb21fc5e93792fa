#pragma once

// The inbox's decisions counted (docs/inbox.md "Decisions").

#include <cstddef>

namespace walrelay::inbox::detail {

/// Decisions of one batch (or of a run, summed).
struct Counts {
  std::size_t applied = 0;
  std::size_t duplicate = 0;
  std::size_t deferred = 0;
  std::size_t quarantined = 0;
  std::size_t skipped = 0;  ///< tombstones (no value): not events, only their offsets advance
  Counts& operator+=(const Counts& o) {
    applied += o.applied;
    duplicate += o.duplicate;
    deferred += o.deferred;
    quarantined += o.quarantined;
    skipped += o.skipped;
    return *this;
  }
};

}  // namespace walrelay::inbox::detail
