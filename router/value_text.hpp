#pragma once

// PostgreSQL text primitives the value mapping shares (private to walrelay_router): digits,
// exact decimals and money (value_numbers.cpp), dates and times (value_time.cpp). Each works on
// the value's PostgreSQL text as wal2json prints it (unescaped).

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace walrelay::router::values {

// ------------------------------------------------------------------------------------------------
// Small helpers

constexpr bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

constexpr bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

inline void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(r.ptr - buf));
}

/// Parses all of `s` as an unsigned decimal number; false when empty, not digits or too big.
inline bool parse_uint(std::string_view s, std::int64_t& v) {
  if (s.empty()) return false;
  v = 0;
  for (char c : s) {
    if (!is_digit(c)) return false;
    if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) return false;
    v = v * 10 + (c - '0');
  }
  return true;
}

/// The two decimal digits at s[pos], s[pos + 1] (the caller has checked they exist); false when
/// either is not a digit (as parse_uint of those two characters).
inline bool parse_2digits(std::string_view s, std::size_t pos, std::int64_t& v) {
  const auto hi = static_cast<unsigned>(s[pos] - '0');
  const auto lo = static_cast<unsigned>(s[pos + 1] - '0');
  if (hi > 9 || lo > 9) return false;
  v = hi * 10 + lo;
  return true;
}

/// Writes `v` (0 <= v < 100) as two digits at `p`; returns the end.
inline char* put_2digits(char* p, std::int64_t v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
  return p + 2;
}

inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

/// RFC 8259 §6 number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
inline bool is_json_number(std::string_view s, bool integer_only) {
  std::size_t i = 0;
  const std::size_t n = s.size();
  if (i < n && s[i] == '-') ++i;
  if (i >= n) return false;
  if (s[i] == '0') {
    ++i;
  } else if (is_digit(s[i])) {
    while (i < n && is_digit(s[i])) ++i;
  } else {
    return false;
  }
  if (integer_only) return i == n;
  if (i < n && s[i] == '.') {
    ++i;
    const std::size_t start = i;
    while (i < n && is_digit(s[i])) ++i;
    if (i == start) return false;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    const std::size_t start = i;
    while (i < n && is_digit(s[i])) ++i;
    if (i == start) return false;
  }
  return i == n;
}

inline bool is_special_float(std::string_view s) {
  return s == "NaN" || s == "Infinity" || s == "-Infinity";
}

inline int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// ------------------------------------------------------------------------------------------------
// Bytes and exact decimals (value_numbers.cpp)

/// bytea text (bytea_output hex `\x0a1b`, or escape format as a fallback) -> "base64".
bool append_bytea_base64(std::string& out, std::string_view text);

/// A plain decimal `[+-]digits[.digits]` split into its parts (numeric_out never prints exponents).
struct Decimal {
  bool negative = false;
  std::string_view int_digits;
  std::string_view frac_digits;
};

/// `s` as a Decimal (views into `s`); false when it is not `[+-]digits[.digits]`.
bool parse_decimal(std::string_view s, Decimal& d);

/// Appends "base64" of the minimal big-endian two's complement bytes of the integer
/// (negative ? -1 : 1) * digits, exactly like java.math.BigInteger#toByteArray.
void append_twos_complement_base64(std::string& out, bool negative, std::string_view digits);

/// The unscaled digits of `d` at `scale` into `digits` (BigDecimal#setScale without rounding:
/// only zeros may be dropped). False when non-zero digits would be lost.
bool unscaled_digits(const Decimal& d, int scale, std::string& digits);

/// PostgreSQL 15 numeric typmod decoding (src/backend/utils/adt/numeric.c,
/// numeric_typmod_precision / numeric_typmod_scale; scale is an 11-bit signed field).
int numeric_typmod_scale(std::int32_t typmod);

/// money text under lc_monetary=C (src/backend/utils/adt/cash.c cash_out: optional '-', '$',
/// digits grouped by ',', '.', 2 fraction digits; also accepts the parenthesised negative form)
/// -> canonical "[-]digits.fraction" in `canon`.
bool parse_money(std::string_view s, std::string& canon);

// ------------------------------------------------------------------------------------------------
// Dates and times, proleptic Gregorian like PostgreSQL and java.time (value_time.cpp)

/// Days since 1970-01-01 of an astronomical year / month / day (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d);

struct Civil {
  std::int64_t year;
  unsigned month;
  unsigned day;
};

/// The date of a day since 1970-01-01 (H. Hinnant's civil_from_days).
Civil civil_from_days(std::int64_t z);

inline constexpr std::int64_t kMicrosPerSecond = 1'000'000;
inline constexpr std::int64_t kMicrosPerDay = 86'400 * kMicrosPerSecond;

/// "HH:MM:SS[.f{1,6}]" at the start of `s` -> microseconds since midnight (24:00:00 allowed);
/// advances `s`.
bool parse_time_part(std::string_view& s, std::int64_t& micros);

/// "+HH[:MM[:SS]]" / "-HH..." at the start of `s` -> seconds east of UTC; advances `s`.
bool parse_offset(std::string_view& s, std::int64_t& seconds);

/// "date" text -> days since 1970-01-01 (astronomical years: 1 BC is year 0).
bool parse_date(std::string_view s, std::int64_t& days);

/// A timestamp / timestamptz text taken apart by parse_timestamp.
struct TimestampParts {
  std::int64_t days = 0;    ///< days since 1970-01-01 (UTC for timestamptz)
  std::int64_t tod = 0;     ///< microseconds into that day
  std::int64_t offset = 0;  ///< the text's offset in seconds east of UTC (timestamptz)
  bool bc = false;          ///< the text ends in " BC"
  std::string_view date;    ///< the text's "YYYY-MM-DD" (without " BC")
  std::string_view clock;   ///< the text's "HH:MM:SS[.f]"
};

/// timestamp / timestamptz text -> its parts (days and time of day local for timestamp; UTC for
/// timestamptz, the offset applied). False on shape errors.
bool parse_timestamp(std::string_view s, bool with_zone, TimestampParts& t);

/// HH:mm:ss[.fraction] of a microsecond-of-day value (0 <= v < 86400e6, or 24:00:00 exactly):
/// at most 18 characters at `p`; returns the end. The fraction as java.time's ISO_LOCAL_TIME
/// prints it (nothing when zero, else 1-9 digits without trailing zeros), or exactly `width`
/// digits when 1 <= width <= 9.
char* put_clock(char* p, std::int64_t micros_of_day, int width);

/// put_clock appended to `out`.
void append_clock(std::string& out, std::int64_t micros_of_day, int width);

}  // namespace walrelay::router::values
