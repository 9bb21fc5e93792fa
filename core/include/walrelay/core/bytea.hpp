#pragma once

// PostgreSQL's bytea hex format (PostgreSQL docs §8.4.1 "bytea Hex Format"): `\x` followed by two
// hex digits per byte, what byteaout prints with bytea_output hex and what bytea input accepts.
// wal2json prints the digits without the `\x`.

#include <string>
#include <string_view>

namespace walrelay::bytea {

/// Appends the bytes of `text` (hex digits of either case, with or without the leading `\x`) to
/// `out`. Returns false for text that is not that (an odd count or a non-hex digit); `out` may
/// then hold part of the bytes.
bool append_bytes(std::string& out, std::string_view text);

/// `bytes` in bytea's hex input format: `\x` and two lower-case hex digits per byte.
std::string hex_text(std::string_view bytes);

}  // namespace walrelay::bytea
