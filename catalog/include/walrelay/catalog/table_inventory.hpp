#pragma once
// Which tables of the database a configuration's `tables` entries match, with what PostgreSQL
// says about their keys: shared by `run` (start-up checks, wal2json filters, snapshot list) and
// `check` (the listing a user reads before starting).

#include <cstddef>
#include <expected>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "walrelay/config/config.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"

namespace walrelay {

/// One table a `tables` entry matches (the first entry that matches decides; a table several
/// entries match is listed once).
struct MatchedTable {
  std::size_t entry = 0;  ///< index into Config::tables
  std::string schema;
  std::string table;
  bool partitioned = false;                       ///< relkind 'p'
  char replica_identity = 'd';                    ///< pg_class.relreplident: d, n, f, i
  bool has_primary_key = false;                   ///< an immediate (non-deferrable) primary key
  std::vector<std::string> primary_key;           ///< its columns in the constraint's order
  std::vector<std::string> replica_identity_key;  ///< REPLICA IDENTITY USING INDEX columns
};

/// A relation a `tables` entry matches whose changes logical decoding does not deliver
/// completely: views, materialized views and foreign tables (no changes at all), unlogged tables
/// (nothing is WAL-logged), temporary tables (PostgreSQL docs §49.6 "Logical Decoding Output
/// Plugins" / §31.1 "Publication": only persistent tables).
struct SkippedRelation {
  std::size_t entry = 0;
  std::string schema;
  std::string table;
  std::string what;    ///< "a view", "a materialized view", "an unlogged table", ...
  bool named = false;  ///< the entry names it without a glob (refused, not skipped)
};

/// Runs one catalog query; Row cells are nullopt for SQL NULL.
using CatalogQuery =
    std::function<std::expected<std::vector<pg::ReplicationStream::Row>, std::string>(
        const std::string& sql)>;

/// match_tables in steps, for a caller that runs the catalog queries itself (without blocking,
/// say): one query per `tables` entry, answered in entry order.
class TableMatcher {
 public:
  explicit TableMatcher(const config::Config& cfg);  ///< `cfg` must outlive the matcher
  /// The SQL for `tables` entry `entry`.
  [[nodiscard]] std::string query(std::size_t entry) const;
  /// Its rows: adds to `matched`, `unmatched` and `skipped`.
  void take(std::size_t entry, const std::vector<pg::ReplicationStream::Row>& rows);

  std::vector<MatchedTable> matched;
  std::vector<std::string> unmatched;
  std::vector<SkippedRelation> skipped;

 private:
  const config::Config& cfg_;
  std::set<std::string> seen_;  // a table several entries match is listed once
};

/// The tables (ordinary and partitioned, persistent, not partitions, outside pg_catalog,
/// information_schema and pg_toast*) each `tables` entry's globs match, entries in configuration
/// order, tables by name. `unmatched` receives the names of entries that match nothing, `skipped`
/// the matching relations of other kinds or persistence (both may be null).
/// Error: the catalog query's message, naming the entry.
std::expected<std::vector<MatchedTable>, std::string> match_tables(
    const CatalogQuery& query, const config::Config& cfg,
    std::vector<std::string>* unmatched = nullptr, std::vector<SkippedRelation>* skipped = nullptr);

/// match_tables on the replication connection (before START_REPLICATION).
std::expected<std::vector<MatchedTable>, std::string> match_tables(
    pg::ReplicationStream& stream, const config::Config& cfg,
    std::vector<std::string>* unmatched = nullptr, std::vector<SkippedRelation>* skipped = nullptr);

/// The key columns a table's row-change events are keyed by: the entry's key_columns, else the
/// primary key, else the REPLICA IDENTITY index's columns; empty when it has none (null keys).
std::vector<std::string> event_key_columns(const MatchedTable& t, const config::Config& cfg);

/// A `*` glob as a LIKE pattern (backslash escapes LIKE's own wildcards).
std::string glob_to_like(const std::string& glob);

}  // namespace walrelay
