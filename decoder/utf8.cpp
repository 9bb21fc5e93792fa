#include "walrelay/decoder/utf8.hpp"

#include <simdjson.h>

#include <cstdio>

namespace walrelay::decoder {

namespace {

bool continuation(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

// Length of the well-formed sequence starting at text[at] (RFC 3629 §4, "UTF8-octets"), or 0 when
// none starts there.
std::size_t sequence_length(std::string_view text, std::size_t at) {
  const std::size_t left = text.size() - at;
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[at + k]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return left >= 2 && continuation(byte(1)) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (left < 3 || !continuation(byte(1)) || !continuation(byte(2))) return 0;
    if (b0 == 0xE0 && byte(1) < 0xA0) return 0;  // overlong
    if (b0 == 0xED && byte(1) > 0x9F) return 0;  // surrogates
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (left < 4 || !continuation(byte(1)) || !continuation(byte(2)) || !continuation(byte(3))) {
      return 0;
    }
    if (b0 == 0xF0 && byte(1) < 0x90) return 0;  // overlong
    if (b0 == 0xF4 && byte(1) > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;  // 0x80..0xC1 (continuation or overlong lead), 0xF5..0xFF
}

}  // namespace

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  if (simdjson::validate_utf8(text.data(), text.size())) return std::nullopt;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t n = sequence_length(text, at);
    if (n == 0) return at;
    at += n;
  }
  return std::nullopt;  // not reached: simdjson and RFC 3629 agree
}

std::string utf8_for_message(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t n = sequence_length(text, at);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++at;
    } else {
      out.append(text, at, n);
      at += n;
    }
  }
  return out;
}

std::string hex_bytes(std::string_view text, std::size_t offset, std::size_t count) {
  std::string out;
  for (std::size_t k = offset; k < text.size() && k < offset + count; ++k) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(text[k]));
    if (!out.empty()) out.push_back(' ');
    out += buf;
  }
  return out;
}

}  // namespace walrelay::decoder
