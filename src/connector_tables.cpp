// The connector's start-up table checks: which tables the configuration captures, where their
// events go, what wal2json is asked to send, and what a snapshot reads.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "connector.hpp"
#include "table_inventory.hpp"
#include "walrelay/decoder/plugin_options.hpp"

namespace walrelay {

namespace {

bool has_partial_glob(const std::string& part) {
  return part != "*" && part.find('*') != std::string::npos;
}

}  // namespace

Connector::Outcome Connector::check_tables() {
  // Look the configured tables up: name them in the summary, detect topic collisions, and warn
  // about tables whose UPDATE/DELETE wal2json would drop silently (shared/cases/README.md item 4).
  std::vector<decoder::TableFilter> filters;
  bool filter_on_server = true;
  snapshot_tables_.clear();
  std::vector<std::string> routes;            // "schema.table → topic" for the summary
  std::map<std::string, std::string> topics;  // topic → the table publishing to it
  for (const auto& tc : cfg_.tables) {
    if (has_partial_glob(tc.schema_pattern) || has_partial_glob(tc.table_pattern)) {
      filter_on_server = false;  // wal2json's add-tables only knows a whole `*`
    }
    filters.push_back({tc.schema_pattern, tc.table_pattern});
  }
  if (!cfg_.snapshot.signal_table.empty()) {
    // The signal table's INSERTs must reach walrelay; they are never published.
    filters.push_back({cfg_.snapshot.signal_table_schema, cfg_.snapshot.signal_table_name});
  }
  std::vector<std::string> unmatched;
  std::vector<SkippedRelation> skipped;
  auto matched = match_tables(*stream_, cfg_, &unmatched, &skipped);
  if (!matched) {
    reason_ = matched.error();
    return Outcome::kRetry;
  }
  for (const auto& name : unmatched) spdlog::warn("tables entry '{}' matches no table yet", name);
  for (const SkippedRelation& r : skipped) {
    if (r.named) {
      // Named on purpose, yet nothing (or not everything) of it would ever arrive: refuse.
      reason_ = "tables entry '" + cfg_.tables[r.entry].name + "' names " + r.schema + "." +
                r.table + ", " + r.what +
                ": logical decoding does not deliver its changes (only persistent ordinary and "
                "partitioned tables). Remove it, or capture the tables it is built from";
      return fatal(ExitCode::kConfigError);
    }
    spdlog::info("skipping {}.{} ({}): logical decoding does not deliver its changes", r.schema,
                 r.table, r.what);
  }
  remember_captured(*matched, skipped);
  for (const MatchedTable& m : *matched) {
    const auto& tc = cfg_.tables[m.entry];
    const std::string& schema = m.schema;
    const std::string& table = m.table;
    if (m.partitioned) {
      // wal2json reports a partitioned table's changes under its leaves' names (shared/cases/
      // README.md item 10): filtering by the root's name on the server would match nothing.
      filter_on_server = false;
    }
    const auto role = router_->role_of(schema, table);
    if (role == router::TableRole::kOutbox) {
      // A misnamed column would stop the connector at the first event: refuse it now.
      if (auto missing = router_->missing_outbox_columns(schema, table); !missing.empty()) {
        std::string list;
        for (const auto& col : missing) list += (list.empty() ? "" : ", ") + col;
        reason_ = "outbox table " + schema + "." + table + " has no column " + list +
                  " named in its outbox configuration";
        return fatal(ExitCode::kConfigError);
      }
      routes.push_back(schema + "." + table + " (outbox)");
      continue;
    }
    if (role != router::TableRole::kRowChange) continue;  // excluded
    const std::string topic = router_->topic_of(schema, table);
    const std::string qualified = schema + "." + table;
    routes.push_back(qualified + " → " + topic);
    if (m.partitioned && cfg_.events.partitions == "leaf") {
      // Leaf topics: a snapshot reads each leaf, so its rows go where its changes go.
      auto leaves =
          stream_->query("SELECT n.nspname, c.relname FROM pg_catalog.pg_partition_tree(" +
                         replication::quote_literal(replication::quote_ident(schema) + "." +
                                                    replication::quote_ident(table)) +
                         "::regclass) t JOIN pg_catalog.pg_class c ON c.oid = t.relid "
                         "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE "
                         "t.isleaf ORDER BY 1, 2");
      if (!leaves) {
        reason_ = "cannot list the partitions of " + qualified + ": " + leaves.error();
        return Outcome::kRetry;
      }
      for (const auto& leaf : *leaves) {
        snapshot_tables_.emplace_back(leaf[0].value_or(""), leaf[1].value_or(""));
      }
    } else {
      snapshot_tables_.emplace_back(schema, table);
    }
    if (topic.size() > 249) {
      reason_ = "table " + qualified + " maps to topic '" + topic +
                "', longer than Kafka's 249 characters; set a shorter `topic` for it";
      return fatal(ExitCode::kConfigError);
    }
    std::string clash_key = topic;  // Kafka treats '.' and '_' alike in topic names
    std::replace(clash_key.begin(), clash_key.end(), '.', '_');
    if (auto [it, inserted] = topics.emplace(clash_key, qualified); !inserted) {
      reason_ = "tables " + it->second + " and " + qualified + " would both publish to topic '" +
                topic +
                "' (names are mapped to Kafka's [A-Za-z0-9._-], and Kafka treats '.' and '_' "
                "alike); give one of them its own `topic`";
      return fatal(ExitCode::kConfigError);
    }
    const char ident = m.replica_identity;
    const bool has_pk = m.has_primary_key;
    if (has_pk && ident == 'i' && tc.key_columns.empty() &&
        std::set<std::string>(m.primary_key.begin(), m.primary_key.end()) !=
            std::set<std::string>(m.replica_identity_key.begin(), m.replica_identity_key.end())) {
      // Its INSERTs and UPDATEs carry the primary key, its DELETEs only the index's columns
      // (shared/cases/BUG-10, CASE-05): no key serves every event. The user chooses.
      std::string idx;
      for (const auto& col : m.replica_identity_key) idx += (idx.empty() ? "" : ", ") + col;
      reason_ = "table " + schema + "." + table +
                " has a primary key but REPLICA IDENTITY USING INDEX on (" + idx +
                "): its DELETEs carry only the index's columns, so no key fits all its events. "
                "Set key_columns: [" +
                idx +
                "] for it (every event keyed by the index), or REPLICA IDENTITY DEFAULT or FULL";
      return fatal(ExitCode::kConfigError);
    }
    if (ident == 'n' || (ident == 'i' && m.replica_identity_key.empty())) {
      spdlog::warn(
          "table {}.{} has REPLICA IDENTITY {}: wal2json drops its UPDATE and "
          "DELETE changes without a trace. Set REPLICA IDENTITY DEFAULT (with a primary "
          "key) or FULL",
          schema, table, ident == 'n' ? "NOTHING" : "USING INDEX of an index that was dropped");
    } else if (ident == 'd' && !has_pk) {
      spdlog::warn(
          "table {}.{} has REPLICA IDENTITY DEFAULT but no usable (non-deferrable) "
          "primary key: wal2json drops its UPDATE and DELETE changes without a trace. "
          "Add a primary key or set REPLICA IDENTITY FULL",
          schema, table);
    }
    if (!has_pk && ident != 'i' && tc.key_columns.empty()) {
      spdlog::warn(
          "table {}.{} has no primary key: its events get a null key (no per-key order, no "
          "compaction). Set key_columns for it",
          schema, table);
    }
  }
  if (!filter_on_server) {
    spdlog::info(
        "a tables pattern uses a partial glob or matches a partitioned table: filtering tables "
        "in walrelay instead of wal2json's add-tables");
  }
  std::vector<std::string> prefixes;
  for (const auto& m : cfg_.messages) prefixes.push_back(m.prefix);
  prefixes.emplace_back(snapshot::IncrementalSnapshot::kWatermarkPrefix);
  prefixes.push_back(cfg_.snapshot.signal_prefix);
  plugin_options_ =
      decoder::wal2json_options(filter_on_server ? std::optional(filters) : std::nullopt, prefixes);
  // NaN/Infinity as strings when the plugin supports it (wal2json 2.6+); dropped on first refusal.
  plugin_options_.emplace_back("numeric-data-types-as-string", "1");
  std::string summary;
  for (const auto& r : routes) summary += (summary.empty() ? "" : ", ") + r;
  spdlog::info("tables ({}): {}", routes.size(), summary.empty() ? "none yet" : summary);
  return Outcome::kStreaming;
}

}  // namespace walrelay
