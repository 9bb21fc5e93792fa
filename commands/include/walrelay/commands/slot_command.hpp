#pragma once
// `walrelay slot status|create|drop --config FILE [--json] [--yes]` (issue "Operations"): look at
// or manage the configured replication slot from a shell, with walrelay's own slot record beside
// the server's view.

#include <ostream>
#include <string>

#include "walrelay/app/exit_code.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay {

/// Runs `action` ("status", "create" or "drop") for cfg.source.slot and prints to `out` (a table,
/// or one JSON object with `json`: `exists`, `active`, `dropped` as JSON booleans, `active_pid`
/// and the byte counts as JSON numbers or null when the server has none, everything else,
/// LSNs and system identifiers included, as strings). `drop` refuses without `yes`; once the
/// server dropped the slot it also removes walrelay's files of it in the state directory
/// (remove_slot_files: the slot record and the snapshot progress) and prints the paths under
/// `record`. `create` makes the slot only (no record): the first `run` with snapshot.mode initial
/// reads the tables by an incremental snapshot. Returns kOk, kRuntimeError (connection or server
/// error, slot missing for drop, active slot for drop, a file of the dropped slot that could not
/// be removed) or
/// kConfigError (unknown action, drop without --yes).
ExitCode run_slot_command(const config::Config& cfg, const std::string& action, bool json, bool yes,
                          std::ostream& out);

}  // namespace walrelay
