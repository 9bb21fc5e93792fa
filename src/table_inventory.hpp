#pragma once
// Which tables of the database a configuration's `tables` entries match, with what PostgreSQL
// says about their keys: shared by `run` (start-up checks, wal2json filters, snapshot list) and
// `check` (the listing a user reads before starting).

#include <cstddef>
#include <expected>
#include <string>
#include <vector>

#include "replication/replication_stream.hpp"
#include "walrelay/config/config.hpp"

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

/// The tables (kinds r and p, not partitions, outside pg_catalog/information_schema/pg_toast*)
/// each `tables` entry's globs match, entries in configuration order, tables by name. Per entry,
/// `unmatched` receives the names of entries that match nothing (may be null).
/// Error: the catalog query's message, naming the entry.
std::expected<std::vector<MatchedTable>, std::string> match_tables(
    replication::ReplicationStream& stream, const config::Config& cfg,
    std::vector<std::string>* unmatched = nullptr);

/// The key columns a table's row-change events are keyed by: the entry's key_columns, else the
/// primary key, else the REPLICA IDENTITY index's columns; empty when it has none (null keys).
std::vector<std::string> event_key_columns(const MatchedTable& t, const config::Config& cfg);

/// A `*` glob as a LIKE pattern (backslash escapes LIKE's own wildcards).
std::string glob_to_like(const std::string& glob);

}  // namespace walrelay
