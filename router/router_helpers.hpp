#pragma once

// Small helpers the router's files share (private to walrelay_router).

#include <charconv>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <span>
#include <string>
#include <string_view>

#include "walrelay/core/json.hpp"
#include "walrelay/decoder/change.hpp"

namespace walrelay::router::detail {

/// Kafka's topic alphabet `[A-Za-z0-9._-]`.
inline bool valid_topic_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

inline void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(end - buf));
}

inline void append_uint(std::string& out, std::uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(end - buf));
}

/// Processing time for the envelope's ts_ms/ts_us/ts_ns, in ns since the Unix epoch (one vDSO
/// clock read per event; ms, µs and ns come from the same reading, as Debezium's from one Instant).
inline std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// Monotonic time for rate limits where a few ms do not matter: CLOCK_MONOTONIC_COARSE is the
/// kernel's last tick, read without the hardware clock.
inline std::chrono::nanoseconds coarse_monotonic() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

/// Rounds toward negative infinity (times before 1970 stay ordered).
inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/// The column named `name` in `cols`, or null.
inline const decoder::Column* find_column(std::span<const decoder::Column> cols,
                                          std::string_view name) {
  for (const auto& c : cols) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

template <typename Names>
bool contains(const Names& names, std::string_view name) {
  for (const auto& n : names) {
    if (n == name) return true;
  }
  return false;
}

/// Names joined with ", ".
template <typename Names>
std::string join_names(const Names& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out.append(n);
  }
  return out;
}

/// A column value as plain text: a JSON string token unescaped, anything else (numbers, booleans,
/// documents) as its literal text. False when a string token's escapes are malformed.
inline bool append_text(std::string& out, std::string_view token) {
  if (json::is_string_token(token)) return json::unescape_string(token, out);
  out.append(token);
  return true;
}

/// Lower-case hex SHA-256 of the concatenation of `a` and `b` (OpenSSL EVP), appended to `out`:
/// the payload digest (`a` empty) and column masking (`a` the salt). In payload_digest.cpp.
void append_sha256_hex(std::string& out, std::string_view a, std::string_view b);

}  // namespace walrelay::router::detail
