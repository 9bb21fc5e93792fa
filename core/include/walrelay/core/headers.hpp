#pragma once

// The names of the Kafka record headers (KIP-82) walrelay writes: one definition, so that every
// system that writes or reads them (the WAL mode, an outbox relay, an inbox, reconcile) uses the
// same bytes. Consumers see these names; changing one is a breaking change of the output
// (docs/events.md, docs/delivery.md, docs/operations.md "Error policy").
//
// Each is a null-terminated char array: it converts to std::string_view (Header::name) and can be
// passed to librdkafka's C API (rd_kafka_header_get_last) as it is.

namespace walrelay::header {

/// `id`: on every record walrelay publishes, the id to deduplicate replays by (docs/delivery.md):
/// a row change `<commit LSN>:<n>` (n the record's index in its transaction), a snapshot row
/// `<LSN>:r:<schema>.<table>:<chunk>:<row>`, an outbox event its event id column (or message
/// field) as text (Debezium's outbox `id` header), a transaction-metadata record (BEGIN, END)
/// `<commit LSN>:<n>` like a row change. On a dead-letter record: the failed event's id, when it
/// had one. Deterministic: the same WAL and configuration give the same ids.
inline constexpr char kId[] = "id";

/// `eventType`: an outbox event's `event_type` column (or message field) as text, when the outbox
/// configures one (Debezium's outbox `type` column placed as a header); absent when it is NULL.
inline constexpr char kEventType[] = "eventType";

/// `payload_digest`: with `outbox.payload_digest: true`, the lower-case hex SHA-256 of the outbox
/// event's value bytes (router::payload_digest), so an inbox tells a replay (same id, same digest)
/// from a conflict (same id, other digest). Absent on a tombstone (NULL payload).
inline constexpr char kPayloadDigest[] = "payload_digest";

/// `__debezium.newkey`: on the delete (and its tombstone) an UPDATE that changes a row's key
/// becomes, the new key (Debezium's PostgreSQL connector; docs/events.md).
inline constexpr char kDebeziumNewKey[] = "__debezium.newkey";

/// `__debezium.oldkey`: on the create such an UPDATE becomes, the old key.
inline constexpr char kDebeziumOldKey[] = "__debezium.oldkey";

/// `walrelay.error.kind`: on a dead-letter record (sink::DeadLetterWriter writes them all), why
/// it is there: `mapping`, `oversize` or `delivery` (docs/operations.md "Error policy").
inline constexpr char kErrorKind[] = "walrelay.error.kind";

/// `walrelay.error.reason`: on a dead-letter record, the error in words (what the log says).
inline constexpr char kErrorReason[] = "walrelay.error.reason";

/// `walrelay.source`: on a dead-letter record, where the failed event came from: the table
/// (`schema.table`), `message:<prefix>` for a logical message, or the topic of a failed delivery.
inline constexpr char kSource[] = "walrelay.source";

/// `walrelay.lsn`: on a dead-letter record, the LSN of the change (or of the transaction) it
/// stands for, as PostgreSQL prints an LSN (`X/X`, hexadecimal).
inline constexpr char kLsn[] = "walrelay.lsn";

}  // namespace walrelay::header
