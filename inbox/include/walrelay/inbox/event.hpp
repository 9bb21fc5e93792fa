#pragma once

// One consumed record as the inbox decides it: its place in Kafka, its bytes, and the fields the
// configuration says where to find (config/inbox.hpp: tenant, event id, digest, aggregate,
// version), read with the shared header names (core/headers.hpp) and the shared digest
// (router/payload_digest.hpp).

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "walrelay/config/inbox.hpp"
#include "walrelay/kafka/consumer.hpp"

namespace walrelay::inbox {

/// An event, owned (copied out of librdkafka's message). Plain value.
struct Event {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::int64_t timestamp_ms = -1;  ///< the record's timestamp (ms since the epoch), -1 if none
  std::optional<std::string> key;
  std::optional<std::string> value;
  /// Every header as one JSON object {"name":"value",…} (the last value of a repeated name; a
  /// null header value is JSON null): the handler's $4.
  std::string headers_json = "{}";
  std::string tenant;  ///< "" without `inbox.tenant`
  std::string id;
  /// The digest header's value, or router::record_digest of the value (a row change's row
  /// values, any other value's bytes): lower-case hex SHA-256.
  std::string digest;
  std::optional<std::string> aggregate;
  std::optional<std::int64_t> version;  ///< set when `inbox.version` is
  std::string event_type;               ///< header eventType, "" when absent
  /// Not "": the record cannot be decided as an event (no id, a version that is no integer, a
  /// digest header that does not match the value, ...): it is QUARANTINED with this reason.
  std::string problem;
};

/// A record's headers by name: the last value of a repeated name (as kafka::Message::header
/// reads them); nullopt for a header whose value is null.
using Headers = std::map<std::string, std::optional<std::string>>;

/// The event of the record `raw` (its topic, partition, offset, timestamp, key and value set;
/// the rest ignored) with `headers`, under `cfg`: every rule of read_event below. The one decode
/// step of arrival and of `walrelay inbox redrive` (which decides a stored record again).
Event decode_event(Event raw, const Headers& headers, const config::InboxConfig& cfg);

/// The headers of `headers_json`, the object Event::headers_json holds ({"name":"value"|null,…});
/// nullopt when it is not such an object.
std::optional<Headers> headers_from_json(const std::string& headers_json);

/// The event of `message` (a record, not a consumer event) under `cfg`. Never fails: what cannot
/// be read is `Event::problem`. The digest: the configured header when present; otherwise (or
/// with `digest: value`) router::record_digest of the value. The walrelay `payload_digest`
/// header (header::kPayloadDigest) is checked against the value's digest: a mismatch is a
/// problem (the payload changed after the producer wrote it).
Event read_event(const kafka::Message& message, const config::InboxConfig& cfg);

/// The highest `$n` placeholder in `sql` (0 when none), counted outside single-quoted literals,
/// quoted identifiers and comments: how many parameters a handler is given (PostgreSQL refuses a
/// Bind with more parameters than the statement uses, PostgreSQL docs §55.2.3).
int placeholder_count(std::string_view sql);

}  // namespace walrelay::inbox
