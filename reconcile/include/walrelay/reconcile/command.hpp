#pragma once

// `walrelay reconcile`: does Kafka hold what the database says it should? (docs/reconcile.md)
//
// For each outbox table of the configuration: the rows of one REPEATABLE READ snapshot of the
// source, with the WAL insert position noted in it, against the records of the table's topics
// read to their end offsets taken once the slot's confirmed_flush_lsn has passed that position
// (walrelay confirms a position only once everything before it is in Kafka: docs/delivery.md),
// so a difference is a break, not lag. Matched by event id (header `id`), compared by payload
// digest (header `payload_digest`, else router::payload_digest of the value), in buckets
// (buckets.hpp) so memory is bounded by `reconcile.buckets` and `reconcile.max_expanded_entries`
// whatever the topic holds.
//
// With `source.mode: poll` (docs/relay.md) there is no slot to wait for: a row's `poll.status`
// says whether it must be in Kafka (`sent`), is on its way (`pending`: an `in_flight` break only
// once older than reconcile.in_flight_limit) or was given up on (`failed`, a break of its own);
// docs/reconcile.md "Poll mode".

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "walrelay/app/exit_code.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay::reconcile {

/// The command line's choices.
struct Options {
  /// `--table schema.table` (repeatable): only these outbox tables; empty: every outbox table the
  /// configuration captures.
  std::vector<std::string> tables;
  /// `--since D`: only events whose timestamp (the outbox's `timestamp` column, which is also the
  /// record's timestamp) is at most D old; needs `outbox.timestamp` on every table compared.
  std::optional<std::chrono::milliseconds> since;
  bool json = false;  ///< `--json`: one JSON object with every break instead of the summary
  /// `--schedule D`: keep running, one reconciliation every D (from the start of one run to the
  /// start of the next), serving /metrics on `metrics.listen` (schedule.hpp) until SIGTERM.
  std::optional<std::chrono::milliseconds> schedule;
  /// `--repair`: publish the `missing` events again (repair.hpp); not with `schedule`.
  bool repair = false;
  /// `--inbox`: also compare the records with the ledger of the configuration's `inbox:`
  /// (inbox_check.hpp); needs that section, with `inbox.event_id: header:id`.
  bool inbox = false;
};

/// Runs one reconciliation (or, with `options.schedule`, one every period until SIGINT/SIGTERM,
/// through app::run) and writes each report to `out` (progress and errors go to the log). Every
/// run keeps the open breaks' first-seen times in `<source.state_dir>/<slot>.reconcile`
/// (break_ages.hpp). Returns kOk (0) when there is no break (or `--repair` re-emitted every
/// break, all of them missing events), kBreaksFound (1) when there are, kConfigError (2) for a
/// bad option or configuration (the message names the key or option), kDeliveryFailed (3) when
/// `--repair` could not re-emit a missing event, kKafkaAuthFailed (7), or kReadFailed (9) when a
/// side could not be read (PostgreSQL or Kafka: no answer, refused, the slot missing). With
/// `schedule`: kOk once stopped by a signal; kConfigError or kKafkaAuthFailed when a run ends
/// with one (retrying cannot help); a run that could not read a side is logged, counted and
/// followed by the next.
ExitCode run(const config::Config& cfg, const Options& options, std::ostream& out);

}  // namespace walrelay::reconcile
