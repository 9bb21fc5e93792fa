#pragma once

// EventRouter's private parts shared by its source files (private to walrelay_router):
// event_router.cpp (transactions, records, outbox routes), table_rules.cpp (rules, roles, shapes),
// row_changes.cpp (the row-change envelope), row_images.cpp (before/after), row_keys.cpp (keys).

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "router_helpers.hpp"
#include "walrelay/router/event_router.hpp"

namespace walrelay::router {

/// How one source table is routed: made once per table (make_rule), its shape read again when
/// its changes disagree with it.
struct EventRouter::Rule {
  TableRole role = TableRole::kIgnored;
  std::string topic;
  std::string source_schema;
  std::string source_table;
  std::string data_collection;  // "schema.table" for transaction metadata
  // source's `<schema>,"table":<table>,"txId":` (JSON), written once: append_source's middle.
  std::string source_names;
  bool outbox_update_warned = false;
  const config::OutboxConfig* outbox = nullptr;
  config::Operations ops;
  bool tombstones = true;
  std::vector<std::string> key_columns;  // configured (key_columns of the tables entry)
  bool identity_key_warned = false;      // a change keyed by its identity (see select_key)
  bool kind_warned = false;              // a name that is now a relation of another kind
  // catalog_epoch_ when `schema` was last read: a table keyed by its replica identity is read
  // again at its next change after a transaction without changes (DDL).
  std::uint64_t identity_epoch = 0;
  // Last shape check of a partial UPDATE or DELETE (coarse_monotonic); none yet: nullopt.
  std::optional<std::chrono::nanoseconds> shape_verified;
  // The JSON tokens of `names_json_of`'s column names (a debezium DELETE's padded `before`).
  const TableSchema* names_json_of = nullptr;
  std::vector<std::string> names_json;
  std::string line_shape;  // a table the catalog does not know: its last INSERT's pk | columns
  std::vector<std::string> exclude;
  std::vector<std::string> mask;
  std::string leaf_schema;
  std::string leaf_table;
  const TableSchema* schema = nullptr;
  std::string collision;  // set: the table cannot be published (topic clash or invalid topic)
  // The types of the columns by their position in a change (see column_type): looked up in the
  // type registry once per table shape, not per value.
  mutable std::vector<ResolvedType> column_types;
};

/// One output record of the router, reused across calls.
struct EventRouter::Slot : RecordBuffer {
  std::string header_key;  // a row-change key as the key-change headers show it (route_row)
};

}  // namespace walrelay::router
