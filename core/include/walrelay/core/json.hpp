#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace walrelay::json {

/// Appends `text` to `out` as a JSON string token (quotes included), escaping per RFC 8259 §7:
/// `"` and `\`, and control characters below 0x20 (as \n, \t, ... or \u00XX). Bytes ≥ 0x80 are
/// copied as they are (the input is UTF-8 from PostgreSQL).
void append_string(std::string& out, std::string_view text);

/// Appends `text` as a JSON string token (append_string), or `null` when it is std::nullopt (an
/// SQL NULL read from PostgreSQL): NULL never becomes an empty string.
void append_string_or_null(std::string& out, const std::optional<std::string>& text);

/// Appends a number's text as it is (PostgreSQL's text of an int8 or numeric: never through a
/// double), or `null` when it is std::nullopt (SQL NULL). The text must be a JSON number.
void append_number_or_null(std::string& out, const std::optional<std::string>& number);

/// Decodes a JSON string token (with its surrounding quotes) and appends the unescaped UTF-8 text
/// to `out`. Handles every RFC 8259 escape including \uXXXX surrogate pairs. Returns false (and
/// leaves `out` in an unspecified state) when `token` is not a well-formed string token, e.g. a
/// number or `null`, or has a lone surrogate.
bool unescape_string(std::string_view token, std::string& out);

/// Rewrites every 4-byte UTF-8 sequence (a character outside the Basic Multilingual Plane, U+10000
/// and above) in `json[from..]` as a `\uXXXX\uXXXX` UTF-16 surrogate-pair escape, the way Jackson
/// (Kafka Connect's JsonConverter) writes such characters, so walrelay's bytes equal Debezium's
/// (a key's bytes decide its murmur2 partition). `json` must be JSON text: 4-byte sequences occur
/// only inside string tokens there. Bytes that are not a well-formed 4-byte sequence are left as
/// they are. A fast scan returns at once when there is no byte ≥ 0xF0 (the common case).
void escape_supplementary(std::string& json, std::size_t from = 0);

/// True when `token` is a JSON string token (starts with a double quote).
inline bool is_string_token(std::string_view token) {
  return !token.empty() && token.front() == '"';
}

}  // namespace walrelay::json
