#pragma once
// The rules walrelay applies before it streams or creates a slot, in one place: `run` stops on
// the first refusal and logs the warnings; `check` prints every finding and exits as `run` would.
// A configuration that cannot run must leave nothing behind on the server.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "walrelay/app/exit_code.hpp"
#include "walrelay/catalog/table_inventory.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"
#include "walrelay/router/event_router.hpp"
#include "walrelay/state/state_store.hpp"

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
/// - a row-change table without a column its entry's key_columns names: refused (its events
///   would otherwise have no configured key; the router refuses such changes too);
/// - key_columns of which some allow NULL, without a primary key or unique index on NOT NULL
///   columns among them: several rows can share one Kafka key. A warning;
/// - a table without a column its entry's mask_columns names, where the entry names the table
///   without a glob: refused (a typo would publish the real column unmasked); a glob entry: only
///   a mask column none of its matched tables has is refused (a `general` finding naming the
///   entry), since a glob's tables may differ in columns;
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

/// Why `run` stops before streaming: its exit code and the message it logs.
struct Refusal {
  ExitCode code = ExitCode::kRuntimeError;
  std::string message;
};

// ---------------------------------------------------------------------------- the server

/// `wal_level` as SHOW prints it: logical decoding needs `logical` (PostgreSQL docs §20.5.1,
/// "wal_level"); anything else is refused with exit 1 (a server setting, not walrelay's).
std::optional<Refusal> check_wal_level(const std::string& wal_level);

/// A PostgreSQL duration as SHOW prints it (`60s`, `1min`, `500ms`, `0`); 0 for what it cannot
/// read.
std::chrono::milliseconds parse_pg_duration(const std::string& text);

/// The standby status update interval walrelay uses: source.status_interval, unless it is not
/// well below the server's wal_sender_timeout (then a third of that, at least 100 ms), since the
/// walsender drops a client silent for that long (PostgreSQL docs §20.6.1 "wal_sender_timeout";
/// shared/cases/README.md item 13). `warning` says so when the interval was shortened.
struct StatusInterval {
  std::chrono::milliseconds interval;
  std::string warning;
};
StatusInterval status_interval_for(std::chrono::milliseconds configured,
                                   std::chrono::milliseconds wal_sender_timeout);

// ------------------------------------------------------------------------------ the slot

/// Whether source.allow_slot_reset counts for this start: it accepts one loss, so once used (the
/// record says so) it is ignored until the operator removes it from the configuration.
bool slot_reset_allowed(const config::Config& cfg, const std::optional<SlotRecord>& record);

/// The durable slot record against the server walrelay connected to (docs/operations.md
/// "Reliability"): a different cluster (system id), or a timeline whose fork (`fork`: where the
/// record's timeline ended in the server's TIMELINE_HISTORY, nullopt when it is not in it) comes
/// before what walrelay confirmed, means the slot's stream may miss changes: exit 5 (kSlotLost),
/// naming the last safe LSN. nullopt: no record, `allow_reset`, or the record fits. `fork` is only
/// read when the timelines differ.
std::optional<Refusal> check_slot_record(const std::optional<SlotRecord>& record, bool allow_reset,
                                         const pg::SystemInfo& server,
                                         const std::optional<Lsn>& fork);

/// The slot as pg_replication_slots shows it (nullopt: it does not exist):
/// - missing while the record says walrelay streamed it (and no `allow_reset`): exit 5;
/// - missing with source.create_slot false: exit 1;
/// - not a logical wal2json slot, or of another database: exit 1;
/// - invalidated (wal_status lost, e.g. by max_slot_wal_keep_size; PostgreSQL docs, view
///   "pg_replication_slots"): exit 5.
/// nullopt: `run` creates the slot or streams from it (an active slot is waited for, not refused).
std::optional<Refusal> check_slot(const std::optional<pg::SlotInfo>& slot,
                                  const std::optional<SlotRecord>& record, bool allow_reset,
                                  const config::Config& cfg, const std::string& database);

}  // namespace walrelay
