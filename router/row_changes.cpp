// A row change as Debezium 3's envelope: route_row (the records of one INSERT/UPDATE/DELETE/
// TRUNCATE: key changes, tombstones), `source`, `transaction`, `op` and the processing times.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

#include "event_router_internal.hpp"
#include "walrelay/core/headers.hpp"
#include "walrelay/core/json.hpp"

namespace walrelay::router {

using detail::append_int;
using detail::append_uint;
using detail::coarse_monotonic;
using detail::contains;
using detail::find_column;
using detail::floor_div;
using detail::join_names;
using detail::now_ns;
using namespace std::string_view_literals;

std::expected<void, MappingError> EventRouter::route_row(const decoder::Change& c, Rule& rule) {
  using decoder::Action;
  if (!rule.collision.empty()) return std::unexpected(MappingError{rule.collision});
  // DDL can change a table's columns between two rows of one transaction, and a name can be
  // dropped and re-created with another shape (tests/integration/cases/CASE-06.sql): map each line
  // by its own column list, and re-read the catalog when the line's columns disagree with the
  // cached shape.
  if (rule.schema != nullptr && schemas_ != nullptr && snapshot_ == nullptr) {
    bool refresh = shape_refresh_due(c, rule);
    if (refresh && !shape_mismatch(c, rule)) rule.shape_verified = coarse_monotonic();
    if (refresh) {
      const TableSchema* before = rule.schema;
      rule.schema = schemas_->table(rule.leaf_schema, rule.leaf_table, true);
      rule.identity_epoch = catalog_epoch_;
      note_shape_change(rule, before);
    }
    if (rule.schema != nullptr && !rule.schema->captured_kind()) {
      // The name was dropped and made again as another kind (a materialized view): not published.
      if (!rule.kind_warned) {
        rule.kind_warned = true;
        spdlog::warn("table {} is now {}: its changes are not published", rule.data_collection,
                     rule.schema->kind_name());
      }
      return {};
    }
  } else if (rule.schema == nullptr && c.action == decoder::Action::kInsert &&
             snapshot_ == nullptr) {
    // No catalog shape (dropped or renamed since): watch the changes' own shape, so a name that
    // comes back with another key or columns is still noticed.
    std::string shape;
    for (const auto& k : c.pk) shape.append(k).push_back(',');
    shape.push_back('|');
    for (const auto& col : c.columns) shape.append(col.name).push_back(',');
    if (!rule.line_shape.empty() && rule.line_shape != shape) {
      spdlog::warn("changes of table {} changed shape: primary key, columns ({}) -> ({})",
                   rule.data_collection, rule.line_shape, shape);
    }
    rule.line_shape = std::move(shape);
  }
  const auto& ops = rule.ops;
  auto fail = [&](const std::string& why) {
    return std::unexpected(MappingError{"table " + rule.data_collection + ": " + why});
  };
  if (!rule.key_columns.empty() && c.action != Action::kTruncate) {
    // A configured key column the table does not have (a typo, a column dropped, a table a glob
    // matched later): never key its events by other columns (the whole row), which would change
    // the key with every UPDATE. An INSERT carries every column, so without a catalog shape it
    // tells.
    for (const auto& k : rule.key_columns) {
      const bool absent = rule.schema != nullptr
                              ? rule.schema->column(k) == nullptr
                              : c.action == Action::kInsert && find_column(c.columns, k) == nullptr;
      if (absent) {
        return fail("key column '" + k +
                    "' (key_columns) does not exist in the table: its events are not published "
                    "with another key. Fix key_columns, or add the column");
      }
    }
  }
  std::string err;
  if (!select_key(c, rule, err)) return fail(err);

  auto emit = [&](char op, const std::vector<decoder::Column>* key_image,
                  const std::vector<decoder::Column>* before, bool after) -> bool {
    if (snapshot_ == nullptr) begin_metadata_if_needed();
    Slot& s = next_slot();
    bool has_key = false;
    // The key-change headers need the key as Connect's header converter prints it (debezium
    // format) or as the key's JSON (native); only an UPDATE can change a key.
    std::string* header =
        c.action == decoder::Action::kUpdate && debezium_format() ? &s.header_key : nullptr;
    if (key_image != nullptr) {
      const bool complete = std::all_of(key_order_.begin(), key_order_.end(), [&](auto k) {
        return find_column(*key_image, k) != nullptr;
      });
      if (complete) {
        has_key = append_key(s.key, *key_image, rule, err, header);
      } else if (key_image != &c.identity) {
        // A new row image without a key column (dropped or renamed since the shape was read):
        // keying it by its other columns (the whole row) would publish it under another key.
        std::vector<std::string_view> absent;
        for (std::string_view k : key_order_) {
          if (find_column(*key_image, k) == nullptr) absent.push_back(k);
        }
        err = "the change does not carry key column(s) " + join_names(absent) +
              (rule.key_columns.empty() ? "" : " (key_columns)") +
              ": not published with another key";
        return false;
      } else {
        // The change carries another identity than its key: a DELETE written under REPLICA
        // IDENTITY USING INDEX of a table with a primary key has only the index's columns, one
        // written under DEFAULT (before a switch to an index that key_columns names) only the
        // primary key. Key it by them (never a key of nulls), and say why
        // once per table.
        if (!rule.identity_key_warned) {
          rule.identity_key_warned = true;
          std::vector<std::string_view> carried;
          for (const auto& col : c.identity) carried.push_back(col.name);
          const bool primary_key = rule.schema != nullptr && !rule.schema->primary_key.empty() &&
                                   carried.size() == rule.schema->primary_key.size() &&
                                   std::all_of(carried.begin(), carried.end(), [&](auto k) {
                                     return contains(rule.schema->primary_key, k);
                                   });
          if (primary_key) {
            spdlog::warn(
                "a change of {} at LSN {} was written under REPLICA IDENTITY DEFAULT (before a "
                "switch to USING INDEX): it carries only the primary key {}, not the key columns "
                "{}; keyed by the primary key instead, so it lands on another key than the row's "
                "later events",
                rule.data_collection, c.lsn.to_string(), join_names(carried),
                join_names(key_order_));
          } else {
            spdlog::warn(
                "a change of {} at LSN {} does not carry its key columns (its REPLICA IDENTITY is "
                "an index other than the primary key): keyed by the identity's columns instead, "
                "so it lands on another key than the row's other events. Use REPLICA IDENTITY "
                "DEFAULT or FULL, or key_columns naming the index's columns",
                rule.data_collection, c.lsn.to_string());
          }
        }
        const std::vector<std::string_view> saved = key_order_;
        key_order_.clear();
        for (const auto& col : *key_image) key_order_.push_back(col.name);
        has_key = append_key(s.key, *key_image, rule, err, header);
        key_order_ = saved;
      }
    }
    if (!err.empty()) return false;
    if (header == nullptr) s.header_key = s.key;
    // The key's bytes as Debezium's JsonConverter (Jackson) writes them, in both formats: the
    // bytes decide the partition and the compacted-topic identity.
    json::escape_supplementary(s.key);
    s.value.assign("{\"before\":"sv);
    // Under REPLICA IDENTITY DEFAULT (or an index) the old row is only its key. Debezium's
    // format writes `before: null` for an UPDATE then, and for a DELETE every column with the
    // non-key ones null; the native format keeps what is known, the key columns only (a value
    // that is not known never looks like a SQL NULL there).
    const bool key_only_before = before != nullptr && !before->empty() && rule.schema != nullptr &&
                                 before->size() < rule.schema->columns.size();
    if (before == nullptr || before->empty() ||
        (key_only_before && debezium_format() && op == 'u')) {
      s.value.append("null"sv);
    } else if (key_only_before && debezium_format() && op == 'd') {
      padded_.clear();
      if (rule.names_json_of != rule.schema) {
        // Once per table shape (the provider never reuses a shape's address).
        rule.names_json.clear();
        for (const ColumnInfo& ci : rule.schema->columns) {
          json::append_string(rule.names_json.emplace_back(), ci.name);
        }
        rule.names_json_of = rule.schema;
      }
      // Only the columns the row had when the change was written (a backlog decoded after ADD
      // COLUMN): one added since never appears in an older change.
      const std::size_t existing = columns_existing_at(*rule.schema, c.xid);
      for (std::size_t i = 0; i < rule.schema->columns.size(); ++i) {
        const ColumnInfo& ci = rule.schema->columns[i];
        if (const decoder::Column* known = find_column(*before, ci.name)) {
          padded_.push_back(*known);
        } else if (i < existing) {
          padded_.push_back(decoder::Column{ci.name, rule.names_json[i], ci.type_oid, "null"});
        }
      }
      append_image(s.value, padded_, rule, err, /*padded=*/true);
    } else {
      append_image(s.value, *before, rule, err);
    }
    s.value.append(",\"after\":"sv);
    if (after) {
      if (!append_after_image(s.value, c, rule, err)) return false;
    } else {
      s.value.append("null"sv);
    }
    if (!err.empty()) return false;
    s.value.push_back(',');
    append_source(s.value, c, rule);
    finish_row_record(s, rule, has_key, op);
    if (debezium_format()) json::escape_supplementary(s.value);
    return true;
  };

  switch (c.action) {
    case Action::kInsert:
      if (snapshot_ != nullptr) {
        if (!emit('r', &c.columns, nullptr, true)) return fail(err);
        return {};
      }
      if (!ops.create) return {};
      if (!emit('c', &c.columns, nullptr, true)) return fail(err);
      return {};
    case Action::kUpdate: {
      if (!ops.update) return {};
      // A key change is detected by comparing the old key values (identity) with the new ones,
      // not by the presence of `identity` (tests/integration/cases/BUG-11.sql). Debezium publishes
      // it as a delete of the old key (+ tombstone) and a create of the new key.
      bool key_changed = false;
      if (!c.identity.empty()) {
        for (const auto& old : c.identity) {
          if (!contains(key_order_, old.name)) continue;
          const decoder::Column* now = find_column(c.columns, old.name);
          if (now != nullptr && now->value != old.value) key_changed = true;
        }
      }
      if (key_changed) {
        // Debezium's headers on a primary-key change: __debezium.newkey on the delete and its
        // tombstone, __debezium.oldkey on the create, each the other record's key.
        if (!emit('d', &c.identity, &c.identity, false)) return fail(err);
        const std::size_t del = used_slots_ - 1;
        if (rule.tombstones) add_tombstone(*slots_[del]);
        const std::size_t tomb = rule.tombstones ? used_slots_ - 1 : del;
        if (!emit('c', &c.columns, nullptr, true)) return fail(err);
        Slot& created = *slots_[used_slots_ - 1];
        for (std::size_t i : {del, tomb}) {
          if (i == tomb && !rule.tombstones) continue;
          Slot& s = *slots_[i];
          s.header_names.push_back(header::kDebeziumNewKey);
          s.header_values.push_back(created.has_key ? created.header_key : std::string("null"));
        }
        created.header_names.push_back(header::kDebeziumOldKey);
        created.header_values.push_back(slots_[del]->has_key ? slots_[del]->header_key
                                                             : std::string("null"));
        return {};
      }
      if (!emit('u', &c.columns, &c.identity, true)) return fail(err);
      return {};
    }
    case Action::kDelete:
      if (!ops.del) return {};
      if (!emit('d', &c.identity, &c.identity, false)) return fail(err);
      if (rule.tombstones) add_tombstone(*slots_[used_slots_ - 1]);
      return {};
    case Action::kTruncate:
      if (!ops.truncate) return {};
      // TRUNCATE of a partitioned table is reported for the root and every leaf; they all map to
      // the root's topic, so publish it once per transaction.
      if (std::find(truncated_.begin(), truncated_.end(), rule.data_collection) !=
          truncated_.end()) {
        return {};
      }
      truncated_.push_back(rule.data_collection);
      if (!emit('t', nullptr, nullptr, false)) return fail(err);
      return {};
    default:
      return {};
  }
}

void EventRouter::append_source(std::string& out, const decoder::Change& c, const Rule& rule) {
  // What only changes with the transaction (or the snapshot row's read time and marker) is
  // written once into source_head_/source_mid_ and copied; the change's LSN is formatted once
  // for its two places.
  const std::string_view marker = snapshot_ != nullptr ? snapshot_->marker : "false";
  const std::uint64_t last_commit =
      snapshot_ != nullptr ? 0 : last_commit_end_.value();  // 0: null (see commit())
  if (!source_cache_valid_ || source_ts_ms_ != commit_ts_ms_ || source_marker_ != marker ||
      source_last_commit_ != last_commit) {
    source_cache_valid_ = true;
    source_ts_ms_ = commit_ts_ms_;
    source_marker_.assign(marker);
    source_last_commit_ = last_commit;
    std::string& h = source_head_;
    h = "\"source\":{\"version\":";
    json::append_string(h, settings_.version);
    h += ",\"connector\":\"postgresql\",\"name\":";
    json::append_string(h, settings_.topic_prefix);
    h += ",\"ts_ms\":";
    append_int(h, commit_ts_ms_);
    h += ",\"snapshot\":\"";
    h += marker;
    h += "\",\"db\":";
    json::append_string(h, settings_.database);
    // sequence: ["<last commit>","<change LSN>"] as a JSON string (see commit()); Debezium's
    // snapshot records have no last commit: [null,"<snapshot LSN>"].
    if (last_commit == 0) {
      h += ",\"sequence\":\"[null,\\\"";
    } else {
      h += ",\"sequence\":\"[\\\"";
      append_uint(h, last_commit);
      h += "\\\",\\\"";
    }
  }
  if (source_mid_ts_us_ != commit_ts_us_ || source_mid_.empty()) {
    // source.ts_us/ts_ns (Debezium 3): the same instant in µs and ns.
    source_mid_ts_us_ = commit_ts_us_;
    source_mid_ = "\\\"]\",\"ts_us\":";
    append_int(source_mid_, commit_ts_us_);
    source_mid_ += ",\"ts_ns\":";
    append_int(source_mid_, commit_ts_us_);
    source_mid_ += "000,\"schema\":";
  }
  char lsn[24];
  const auto lsn_len =
      static_cast<std::size_t>(std::to_chars(lsn, lsn + sizeof lsn, c.lsn.value()).ptr - lsn);
  out += source_head_;
  out.append(lsn, lsn_len);
  out += source_mid_;
  out += rule.source_names;
  // txId, lsn, and origin/origin_lsn: the replication origin of a transaction replayed by a
  // subscriber; wal2json does not report it, so null (docs/events.md: where walrelay differs
  // from Debezium).
  constexpr std::string_view kLsn = ",\"lsn\":";
  constexpr std::string_view kEnd = ",\"xmin\":null,\"origin\":null,\"origin_lsn\":null}";
  char buf[24 + kLsn.size() + sizeof lsn + kEnd.size()];
  char* p = std::to_chars(buf, buf + 24, c.xid).ptr;
  p = std::copy(kLsn.begin(), kLsn.end(), p);
  p = std::copy(lsn, lsn + lsn_len, p);
  p = std::copy(kEnd.begin(), kEnd.end(), p);
  out.append(buf, static_cast<std::size_t>(p - buf));
}

void EventRouter::finish_row_record(Slot& s, const Rule& rule, bool has_key, char op) {
  s.topic = rule.topic;
  s.has_key = has_key;
  // Debezium 3's envelope order: ..., source, transaction, op, ts_ms, ts_us, ts_ns.
  if (settings_.events.transaction_metadata && snapshot_ == nullptr) {
    ++event_count_;
    std::uint32_t* per_table = nullptr;
    for (auto& [name, count] : collection_counts_) {
      if (name == rule.data_collection) per_table = &count;
    }
    if (per_table == nullptr) {
      collection_counts_.emplace_back(rule.data_collection, 0);
      per_table = &collection_counts_.back().second;
    }
    ++*per_table;
    // Debezium 3.6: each event's id is "<txId>:<the event's LSN>".
    s.value += ",\"transaction\":{\"id\":\"";
    append_uint(s.value, xid_);
    s.value.push_back(':');
    append_uint(s.value, change_lsn_.value());
    s.value += "\",\"total_order\":";
    append_uint(s.value, event_count_);
    s.value += ",\"data_collection_order\":";
    append_uint(s.value, *per_table);
    s.value.push_back('}');
  } else {
    s.value.append(",\"transaction\":null"sv);
  }
  // `,"op":"c","ts_ms":…,"ts_us":…,"ts_ns":…}`: processing time, one reading in ms, µs and ns,
  // never before the source's time. The ns digits are formatted once: ms and µs are their
  // prefixes (floor division of a positive number by 10^6 and 10^3).
  const std::int64_t ns = std::max(now_ns(), commit_ts_us_ * 1000);
  char digits[24];
  const auto n =
      static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, ns).ptr - digits);
  if (ns < 1'000'000) {
    s.value += ",\"op\":\"";
    s.value.push_back(op);
    s.value += "\",\"ts_ms\":";
    append_int(s.value, floor_div(ns, 1'000'000));
    s.value += ",\"ts_us\":";
    append_int(s.value, floor_div(ns, 1000));
    s.value += ",\"ts_ns\":";
    s.value.append(digits, n);
    s.value.push_back('}');
  } else {
    constexpr std::string_view kOp = ",\"op\":\"";
    constexpr std::string_view kMs = "\",\"ts_ms\":";
    constexpr std::string_view kUs = ",\"ts_us\":";
    constexpr std::string_view kNs = ",\"ts_ns\":";
    char buf[kOp.size() + 1 + kMs.size() + kUs.size() + kNs.size() + 3 * sizeof digits + 1];
    char* p = std::copy(kOp.begin(), kOp.end(), buf);
    *p++ = op;
    p = std::copy(kMs.begin(), kMs.end(), p);
    p = std::copy(digits, digits + n - 6, p);
    p = std::copy(kUs.begin(), kUs.end(), p);
    p = std::copy(digits, digits + n - 3, p);
    p = std::copy(kNs.begin(), kNs.end(), p);
    p = std::copy(digits, digits + n, p);
    *p++ = '}';
    s.value.append(buf, static_cast<std::size_t>(p - buf));
  }
  s.timestamp_ms = commit_ts_ms_;
  s.op = op;
}

void EventRouter::add_tombstone(const Slot& of) {
  // Debezium tombstones.on.delete: same key, null value, so compaction can drop the key. Slots
  // are allocated one by one, so `of` stays valid while another is added.
  Slot& t = next_slot();
  t.topic = of.topic;
  t.key = of.key;
  t.has_key = of.has_key;
  t.has_value = false;
  t.timestamp_ms = commit_ts_ms_;
}

}  // namespace walrelay::router
