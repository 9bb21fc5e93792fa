// Bytes and exact decimals in PostgreSQL's text (value_text.hpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base64.hpp"
#include "value_text.hpp"

namespace walrelay::router::values {

namespace {

/// Scratch buffers reused across calls (the mapping runs on the connector's thread; thread_local
/// keeps it safe anyway). None of them is held across a call that uses the same buffer.
thread_local std::string tl_bytes;  // two's complement bytes
thread_local std::vector<std::uint32_t> tl_limbs;

}  // namespace

bool append_bytea_base64(std::string& out, std::string_view text) {
  out.push_back('"');
  detail::Base64Writer w(out);
  // byteaout hex format is "\x" then two hex digits per byte (src/backend/utils/adt/varlena.c);
  // wal2json strips the "\x" and prints only the digits (verified with wal2json 2.5 and
  // bytea_output=hex, which walrelay pins).
  std::string_view hex = text;
  if (hex.size() >= 2 && hex[0] == '\\' && hex[1] == 'x') hex.remove_prefix(2);
  bool is_hex = hex.size() % 2 == 0;
  for (std::size_t i = 0; is_hex && i < hex.size(); ++i) is_hex = hex_value(hex[i]) >= 0;
  if (is_hex) {
    for (std::size_t i = 0; i < hex.size(); i += 2) {
      w.put(static_cast<std::uint8_t>((hex_value(hex[i]) << 4) | hex_value(hex[i + 1])));
    }
  } else {
    // Escape format: `\\` is a backslash, `\ooo` an octal byte, anything else the byte itself.
    for (std::size_t i = 0; i < text.size();) {
      if (text[i] != '\\') {
        w.put(static_cast<std::uint8_t>(text[i++]));
      } else if (i + 1 < text.size() && text[i + 1] == '\\') {
        w.put('\\');
        i += 2;
      } else if (i + 3 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '3' &&
                 text[i + 2] >= '0' && text[i + 2] <= '7' && text[i + 3] >= '0' &&
                 text[i + 3] <= '7') {
        w.put(static_cast<std::uint8_t>(((text[i + 1] - '0') << 6) | ((text[i + 2] - '0') << 3) |
                                        (text[i + 3] - '0')));
        i += 4;
      } else {
        return false;
      }
    }
  }
  w.finish();
  out.push_back('"');
  return true;
}

bool parse_decimal(std::string_view s, Decimal& d) {
  std::size_t i = 0;
  d.negative = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) d.negative = s[i++] == '-';
  const std::size_t int_start = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  d.int_digits = s.substr(int_start, i - int_start);
  d.frac_digits = {};
  if (i < s.size() && s[i] == '.') {
    const std::size_t frac_start = ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
    d.frac_digits = s.substr(frac_start, i - frac_start);
  }
  return i == s.size() && (!d.int_digits.empty() || !d.frac_digits.empty());
}

void append_twos_complement_base64(std::string& out, bool negative, std::string_view digits) {
  std::size_t first = 0;
  while (first < digits.size() && digits[first] == '0') ++first;
  digits.remove_prefix(first);

  // Decimal digits -> base 2^32 limbs (little endian), 9 digits at a time.
  auto& limbs = tl_limbs;
  limbs.clear();
  std::size_t pos = 0;
  while (pos < digits.size()) {
    const std::size_t take = std::min<std::size_t>(9, digits.size() - pos);
    std::uint32_t chunk = 0;
    std::uint64_t mul = 1;
    for (std::size_t k = 0; k < take; ++k) {
      chunk = chunk * 10 + static_cast<std::uint32_t>(digits[pos + k] - '0');
      mul *= 10;
    }
    pos += take;
    std::uint64_t carry = chunk;
    for (auto& limb : limbs) {
      const std::uint64_t v = static_cast<std::uint64_t>(limb) * mul + carry;
      limb = static_cast<std::uint32_t>(v);
      carry = v >> 32;
    }
    if (carry != 0) limbs.push_back(static_cast<std::uint32_t>(carry));
  }

  // Magnitude, big endian, without leading zero bytes.
  auto& bytes = tl_bytes;
  bytes.clear();
  for (std::size_t i = limbs.size(); i-- > 0;) {
    for (int shift = 24; shift >= 0; shift -= 8) {
      const auto b = static_cast<char>((limbs[i] >> shift) & 0xFF);
      if (bytes.empty() && b == 0) continue;
      bytes.push_back(b);
    }
  }
  const bool zero = bytes.empty();
  if (zero || !negative) {
    // A leading 0x00 when the top bit is set keeps the value positive.
    if (zero || (static_cast<unsigned char>(bytes[0]) & 0x80) != 0) bytes.insert(bytes.begin(), 0);
  } else {
    // Two's complement of the magnitude in the same width: invert and add one.
    unsigned carry = 1;
    for (std::size_t i = bytes.size(); i-- > 0;) {
      const unsigned v = (~static_cast<unsigned char>(bytes[i]) & 0xFFu) + carry;
      bytes[i] = static_cast<char>(v & 0xFF);
      carry = v >> 8;
    }
    // Without the sign bit set the value needs one more byte to read as negative.
    if ((static_cast<unsigned char>(bytes[0]) & 0x80) == 0) bytes.insert(bytes.begin(), '\xFF');
    while (bytes.size() > 1 && static_cast<unsigned char>(bytes[0]) == 0xFF &&
           (static_cast<unsigned char>(bytes[1]) & 0x80) != 0) {
      bytes.erase(bytes.begin());
    }
  }
  out.push_back('"');
  detail::Base64Writer w(out);
  for (char b : bytes) w.put(static_cast<std::uint8_t>(b));
  w.finish();
  out.push_back('"');
}

bool unscaled_digits(const Decimal& d, int scale, std::string& digits) {
  digits.clear();
  if (scale >= 0) {
    const auto s = static_cast<std::size_t>(scale);
    digits.append(d.int_digits);
    if (d.frac_digits.size() <= s) {
      digits.append(d.frac_digits);
      digits.append(s - d.frac_digits.size(), '0');
    } else {
      for (char c : d.frac_digits.substr(s))
        if (c != '0') return false;
      digits.append(d.frac_digits.substr(0, s));
    }
  } else {
    // Negative scale (numeric(p,-s), PostgreSQL 15): the last -scale integer digits must be 0.
    for (char c : d.frac_digits)
      if (c != '0') return false;
    const auto drop = static_cast<std::size_t>(-scale);
    std::string_view int_digits = d.int_digits;
    std::size_t kept = int_digits.size() > drop ? int_digits.size() - drop : 0;
    for (char c : int_digits.substr(kept))
      if (c != '0') return false;
    digits.append(int_digits.substr(0, kept));
  }
  return true;
}

int numeric_typmod_scale(std::int32_t typmod) {
  return static_cast<int>((((static_cast<std::uint32_t>(typmod) - 4u) & 0x7FFu) ^ 1024u)) - 1024;
}

bool parse_money(std::string_view s, std::string& canon) {
  canon.clear();
  bool negative = false;
  if (s.size() >= 2 && s.front() == '(' && s.back() == ')') {
    negative = true;
    s = s.substr(1, s.size() - 2);
  }
  std::size_t i = 0;
  while (i < s.size() && (s[i] == '-' || s[i] == '$' || s[i] == '+' || s[i] == ' ')) {
    if (s[i] == '-') negative = true;
    ++i;
  }
  if (negative) canon.push_back('-');
  bool any_digit = false;
  bool dot = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (is_digit(c)) {
      canon.push_back(c);
      any_digit = true;
    } else if (c == ',' && !dot) {
      continue;
    } else if (c == '.' && !dot) {
      dot = true;
      canon.push_back('.');
    } else {
      return false;
    }
  }
  return any_digit;
}

}  // namespace walrelay::router::values
