// The connector's start-up table checks: which tables the configuration captures, where their
// events go, what wal2json is asked to send, and what a snapshot reads.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "walrelay/catalog/table_inventory.hpp"
#include "walrelay/connector/connector.hpp"
#include "walrelay/connector/preflight.hpp"
#include "walrelay/decoder/plugin_options.hpp"

namespace walrelay {

namespace {

bool has_partial_glob(const std::string& part) {
  return part != "*" && part.find('*') != std::string::npos;
}

}  // namespace

Connector::Outcome Connector::check_tables() {
  // Look the configured tables up: name them in the summary, refuse what cannot run, and warn
  // about tables whose UPDATE/DELETE wal2json would drop silently (shared/cases/README.md item 4).
  std::vector<decoder::TableFilter> filters;
  bool filter_on_server = true;
  snapshot_tables_.clear();
  leaf_partitions_.clear();
  std::vector<std::string> routes;  // "schema.table → topic" for the summary
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
  // The rules `check` applies too (preflight.hpp): the first refusal stops here, with exit 2.
  const TablePreflight preflight = preflight_tables(*matched, skipped, unmatched, *router_, cfg_);
  for (const auto& f : preflight.general) {
    if (!f.refused) spdlog::warn("{}", f.message);
  }
  if (const TableFinding* refusal = preflight.first_refusal()) {
    reason_ = refusal->message;
    return fatal(ExitCode::kConfigError);
  }
  remember_captured(*matched, skipped);
  for (const TableVerdict& v : preflight.tables) {
    const MatchedTable& m = *v.table;
    for (const auto& f : v.findings) spdlog::warn("{}", f.message);
    const std::string& schema = m.schema;
    const std::string& table = m.table;
    if (m.partitioned) {
      // wal2json reports a partitioned table's changes under its leaves' names (shared/cases/
      // README.md item 10): filtering by the root's name on the server would match nothing.
      filter_on_server = false;
    }
    if (v.role == router::TableRole::kOutbox) {
      routes.push_back(schema + "." + table + " (outbox)");
      continue;
    }
    if (v.role != router::TableRole::kRowChange) continue;  // excluded
    const std::string qualified = schema + "." + table;
    if (m.partitioned && cfg_.events.partitions == config::Partitions::kLeaf) {
      // Leaf topics: a snapshot reads each leaf, so its rows go where its changes go.
      auto leaves =
          stream_->query("SELECT n.nspname, c.relname FROM pg_catalog.pg_partition_tree(" +
                         pg::quote_literal(pg::quote_ident(schema) + "." + pg::quote_ident(table)) +
                         "::regclass) t JOIN pg_catalog.pg_class c ON c.oid = t.relid "
                         "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE "
                         "t.isleaf ORDER BY 1, 2");
      if (!leaves) {
        reason_ = "cannot list the partitions of " + qualified + ": " + leaves.error();
        return Outcome::kRetry;
      }
      auto& listed = leaf_partitions_[{schema, table}];
      std::string names;
      for (const auto& leaf : *leaves) {
        snapshot_tables_.emplace_back(leaf[0].value_or(""), leaf[1].value_or(""));
        listed.push_back(snapshot_tables_.back());
        names += (names.empty() ? "" : ", ") + listed.back().first + "." + listed.back().second;
      }
      // events.partitions: leaf: each leaf's changes go to the leaf's own topic, not v.topic.
      routes.push_back(qualified + " → the topics of its " + std::to_string(listed.size()) +
                       " leaf partition(s) (" + names + ")");
    } else {
      routes.push_back(qualified + " → " + v.topic);
      snapshot_tables_.emplace_back(schema, table);
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
