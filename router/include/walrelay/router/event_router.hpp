#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "walrelay/config/config.hpp"
#include "walrelay/core/lsn.hpp"
#include "walrelay/core/record.hpp"
#include "walrelay/decoder/change.hpp"
#include "walrelay/router/commit_timestamp.hpp"
#include "walrelay/router/mapping_error.hpp"
#include "walrelay/router/outbox_record.hpp"
#include "walrelay/router/table_schema.hpp"
#include "walrelay/router/type_registry.hpp"
#include "walrelay/router/value_mapping.hpp"

namespace walrelay::router {

/// How the router treats one source table.
enum class TableRole : std::uint8_t { kIgnored, kRowChange, kOutbox };

/// Settings the router needs besides the table rules.
struct RouterSettings {
  std::string connector_name;  ///< `name`
  std::string topic_prefix;    ///< topics.prefix; Debezium's source.name
  std::string database;        ///< current_database() of the source, for source.db
  std::string version;         ///< walrelay version for source.version
  config::EventsConfig events;
};

/// A catalog read that routing a change makes through the SchemaProvider (see lookup_needed).
struct SchemaLookup {
  std::string schema;
  std::string table;
  bool refresh = false;  ///< false: the table's first sight; true: its shape is read again
};

/// One row read by a snapshot, as the router needs to describe it in `source`.
struct SnapshotRead {
  /// source.snapshot as Debezium 3 writes it: "first" (first record of the snapshot),
  /// "first_in_data_collection", "true", "last_in_data_collection", "last" (its last record).
  std::string_view marker;
  std::string_view id;  ///< the record's `id` header (deterministic for the same chunk and row)
  /// When the row was read, since the Unix epoch: source.ts_ms/ts_us/ts_ns and (in ms) the
  /// record timestamp.
  std::chrono::microseconds read_time{0};
};

/// Maps decoded changes to Kafka records (architecture: EventRouter). Debezium behaviours it
/// follows are cited where they are implemented; the README documents the result.
///
/// - Row-change tables: INSERT/UPDATE/DELETE/TRUNCATE → Debezium 3's envelope
///   `{"before","after","source","transaction","op","ts_ms","ts_us","ts_ns"}` on the table's
///   topic (field order as Debezium's JsonConverter prints it), keyed by the key columns as compact
///   JSON in the key's declaration order; a DELETE is followed by a tombstone; an UPDATE
///   that changes the key becomes a delete (+ tombstone) of the old key and a create of the new.
/// - Outbox tables and logical-message outboxes: one domain event per INSERT / message, built by
///   OutboxRecordBuilder (outbox_record.hpp), which other sources of outbox events share.
/// - Every record carries header `id`: the outbox event id, or `<commit LSN>:<n>` with n the
///   record's index in its transaction (deterministic for the same WAL and configuration).
///
/// Records and their bytes live in the router and are valid until its next call.
/// Owned by the connector's io_context thread; not thread-safe.
class EventRouter {
 public:
  /// `schemas` (may be null: no TOAST fill, no partition roots, no typmods) and `types` must
  /// outlive the router.
  EventRouter(RouterSettings settings, const config::Config& cfg, SchemaProvider* schemas,
              const TypeRegistry& types);
  ~EventRouter();
  EventRouter(const EventRouter&) = delete;
  EventRouter& operator=(const EventRouter&) = delete;

  /// Starts a transaction (wal2json B): `commit_lsn` is the B/C `lsn`, `commit_time` the commit
  /// time since the Unix epoch (PostgreSQL's µs precision; source.ts_ms/ts_us/ts_ns).
  void begin(std::uint64_t xid, Lsn commit_lsn, std::chrono::microseconds commit_time);

  /// Where the stream (re)started: `source.sequence`'s first element until the first transaction
  /// that counts for it has committed (below). Lsn{} (0/0) on a slot's first start gives `null`,
  /// as Debezium's first start without stored offsets does.
  void set_stream_start(Lsn start);

  /// A logical message the connector consumed itself (snapshot watermark, signal, heartbeat)
  /// without routing it: it still moves `source.sequence`'s first element as `route` would.
  void note_message(const decoder::Change& message);

  /// Routes one I/U/D/T/M change of the open transaction (or a non-transactional message outside
  /// any). Returns the records to publish (possibly none), or a MappingError naming the table,
  /// column and reason.
  std::expected<std::span<const Record>, MappingError> route(const decoder::Change& change);

  /// The SchemaProvider call route(`change`) would make, so that a caller whose provider answers
  /// asynchronously can load it first (then route() answers from the provider's cache): the
  /// table on its first sight, or its shape again when the change's columns disagree with the
  /// cached shape (or a partial UPDATE/DELETE is due a check, at most once a second per table; or
  /// a change without a primary key, keyed by the REPLICA IDENTITY, is the table's first since a
  /// transaction without changes: DDL, which wal2json sends as an empty BEGIN/COMMIT).
  /// nullopt: route() asks the provider nothing for it. No side effects; messages, BEGIN and
  /// COMMIT never need a lookup.
  std::optional<SchemaLookup> lookup_needed(const decoder::Change& change);

  /// Routes one row read by a snapshot: `row` is shaped like a wal2json INSERT (columns in
  /// attnum order with wal2json's value tokens, `pk` the key columns; `lsn` is the snapshot's
  /// position and `xid` its transaction id, both written to `source`). A row-change table's row
  /// becomes an `op: "r"` event with `before: null`, built by the same code as streamed rows (same
  /// topic, key and value bytes; no transaction metadata, as Debezium). Outbox and ignored tables
  /// give no records. The open streaming transaction, if any, is left as it was.
  std::expected<std::span<const Record>, MappingError> route_snapshot(const decoder::Change& row,
                                                                      const SnapshotRead& read);

  /// Ends the transaction (wal2json C; `end_lsn` is its `nextlsn`, the end of the commit record):
  /// the transaction-metadata END record when enabled and the transaction produced events;
  /// otherwise nothing. A transaction without changes or messages (DDL) makes tables keyed by
  /// their REPLICA IDENTITY read their shape again at their next change (lookup_needed).
  ///
  /// `source.sequence` is `["<last commit>","<change LSN>"]` as Debezium's PostgreSQL connector
  /// writes it (PostgresStreamingChangeEventSource, lastCompletelyProcessedLsn): the first element
  /// is the end LSN of the last transaction pgoutput would have sent before this change (one that
  /// changed a captured table or carried a transactional logical message; PostgreSQL 15's pgoutput
  /// skips the others), or the LSN of the last non-transactional message, or the stream's start.
  std::span<const Record> commit(Lsn end_lsn);

  /// The role of `schema.table` under the configured rules (exclude first, then the first
  /// matching `tables` entry).
  TableRole role_of(std::string_view schema, std::string_view table);

  /// The topic a row-change table's events go to (template applied, names mapped to Kafka's
  /// `[A-Za-z0-9._-]`). Empty when the table is not a row-change table.
  std::string topic_of(std::string_view schema, std::string_view table);

  /// The key columns a row-change table's events are keyed by when it has no primary key:
  /// `key_columns` of its `tables` entry, else its REPLICA IDENTITY USING INDEX columns; empty
  /// otherwise (and for tables that are not row-change tables).
  std::vector<std::string> key_columns_of(std::string_view schema, std::string_view table);

  /// The event id of an outbox change (an outbox row's event-id column, or a message outbox's
  /// event-id field is not parsed here), for dead-letter records; nullopt otherwise.
  std::optional<std::string> outbox_event_id(const decoder::Change& change);

  /// Checks an outbox table's columns against its configuration: the names of configured columns
  /// the table does not have (empty when all exist or the shape is unknown).
  std::vector<std::string> missing_outbox_columns(std::string_view schema, std::string_view table);

  /// Checks a row-change table's `key_columns` against its catalog shape: the configured key
  /// columns the table does not have, in configuration order (empty when all exist, none are
  /// configured, the table is not a row-change table, or its shape is unknown). route() never
  /// keys an event of such a table by other columns: its changes are MappingErrors.
  std::vector<std::string> missing_key_columns(std::string_view schema, std::string_view table);

  /// Checks a row-change table's `key_columns` for NULL: the configured key columns the catalog
  /// lets hold NULL, in configuration order, when no primary key or unique index on NOT NULL
  /// columns lies within them (then rows whose key columns are NULL, or equal, share one Kafka
  /// key). Empty when the key identifies a row, no key columns are configured, the table is not a
  /// row-change table, or its shape is unknown. A warning, not a refusal: the data may never hold
  /// NULL there.
  std::vector<std::string> nullable_key_columns(std::string_view schema, std::string_view table);

  /// The same for `mask_columns`: the configured mask columns the table does not have (a typo
  /// would leave the real column unmasked). Empty as for missing_key_columns.
  std::vector<std::string> missing_mask_columns(std::string_view schema, std::string_view table);

  /// How many NOT NULL numeric/float values arrived as null (NaN/Infinity under wal2json < 2.6).
  [[nodiscard]] std::uint64_t nan_as_null_count() const { return nan_as_null_; }

  /// How many UPDATEs of outbox rows were dropped (they are not events; warned once per table).
  [[nodiscard]] std::uint64_t outbox_updates_ignored() const { return outbox_updates_ignored_; }

  /// Maps a name into Kafka's topic alphabet: every character outside `[A-Za-z0-9._-]`
  /// (including every byte of a non-ASCII character) becomes `_` (as Debezium's topic name
  /// sanitizer does). Collisions this can cause are detected by the connector.
  static void append_topic_part(std::string& out, std::string_view part);

 private:
  struct Rule;
  struct Slot;
  Rule& rule_for(std::string_view schema, std::string_view table);
  Rule& rule_lookup(std::string_view schema, std::string_view table);  ///< rule_for's hash lookup
  Rule make_rule(std::string_view schema, std::string_view table);
  std::expected<void, MappingError> route_row(const decoder::Change& c, Rule& rule);
  /// The change's columns disagree with the rule's cached shape (a column added, dropped, or the
  /// name re-created).
  [[nodiscard]] bool shape_mismatch(const decoder::Change& c, const Rule& rule) const;
  /// route_row re-reads the shape for `c`: a mismatch, or a partial change due a check.
  [[nodiscard]] bool shape_refresh_due(const decoder::Change& c, const Rule& rule) const;
  std::expected<void, MappingError> route_outbox_row(const decoder::Change& c, const Rule& rule);
  std::expected<void, MappingError> route_message(const decoder::Change& c);
  /// One outbox event from `cols` (an outbox row's columns or a message's fields) into the next
  /// slot, by outbox_builder_.
  std::expected<void, MappingError> emit_outbox(const config::OutboxConfig& ob,
                                                const std::vector<decoder::Column>& cols,
                                                const OutboxRecordBuilder::ErrorContext& where);

  Slot& next_slot();
  /// Marks the open transaction as one pgoutput would send (a captured table's change or a
  /// transactional message at `change_lsn`).
  void count_for_sequence(Lsn change_lsn);
  void set_txn_id(Lsn lsn);  ///< txn_id_ = "<xid>:<lsn>"
  void begin_metadata_if_needed();
  /// A transaction-metadata record with its topic, key and `{"status":…,"id":…` started.
  Slot& transaction_record(std::string_view status);
  /// `padded`: a DELETE's before image padded with null for the columns its replica identity
  /// leaves out (Debezium's shape): those nulls are not values, so a NOT NULL column's null is
  /// no sign of wal2json's NaN-as-null there.
  void append_image(std::string& out, const std::vector<decoder::Column>& cols, const Rule& rule,
                    std::string& err, bool padded = false);
  bool append_after_image(std::string& out, const decoder::Change& c, const Rule& rule,
                          std::string& err);
  /// One column's value of a before or after image: masked when configured (hex SHA-256 of the
  /// salt and the value's text), else mapped by append_value with the change's type and `typmod`
  /// (the catalog's, -1 when unknown). `not_null`: the catalog says NOT NULL, so a null is
  /// wal2json's NaN-as-null (note_nan_as_null). `position` indexes the rule's type cache. False
  /// (err set, naming the column) when the value cannot be mapped.
  bool append_column(std::string& out, const decoder::Column& col, const Rule& rule,
                     std::size_t position, std::int32_t typmod, bool not_null, std::string& err);
  /// The key's JSON into `out`; with `header`, also the key as Kafka Connect's
  /// SimpleHeaderConverter prints Debezium's key struct (the `__debezium.newkey`/`oldkey` header).
  /// Warns when a refresh gave `rule` another shape than `before` (columns, key, or none).
  void note_shape_change(const Rule& rule, const TableSchema* before);
  /// Sets key_order_: the columns `c`'s event is keyed by (see the definition). False (`err`
  /// says why: a mapping error) when the identity `c` was written under cannot be decided.
  bool select_key(const decoder::Change& c, const Rule& rule, std::string& err);
  /// select_key for a change without a primary key: its REPLICA IDENTITY index as written.
  bool select_identity_key(const decoder::Change& c, const TableSchema& shape, std::string& err);
  bool append_key(std::string& out, const std::vector<decoder::Column>& image, const Rule& rule,
                  std::string& err, std::string* header = nullptr);
  static void append_connect_header_string(std::string& out, std::string_view text);
  void append_connect_header_value(std::string& out, std::string_view json_value,
                                   const decoder::Column& col, const ResolvedType& type);
  /// The type of the column at `position` of `rule`'s changes, from the rule's cache (looked up
  /// again when the column's type or typmod differs, or the registry has changed since).
  const ResolvedType& column_type(const Rule& rule, std::size_t position, std::uint32_t type_oid,
                                  std::int32_t typmod);
  static void append_big_decimal_text(std::string& out, std::string_view text);
  void append_source(std::string& out, const decoder::Change& c, const Rule& rule);
  void finish_row_record(Slot& s, const Rule& rule, bool has_key, char op);
  void add_tombstone(const Slot& of);
  void note_nan_as_null(const Rule& rule, const decoder::Column& col);
  /// Turns the used slots into `records_`.
  std::span<const Record> collect_records();

  RouterSettings settings_;
  ValueMappingOptions value_opts_;
  std::vector<config::TableConfig> tables_;
  std::vector<config::TableConfig> exclude_;
  std::vector<config::MessageOutboxConfig> messages_;
  SchemaProvider* schemas_;
  const TypeRegistry& types_;

  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, Rule*, StringHash, std::equal_to<>> rules_;
  std::vector<std::unique_ptr<Rule>> rule_storage_;
  std::unordered_map<std::string, std::string> topic_owner_;  // row topic -> "schema.table"
  std::string lookup_;
  Rule* last_rule_ = nullptr;  // the rule rule_for returned last (rules live as long as the router)

  // The open transaction.
  std::uint64_t xid_ = 0;
  Lsn commit_lsn_;
  std::int64_t commit_ts_ms_ = 0;         // commit time (or a snapshot row's read time) in ms
  std::int64_t commit_ts_us_ = 0;         //   and in µs
  Lsn last_commit_end_;                   // source.sequence's first element; 0/0 = null
  bool txn_counts_for_sequence_ = false;  // the open transaction moves last_commit_end_
  Lsn txn_first_lsn_;                // its first change that counts (pgoutput's BEGIN position)
  Lsn change_lsn_;                   // the change being routed
  std::uint32_t record_index_ = 0;   // records published in this transaction (ids)
  std::uint64_t txn_changes_ = 0;    // changes and messages in the open transaction
  std::uint64_t catalog_epoch_ = 0;  // transactions without changes (DDL) so far (identity_epoch)
  std::uint32_t event_count_ = 0;    // data events (transaction metadata total_order)
  bool begin_emitted_ = false;
  std::string txn_id_;     // "<xid>:<commit lsn>" for transaction metadata
  std::string id_prefix_;  // "<commit lsn>:" of row-change record ids (next_slot)
  Lsn id_prefix_lsn_;
  std::vector<std::pair<std::string, std::uint32_t>> collection_counts_;
  std::vector<std::string> truncated_;  // tables TRUNCATEd in this transaction (partition roots)
  const SnapshotRead* snapshot_ = nullptr;  // set while route_snapshot runs

  // Reused output slots (no per-event allocation once warm).
  std::vector<std::unique_ptr<Slot>> slots_;
  std::size_t used_slots_ = 0;
  std::vector<Record> records_;
  OutboxRecordBuilder outbox_builder_;
  std::string scratch2_;
  // append_source's parts that change only with the transaction (see there), and their inputs.
  bool source_cache_valid_ = false;
  std::int64_t source_ts_ms_ = 0;
  std::string source_marker_;
  std::uint64_t source_last_commit_ = 0;
  std::string source_head_;
  std::int64_t source_mid_ts_us_ = 0;
  std::string source_mid_;
  std::vector<std::string_view> key_order_;  // append_key's column order, reused
  std::vector<decoder::Column> padded_;      // a DELETE's key-only before with every column
  [[nodiscard]] bool debezium_format() const {
    return value_opts_.format == ValueFormat::kDebezium;
  }
  std::uint64_t nan_as_null_ = 0;
  std::uint64_t outbox_updates_ignored_ = 0;
  std::unordered_set<std::string> nan_warned_;
  std::string message_buffer_;                   // padded copy of a message's content
  std::vector<decoder::Column> message_fields_;  // its top-level fields, as outbox columns
};

}  // namespace walrelay::router
