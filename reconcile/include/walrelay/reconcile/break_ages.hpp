#pragma once

// The first-seen times of the open breaks, kept across `walrelay reconcile` runs in a state file
// under walrelay's state directory (docs/reconcile.md "Break ages"): `<state_dir>/<slot>.reconcile`
// beside the slot record (state/state_store.hpp), replaced atomically (state::write_file_durably).
// A file and not a table, so that reconcile stays read-only on the source database (it reads in a
// READ ONLY transaction and needs no privilege beyond SELECT on the outbox tables and
// pg_replication_slots).
//
// A break is identified by (table, class, event id). A break seen again keeps its first-seen
// time; a break of a table compared in this run that is not seen again is closed (forgotten);
// the breaks of tables not compared in this run (`--table`) are kept as they were.
//
// File format, UTF-8 text, one break a line after a comment and a version line:
//   # walrelay reconcile: first-seen times of open breaks (docs/reconcile.md "Break ages")
//   version=1
//   <first_seen_ms>\t<table>\t<class>\t<event id>
// with `\` `\t` `\n` `\r` in a field written as `\\` `\t` `\n` `\r`.

#include <cstdint>
#include <expected>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "walrelay/reconcile/report.hpp"

namespace walrelay::reconcile {

/// The open breaks' first-seen times: (table, class name, id) -> ms since the epoch.
using BreakAgeKey = std::tuple<std::string, std::string, std::string>;
using BreakAges = std::map<BreakAgeKey, std::int64_t>;

/// The file of `slot` in `state_dir`: `<state_dir>/<slot>.reconcile`.
std::string break_ages_path(const std::string& state_dir, const std::string& slot);

/// Reads the file at `path`. A file that does not exist is empty (the first run). Error: it
/// cannot be read, or a line is malformed (the message names the file and the line).
std::expected<BreakAges, std::string> load_break_ages(const std::string& path);

/// Writes `ages` to `path` (its directory `dir` created if missing), atomically. Error: the OS
/// reason, naming the file.
std::expected<void, std::string> save_break_ages(const std::string& dir, const std::string& path,
                                                 const BreakAges& ages);

/// Sets every break's first_seen_ms in `report` from `ages` (a break seen before keeps its time;
/// a new one gets the earlier of its since_ms and report.now_ms), then replaces the entries of
/// the report's tables in `ages` with its breaks (closing those not seen). Entries of other
/// tables are kept.
void apply_break_ages(Report& report, BreakAges& ages);

}  // namespace walrelay::reconcile
