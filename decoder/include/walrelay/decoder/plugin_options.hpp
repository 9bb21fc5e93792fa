#pragma once

#include <optional>
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
/// asterisk, except a lone `*` meaning "any"). Logical messages are limited to
/// `message_prefixes` plus walrelay's own prefix `walrelay` (`add-msg-prefixes`), so the server
/// does not send messages nobody reads.
/// `tables` nullopt: no table filter on the server (walrelay filters); an empty list: no table at
/// all (`filter-tables` `*.*`, for a connector with message outboxes only).
std::vector<std::pair<std::string, std::string>> wal2json_options(
    const std::optional<std::vector<TableFilter>>& tables,
    const std::vector<std::string>& message_prefixes = {});

/// Escapes one schema or table name for `add-tables` (a lone `*` stays a wildcard).
std::string escape_add_tables_name(const std::string& name);

}  // namespace walrelay::decoder
