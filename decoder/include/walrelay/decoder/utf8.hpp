#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace walrelay::decoder {

/// Checks that `text` is well-formed UTF-8 (RFC 3629 §4: shortest forms only, no surrogates
/// U+D800..U+DFFF, nothing above U+10FFFF). Valid text costs one pass of simdjson's vectorised
/// validator; only invalid text is scanned again to find where.
/// Returns nullopt when `text` is valid, else the byte offset of the first byte that does not
/// start a complete, well-formed sequence. Never fails.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

/// `text` with every byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD
/// (the replacement character); valid sequences are kept. For error messages, logs and Kafka
/// headers that must be UTF-8 only: never use it to repair data that is published.
std::string utf8_for_message(std::string_view text);

/// `"0xe9 0x20 0x4d"`: up to `count` bytes of `text` from `offset`, in hex, for error messages.
/// Empty when `offset` is at or after the end.
std::string hex_bytes(std::string_view text, std::size_t offset, std::size_t count = 4);

}  // namespace walrelay::decoder
