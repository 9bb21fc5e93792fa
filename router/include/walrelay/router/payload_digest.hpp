#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace walrelay::router {

/// The `payload_digest` header's value (header::kPayloadDigest, `outbox.payload_digest: true`):
/// the SHA-256 (FIPS 180-4, OpenSSL's EVP_sha256) of exactly the bytes of `value`, the outbox
/// event's Kafka record value as published (a json/jsonb payload's document text, a text payload's
/// unescaped text, a bytea payload's raw bytes; nothing added, no normalisation), as 64 lower-case
/// hexadecimal characters. `printf '%s' '{"a":1}' | sha256sum` gives the same digits. A tombstone
/// (no value) has no digest: walrelay writes no header for it.
std::string payload_digest(std::string_view value);

/// payload_digest(value) appended to `out` (no allocation once `out` has room for 64 bytes).
void append_payload_digest(std::string& out, std::string_view value);

/// The digest of a row change (a record of a row-change topic, docs/events.md): the SHA-256 of the
/// change's row values only, so that the same change published again (a restarted connector's
/// replay, with a new top-level `ts_ms`/`ts_us`/`ts_ns` and a new `source`) has the same digest,
/// and a change with other row values has another.
///
/// `value` is a row-change envelope when it is one JSON object (RFC 8259) with a string member
/// `op` and an object member `source`, whose `before` and `after` members, when present, are each
/// an object or null, and that has none of these four names twice. For such a value the digest is
/// the lower-case hex SHA-256 (64 characters, as payload_digest) of the canonical text
///
///     {"op":<op>,"before":<before>,"after":<after>}
///
/// where each <…> is that member's JSON text exactly as the record has it, with only the
/// whitespace outside strings removed (simdjson::minify): numbers keep their literal digits (never
/// read as a double), strings their escapes, objects their member order. A member the value does
/// not have is left out of the text with its name and comma (`{"op":"c","after":{…}}` without
/// `before`), so an absent `before` and `"before":null` differ, as do `{"a":null}` and `{}` inside
/// a row. Every other member (`source`, `transaction`, `ts_ms`, `ts_us`, `ts_ns`, any other) is
/// ignored. For a compact record, `printf '%s' '{"op":"c","before":null,"after":{"id":1}}' |
/// sha256sum` gives the same digits.
///
/// Returns nullopt when `value` is not a row-change envelope (not JSON, not an object, no string
/// `op` or no object `source`, ...): then use payload_digest. Never throws; thread-safe (one
/// parser per thread).
std::optional<std::string> row_change_digest(std::string_view value);

/// The digest of a record that carries no `payload_digest` header (one definition for whoever
/// compares walrelay's records by digest: `walrelay inbox` today): row_change_digest(value) for a
/// row-change envelope, otherwise payload_digest(value). 64 lower-case hex characters.
std::string record_digest(std::string_view value);

}  // namespace walrelay::router
