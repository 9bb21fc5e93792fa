#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "walrelay/core/lsn.hpp"
#include "walrelay/decoder/change.hpp"
#include "walrelay/decoder/wal2json_value.hpp"
#include "walrelay/router/table_schema.hpp"
#include "walrelay/snapshot/snapshot_progress.hpp"

namespace walrelay::snapshot {

/// How one table is read in chunks: its columns (the catalog's shape, attnum order, as wal2json
/// prints them) and the key it is paginated on, in ORDER BY order.
struct TableReadPlan {
  const router::TableSchema* shape = nullptr;
  std::vector<std::string> key;         ///< pagination columns (unique); empty: no chunking
  std::vector<std::size_t> key_index;   ///< their positions in shape->columns
  std::vector<unsigned int> key_types;  ///< their type OIDs (typed query parameters)
  std::vector<std::string_view> pk;     ///< the Change's pk: the primary key columns
  std::vector<std::string> name_json;   ///< column names as JSON string tokens
  std::string select;                   ///< `SELECT <columns> FROM [ONLY] <table>`
};

/// The plan for `shape`: paginated on its primary key, else on a unique index over NOT NULL
/// columns (the one with the columns of `preferred_key`, the table's key_columns or REPLICA
/// IDENTITY index, when there is one): keyset pagination needs a key that identifies every row,
/// and a NULL compares as unknown. Without any, `key` is empty (read whole, not resumable).
/// nullopt when a key column is not a column of the table.
std::optional<TableReadPlan> make_read_plan(const router::TableSchema& shape,
                                            const std::vector<std::string>& preferred_key);

/// Startup options of every connection that reads a snapshot's rows, after the pinned ones. With
/// row_security off (PostgreSQL docs §20.11.1, as pg_dump reads), a read that a row-level security
/// policy would filter for walrelay's role fails (insufficient_privilege) instead of silently
/// leaving out rows the stream carries; a role that owns the table or has BYPASSRLS reads all.
/// `row_security` (snapshot.row_security): policies apply, nothing is added.
inline const char* read_every_row_options(bool row_security) {
  return row_security ? "" : " -c row_security=off";
}
/// What a failed read's message gains when a row-level security policy refused it.
inline std::string row_security_hint(const std::string& sqlstate, const std::string& message) {
  if (sqlstate != "42501" || message.find("row-level security") == std::string::npos) return "";
  return " (walrelay's role must read every row, as the stream carries every row: ALTER ROLE ... "
         "BYPASSRLS, or snapshot.row_security: true if its policies show it every row; "
         "retrying)";
}

/// SQLSTATEs (PostgreSQL docs Appendix A) that mean the table is gone: undefined_table,
/// invalid_schema_name.
inline bool is_dropped_table(const std::string& sqlstate) {
  return sqlstate == "42P01" || sqlstate == "3F000";
}
/// untranslatable_character, character_not_in_repertoire: a stored value has no equivalent in
/// the connection's client_encoding (UTF8), e.g. byte 0x81 in a WIN1252 database
/// (docs/operations.md "Database encoding"). Reading the chunk again cannot help.
inline bool is_untranslatable(const std::string& sqlstate) {
  return sqlstate == "22P05" || sqlstate == "22021";
}
/// undefined_column: the table's columns changed (DDL) since its shape was read.
inline bool is_changed_columns(const std::string& sqlstate) {
  return sqlstate == "42703";
}

/// The keyset query for the next chunk: rows after `$1..$n` (the last key read, when
/// `after_key`) in key order, at most `limit` rows. A row comparison uses the key's btree order,
/// as ORDER BY does (PostgreSQL docs §9.24.5 "Row Constructor Comparison").
std::string chunk_query(const TableReadPlan& plan, bool after_key, std::size_t limit);

/// The same query with the last key read (`after`, nullptr: the first chunk) written into it as
/// quoted literals instead of parameters, for a simple-query batch (SnapshotConnection::
/// async_batch). Each literal is untyped and takes its key column's type, as a parameter of that
/// type would (PostgreSQL docs §10.2 "Operators": an unknown-type literal is resolved to the
/// other operand's type).
std::string chunk_query_literal(const TableReadPlan& plan, const KeyText* after, std::size_t limit);

/// In a transaction on the exported snapshot: one row, one column, `f` when the table's file
/// (a partitioned table's: any of its leaves') differs from the snapshot's, i.e. the table was
/// rewritten since (ALTER … TYPE, TRUNCATE, VACUUM FULL, CLUSTER: not MVCC-safe, PostgreSQL docs
/// §13.6 "Caveats"), which the snapshot would read as empty; `t` otherwise.
std::string same_file_query(const TableReadPlan& plan);

/// Turns one row (value texts in column order, nullopt = SQL NULL) into the `Change` a wal2json
/// INSERT of it would decode to: the same column names, type OIDs and value tokens, `pk` from
/// the plan. `tokens` is the caller's reused buffer that the Change points into (with the plan).
/// `check_utf8` (an SQL_ASCII database, whose texts arrive as stored): every value and name must
/// be UTF-8, as the stream requires of each wal2json line.
/// Error: a numeric column whose text is not a number, or with `check_utf8` a value or name that
/// is not UTF-8 (names the column and the bytes' offset, never quotes the bytes).
std::expected<void, std::string> build_row_change(
    const TableReadPlan& plan, std::span<const std::optional<std::string_view>> values,
    decoder::NumericTokens numerics, bool check_utf8, Lsn lsn, std::uint64_t xid,
    decoder::Change& change, std::string& tokens);

/// The key's values of a row, as text (for the progress record and the next chunk's parameters).
KeyText key_of(const TableReadPlan& plan, std::span<const std::optional<std::string_view>> values);

}  // namespace walrelay::snapshot
