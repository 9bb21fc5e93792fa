#pragma once

// `walrelay outbox status` and `walrelay outbox retry` (docs/relay.md "Status" and "Retry"): the
// operator's view of a polled outbox and the way back for its failed rows. Both first run the
// relay's preflight (relay/preflight.hpp) on `source.conninfo`, so a table, column or privilege
// the configuration names wrongly is reported naming its key (exit 2), as `check` and `run` do.
// Blocking; for the command line only. `cfg` must be a poll-mode configuration (main refuses the
// others).

#include <ostream>
#include <string>
#include <vector>

#include "walrelay/app/exit_code.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay::relay {

/// Failed rows listed per table by `outbox status`, oldest first.
inline constexpr std::size_t kStatusFailedRows = 10;

/// `walrelay outbox status --config F [--json]`: per table, the backlog (pending rows) and the
/// oldest pending row's age in seconds per aggregate type, and the failed rows (their count per
/// aggregate type, and the oldest kStatusFailedRows with event id, aggregate type and id,
/// attempts, last_error when configured, age). Ages come from `outbox.timestamp`, else from
/// `poll.order_by` when it is a time; without either they are absent (`-`, JSON null).
/// `json`: one JSON object {"name","tables":[{"table","pending","failed","oldest_pending_s",
/// "by_type":[{"aggregate_type","pending","failed","oldest_pending_s"}],"failed_rows":[{
/// "event_id","aggregate_type","aggregate_id","attempts","last_error","age_s"}]}]}, numbers as
/// JSON numbers. Returns kOk; kConfigError (the key named on `err`) when the preflight refuses
/// the configuration; kRuntimeError (the reason on `err`) when PostgreSQL cannot be read.
ExitCode run_outbox_status(const config::Config& cfg, bool json, std::ostream& out,
                           std::ostream& err);

/// What `outbox retry` puts back: the given event ids, or every failed row.
struct RetryRequest {
  std::vector<std::string> event_ids;  ///< compared with each event id column's text
  bool all_failed = false;             ///< `--failed`: every failed row of every table
  std::string actor;                   ///< `--actor`; "" = the OS user, else current_user
};

/// `walrelay outbox retry --config F (--event-id ID … | --failed) [--actor NAME]`: in one
/// transaction, sets the failed rows back to pending (status `statuses.pending`, attempts 0,
/// last_error NULL when configured; no other column changes) and writes one row per event to
/// `<relay.schema>.audit` (app/audit.hpp; created with the schema when missing): actor, action
/// `outbox retry`, the event id, and the table with the row's attempts and last_error before.
/// Logs one audit line. Prints a line per event put back on `out`, and on `err` each requested id
/// that is not failed (its status) or not found: those are not changed. Returns kOk when every
/// requested id was put back (with `all_failed`: always, even when none was failed),
/// kRuntimeError when some id was not (the others are put back) or PostgreSQL failed (nothing is
/// changed), kConfigError when the preflight refuses the configuration.
ExitCode run_outbox_retry(const config::Config& cfg, const RetryRequest& request, std::ostream& out,
                          std::ostream& err);

}  // namespace walrelay::relay
