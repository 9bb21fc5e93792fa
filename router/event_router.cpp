// EventRouter: construction, the transaction (BEGIN/COMMIT, transaction metadata, record ids),
// route()/route_snapshot() and the records they return, and the outbox routes (outbox rows and
// logical messages, built by OutboxRecordBuilder). Rules are in table_rules.cpp, row changes in
// row_changes.cpp, row_images.cpp and row_keys.cpp.

#include <spdlog/spdlog.h>

#include <charconv>

#include "event_router_internal.hpp"
#include "walrelay/core/json.hpp"

namespace walrelay::router {

using detail::append_int;
using detail::append_uint;
using detail::floor_div;

EventRouter::EventRouter(RouterSettings settings, const config::Config& cfg,
                         SchemaProvider* schemas, const TypeRegistry& types)
    : settings_(std::move(settings)),
      tables_(cfg.tables),
      exclude_(cfg.exclude),
      messages_(cfg.messages),
      schemas_(schemas),
      types_(types),
      outbox_builder_(types) {
  if (!cfg.snapshot.signal_table.empty()) {
    // The signal table's rows are signals (its INSERTs are consumed before routing), never
    // published: not read by a snapshot, its updates and deletes not streamed, also when a
    // `tables` pattern matches it.
    config::TableConfig signals;
    signals.name = cfg.snapshot.signal_table;
    signals.schema_pattern = cfg.snapshot.signal_table_schema;
    signals.table_pattern = cfg.snapshot.signal_table_name;
    exclude_.push_back(std::move(signals));
  }
  value_opts_.format = settings_.events.value_format;
  value_opts_.json_as_document = settings_.events.json_as_document;
  value_opts_.decimal = settings_.events.decimal_handling;
}

EventRouter::~EventRouter() = default;

void EventRouter::begin(std::uint64_t xid, Lsn commit_lsn, std::chrono::microseconds commit_time) {
  xid_ = xid;
  commit_lsn_ = commit_lsn;
  commit_ts_us_ = commit_time.count();
  commit_ts_ms_ = floor_div(commit_ts_us_, 1000);
  txn_counts_for_sequence_ = false;
  txn_first_lsn_ = Lsn{};
  txn_changes_ = 0;
  record_index_ = 0;
  event_count_ = 0;
  begin_emitted_ = false;
  collection_counts_.clear();
  truncated_.clear();
}

EventRouter::Slot& EventRouter::next_slot() {
  if (used_slots_ == slots_.size()) slots_.push_back(std::make_unique<Slot>());
  Slot& s = *slots_[used_slots_++];
  s.clear();  // header_key is set by every row change that uses it
  if (snapshot_ != nullptr) {
    s.id = snapshot_->id;
    return s;
  }
  // Row-change ids: the transaction's commit LSN and the record's index in the transaction
  // ("<commit LSN>:" formatted once per transaction).
  if (id_prefix_.empty() || id_prefix_lsn_ != commit_lsn_) {
    char buf[17];
    id_prefix_.assign(buf, commit_lsn_.format_to(buf));
    id_prefix_.push_back(':');
    id_prefix_lsn_ = commit_lsn_;
  }
  char index[12];
  s.id.append(id_prefix_);
  s.id.append(index, static_cast<std::size_t>(
                         std::to_chars(index, index + sizeof index, record_index_++).ptr - index));
  return s;
}

void EventRouter::set_txn_id(Lsn lsn) {
  txn_id_.clear();
  append_uint(txn_id_, xid_);
  txn_id_.push_back(':');
  append_uint(txn_id_, lsn.value());
}

EventRouter::Slot& EventRouter::transaction_record(std::string_view status) {
  // Debezium transaction metadata: `<prefix>.transaction`, keyed by {"id":"<txId>:<LSN>"}. As
  // Debezium 3.6 writes it, the LSN is the position the record describes (BEGIN: the first change
  // pgoutput sends; END: the end of the commit record), so BEGIN and END need not share a
  // partition: group by the txId before the colon.
  Slot& s = next_slot();
  append_topic_part(s.topic, settings_.topic_prefix);
  s.topic += ".transaction";
  s.has_key = true;
  s.key = "{\"id\":";
  json::append_string(s.key, txn_id_);
  s.key.push_back('}');
  s.value = "{\"status\":\"";
  s.value += status;
  s.value += "\",\"id\":";
  json::append_string(s.value, txn_id_);
  return s;
}

void EventRouter::begin_metadata_if_needed() {
  if (!settings_.events.transaction_metadata || begin_emitted_) return;
  begin_emitted_ = true;
  // Debezium transaction metadata: BEGIN before the first event, id "<txId>:<LSN of the first
  // change pgoutput would send>" (PostgreSQL 15's pgoutput sends BEGIN lazily with that LSN).
  set_txn_id(txn_first_lsn_.value() != 0 ? txn_first_lsn_ : commit_lsn_);
  Slot& s = transaction_record("BEGIN");
  s.value += ",\"event_count\":null,\"data_collections\":null,\"ts_ms\":";
  append_int(s.value, commit_ts_ms_);
  s.value.push_back('}');
  s.timestamp_ms = commit_ts_ms_;
}

void EventRouter::set_stream_start(Lsn start) {
  last_commit_end_ = start;
}

void EventRouter::count_for_sequence(Lsn change_lsn) {
  if (!txn_counts_for_sequence_) txn_first_lsn_ = change_lsn;
  txn_counts_for_sequence_ = true;
}

void EventRouter::note_message(const decoder::Change& message) {
  // pgoutput (messages=true, as Debezium asks for on PostgreSQL 14+) sends every logical message:
  // a transactional one makes its transaction non-empty; a non-transactional one is its own unit.
  ++txn_changes_;
  if (message.transactional) {
    count_for_sequence(message.lsn);
  } else {
    last_commit_end_ = message.lsn;
  }
}

std::span<const Record> EventRouter::commit(Lsn end_lsn) {
  used_slots_ = 0;
  records_.clear();
  if (txn_counts_for_sequence_) last_commit_end_ = end_lsn;
  // A transaction without changes is DDL (or changes wal2json filtered out): a replica identity
  // may have moved, so tables keyed by it verify their shape at their next change.
  if (txn_changes_ == 0) ++catalog_epoch_;
  txn_changes_ = 0;
  txn_counts_for_sequence_ = false;
  txn_first_lsn_ = Lsn{};
  if (!begin_emitted_) return {};
  set_txn_id(end_lsn);  // Debezium 3.6: END's id carries the commit's end LSN
  Slot& s = transaction_record("END");
  s.value += ",\"event_count\":";
  append_uint(s.value, event_count_);
  s.value += ",\"data_collections\":[";
  bool first = true;
  for (const auto& [name, count] : collection_counts_) {
    if (!first) s.value.push_back(',');
    first = false;
    s.value += "{\"data_collection\":";
    json::append_string(s.value, name);
    s.value += ",\"event_count\":";
    append_uint(s.value, count);
    s.value.push_back('}');
  }
  s.value += "],\"ts_ms\":";
  append_int(s.value, commit_ts_ms_);
  s.value.push_back('}');
  s.timestamp_ms = commit_ts_ms_;
  records_.push_back(s.record());  // keyed, with a value, header `id` only
  begin_emitted_ = false;
  return records_;
}

std::expected<std::span<const Record>, MappingError> EventRouter::route(const decoder::Change& c) {
  using decoder::Action;
  used_slots_ = 0;
  change_lsn_ = c.lsn;
  ++txn_changes_;
  std::expected<void, MappingError> result;
  switch (c.action) {
    case Action::kInsert:
    case Action::kUpdate:
    case Action::kDelete:
    case Action::kTruncate: {
      Rule& rule = rule_for(c.schema, c.table);
      if (rule.role != TableRole::kIgnored) count_for_sequence(c.lsn);
      if (rule.role == TableRole::kRowChange) {
        result = route_row(c, rule);
      } else if (rule.role == TableRole::kOutbox && c.action == Action::kInsert) {
        // UPDATE and DELETE of an outbox row publish nothing: rows may be deleted right after
        // the insert, even in the same transaction (Debezium outbox event router).
        result = route_outbox_row(c, rule);
      } else if (rule.role == TableRole::kOutbox && c.action == Action::kUpdate) {
        // An UPDATE (an upsert's second write, say) is not a new event: dropped, but not silently
        // (shared/cases/CASE-09): a warning once per table, and counted.
        ++outbox_updates_ignored_;
        if (!rule.outbox_update_warned) {
          rule.outbox_update_warned = true;
          spdlog::warn(
              "an UPDATE of outbox table {} publishes nothing (only INSERTs are events; an upsert "
              "that updates an existing row sends no new event). Said once per table; counted "
              "in the progress line",
              std::string(c.schema) + "." + std::string(c.table));
        }
      }
      break;
    }
    case Action::kMessage:
      result = route_message(c);
      // After routing: a non-transactional message's records carry the sequence before it.
      note_message(c);
      break;
    default:
      break;
  }
  if (!result) {
    used_slots_ = 0;
    return std::unexpected(std::move(result.error()));
  }
  return collect_records();
}

std::span<const Record> EventRouter::collect_records() {
  records_.clear();
  for (std::size_t i = 0; i < used_slots_; ++i) records_.push_back(slots_[i]->record());
  return std::span<const Record>(records_);
}

std::expected<std::span<const Record>, MappingError> EventRouter::route_snapshot(
    const decoder::Change& row, const SnapshotRead& read) {
  used_slots_ = 0;
  Rule& rule = rule_for(row.schema, row.table);
  if (rule.role != TableRole::kRowChange) return collect_records();
  // The snapshot's row is described by its own position and time; the streaming transaction
  // that may be open around it keeps its own.
  const Lsn saved_commit_lsn = commit_lsn_;
  const std::int64_t saved_ts_ms = commit_ts_ms_;
  const std::int64_t saved_ts_us = commit_ts_us_;
  commit_lsn_ = row.lsn;
  commit_ts_us_ = read.read_time.count();
  commit_ts_ms_ = floor_div(commit_ts_us_, 1000);
  snapshot_ = &read;
  auto result = route_row(row, rule);
  snapshot_ = nullptr;
  commit_lsn_ = saved_commit_lsn;
  commit_ts_ms_ = saved_ts_ms;
  commit_ts_us_ = saved_ts_us;
  if (!result) {
    used_slots_ = 0;
    return std::unexpected(std::move(result.error()));
  }
  return collect_records();
}

// ---- outbox --------------------------------------------------------------------------------

std::expected<void, MappingError> EventRouter::route_outbox_row(const decoder::Change& c,
                                                                const Rule& rule) {
  // The error context is built only for an error (an event must not allocate).
  return emit_outbox(*rule.outbox, c.columns, [&c] {
    return "outbox table " + std::string(c.schema) + "." + std::string(c.table);
  });
}

std::expected<void, MappingError> EventRouter::emit_outbox(
    const config::OutboxConfig& ob, const std::vector<decoder::Column>& cols,
    const OutboxRecordBuilder::ErrorContext& where) {
  // The slot is taken (and the transaction's record index moved) only once the row has the
  // columns an event needs, as the router always did: a later row's id does not depend on it.
  auto columns = OutboxRecordBuilder::locate(ob, cols, where);
  if (!columns) return std::unexpected(std::move(columns.error()));
  Slot& s = next_slot();
  return outbox_builder_.build(ob, cols, *columns, commit_ts_ms_, where, s);
}

std::expected<void, MappingError> EventRouter::route_message(const decoder::Change& c) {
  const config::MessageOutboxConfig* mo = nullptr;
  for (const auto& m : messages_) {
    if (m.prefix == c.prefix) mo = &m;
  }
  if (mo == nullptr) return {};  // other prefixes (and walrelay's own heartbeats) are skipped
  const auto where = [&] {
    return "message outbox '" + mo->prefix + "' at LSN " + c.lsn.to_string();
  };
  if (auto parsed = outbox_message_fields(c.content, message_buffer_, message_fields_); !parsed) {
    return std::unexpected(MappingError{where() + ": " + parsed.error()});
  }
  return emit_outbox(mo->outbox, message_fields_, where);
}

}  // namespace walrelay::router
