#pragma once

// The outbox record builder: one outbox row (or one logical message's top-level fields) becomes
// the Kafka record of its domain event. The WAL mode calls it for every INSERT into an outbox
// table and every logical message with a configured prefix (EventRouter); a relay that reads
// outbox rows with a SELECT calls it with the same fields, so both publish the same bytes.
//
// It follows Debezium's outbox event router (io.debezium.transforms.outbox.EventRouter; see
// config::OutboxConfig for the option each setting stands for), as docs/events.md and
// docs/configuration.md describe it:
//   event_id column        -> header `id` (the text of the value), the id consumers deduplicate by
//   aggregate_id column    -> record key (its text; table.field.event.key)
//   aggregate_type column  -> topic: `{aggregate_type}` in `topic` replaced by its text verbatim
//                             (route.by.field, default topic `outbox.event.{aggregate_type}`)
//   payload column         -> record value: a json/jsonb payload is the document itself (never a
//                             JSON string holding it), a text payload must hold JSON and is its
//                             text, a bytea payload is its bytes; a number, boolean or (message
//                             form) embedded document is its JSON text. NULL: a tombstone with
//                             `tombstone_on_empty_payload` (route.tombstone.on.empty.payload),
//                             otherwise an error.
//   event_type column      -> header `eventType` (Debezium's `type`, placed as a header), when
//                             configured and not NULL
//   timestamp column       -> record timestamp (ms, its text parsed as parse_commit_timestamp
//                             does); absent, NULL or unparsable: the caller's fallback (the commit
//                             time)
//   additional columns     -> one header each, in configuration order, when not NULL
//                             (table.fields.additional.placement `column:header[:alias]`)
//   payload_digest: true   -> header `payload_digest` = payload_digest(value), not on a tombstone
// Headers in this order: `id`, `eventType`, the additional ones, `payload_digest`.
// Differences from Debezium: an empty-string aggregate id is an error unless
// `allow_empty_aggregate_id` (key '' would put unrelated aggregates on one key and partition).

#include <cstdint>
#include <expected>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "walrelay/config/config.hpp"
#include "walrelay/core/record.hpp"
#include "walrelay/decoder/change.hpp"
#include "walrelay/router/mapping_error.hpp"
#include "walrelay/router/type_registry.hpp"

namespace walrelay::router {

/// The bytes of one Kafka record, owned and reused across calls by whoever builds records (the
/// router keeps one per output slot): strings keep their capacity, so a warm buffer allocates
/// nothing. Not thread-safe; one owner.
struct RecordBuffer {
  std::string topic;
  std::string key;
  std::string value;
  std::string id;  ///< the `id` header's value (header::kId), always the first header
  bool has_key = false;
  bool has_value = true;  ///< false: a tombstone (null value)
  std::int64_t timestamp_ms = 0;
  char op = 0;  ///< the row-change envelope's op (Record::op), 0 for other records
  /// The headers after `id`, in order: names (views of constants or of the configuration that
  /// built them, which must outlive the buffer's records) and their owned values.
  std::vector<std::string_view> header_names;
  std::vector<std::string> header_values;
  std::vector<Header> headers;  ///< filled by record()

  /// Empties every field (capacity kept).
  void clear();

  /// The record as the sink takes it: views into this buffer (valid until it changes), headers
  /// `id` then header_names/header_values.
  Record record();
};

/// Where the builder finds an outbox event's fields in a row (locate). Views into the row.
struct OutboxColumns {
  const decoder::Column* event_id = nullptr;
  const decoder::Column* aggregate_id = nullptr;
  const decoder::Column* aggregate_type = nullptr;
  const decoder::Column* payload = nullptr;
  const decoder::Column* event_type = nullptr;  ///< null: not configured or not in the row
  const decoder::Column* timestamp = nullptr;   ///< null: not configured or not in the row
};

/// Builds outbox event records (see the file comment for the mapping). Holds scratch space and
/// the type registry (domains over json/jsonb/bytea payloads resolve to their base type); owned
/// by one thread.
class OutboxRecordBuilder {
 public:
  /// Names what is being mapped in an error ("outbox table public.outbox", "message outbox
  /// 'outbox' at LSN 0/16B3748"); called only for an error, so an event allocates nothing.
  using ErrorContext = std::function<std::string()>;

  /// `types` must outlive the builder.
  explicit OutboxRecordBuilder(const TypeRegistry& types) : types_(types) {}

  /// Step 1: finds the configured columns in `row` (fields by name, in the decoder's
  /// representation: decoder::Column, `value` a wal2json JSON token, `null` for SQL NULL,
  /// `type_oid` the column's pg_type OID). MappingError (`<where()>: <why>`) when the event id,
  /// aggregate id or aggregate type column is missing or NULL, or the payload column is missing.
  static std::expected<OutboxColumns, MappingError> locate(const config::OutboxConfig& outbox,
                                                           std::span<const decoder::Column> row,
                                                           const ErrorContext& where);

  /// Step 2: writes the event's record into `out` (cleared first). `fallback_timestamp_ms` (ms
  /// since the Unix epoch) is the record timestamp when the row gives none: the commit time.
  /// MappingError (`<where()>: <why>`, `out` then unspecified) when a text field's string escapes
  /// are malformed, the aggregate id is the empty string (unless allow_empty_aggregate_id), the
  /// aggregate type is empty, the topic is not a valid Kafka topic name (empty, `.`, `..`, longer
  /// than 249 characters, a character outside `[A-Za-z0-9._-]`), the payload is NULL without
  /// tombstone_on_empty_payload, a bytea payload is not hex, or a text payload is not JSON.
  /// Header names view `outbox` (its `additional` entries): it must outlive `out`'s record.
  std::expected<void, MappingError> build(const config::OutboxConfig& outbox,
                                          std::span<const decoder::Column> row,
                                          const OutboxColumns& columns,
                                          std::int64_t fallback_timestamp_ms,
                                          const ErrorContext& where, RecordBuffer& out);

  /// locate and build in one call: what a relay that has one row at a time calls.
  std::expected<void, MappingError> build(const config::OutboxConfig& outbox,
                                          std::span<const decoder::Column> row,
                                          std::int64_t fallback_timestamp_ms,
                                          const ErrorContext& where, RecordBuffer& out);

 private:
  const TypeRegistry& types_;
  std::string scratch_;
};

/// A logical message outbox's content (`pg_logical_emit_message(true, '<prefix>', '{...}')`, the
/// message's unescaped content) as outbox fields: each top-level field of the JSON object becomes
/// a decoder::Column named like the outbox column it stands for, `value` its raw JSON token (a
/// string's quotes included), `type_oid` json for an object or array, text for a string, 0
/// otherwise; so OutboxRecordBuilder gives it exactly the record an outbox row would get.
/// `buffer` receives a padded copy of `content` that the values view, the names view this
/// thread's JSON parser: both valid until the next call on the thread. `fields` is replaced. Errors
/// (a reason without context): "content is not a JSON object", "content is not valid JSON".
std::expected<void, std::string> outbox_message_fields(std::string_view content,
                                                       std::string& buffer,
                                                       std::vector<decoder::Column>& fields);

}  // namespace walrelay::router
