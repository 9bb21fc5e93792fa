#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace walrelay::router {

/// One column of a table as the catalog describes it now (pg_attribute).
struct ColumnInfo {
  std::string name;
  std::uint32_t type_oid = 0;
  std::int32_t typmod = -1;  ///< pg_attribute.atttypmod (-1: none)
  bool not_null = false;
  /// Whether PostgreSQL can store the value out of line (TOAST): a variable-length type whose
  /// storage is not PLAIN. Only such columns may be missing from an UPDATE's new row
  /// (PostgreSQL docs §73.2 "TOAST"; wal2json skips unchanged TOASTed values).
  bool toastable = false;
  /// The transaction that last wrote the column's pg_attribute row (its ADD COLUMN, or a later
  /// ALTER of the column): its xmin. 0 when unknown; 1 or 2 (bootstrap, frozen) when older than
  /// any change. A change written by an earlier transaction may predate the column (existed_at).
  std::uint32_t attribute_xmin = 0;

  friend bool operator==(const ColumnInfo&, const ColumnInfo&) = default;
};

/// Whether a column of the current catalog shape surely existed, as it is now, when the change of
/// transaction `change_xid` (wal2json's xid; 0 unknown) was written: its pg_attribute row is older
/// than that transaction (xids compared modulo 2^32 as PostgreSQL does). True when either is
/// unknown. ALTER TABLE takes an ACCESS EXCLUSIVE lock, so a column added by a transaction that
/// began after the change's was added after the change (or in a transaction that waited for it).
[[nodiscard]] inline bool existed_at(const ColumnInfo& column, std::uint64_t change_xid) {
  constexpr std::uint32_t kFirstNormalXid = 3;
  if (change_xid == 0 || column.attribute_xmin < kFirstNormalXid) return true;
  const auto xid = static_cast<std::uint32_t>(change_xid);
  return static_cast<std::int32_t>(column.attribute_xmin - xid) < 0;
}

/// A table's shape from the catalog: what the router needs besides the change itself.
struct TableSchema {
  std::string schema;
  std::string table;
  std::vector<ColumnInfo> columns;       ///< in attnum order, dropped columns left out
  std::vector<std::string> primary_key;  ///< immediate (non-deferrable) primary key, column order
  char replica_identity = 'd';           ///< pg_class.relreplident: d, n, f, i
  /// Columns of the REPLICA IDENTITY USING INDEX index (relreplident 'i'), column order.
  std::vector<std::string> replica_identity_index;
  /// Key columns of every valid, immediate, non-partial, non-expression unique index whose
  /// columns are all NOT NULL (index column order): keys that identify a row (snapshot chunks).
  std::vector<std::vector<std::string>> unique_keys;
  std::string root_schema;  ///< partitioned tables: the root of a leaf (pg_partition_root);
  std::string root_table;   ///<   otherwise the table itself
  /// A partitioned table (relkind 'p'): its rows are its partitions'. Any other table's rows are
  /// its own, not its inheritance children's (INHERITS), which wal2json reports as theirs.
  bool partitioned = false;
  /// pg_class.relkind: 'r' (ordinary) and 'p' (partitioned) are captured; any other kind (a
  /// materialized view 'm', whose REFRESH CONCURRENTLY and creation wal2json decodes as rows) is
  /// never published, whenever it appeared (captured_kind()).
  char kind = 'r';

  friend bool operator==(const TableSchema&, const TableSchema&) = default;

  /// Whether walrelay captures relations of this kind (ordinary and partitioned tables).
  [[nodiscard]] bool captured_kind() const { return kind == 'r' || kind == 'p'; }
  /// "a materialized view", "a view", ... for logs.
  [[nodiscard]] const char* kind_name() const {
    switch (kind) {
      case 'm':
        return "a materialized view";
      case 'v':
        return "a view";
      case 'f':
        return "a foreign table";
      case 'S':
        return "a sequence";
      default:
        return "a relation of another kind";
    }
  }

  [[nodiscard]] const ColumnInfo* column(std::string_view name) const {
    for (const auto& c : columns) {
      if (c.name == name) return &c;
    }
    return nullptr;
  }
};

/// How many of `table`'s columns, from the first, surely existed when the change of transaction
/// `change_xid` was written: up to the last one existed_at says did (attnums only grow, so every
/// column before it, still in the catalog, was added before it). The rest were added (or altered)
/// since.
[[nodiscard]] inline std::size_t columns_existing_at(const TableSchema& table,
                                                     std::uint64_t change_xid) {
  for (std::size_t p = table.columns.size(); p > 0; --p) {
    if (existed_at(table.columns[p - 1], change_xid)) return p;
  }
  return 0;
}

/// Where the router gets table shapes from. Implemented over a catalog connection in src/.
class SchemaProvider {
 public:
  virtual ~SchemaProvider() = default;
  /// The table's schema, or nullptr when the table is unknown (e.g. dropped since). With
  /// `refresh`, re-reads the catalog first (after a change showed a column the cached shape does
  /// not have). The pointer stays valid for the provider's lifetime (a refresh returns a new one).
  virtual const TableSchema* table(std::string_view schema, std::string_view table,
                                   bool refresh) = 0;
};

}  // namespace walrelay::router
