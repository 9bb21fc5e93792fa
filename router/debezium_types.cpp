#include "debezium_types.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "base64.hpp"
#include "walrelay/core/json.hpp"

namespace walrelay::router::detail {

namespace {

/// Significant digits and decimal exponent of a value in scientific notation: value =
/// d1.d2d3... × 10^exponent.
struct Decimal {
  char digits[40];
  int count = 0;
  int exponent = 0;
};

/// Parses std::to_chars scientific output (`-1.234e+21`, `5e-324`) into digits and exponent.
Decimal from_scientific(std::string_view s) {
  Decimal d;
  std::size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  for (; i < s.size() && s[i] != 'e'; ++i) {
    if (s[i] != '.' && d.count < static_cast<int>(sizeof d.digits)) d.digits[d.count++] = s[i];
  }
  if (i < s.size()) {
    ++i;  // 'e'
    if (i < s.size() && s[i] == '+') ++i;
    std::from_chars(s.data() + i, s.data() + s.size(), d.exponent);
  }
  while (d.count > 1 && d.digits[d.count - 1] == '0') --d.count;
  return d;
}

/// Java's Double/Float.toString layout of `d` (JDK 19+ javadoc: plain for 10^-3 <= |v| < 10^7,
/// computerized scientific notation otherwise; at least one digit after the point).
void append_java_layout(std::string& out, bool negative, const Decimal& d) {
  if (negative) out.push_back('-');
  const int e = d.exponent;
  if (e >= -3 && e < 7) {
    if (e >= 0) {
      for (int i = 0; i <= e; ++i) out.push_back(i < d.count ? d.digits[i] : '0');
      out.push_back('.');
      if (d.count > e + 1) {
        out.append(d.digits + e + 1, static_cast<std::size_t>(d.count - e - 1));
      } else {
        out.push_back('0');
      }
    } else {
      out += "0.";
      out.append(static_cast<std::size_t>(-e - 1), '0');
      out.append(d.digits, static_cast<std::size_t>(d.count));
    }
    return;
  }
  out.push_back(d.digits[0]);
  out.push_back('.');
  if (d.count > 1) {
    out.append(d.digits + 1, static_cast<std::size_t>(d.count - 1));
  } else {
    out.push_back('0');
  }
  out.push_back('E');
  char buf[8];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, e);
  out.append(buf, static_cast<std::size_t>(end - buf));
}

template <typename F>
void append_java(std::string& out, F v) {
  if (std::isnan(v)) {
    out += "\"NaN\"";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    return;
  }
  if (v == 0) {
    out += std::signbit(v) ? "-0.0" : "0.0";
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  Decimal d = from_scientific(std::string_view(buf, static_cast<std::size_t>(r.ptr - buf)));
  if (d.count == 1) {
    // Java picks among the decimals of length 1 or 2 that round to v the one closest to v: the
    // correctly rounded 2-digit decimal (4.9E-324, not 5.0E-324; 1.4E-45 for the least float).
    r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, 1);
    d = from_scientific(std::string_view(buf, static_cast<std::size_t>(r.ptr - buf)));
  }
  append_java_layout(out, std::signbit(v), d);
}

std::optional<double> parse_double(std::string_view s) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

/// java.lang.String#hashCode over the UTF-16 code units of UTF-8 `s` (invalid bytes count as
/// one unit each: PgJDBC would have replaced them, and hstore text from PostgreSQL is valid).
std::int32_t java_string_hash(std::string_view s) {
  std::uint32_t h = 0;
  const auto unit = [&h](std::uint32_t u) { h = 31 * h + u; };
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::uint32_t cp = b;
    std::size_t len = 1;
    if (b >= 0xF0 && i + 3 < s.size()) {
      cp = ((b & 0x07u) << 18) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 12) |
           ((static_cast<unsigned char>(s[i + 2]) & 0x3Fu) << 6) |
           (static_cast<unsigned char>(s[i + 3]) & 0x3Fu);
      len = 4;
    } else if (b >= 0xE0 && i + 2 < s.size()) {
      cp = ((b & 0x0Fu) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
           (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
      len = 3;
    } else if (b >= 0xC0 && i + 1 < s.size()) {
      cp = ((b & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
      len = 2;
    }
    if (cp >= 0x10000) {
      unit(0xD800 + ((cp - 0x10000) >> 10));
      unit(0xDC00 + ((cp - 0x10000) & 0x3FF));
    } else {
      unit(cp);
    }
    i += len;
  }
  return static_cast<std::int32_t>(h);
}

/// One quoted hstore token (`"..."` with backslash escapes) at `s[i]`; advances `i`.
bool hstore_quoted(std::string_view s, std::size_t& i, std::string& out) {
  if (i >= s.size() || s[i] != '"') return false;
  ++i;
  while (i < s.size() && s[i] != '"') {
    if (s[i] == '\\' && i + 1 < s.size()) ++i;
    out.push_back(s[i++]);
  }
  if (i >= s.size()) return false;
  ++i;
  return true;
}

void skip_spaces(std::string_view s, std::size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
}

}  // namespace

void append_java_double(std::string& out, double v) {
  append_java(out, v);
}

void append_java_float(std::string& out, float v) {
  append_java(out, v);
}

bool append_java_number(std::string& out, std::string_view text, bool single) {
  if (single) {
    float f = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), f);
    if (ec != std::errc() || ptr != text.data() + text.size()) return false;
    append_java_float(out, f);
    return true;
  }
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ptr != text.data() + text.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    // Beyond a double's range (a numeric 1e400 in decimal.handling.mode=double): the IEEE result
    // BigDecimal#doubleValue gives too, ±Infinity or ±0 (strtod's rounding, in the C locale).
    const std::string copy(text);
    v = std::strtod(copy.c_str(), nullptr);
  } else if (ec != std::errc()) {
    return false;
  }
  append_java_double(out, v);
  return true;
}

bool append_debezium_bits(std::string& out, std::string_view text, std::int32_t length) {
  for (char c : text) {
    if (c != '0' && c != '1') return false;
  }
  if (length == 1) {
    out += text.find('1') != std::string_view::npos ? "true" : "false";
    return true;
  }
  // Bit i of the BitSet is the i-th character from the right; toByteArray() is little-endian and
  // ends at the byte holding the highest set bit.
  std::vector<std::uint8_t> bytes((text.size() + 7) / 8, 0);
  std::size_t used = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[text.size() - 1 - i] != '1') continue;
    bytes[i / 8] |= static_cast<std::uint8_t>(1u << (i % 8));
    used = i / 8 + 1;
  }
  out.push_back('"');
  Base64Writer w(out);
  for (std::size_t i = 0; i < used; ++i) w.put(bytes[i]);
  w.finish();
  out.push_back('"');
  return true;
}

bool append_debezium_point(std::string& out, std::string_view text) {
  // point_out: "(x,y)" with float8 text for each coordinate.
  if (text.size() < 5 || text.front() != '(' || text.back() != ')') return false;
  const std::string_view inner = text.substr(1, text.size() - 2);
  const auto comma = inner.find(',');
  if (comma == std::string_view::npos) return false;
  const auto x = parse_double(inner.substr(0, comma));
  const auto y = parse_double(inner.substr(comma + 1));
  if (!x || !y) return false;
  out += "{\"x\":";
  append_java_double(out, *x);
  out += ",\"y\":";
  append_java_double(out, *y);
  // OGC WKB point (io.debezium.data.geometry.Point#buildWKBPoint): byte order 1 (little endian),
  // uint32 type 1, x and y as little-endian IEEE 754 doubles.
  out += ",\"wkb\":\"";
  Base64Writer w(out);
  w.put(1);
  for (std::uint8_t b : {1, 0, 0, 0}) w.put(b);
  for (double c : {*x, *y}) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &c, sizeof bits);
    for (int i = 0; i < 8; ++i) w.put(static_cast<std::uint8_t>(bits >> (8 * i)));
  }
  w.finish();
  out += "\",\"srid\":null}";
  return true;
}

bool append_hstore_json(std::string& out, std::string_view text) {
  // hstore_out: "key"=>"value" or "key"=>NULL, separated by ", ".
  std::vector<std::pair<std::string, std::optional<std::string>>> entries;
  std::size_t i = 0;
  skip_spaces(text, i);
  while (i < text.size()) {
    std::string key;
    if (!hstore_quoted(text, i, key)) return false;
    skip_spaces(text, i);
    if (text.substr(i, 2) != "=>") return false;
    i += 2;
    skip_spaces(text, i);
    std::optional<std::string> value;
    if (text.substr(i, 4) == "NULL") {
      i += 4;
    } else {
      value.emplace();
      if (!hstore_quoted(text, i, *value)) return false;
    }
    entries.emplace_back(std::move(key), std::move(value));
    skip_spaces(text, i);
    if (i < text.size()) {
      if (text[i] != ',') return false;
      ++i;
      skip_spaces(text, i);
    }
  }
  // java.util.HashMap iteration order: table of 16 buckets doubled while size > 0.75 × buckets,
  // bucket = (h ^ (h >>> 16)) & (buckets - 1), insertion order within a bucket (a resize keeps
  // it). A bucket of 8+ keys would be a tree in Java; hstores that collide that much are not
  // expected (documented).
  std::size_t buckets = 16;
  while (entries.size() > buckets * 3 / 4) buckets *= 2;
  std::vector<std::pair<std::size_t, std::size_t>> order;  // (bucket, insertion index)
  order.reserve(entries.size());
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const auto h = static_cast<std::uint32_t>(java_string_hash(entries[k].first));
    order.emplace_back((h ^ (h >> 16)) & (buckets - 1), k);
  }
  std::sort(order.begin(), order.end());
  std::string doc = "{";
  for (std::size_t n = 0; n < order.size(); ++n) {
    const auto& [key, value] = entries[order[n].second];
    if (n > 0) doc.push_back(',');
    json::append_string(doc, key);
    doc.push_back(':');
    if (value) {
      json::append_string(doc, *value);
    } else {
      doc += "null";
    }
  }
  doc.push_back('}');
  json::append_string(out, doc);
  return true;
}

}  // namespace walrelay::router::detail
