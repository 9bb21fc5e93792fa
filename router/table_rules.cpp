// EventRouter's rules: which tables are routed how (the `tables`/`exclude` entries, partitions,
// topics and their collisions), the checks the connector makes of a table's configuration, and
// when a table's shape is read again (lookup_needed, shape_refresh_due).

#include <spdlog/spdlog.h>

#include <algorithm>

#include "event_router_internal.hpp"
#include "walrelay/core/json.hpp"

namespace walrelay::router {

using detail::append_text;
using detail::coarse_monotonic;
using detail::contains;
using detail::find_column;
using detail::join_names;
using detail::valid_topic_char;

void EventRouter::append_topic_part(std::string& out, std::string_view part) {
  for (char c : part) out.push_back(valid_topic_char(c) ? c : '_');
}

EventRouter::Rule EventRouter::make_rule(std::string_view schema, std::string_view table) {
  Rule r;
  r.leaf_schema = std::string(schema);
  r.leaf_table = std::string(table);
  r.schema = schemas_ != nullptr ? schemas_->table(schema, table, false) : nullptr;
  r.identity_epoch = catalog_epoch_;
  if (r.schema != nullptr && !r.schema->captured_kind()) {
    // wal2json decodes a materialized view's rows (its creation, REFRESH ... CONCURRENTLY): such
    // a relation is never published, also when it appeared after start-up (test:
    // CatalogIdentityTest.MaterializedViewsNeverPublishWheneverTheyAppeared).
    spdlog::info(
        "skipping {}.{} ({}): only ordinary and partitioned tables are captured, its changes are "
        "not published",
        schema, table, r.schema->kind_name());
    return r;
  }
  const bool is_leaf = r.schema != nullptr && (r.schema->root_schema != r.leaf_schema ||
                                               r.schema->root_table != r.leaf_table);
  struct Name {
    std::string schema, table;
  };
  std::vector<Name> candidates;
  // wal2json reports a partition's changes under the leaf's name (shared/cases/README.md item
  // 10): a rule written for the partitioned root applies to its leaves.
  if (is_leaf) candidates.push_back({r.schema->root_schema, r.schema->root_table});
  candidates.push_back({r.leaf_schema, r.leaf_table});

  const config::TableConfig* tc = nullptr;
  bool matched_root = false;
  for (std::size_t i = 0; i < candidates.size() && tc == nullptr; ++i) {
    const auto& cand = candidates[i];
    for (const auto& ex : exclude_) {
      if (config::glob_match(ex.schema_pattern, cand.schema) &&
          config::glob_match(ex.table_pattern, cand.table)) {
        return r;  // excluded
      }
    }
    for (const auto& t : tables_) {
      if (config::glob_match(t.schema_pattern, cand.schema) &&
          config::glob_match(t.table_pattern, cand.table)) {
        tc = &t;
        matched_root = is_leaf && i == 0;
        break;
      }
    }
  }
  if (tc == nullptr) return r;
  if (tc->outbox) {
    r.role = TableRole::kOutbox;
    r.outbox = &*tc->outbox;
    return r;
  }
  r.role = TableRole::kRowChange;
  const bool use_root =
      is_leaf && (matched_root || settings_.events.partitions == config::Partitions::kRoot) &&
      settings_.events.partitions == config::Partitions::kRoot;
  r.source_schema = use_root ? r.schema->root_schema : r.leaf_schema;
  r.source_table = use_root ? r.schema->root_table : r.leaf_table;
  r.data_collection = r.source_schema + "." + r.source_table;
  json::append_string(r.source_names, r.source_schema);
  r.source_names += ",\"table\":";
  json::append_string(r.source_names, r.source_table);
  r.source_names += ",\"txId\":";
  const std::string tmpl = tc->topic.value_or("{prefix}.{schema}.{table}");
  for (std::size_t pos = 0; pos < tmpl.size();) {
    if (tmpl.compare(pos, 8, "{prefix}") == 0) {
      append_topic_part(r.topic, settings_.topic_prefix);
      pos += 8;
    } else if (tmpl.compare(pos, 8, "{schema}") == 0) {
      append_topic_part(r.topic, r.source_schema);
      pos += 8;
    } else if (tmpl.compare(pos, 7, "{table}") == 0) {
      append_topic_part(r.topic, r.source_table);
      pos += 7;
    } else {
      r.topic.push_back(valid_topic_char(tmpl[pos]) ? tmpl[pos] : '_');
      ++pos;
    }
  }
  // Two tables whose names map to one topic would mix their events: refuse the later one (the
  // connector also checks the tables that exist at start-up).
  // Kafka treats '.' and '_' alike in topic names (their metric names collide): the broker
  // refuses the second of two such topics, so they count as one here.
  std::string clash_key = r.topic;
  std::replace(clash_key.begin(), clash_key.end(), '.', '_');
  if (auto [it, inserted] = topic_owner_.emplace(clash_key, r.data_collection);
      !inserted && it->second != r.data_collection) {
    r.collision = "tables " + it->second + " and " + r.data_collection +
                  " would both publish to topic '" + r.topic +
                  "' (names are mapped to Kafka's [A-Za-z0-9._-], and Kafka treats '.' and '_' "
                  "alike); give one of them its own topic";
  }
  if (r.topic.size() > 249) {
    r.collision = "topic '" + r.topic + "' is longer than Kafka's 249 characters";
  }
  r.ops = tc->operations.value_or(settings_.events.operations);
  r.tombstones = tc->tombstones_on_delete.value_or(settings_.events.tombstones_on_delete);
  r.key_columns = tc->key_columns;
  r.exclude = tc->exclude_columns;
  r.mask = tc->mask_columns;
  const bool glob = tc->schema_pattern.find('*') != std::string::npos ||
                    tc->table_pattern.find('*') != std::string::npos;
  if (r.schema != nullptr && !glob) {
    // `run` and `check` refuse this at start-up (preflight.hpp); `tail` says it once. (A glob's
    // mask columns need only exist in some of its tables.)
    std::vector<std::string_view> unknown;
    for (const auto& m : r.mask) {
      if (r.schema->column(m) == nullptr) unknown.push_back(m);
    }
    if (!unknown.empty()) {
      spdlog::warn("table {}.{} has no column {} named in mask_columns: nothing is masked for it",
                   schema, table, join_names(unknown));
    }
  }
  if (schemas_ != nullptr && r.schema == nullptr) {
    spdlog::warn(
        "table {}.{} is not in the catalog (dropped or renamed since its changes were written): "
        "they are mapped from their own content (key from each change, no TOAST fill-in)",
        schema, table);
  }
  return r;
}

EventRouter::Rule& EventRouter::rule_for(std::string_view schema, std::string_view table) {
  // Consecutive changes are mostly of one table: two comparisons instead of a hash lookup.
  if (last_rule_ != nullptr && last_rule_->leaf_table == table &&
      last_rule_->leaf_schema == schema) {
    return *last_rule_;
  }
  last_rule_ = &rule_lookup(schema, table);
  return *last_rule_;
}

EventRouter::Rule& EventRouter::rule_lookup(std::string_view schema, std::string_view table) {
  lookup_.assign(schema);
  lookup_.push_back('\0');
  lookup_.append(table);
  if (auto it = rules_.find(std::string_view(lookup_)); it != rules_.end()) return *it->second;
  rule_storage_.push_back(std::make_unique<Rule>(make_rule(schema, table)));
  Rule* r = rule_storage_.back().get();
  rules_.emplace(lookup_, r);
  return *r;
}

TableRole EventRouter::role_of(std::string_view schema, std::string_view table) {
  return rule_for(schema, table).role;
}

std::optional<std::string> EventRouter::outbox_event_id(const decoder::Change& c) {
  if (c.action != decoder::Action::kInsert) return std::nullopt;
  const Rule& rule = rule_for(c.schema, c.table);
  if (rule.role != TableRole::kOutbox) return std::nullopt;
  const decoder::Column* col = find_column(c.columns, rule.outbox->event_id);
  std::string id;
  if (col == nullptr || col->is_null() || !append_text(id, col->value)) return std::nullopt;
  return id;
}

namespace {

// The names of `wanted` that `shape` has no column of, in their order.
std::vector<std::string> absent_columns(const TableSchema& shape,
                                        const std::vector<std::string>& wanted) {
  std::vector<std::string> missing;
  for (const auto& w : wanted) {
    if (shape.column(w) == nullptr) missing.push_back(w);
  }
  return missing;
}

}  // namespace

std::vector<std::string> EventRouter::missing_outbox_columns(std::string_view schema,
                                                             std::string_view table) {
  const Rule& rule = rule_for(schema, table);
  if (rule.role != TableRole::kOutbox || rule.schema == nullptr) return {};
  const config::OutboxConfig& ob = *rule.outbox;
  std::vector<std::string> wanted = {ob.event_id, ob.aggregate_id, ob.aggregate_type, ob.payload};
  if (ob.event_type) wanted.push_back(*ob.event_type);
  if (ob.timestamp) wanted.push_back(*ob.timestamp);
  for (const auto& a : ob.additional) wanted.push_back(a.column);
  return absent_columns(*rule.schema, wanted);
}

std::vector<std::string> EventRouter::missing_key_columns(std::string_view schema,
                                                          std::string_view table) {
  const Rule& rule = rule_for(schema, table);
  if (rule.role != TableRole::kRowChange || rule.schema == nullptr) return {};
  return absent_columns(*rule.schema, rule.key_columns);
}

std::vector<std::string> EventRouter::nullable_key_columns(std::string_view schema,
                                                           std::string_view table) {
  const Rule& rule = rule_for(schema, table);
  if (rule.role != TableRole::kRowChange || rule.schema == nullptr || rule.key_columns.empty()) {
    return {};
  }
  const TableSchema& shape = *rule.schema;
  const auto within_key = [&](const std::vector<std::string>& unique) {
    return !unique.empty() && std::all_of(unique.begin(), unique.end(), [&](const auto& c) {
      return contains(rule.key_columns, c);
    });
  };
  // A primary key or a unique index on NOT NULL columns among the key columns: no two rows share
  // the key, whatever the other key columns hold.
  if (within_key(shape.primary_key) ||
      std::any_of(shape.unique_keys.begin(), shape.unique_keys.end(), within_key)) {
    return {};
  }
  std::vector<std::string> nullable;
  for (const auto& k : rule.key_columns) {
    const ColumnInfo* col = shape.column(k);
    if (col != nullptr && !col->not_null) nullable.push_back(k);
  }
  return nullable;
}

std::vector<std::string> EventRouter::missing_mask_columns(std::string_view schema,
                                                           std::string_view table) {
  const Rule& rule = rule_for(schema, table);
  if (rule.role != TableRole::kRowChange || rule.schema == nullptr) return {};
  return absent_columns(*rule.schema, rule.mask);
}

std::string EventRouter::topic_of(std::string_view schema, std::string_view table) {
  const Rule& r = rule_for(schema, table);
  return r.role == TableRole::kRowChange ? r.topic : std::string();
}

std::vector<std::string> EventRouter::key_columns_of(std::string_view schema,
                                                     std::string_view table) {
  const Rule& rule = rule_for(schema, table);
  if (rule.key_columns.empty() && rule.schema != nullptr && rule.schema->primary_key.empty() &&
      rule.schema->replica_identity == 'i') {
    return rule.schema->replica_identity_index;  // a table without a primary key
  }
  if (rule.role != TableRole::kRowChange) return {};
  return rule.key_columns;
}

bool EventRouter::shape_mismatch(const decoder::Change& c, const Rule& rule) const {
  bool refresh = false;
  for (std::size_t i = 0; i < c.columns.size() && !refresh; ++i) {
    const auto& name = c.columns[i].name;
    refresh = !((i < rule.schema->columns.size() && rule.schema->columns[i].name == name) ||
                rule.schema->column(name) != nullptr);  // a column added since
  }
  // An INSERT carries every column: fewer means columns were dropped (or the name re-created).
  if (!refresh && c.action == decoder::Action::kInsert &&
      c.columns.size() != rule.schema->columns.size()) {
    refresh = true;
  }
  return refresh;
}

bool EventRouter::shape_refresh_due(const decoder::Change& c, const Rule& rule) const {
  if (shape_mismatch(c, rule)) return true;
  // A change without a primary key whose key comes from the replica identity (an INSERT carries
  // none, so the catalog tells): read again after DDL, so the identity a change was written under
  // keys it from the first change after a switch (PostgreSQL docs, ALTER TABLE "REPLICA IDENTITY").
  if (rule.key_columns.empty() && c.pk.empty() && rule.identity_epoch != catalog_epoch_ &&
      (c.action == decoder::Action::kInsert || c.action == decoder::Action::kUpdate ||
       c.action == decoder::Action::kDelete)) {
    return true;
  }
  // An UPDATE leaves out unchanged TOASTed columns, or a column was dropped: the line cannot
  // tell, so verify the shape, at most once a second per table (a dropped column is never
  // filled with the TOAST placeholder for longer).
  // The same for a debezium-format DELETE, whose key-only `before` lists the shape's columns.
  const bool partial =
      (c.action == decoder::Action::kUpdate && c.columns.size() < rule.schema->columns.size()) ||
      (c.action == decoder::Action::kDelete && debezium_format() &&
       c.identity.size() < rule.schema->columns.size());
  return partial && (!rule.shape_verified ||
                     coarse_monotonic() - *rule.shape_verified >= std::chrono::seconds(1));
}

std::optional<SchemaLookup> EventRouter::lookup_needed(const decoder::Change& c) {
  using decoder::Action;
  if (schemas_ == nullptr) return std::nullopt;
  if (c.action != Action::kInsert && c.action != Action::kUpdate && c.action != Action::kDelete &&
      c.action != Action::kTruncate) {
    return std::nullopt;
  }
  const Rule* rule = nullptr;
  if (last_rule_ != nullptr && last_rule_->leaf_table == c.table &&
      last_rule_->leaf_schema == c.schema) {
    rule = last_rule_;
  } else {
    lookup_.assign(c.schema);
    lookup_.push_back('\0');
    lookup_.append(c.table);
    if (auto it = rules_.find(std::string_view(lookup_)); it != rules_.end()) rule = it->second;
  }
  if (rule == nullptr) return SchemaLookup{std::string(c.schema), std::string(c.table), false};
  if (rule->role == TableRole::kRowChange && rule->collision.empty() && rule->schema != nullptr &&
      shape_refresh_due(c, *rule)) {
    return SchemaLookup{rule->leaf_schema, rule->leaf_table, true};
  }
  return std::nullopt;
}

void EventRouter::note_shape_change(const Rule& rule, const TableSchema* before) {
  // A captured name whose key or columns changed is worth a warning: consumers and schema
  // registries see another shape on the same topic (shared/cases/CASE-06).
  const TableSchema* after = rule.schema;
  if (after == before) return;
  const auto names = [](const TableSchema* t) {
    std::string out;
    if (t == nullptr) return std::string("<none>");
    for (const auto& col : t->columns) out += (out.empty() ? "" : ", ") + col.name;
    return out;
  };
  const auto key = [](const TableSchema* t) {
    std::string out;
    if (t == nullptr) return out;
    for (const auto& k : t->primary_key) out += (out.empty() ? "" : ", ") + k;
    return out;
  };
  if (after == nullptr) {
    spdlog::warn(
        "table {} no longer exists: its remaining changes are mapped from their own content "
        "(no TOAST fill-in, key from each change)",
        rule.data_collection);
    return;
  }
  if (before != nullptr && names(before) == names(after) && key(before) == key(after)) return;
  spdlog::warn("table {} changed shape: columns ({}) -> ({}), primary key ({}) -> ({})",
               rule.data_collection, names(before), names(after), key(before), key(after));
}

}  // namespace walrelay::router
