#pragma once
// `walrelay tail --config FILE [--from-slot] [--max N]` (issue "Operations"): prints the records
// walrelay would publish (topic, key, headers, value) as JSON lines on stdout, without Kafka.
// By default from a TEMPORARY slot (new changes only, gone when tail ends); with `from_slot`, the
// configured slot's pending changes, never confirmed (the slot's position is untouched; refused
// while the slot is active).

#include <cstddef>
#include <ostream>

#include "walrelay/app/exit_code.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay {

/// Runs until SIGINT/SIGTERM or `max` records are printed (never more; 0 = no limit). Logs the
/// temporary slot's name and starting LSN once, when its stream has started. Returns kOk,
/// kRuntimeError (connection, slot missing or active) or kMappingFailed (a change walrelay could
/// not map: the error is printed as a JSON line too, and tail goes on).
ExitCode run_tail(const config::Config& cfg, bool from_slot, std::size_t max, std::ostream& out);

}  // namespace walrelay
