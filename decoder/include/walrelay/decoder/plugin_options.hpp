#pragma once

#include <string>
#include <utility>
#include <vector>

namespace walrelay::decoder {

/// A schema/table pair to pass to wal2json's `add-tables` option.
struct TableFilter {
  std::string schema;  ///< exact name, or `*` for any schema
  std::string table;   ///< exact name, or `*` for any table
};

/// The wal2json options this decoder relies on, in the order they are sent with
/// START_REPLICATION (wal2json README, "Parameters"):
/// format-version 2, include-xids, include-timestamp, include-lsn, include-pk,
/// include-transaction, include-type-oids=1 with include-types=0 (2.5 prints some type names as
/// invalid JSON: shared/cases/README.md item 5), and `add-tables` built from `tables` when it is
/// not empty (names escaped as wal2json requires: backslash before space, quote, comma, dot and
/// asterisk, except a lone `*` meaning "any").
std::vector<std::pair<std::string, std::string>> wal2json_options(
    const std::vector<TableFilter>& tables);

/// Escapes one schema or table name for `add-tables` (a lone `*` stays a wildcard).
std::string escape_add_tables_name(const std::string& name);

}  // namespace walrelay::decoder
