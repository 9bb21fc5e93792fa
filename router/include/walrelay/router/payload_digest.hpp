#pragma once

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

}  // namespace walrelay::router
