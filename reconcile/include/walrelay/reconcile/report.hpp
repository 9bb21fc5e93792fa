#pragma once

// What one reconcile run found, per table, and how it is printed: a readable summary (per table
// and class: count, oldest age, example ids) and `--json` (every break). Pure: no I/O beyond the
// stream it is given.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "walrelay/reconcile/classify.hpp"

namespace walrelay::reconcile {

/// One table's result.
struct TableReport {
  std::string table;                ///< schema.table
  std::vector<std::string> topics;  ///< the topics read, sorted
  std::uint64_t source_rows = 0;    ///< rows compared (after --since)
  std::uint64_t kafka_records = 0;  ///< records compared (after --since, up to the end offsets)
  std::uint64_t expanded_buckets = 0;
  /// Records whose row was committed after the source's snapshot (newer than the comparison).
  std::uint64_t newer_than_snapshot = 0;
  std::string snapshot_lsn;  ///< the WAL insert position in the source's snapshot, `X/X`
  bool delivered = false;    ///< the slot's confirmed_flush_lsn passed snapshot_lsn in time
  /// `source.mode: poll`: "in flight" is the row's status, not the slot (no snapshot_lsn, and
  /// `delivered` is true: a `sent` row must be in Kafka).
  bool poll = false;
  /// Poll mode: rows not yet sent (pending) and younger than reconcile.in_flight_limit: on their
  /// way, not breaks.
  std::uint64_t in_flight_rows = 0;
  /// `--inbox` ran: records of the table's topics the inbox consumes at or past its stored
  /// position (its lag), not breaks.
  bool inbox = false;
  std::uint64_t inbox_in_flight = 0;
  Classification found;  ///< breaks and duplicates
  /// `--repair`: the ids of the `missing` events re-emitted and acknowledged by Kafka, and those
  /// that could not be (id, reason: the row could not be read again or built, or Kafka refused
  /// or did not acknowledge the record).
  std::vector<std::string> repaired;
  std::vector<std::pair<std::string, std::string>> repair_failed;
};

/// The whole run.
struct Report {
  std::vector<TableReport> tables;
  std::int64_t now_ms = 0;  ///< when ages are measured (ms since the epoch)

  bool repair = false;  ///< `--repair` ran: the summary and the JSON say what it re-emitted

  /// Any break (duplicates are not breaks).
  [[nodiscard]] bool has_breaks() const;
  /// Breaks `--repair` did not fix: every break but the missing events it re-emitted.
  [[nodiscard]] std::uint64_t unrepaired_breaks() const;
  /// Missing events `--repair` could not re-emit.
  [[nodiscard]] std::uint64_t repair_failures() const;
};

/// A break's age at `now_ms`: from its first_seen_ms, else (break ages not applied) its since_ms;
/// -1 when neither is known.
std::int64_t break_age_ms(const Break& b, std::int64_t now_ms);

/// The summary: one line per table with its figures, then a table of `table class count
/// oldest_age examples` (ages as `1h2m`, `-` unknown, break_age_ms), or "no breaks"; after a
/// `--repair`, a line per table naming the events re-emitted and those that failed.
void write_summary(std::ostream& out, const Report& report);

/// One JSON object: {"tables":[{"table":…,"topics":[…],"source_rows":n,"kafka_records":n,
/// "duplicates":n,"duplicate_ids":[…],"newer_than_snapshot":n,"snapshot_lsn":"X/X",
/// "delivered":bool, in poll mode "mode":"poll","in_flight_rows":n,
/// "breaks":[{"class":…,"id":…,"since_ms":n|null,"age_s":n|null,
/// "first_seen_ms":n|null,"detail":…}]} plus, after `--repair`, "repaired":[ids],
/// "repair_failed":[{"id":…,"reason":…}]],"breaks":n,"now_ms":n}. `since_ms` is the event's
/// time, `age_s` break_age_ms in seconds.
void write_json(std::ostream& out, const Report& report);

/// `ms` as a short duration: `45s`, `12m3s`, `5h2m`, `3d4h`; `-` for a negative value.
std::string format_age(std::int64_t ms);

}  // namespace walrelay::reconcile
