#pragma once
// The table rules walrelay applies before it creates a slot, in one place: `run` stops on the
// first refusal (exit 2) and logs the warnings; `check` prints every finding and exits as `run`
// would. A configuration that cannot run must leave nothing behind on the server.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "table_inventory.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/router/event_router.hpp"

namespace walrelay {

/// One finding of the table rules.
struct TableFinding {
  bool refused = false;  ///< `run` exits 2 (ExitCode::kConfigError) on it; else a warning
  std::string subject;   ///< the table (`schema.table`) or `tables` entry it is about
  std::string message;   ///< one sentence naming the subject, what happens and the fix
};

/// What `run` makes of one matched table.
struct TableVerdict {
  const MatchedTable* table = nullptr;  ///< into the `matched` passed to preflight_tables
  router::TableRole role = router::TableRole::kIgnored;
  std::string topic;             ///< row-change tables: where its events go
  std::vector<std::string> key;  ///< row-change tables: the event key's columns (may be empty)
  std::vector<TableFinding> findings;  ///< about this table, in the order `run` meets them
};

/// Every finding, in the order `run` meets them.
struct TablePreflight {
  std::vector<TableVerdict> tables;  ///< one per matched table, in match order
  /// Relations named in `tables` that logical decoding does not deliver (refused), globbed ones
  /// (skipped, a warning), entries that match nothing (a warning): before the tables' findings.
  std::vector<TableFinding> general;

  /// The first refusal (what `run` exits 2 with), or nullopt when `run` can start.
  [[nodiscard]] const TableFinding* first_refusal() const;
};

/// Applies the table rules to what match_tables found, with `router` (the same configuration and
/// catalog `run` routes with) deciding each table's role and topic:
/// - a relation named without a glob whose changes logical decoding does not deliver (views,
///   materialized views, foreign, unlogged, temporary tables; PostgreSQL docs §49.6): refused;
/// - an outbox table without a column its outbox configuration names: refused;
/// - a topic longer than Kafka's 249 characters, or two tables on one topic (Kafka treats `.` and
///   `_` alike): refused;
/// - a primary key and REPLICA IDENTITY USING INDEX on other columns, without key_columns: its
///   DELETEs carry only the index's columns (PostgreSQL docs, ALTER TABLE "REPLICA IDENTITY";
///   shared/ cases/BUG-10, CASE-05): refused;
/// - REPLICA IDENTITY NOTHING (or USING INDEX of a dropped index), or DEFAULT without a primary
///   key: wal2json drops UPDATE and DELETE; no key at all: null keys. Warnings.
/// Queries nothing itself; the router may read the catalog (blocking) for tables it has not seen.
TablePreflight preflight_tables(const std::vector<MatchedTable>& matched,
                                const std::vector<SkippedRelation>& skipped,
                                const std::vector<std::string>& unmatched,
                                router::EventRouter& router, const config::Config& cfg);

}  // namespace walrelay
