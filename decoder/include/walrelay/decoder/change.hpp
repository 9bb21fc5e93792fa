#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "walrelay/core/lsn.hpp"

namespace walrelay::decoder {

/// The `action` of a wal2json format-version 2 line (wal2json README, "format-version 2").
enum class Action : char {
  kBegin = 'B',
  kCommit = 'C',
  kInsert = 'I',
  kUpdate = 'U',
  kDelete = 'D',
  kTruncate = 'T',
  kMessage = 'M',
};

/// One column of a row image. Views point into the decoder's buffers and stay valid until the
/// decoder's next `decode` call: copy what you keep.
struct Column {
  std::string_view name;       ///< unescaped column name, exactly as in the catalog
  std::string_view name_json;  ///< the name as a JSON string token, quotes and escapes included
  std::uint32_t type_oid = 0;  ///< pg_type OID (`typeoid`, from include-type-oids); 0 if absent
  /// The value's raw JSON token exactly as wal2json printed it: a number's digits (`12.30`, never
  /// via double), a string token with its quotes and escapes (`"a\u00e9"`), `true`/`false`, or
  /// `null` for SQL NULL.
  std::string_view value;

  /// True when the value is SQL NULL (wal2json prints JSON `null`; 2.5 also prints NaN/Infinity
  /// of numeric and floats as `null`, shared/cases/README.md item 6).
  [[nodiscard]] bool is_null() const { return value == "null"; }
};

/// One decoded wal2json format-version 2 line.
/// Which fields are set depends on `action`:
/// - B/C: xid, lsn (start of the commit record), next_lsn (end of it: the LSN to confirm),
///   timestamp (commit time).
/// - I/U/D: xid, lsn (of the row's record; neither unique nor monotonic, never filter by it),
///   schema, table, columns (new row; I and U), identity (old key or old row under REPLICA
///   IDENTITY FULL; U and D), pk (primary key column names, in the catalog's order).
/// - T: xid, schema, table.
/// - M: transactional, prefix, content (unescaped), lsn (end of the message record); xid and
///   timestamp are absent for non-transactional messages.
struct Change {
  Action action = Action::kBegin;
  std::uint64_t xid = 0;  ///< 0 when absent or null
  Lsn lsn;
  Lsn next_lsn;
  std::string_view timestamp;  ///< commit timestamp text, e.g. `2026-11-30 00:14:37.104367+00`
  std::string_view schema;
  std::string_view table;
  std::vector<Column> columns;
  std::vector<Column> identity;
  std::vector<std::string_view> pk;
  bool transactional = false;
  std::string_view prefix;
  std::string_view content;
};

}  // namespace walrelay::decoder
