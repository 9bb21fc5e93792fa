#pragma once

// One reconciliation (command.cpp), shared by the one-shot command and the schedule
// (schedule.hpp): compare, `--repair` if asked, then keep the break ages (break_ages.hpp).

#include <atomic>
#include <expected>
#include <string>

#include "walrelay/app/exit_code.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/reconcile/command.hpp"
#include "walrelay/reconcile/report.hpp"

namespace walrelay::reconcile {

/// Why a run stopped before a report: the exit code and the line to log.
struct Failure {
  ExitCode code = ExitCode::kReadFailed;
  std::string message;
  bool cancelled = false;  ///< `cancel` was set: the run was abandoned, nothing to report
};

/// One reconciliation with `options` (its `schedule` is ignored). `cancel` is polled while the
/// run waits (for the slot, for a topic's records): once set, the run ends with a cancelled
/// Failure. Blocking; any thread, one run at a time per process (they share the break-age
/// file). The break ages are read and written here; a file that cannot be read or written is
/// logged (warning) and the ages then count from this run.
std::expected<Report, Failure> reconcile_once(const config::Config& cfg, const Options& options,
                                              const std::atomic<bool>& cancel);

/// The exit code of a report (command.hpp run): kOk, kBreaksFound or kDeliveryFailed.
ExitCode exit_code_of(const Report& report);

}  // namespace walrelay::reconcile
