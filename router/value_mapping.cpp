// Column value mapping: wal2json token (PostgreSQL text output) -> JSON for walrelay's native
// format or for Debezium's default JSON encoding. The rules and their sources are documented in
// walrelay/router/value_mapping.hpp; the comments here cite the code each rule mirrors.

#include "walrelay/router/value_mapping.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "base64.hpp"
#include "debezium_types.hpp"
#include "walrelay/core/json.hpp"

namespace walrelay::router {

namespace {

// ------------------------------------------------------------------------------------------------
// Small helpers

constexpr bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

constexpr bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(r.ptr - buf));
}

/// Parses all of `s` as an unsigned decimal number; false when empty, not digits or too big.
bool parse_uint(std::string_view s, std::int64_t& v) {
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
bool parse_2digits(std::string_view s, std::size_t pos, std::int64_t& v) {
  const auto hi = static_cast<unsigned>(s[pos] - '0');
  const auto lo = static_cast<unsigned>(s[pos + 1] - '0');
  if (hi > 9 || lo > 9) return false;
  v = hi * 10 + lo;
  return true;
}

/// Writes `v` (0 <= v < 100) as two digits at `p`; returns the end.
char* put_2digits(char* p, std::int64_t v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
  return p + 2;
}

bool iequals(std::string_view a, std::string_view b) {
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
bool is_json_number(std::string_view s, bool integer_only) {
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

bool is_special_float(std::string_view s) {
  return s == "NaN" || s == "Infinity" || s == "-Infinity";
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// bytea text (bytea_output hex `\x0a1b`, or escape format as a fallback) -> "base64".
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

// ------------------------------------------------------------------------------------------------
// Exact decimals

/// A plain decimal `[+-]digits[.digits]` split into its parts (numeric_out never prints exponents).
struct Decimal {
  bool negative = false;
  std::string_view int_digits;
  std::string_view frac_digits;
};

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

/// Scratch buffers reused across calls (the mapping runs on the connector's thread; thread_local
/// keeps it safe anyway). None of them is held across a call that uses the same buffer.
thread_local std::string tl_text;    // top-level unescaped token
thread_local std::string tl_digits;  // unscaled decimal digits
thread_local std::string tl_bytes;   // two's complement bytes
thread_local std::vector<std::uint32_t> tl_limbs;
// Array element text, one buffer per nesting depth (a deque: growing it keeps references valid).
thread_local std::deque<std::string> tl_elements;

/// Appends "base64" of the minimal big-endian two's complement bytes of the integer
/// (negative ? -1 : 1) * digits, exactly like java.math.BigInteger#toByteArray.
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

/// The unscaled digits of `d` at `scale` into tl_digits (BigDecimal#setScale without rounding:
/// only zeros may be dropped). False when non-zero digits would be lost.
bool unscaled_digits(const Decimal& d, int scale) {
  auto& digits = tl_digits;
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

/// PostgreSQL 15 numeric typmod decoding (src/backend/utils/adt/numeric.c,
/// numeric_typmod_precision / numeric_typmod_scale; scale is an 11-bit signed field).
int numeric_typmod_scale(std::int32_t typmod) {
  return static_cast<int>((((static_cast<std::uint32_t>(typmod) - 4u) & 0x7FFu) ^ 1024u)) - 1024;
}

/// money text under lc_monetary=C (src/backend/utils/adt/cash.c cash_out: optional '-', '$',
/// digits grouped by ',', '.', 2 fraction digits; also accepts the parenthesised negative form)
/// -> canonical "[-]digits.fraction" in tl_digits.
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

// ------------------------------------------------------------------------------------------------
// Dates and times (proleptic Gregorian, like PostgreSQL and java.time)

/// Days since 1970-01-01 of an astronomical year / month / day (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct Civil {
  std::int64_t year;
  unsigned month;
  unsigned day;
};

Civil civil_from_days(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {y + (m <= 2 ? 1 : 0), m, d};
}

constexpr std::int64_t kMicrosPerSecond = 1'000'000;
constexpr std::int64_t kMicrosPerDay = 86'400 * kMicrosPerSecond;

/// "YYYY-MM-DD" (year of 4+ digits) at the start of `s`; advances `s`. Era suffix handled by the
/// callers. Returns the proleptic year as printed (1 for 1 BC).
bool parse_date_part(std::string_view& s, std::int64_t& year, unsigned& month, unsigned& day) {
  std::size_t i = 0;
  while (i < s.size() && is_digit(s[i])) ++i;
  // PostgreSQL's dates end in 5874897 AD (7 digits): a longer year is not PostgreSQL output, and
  // days_from_civil's arithmetic must not overflow on it (found by the decoder fuzzer).
  if (i < 4 || i > 7 || i + 6 > s.size() || s[i] != '-' || s[i + 3] != '-') return false;
  std::int64_t m = 0;
  std::int64_t d = 0;
  if (!parse_uint(s.substr(0, i), year) || !parse_2digits(s, i + 1, m) ||
      !parse_2digits(s, i + 4, d) || m < 1 || m > 12 || d < 1 || d > 31)
    return false;
  month = static_cast<unsigned>(m);
  day = static_cast<unsigned>(d);
  s.remove_prefix(i + 6);
  return true;
}

/// "HH:MM:SS[.f{1,6}]" at the start of `s` -> microseconds since midnight (24:00:00 allowed);
/// advances `s`.
bool parse_time_part(std::string_view& s, std::int64_t& micros) {
  if (s.size() < 8 || s[2] != ':' || s[5] != ':') return false;
  std::int64_t h = 0;
  std::int64_t m = 0;
  std::int64_t sec = 0;
  if (!parse_2digits(s, 0, h) || !parse_2digits(s, 3, m) || !parse_2digits(s, 6, sec) || h > 24 ||
      m > 59 || sec > 60)
    return false;
  std::size_t i = 8;
  std::int64_t f = 0;
  std::string_view frac_text;
  if (i < s.size() && s[i] == '.') {
    const std::size_t start = ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
    frac_text = s.substr(start, i - start);
    if (frac_text.empty() || frac_text.size() > 6) return false;
    for (char c : frac_text) f = f * 10 + (c - '0');
    for (std::size_t k = frac_text.size(); k < 6; ++k) f *= 10;
  }
  micros = ((h * 60 + m) * 60 + sec) * kMicrosPerSecond + f;
  if (micros > kMicrosPerDay) return false;
  s.remove_prefix(i);
  return true;
}

/// "+HH[:MM[:SS]]" / "-HH..." at the start of `s` -> seconds east of UTC; advances `s`.
bool parse_offset(std::string_view& s, std::int64_t& seconds) {
  if (s.size() < 3 || (s[0] != '+' && s[0] != '-')) return false;
  const bool neg = s[0] == '-';
  std::int64_t h = 0;
  std::int64_t m = 0;
  std::int64_t sec = 0;
  if (!parse_2digits(s, 1, h)) return false;
  std::size_t i = 3;
  if (i + 3 <= s.size() && s[i] == ':') {
    if (!parse_2digits(s, i + 1, m)) return false;
    i += 3;
    if (i + 3 <= s.size() && s[i] == ':') {
      if (!parse_2digits(s, i + 1, sec)) return false;
      i += 3;
    }
  }
  if (m > 59 || sec > 59) return false;
  seconds = (h * 3600 + m * 60 + sec) * (neg ? -1 : 1);
  s.remove_prefix(i);
  return true;
}

/// Removes a trailing " BC" (DateStyle ISO era suffix); true when present.
bool strip_bc(std::string_view& s) {
  if (s.size() > 3 && s.substr(s.size() - 3) == " BC") {
    s.remove_suffix(3);
    return true;
  }
  return false;
}

/// "date" text -> days since 1970-01-01 (astronomical years: 1 BC is year 0).
bool parse_date(std::string_view s, std::int64_t& days) {
  const bool bc = strip_bc(s);
  std::int64_t year = 0;
  unsigned month = 0;
  unsigned day = 0;
  if (!parse_date_part(s, year, month, day) || !s.empty()) return false;
  if (bc) year = 1 - year;
  days = days_from_civil(year, month, day);
  return true;
}

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
bool parse_timestamp(std::string_view s, bool with_zone, TimestampParts& t) {
  t.bc = strip_bc(s);
  std::int64_t year = 0;
  unsigned month = 0;
  unsigned day = 0;
  const std::string_view whole = s;
  if (!parse_date_part(s, year, month, day) || s.empty() || s[0] != ' ') return false;
  t.date = whole.substr(0, whole.size() - s.size());
  s.remove_prefix(1);
  const std::string_view clock = s;
  std::int64_t tod = 0;
  if (!parse_time_part(s, tod)) return false;
  t.clock = clock.substr(0, clock.size() - s.size());
  std::int64_t offset = 0;
  if (with_zone && !parse_offset(s, offset)) return false;
  if (!s.empty()) return false;
  if (t.bc) year = 1 - year;
  std::int64_t days = days_from_civil(year, month, day);
  t.offset = offset;
  tod -= offset * kMicrosPerSecond;  // |offset| < 1 day, 0 <= tod <= 1 day
  while (tod < 0) {
    tod += kMicrosPerDay;
    --days;
  }
  while (tod >= kMicrosPerDay) {
    tod -= kMicrosPerDay;
    ++days;
  }
  t.days = days;
  t.tod = tod;
  return true;
}

/// java.time ISO_LOCAL_TIME fraction: nothing when zero, else 1-9 digits without trailing zeros
/// (DateTimeFormatterBuilder#appendFraction(NANO_OF_SECOND, 0, 9, true)); or exactly `width`
/// digits when 1 <= width <= 9 (appendFraction(NANO_OF_SECOND, width, width, true)). Writes at
/// most 10 characters at `p`; returns the end.
char* put_fraction(char* p, std::int64_t micros_of_second, int width) {
  int len = 0;
  if (width >= 1 && width <= 9) {
    len = width;
  } else {
    if (micros_of_second == 0) return p;
    len = 9;
  }
  char* digits = p + 1;
  std::int64_t nanos = micros_of_second * 1000;
  for (int i = 8; i >= 0; --i) {
    digits[i] = static_cast<char>('0' + nanos % 10);
    nanos /= 10;
  }
  if (!(width >= 1 && width <= 9)) {
    while (len > 0 && digits[len - 1] == '0') --len;
  }
  *p = '.';
  return digits + len;
}

/// HH:mm:ss[.fraction] of a microsecond-of-day value (0 <= v < 86400e6, or 24:00:00 exactly):
/// at most 18 characters at `p`; returns the end.
char* put_clock(char* p, std::int64_t micros_of_day, int width) {
  const std::int64_t secs = micros_of_day / kMicrosPerSecond;
  p = put_2digits(p, secs / 3600);
  *p++ = ':';
  p = put_2digits(p, secs / 60 % 60);
  *p++ = ':';
  p = put_2digits(p, secs % 60);
  return put_fraction(p, micros_of_day % kMicrosPerSecond, width);
}

void append_clock(std::string& out, std::int64_t micros_of_day, int width) {
  char buf[24];
  out.append(buf, static_cast<std::size_t>(put_clock(buf, micros_of_day, width) - buf));
}

// ------------------------------------------------------------------------------------------------
// Type classification

using Kind = ValueKind;

struct Resolved {
  Kind kind = Kind::kText;
  std::uint32_t oid = 0;      ///< after resolving domains
  std::uint32_t element = 0;  ///< element type of an array
};

Resolved classify(std::uint32_t type_oid, const TypeRegistry& types) {
  Resolved r;
  r.oid = types.resolve_domain(type_oid);
  switch (r.oid) {
    case oid::kInt2:
    case oid::kInt4:
    case oid::kInt8:
    case oid::kOid:
      r.kind = Kind::kInt;
      return r;
    case oid::kFloat4:
    case oid::kFloat8:
      r.kind = Kind::kFloat;
      return r;
    case oid::kNumeric:
      r.kind = Kind::kNumeric;
      return r;
    case oid::kMoney:
      r.kind = Kind::kMoney;
      return r;
    case oid::kBool:
      r.kind = Kind::kBool;
      return r;
    case oid::kJson:
    case oid::kJsonb:
      r.kind = Kind::kJson;
      return r;
    case oid::kBytea:
      r.kind = Kind::kBytea;
      return r;
    case oid::kDate:
      r.kind = Kind::kDate;
      return r;
    case oid::kTime:
      r.kind = Kind::kTime;
      return r;
    case oid::kTimetz:
      r.kind = Kind::kTimetz;
      return r;
    case oid::kTimestamp:
      r.kind = Kind::kTimestamp;
      return r;
    case oid::kTimestamptz:
      r.kind = Kind::kTimestamptz;
      return r;
    case oid::kInterval:
      r.kind = Kind::kInterval;
      return r;
    case oid::kBit:
    case oid::kVarbit:
      r.kind = Kind::kBits;
      return r;
    case oid::kPoint:
      r.kind = Kind::kPoint;
      return r;
    default:
      break;
  }
  if (r.oid == types.hstore_oid() && r.oid != 0) {
    r.kind = Kind::kHstore;
    return r;
  }
  if (const TypeInfo* t = types.find(r.oid);
      t != nullptr && t->category == 'A' && t->element != 0) {
    r.kind = Kind::kArray;
    r.element = t->element;
  }
  return r;
}

struct Ctx {
  const TypeRegistry& types;
  const ValueMappingOptions& opts;
  std::string& error;
  std::uint32_t type_oid;  ///< the column's declared type, for messages
  int depth = 0;           ///< array nesting (domains over arrays inside arrays)
};

bool fail(Ctx& ctx, std::uint32_t type_oid, std::string_view text, std::string_view why) {
  ctx.error.clear();
  ctx.error += "cannot map value ";
  json::append_string(ctx.error, text.substr(0, 200));
  if (text.size() > 200) ctx.error += "...";
  ctx.error += " of type ";
  if (const TypeInfo* t = ctx.types.find(type_oid); t != nullptr && !t->name.empty()) {
    ctx.error += t->name;
    ctx.error += " (oid ";
    append_int(ctx.error, type_oid);
    ctx.error += ')';
  } else {
    ctx.error += "oid ";
    append_int(ctx.error, type_oid);
  }
  if (type_oid != ctx.type_oid) {
    // An array element or a domain: name the column's declared type too.
    ctx.error += " in ";
    if (const TypeInfo* t = ctx.types.find(ctx.type_oid); t != nullptr && !t->name.empty()) {
      ctx.error += t->name;
      ctx.error += " (oid ";
      append_int(ctx.error, ctx.type_oid);
      ctx.error += ')';
    } else {
      ctx.error += "oid ";
      append_int(ctx.error, ctx.type_oid);
    }
  }
  ctx.error += ": ";
  ctx.error += why;
  return false;
}

bool map_array(std::string& out, std::string_view text, const Resolved& r, std::int32_t typmod,
               Ctx& ctx);

// ------------------------------------------------------------------------------------------------
// Scalars. `text` is the value's PostgreSQL text (unescaped); `bare` when wal2json printed it as a
// bare JSON token (numbers, true/false) rather than a string.

bool map_numeric(std::string& out, std::string_view text, std::int32_t typmod, Ctx& ctx,
                 std::uint32_t oid_for_error) {
  const bool debezium = ctx.opts.format == ValueFormat::kDebezium;
  if (debezium && ctx.opts.decimal == DecimalHandling::kString) {
    // SpecialValueDecimal#fromLogical in string mode: toPlainString() (PostgreSQL's numeric text is
    // plain and has the value's scale) or the special value's name.
    if (text == "NaN") {
      out += "\"NAN\"";
    } else if (text == "Infinity") {
      out += "\"POSITIVE_INFINITY\"";
    } else if (text == "-Infinity") {
      out += "\"NEGATIVE_INFINITY\"";
    } else {
      Decimal d;
      if (!parse_decimal(text, d)) return fail(ctx, oid_for_error, text, "not a decimal number");
      json::append_string(out, text);
    }
    return true;
  }
  if (debezium && ctx.opts.decimal == DecimalHandling::kDouble) {
    // BigDecimal#doubleValue (correctly rounded), printed as Java does; NaN/±Infinity as Jackson
    // writes non-finite doubles.
    if (!is_special_float(text)) {
      Decimal d;
      if (!parse_decimal(text, d)) return fail(ctx, oid_for_error, text, "not a decimal number");
    }
    if (!detail::append_java_number(out, text == "NaN" ? "nan" : text, false))
      return fail(ctx, oid_for_error, text, "not a decimal number");
    return true;
  }
  if (is_special_float(text)) {
    if (debezium) {
      // Debezium (decimal.handling.mode=precise) cannot express NaN/±Infinity in a Decimal: it
      // logs a warning and publishes null (seen with Debezium 3.6.1); walrelay does the same.
      out += "null";
    } else {
      json::append_string(out, text);
    }
    return true;
  }
  Decimal d;
  if (!parse_decimal(text, d)) return fail(ctx, oid_for_error, text, "not a decimal number");
  if (!debezium) {
    out.push_back('"');
    out.append(text);
    out.push_back('"');
    return true;
  }
  if (typmod >= 4) {
    // numeric(p,s) -> org.apache.kafka.connect.data.Decimal with scale s: BigDecimal#setScale(s)
    // (PostgresValueConverter#withScaleAdjustedIfNeeded) then Decimal#fromLogical =
    // unscaledValue().toByteArray(), base64 by JsonConverter (decimal.format=BASE64 default).
    if (!unscaled_digits(d, numeric_typmod_scale(typmod)))
      return fail(ctx, oid_for_error, text, "more fraction digits than the column's scale");
    append_twos_complement_base64(out, d.negative, tl_digits);
    return true;
  }
  // numeric without typmod -> io.debezium.data.VariableScaleDecimal struct {scale, value}:
  // PostgresValueConverter#convertDecimal strips trailing zeros (stripTrailingZeros, then
  // setScale(0) if the scale went negative), so the scale is the count of significant fraction
  // digits.
  std::string_view frac = d.frac_digits;
  while (!frac.empty() && frac.back() == '0') frac.remove_suffix(1);
  Decimal stripped = d;
  stripped.frac_digits = frac;
  unscaled_digits(stripped, static_cast<int>(frac.size()));
  out += "{\"scale\":";
  append_int(out, static_cast<std::int64_t>(frac.size()));
  out += ",\"value\":";
  append_twos_complement_base64(out, d.negative, tl_digits);
  out.push_back('}');
  return true;
}

bool map_money(std::string& out, std::string_view text, Ctx& ctx, std::uint32_t oid_for_error) {
  thread_local std::string canon;
  Decimal d;
  if (!parse_money(text, canon) || !parse_decimal(canon, d))
    return fail(ctx, oid_for_error, text, "not a money amount");
  if (ctx.opts.format == ValueFormat::kNative) {
    json::append_string(out, canon);
    return true;
  }
  // Debezium convertMoney: string mode toPlainString of the scale-2 amount, double mode
  // doubleValue() as Java prints it.
  if (ctx.opts.decimal == DecimalHandling::kString ||
      ctx.opts.decimal == DecimalHandling::kDouble) {
    if (!unscaled_digits(d, 2))
      return fail(ctx, oid_for_error, text, "more than 2 fraction digits");
    std::string plain = d.negative ? "-" : "";
    plain.append(d.int_digits.empty() ? std::string_view("0") : d.int_digits);
    plain.push_back('.');
    plain.append(d.frac_digits);
    plain.append(2 - std::min<std::size_t>(2, d.frac_digits.size()), '0');
    if (ctx.opts.decimal == DecimalHandling::kString) {
      json::append_string(out, plain);
    } else if (!detail::append_java_number(out, plain, false)) {
      return fail(ctx, oid_for_error, text, "not a money amount");
    }
    return true;
  }
  // Debezium: PostgresValueConverter#moneySchema = Decimal.builder(money.fraction.digits = 2),
  // convertMoney sets the scale to 2 -> base64 of the unscaled two's complement.
  if (!unscaled_digits(d, 2)) return fail(ctx, oid_for_error, text, "more than 2 fraction digits");
  append_twos_complement_base64(out, d.negative, tl_digits);
  return true;
}

bool map_timestamp(std::string& out, std::string_view text, bool with_zone, std::int32_t typmod,
                   Ctx& ctx, std::uint32_t oid_for_error) {
  const bool debezium = ctx.opts.format == ValueFormat::kDebezium;
  if (text == "infinity" || text == "-infinity") {
    if (!debezium || with_zone) {
      // Native: PostgreSQL's text. Debezium timestamptz: PostgresValueConverter
      // #convertTimestampWithZone returns the strings "infinity" / "-infinity".
      json::append_string(out, text);
      return true;
    }
    // Debezium timestamp: POSITIVE/NEGATIVE_INFINITY_LOCAL_DATE_TIME, built from pgjdbc's
    // PGStatement.DATE_POSITIVE_INFINITY = 9223372036825200000 and DATE_NEGATIVE_INFINITY =
    // -9223372036832400000 read as microseconds since the epoch.
    const bool pos = text[0] == 'i';
    const int precision = typmod < 0 ? 6 : typmod;
    if (precision <= 3) {
      out += pos ? "9223372036825200" : "-9223372036832400";
    } else {
      out += pos ? "9223372036825200000" : "-9223372036832400000";
    }
    return true;
  }
  TimestampParts t;
  if (!parse_timestamp(text, with_zone, t))
    return fail(ctx, oid_for_error, text, "not an ISO timestamp");
  const std::int64_t days = t.days;
  const std::int64_t tod = t.tod;

  if (!debezium) {
    if (t.bc) {
      // No ISO 8601 form that every consumer agrees on for BC; keep PostgreSQL's text.
      json::append_string(out, text);
      return true;
    }
    // "YYYY-MM-DD HH:MM:SS[.f]" -> "YYYY-MM-DDTHH:MM:SS[.f]" (+ "Z" / "+HH:MM[:SS]").
    char buf[16];
    char* p = buf;
    if (with_zone) {
      if (t.offset == 0) {
        *p++ = 'Z';
      } else {
        const std::int64_t a = t.offset < 0 ? -t.offset : t.offset;
        *p++ = t.offset < 0 ? '-' : '+';
        p = put_2digits(p, a / 3600);
        *p++ = ':';
        p = put_2digits(p, a / 60 % 60);
        if (a % 60 != 0) {
          *p++ = ':';
          p = put_2digits(p, a % 60);
        }
      }
    }
    *p++ = '"';
    out.push_back('"');
    out.append(t.date);
    out.push_back('T');
    out.append(t.clock);
    out.append(buf, static_cast<std::size_t>(p - buf));
    return true;
  }

  const int precision = typmod < 0 ? 6 : typmod;
  if (!with_zone) {
    // time.precision.mode=adaptive (JdbcValueConverters): timestamp(0..3) -> io.debezium.time.
    // Timestamp (epoch ms), timestamp(4..6) and unspecified -> MicroTimestamp (epoch µs).
    const std::int64_t per_day = precision <= 3 ? kMicrosPerDay / 1000 : kMicrosPerDay;
    const std::int64_t in_day = precision <= 3 ? tod / 1000 : tod;
    std::int64_t v = 0;
    if (__builtin_mul_overflow(days, per_day, &v) || __builtin_add_overflow(v, in_day, &v)) {
      // Beyond int64 µs since 1970 (PostgreSQL's range ends in 294276 AD, past 2^63 µs from
      // 1970): not representable, emitted as null.
      out += "null";
      return true;
    }
    append_int(out, v);
    return true;
  }
  // timestamptz -> io.debezium.time.ZonedTimestamp in UTC. ZonedTimestamp#toIsoString with the
  // column's precision as fractional width (DBZ-5996, Debezium >= 2.2): exactly p digits for
  // 1 <= p <= 9, ISO_OFFSET_DATE_TIME (no fraction when zero) for p = 0. Years beyond 9999 get
  // a '+' and BC years a '-' (ISO_LOCAL_DATE, SignStyle.EXCEEDS_PAD).
  const Civil c = civil_from_days(days);
  char buf[64];
  char* p = buf;
  *p++ = '"';
  if (c.year > 9999) *p++ = '+';
  if (c.year < 0) *p++ = '-';
  const std::int64_t year = c.year < 0 ? -c.year : c.year;
  if (year < 1000) {
    // Zero padded to four digits.
    for (std::int64_t scale = 1000; scale > 1 && year < scale; scale /= 10) *p++ = '0';
  }
  p = std::to_chars(p, buf + 24, year).ptr;
  *p++ = '-';
  p = put_2digits(p, c.month);
  *p++ = '-';
  p = put_2digits(p, c.day);
  *p++ = 'T';
  p = put_clock(p, tod, precision);
  *p++ = 'Z';
  *p++ = '"';
  out.append(buf, static_cast<std::size_t>(p - buf));
  return true;
}

bool map_interval(std::string& out, std::string_view text, Ctx& ctx, std::uint32_t oid_for_error) {
  if (ctx.opts.format == ValueFormat::kNative) {
    json::append_string(out, text);
    return true;
  }
  // IntervalStyle iso_8601 output (src/backend/utils/adt/datetime.c EncodeInterval):
  // P[nY][nM][nD][T[nH][nM][n[.f]S]], every field signed on its own, "PT0S" for zero.
  std::string_view s = text;
  if (s.size() < 2 || s[0] != 'P')
    return fail(ctx, oid_for_error, text, "not an ISO 8601 interval");
  s.remove_prefix(1);
  std::int64_t years = 0, months = 0, days = 0, hours = 0, minutes = 0;
  std::int64_t whole_seconds = 0, micros = 0;
  bool time_part = false;
  bool any = false;
  while (!s.empty()) {
    if (s[0] == 'T') {
      if (time_part) return fail(ctx, oid_for_error, text, "not an ISO 8601 interval");
      time_part = true;
      s.remove_prefix(1);
      continue;
    }
    bool neg = false;
    if (s[0] == '-' || s[0] == '+') {
      neg = s[0] == '-';
      s.remove_prefix(1);
    }
    std::size_t i = 0;
    while (i < s.size() && is_digit(s[i])) ++i;
    std::int64_t n = 0;
    if (!parse_uint(s.substr(0, i), n)) return fail(ctx, oid_for_error, text, "bad interval field");
    std::int64_t frac = 0;
    bool has_frac = false;
    if (i < s.size() && s[i] == '.') {
      const std::size_t start = ++i;
      while (i < s.size() && is_digit(s[i])) ++i;
      const std::string_view f = s.substr(start, i - start);
      if (f.empty() || f.size() > 6) return fail(ctx, oid_for_error, text, "bad interval field");
      for (char c : f) frac = frac * 10 + (c - '0');
      for (std::size_t k = f.size(); k < 6; ++k) frac *= 10;
      has_frac = true;
    }
    if (i >= s.size()) return fail(ctx, oid_for_error, text, "bad interval field");
    const char unit = s[i];
    s.remove_prefix(i + 1);
    const std::int64_t v = neg ? -n : n;
    if (has_frac && !(time_part && unit == 'S'))
      return fail(ctx, oid_for_error, text, "fraction only allowed on seconds");
    if (!time_part && unit == 'Y') {
      years = v;
    } else if (!time_part && unit == 'M') {
      months = v;
    } else if (!time_part && unit == 'D') {
      days = v;
    } else if (time_part && unit == 'H') {
      hours = v;
    } else if (time_part && unit == 'M') {
      minutes = v;
    } else if (time_part && unit == 'S') {
      whole_seconds = v;
      micros = neg ? -frac : frac;
    } else {
      return fail(ctx, oid_for_error, text, "bad interval unit");
    }
    any = true;
  }
  if (!any) return fail(ctx, oid_for_error, text, "empty interval");
  // io.debezium.time.MicroDuration (interval.handling.mode=numeric): PostgresValueConverter
  // #convertInterval calls MicroDuration#durationMicros(years, months, days, hours, minutes,
  // seconds, DAYS_PER_MONTH_AVG = 365.25 / 12), which computes in double:
  //   numberOfDays = (years * 12 + months) * daysPerMonthAvg + days
  //   numberOfSeconds = ((numberOfDays * 24 + hours) * 60 + minutes) * 60 + seconds
  //   return (long) (numberOfSeconds * 1e6)
  // with seconds = PGInterval#getSeconds() = wholeSeconds + microSeconds / 1e6. The same double
  // operations in the same order give the same result; (long) saturates like Java's cast.
  constexpr double kDaysPerMonthAvg = 365.25 / 12.0;
  const double seconds =
      static_cast<double>(whole_seconds) + static_cast<double>(micros) / 1'000'000.0;
  const double number_of_days =
      static_cast<double>(years * 12 + months) * kDaysPerMonthAvg + static_cast<double>(days);
  const double number_of_seconds =
      ((number_of_days * 24 + static_cast<double>(hours)) * 60 + static_cast<double>(minutes)) *
          60 +
      seconds;
  const double us = number_of_seconds * 1e6;
  std::int64_t result = 0;
  if (us != us) {
    result = 0;
  } else if (us >= 9223372036854775807.0) {
    result = std::numeric_limits<std::int64_t>::max();
  } else if (us <= -9223372036854775808.0) {
    result = std::numeric_limits<std::int64_t>::min();
  } else {
    result = static_cast<std::int64_t>(us);
  }
  append_int(out, result);
  return true;
}

bool map_scalar(std::string& out, std::string_view text, bool bare, const Resolved& r,
                std::int32_t typmod, Ctx& ctx) {
  const bool debezium = ctx.opts.format == ValueFormat::kDebezium;
  switch (r.kind) {
    case Kind::kInt:
      // int2/int4/int8/oid: JSON number with the exact digits (Debezium INT16/INT32/INT64).
      if (!is_json_number(text, true)) return fail(ctx, r.oid, text, "not an integer");
      out.append(text);
      return true;
    case Kind::kFloat:
      // float4/float8: native keeps the exact text (extra_float_digits 3 prints the shortest
      // exact form, -0 kept); debezium prints the same value as Java's Float/Double.toString
      // (`1.0`, `-0.0`, `1.0E21`), as Jackson does for JsonConverter. NaN/±Infinity are not JSON
      // numbers: JSON strings, as Jackson writes them (QUOTE_NON_NUMERIC_NUMBERS).
      if (is_json_number(text, false)) {
        if (!debezium) {
          out.append(text);
        } else if (!detail::append_java_number(out, text, r.oid == oid::kFloat4)) {
          return fail(ctx, r.oid, text, "not a floating-point number");
        }
      } else if (!bare && is_special_float(text)) {
        json::append_string(out, text);
      } else {
        return fail(ctx, r.oid, text, "not a floating-point number");
      }
      return true;
    case Kind::kNumeric:
      return map_numeric(out, text, typmod, ctx, r.oid);
    case Kind::kMoney:
      return map_money(out, text, ctx, r.oid);
    case Kind::kBool:
      if (text == "true" || text == "t") {
        out += "true";
      } else if (text == "false" || text == "f") {
        out += "false";
      } else {
        return fail(ctx, r.oid, text, "not a boolean");
      }
      return true;
    case Kind::kJson:
      if (!debezium && ctx.opts.json_as_document) {
        out.append(text);
      } else {
        json::append_string(out, text);  // io.debezium.data.Json is a STRING
      }
      return true;
    case Kind::kBytea:
      // Native: base64. Debezium binary.handling.mode=bytes: BYTES, base64 by JsonConverter.
      if (!append_bytea_base64(out, text)) return fail(ctx, r.oid, text, "not bytea hex text");
      return true;
    case Kind::kDate: {
      if (!debezium) {
        json::append_string(out, text);
        return true;
      }
      if (text == "infinity" || text == "-infinity") {
        // Debezium: DateTimeFormat#date maps them to PostgresValueConverter.POSITIVE_INFINITY_
        // LOCAL_DATE = -5877611-06-21 and NEGATIVE_INFINITY_LOCAL_DATE = -5877611-06-22, then
        // io.debezium.time.Date#toEpochDay.
        append_int(out, text[0] == 'i' ? days_from_civil(-5877611, 6, 21)
                                       : days_from_civil(-5877611, 6, 22));
        return true;
      }
      std::int64_t days = 0;
      if (!parse_date(text, days)) return fail(ctx, r.oid, text, "not an ISO date");
      append_int(out, days);  // io.debezium.time.Date: INT32 days since the epoch
      return true;
    }
    case Kind::kTime: {
      std::string_view s = text;
      std::int64_t micros = 0;
      if (!parse_time_part(s, micros) || !s.empty())
        return fail(ctx, r.oid, text, "not an ISO time");
      if (!debezium) {
        json::append_string(out, text);
        return true;
      }
      // adaptive: time(0..3) -> io.debezium.time.Time (INT32 ms of day), else MicroTime (INT64
      // µs); 24:00:00 arrives as a java.time.Duration (Strings#asDuration) = a full day.
      const int precision = typmod < 0 ? 6 : typmod;
      append_int(out, precision <= 3 ? micros / 1000 : micros);
      return true;
    }
    case Kind::kTimetz: {
      std::string_view s = text;
      std::int64_t micros = 0;
      std::int64_t offset = 0;
      if (!parse_time_part(s, micros) || !parse_offset(s, offset) || !s.empty())
        return fail(ctx, r.oid, text, "not an ISO time with time zone");
      if (!debezium) {
        json::append_string(out, text);
        return true;
      }
      // io.debezium.time.ZonedTime: OffsetTime#withOffsetSameInstant(UTC) formatted with
      // ISO_OFFSET_TIME ("HH:mm:ss[.fraction]Z", fraction without trailing zeros);
      // PostgresTimeBoundary keeps 24:00:00 at UTC as "24:00:00Z".
      if (micros == kMicrosPerDay && offset == 0) {
        out += "\"24:00:00Z\"";
        return true;
      }
      std::int64_t utc = (micros - offset * kMicrosPerSecond) % kMicrosPerDay;
      if (utc < 0) utc += kMicrosPerDay;
      out.push_back('"');
      append_clock(out, utc, 0);
      out += "Z\"";
      return true;
    }
    case Kind::kTimestamp:
      return map_timestamp(out, text, false, typmod, ctx, r.oid);
    case Kind::kTimestamptz:
      return map_timestamp(out, text, true, typmod, ctx, r.oid);
    case Kind::kInterval:
      return map_interval(out, text, ctx, r.oid);
    case Kind::kArray:
      return map_array(out, text, r, typmod, ctx);
    case Kind::kBits:
      // Debezium: bit(1)/varbit(1) a boolean, else io.debezium.data.Bits bytes.
      if (!debezium) {
        json::append_string(out, text);
      } else if (!detail::append_debezium_bits(out, text, typmod)) {
        return fail(ctx, r.oid, text, "not a bit string");
      }
      return true;
    case Kind::kPoint:
      // Debezium: io.debezium.data.geometry.Point {x, y, wkb, srid}.
      if (!debezium) {
        json::append_string(out, text);
      } else if (!detail::append_debezium_point(out, text)) {
        return fail(ctx, r.oid, text, "not a point");
      }
      return true;
    case Kind::kHstore:
      // Debezium (hstore.handling.mode=json): a JSON string holding the map as a JSON object.
      if (!debezium) {
        json::append_string(out, text);
      } else if (!detail::append_hstore_json(out, text)) {
        return fail(ctx, r.oid, text, "not hstore text");
      }
      return true;
    case Kind::kText:
      if (bare) {
        out.append(text);  // a bare token for a type we don't know: keep it as wal2json wrote it
      } else {
        json::append_string(out, text);
      }
      return true;
  }
  return fail(ctx, r.oid, text, "unhandled type");
}

// ------------------------------------------------------------------------------------------------
// Arrays: PostgreSQL's array literal (src/backend/utils/adt/arrayfuncs.c, array_out / ReadArrayStr)

class ArrayParser {
 public:
  ArrayParser(std::string& out, std::string_view text, char delim, const Resolved& element,
              std::int32_t typmod, Ctx& ctx, std::string& buf)
      : out_(out),
        s_(text),
        delim_(delim),
        element_(element),
        typmod_(typmod),
        ctx_(ctx),
        buf_(buf) {}

  bool parse() {
    skip_space();
    if (!parse_level()) return false;
    skip_space();
    return pos_ == s_.size() || error("trailing characters after the array");
  }

 private:
  bool error(std::string_view why) { return fail(ctx_, ctx_.type_oid, s_, why); }

  void skip_space() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }

  bool parse_level() {
    if (pos_ >= s_.size() || s_[pos_] != '{') return error("expected '{'");
    ++pos_;
    out_.push_back('[');
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      out_.push_back(']');
      return true;
    }
    bool first = true;
    for (;;) {
      if (!first) out_.push_back(',');
      first = false;
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == '{') {
        if (!parse_level()) return false;
      } else if (!parse_element()) {
        return false;
      }
      skip_space();
      if (pos_ >= s_.size()) return error("unterminated array");
      const char c = s_[pos_++];
      if (c == '}') break;
      if (c != delim_) return error("expected a delimiter or '}'");
    }
    out_.push_back(']');
    return true;
  }

  bool parse_element() {
    buf_.clear();
    bool quoted = false;
    bool escaped = false;
    if (pos_ < s_.size() && s_[pos_] == '"') {
      quoted = true;
      ++pos_;
      for (;;) {
        if (pos_ >= s_.size()) return error("unterminated quoted element");
        const char c = s_[pos_++];
        if (c == '"') break;
        if (c == '\\') {
          if (pos_ >= s_.size()) return error("unterminated quoted element");
          buf_.push_back(s_[pos_++]);
        } else {
          buf_.push_back(c);
        }
      }
    } else {
      // Unquoted: up to the delimiter or '}', backslash escapes honoured, surrounding white
      // space dropped (array_in ignores it; array_out never writes it).
      std::size_t keep = 0;  // buf_ length up to the last escaped or non-space character
      while (pos_ < s_.size()) {
        const char c = s_[pos_];
        if (c == delim_ || c == '}') break;
        if (c == '{' || c == '"') return error("unexpected character in an unquoted element");
        ++pos_;
        if (c == '\\') {
          if (pos_ >= s_.size()) return error("unterminated element");
          buf_.push_back(s_[pos_++]);
          escaped = true;
          keep = buf_.size();
        } else {
          buf_.push_back(c);
          if (!is_space(c)) keep = buf_.size();
        }
      }
      buf_.resize(keep);
      if (buf_.empty() && !escaped) return error("empty unquoted element");
    }
    if (!quoted && !escaped && iequals(buf_, "NULL")) {
      out_ += "null";
      return true;
    }
    if (element_.kind == Kind::kArray) {
      // A domain over an array used as an element: parse the inner literal with its own buffer.
      ++ctx_.depth;
      const bool ok = map_scalar(out_, buf_, false, element_, typmod_, ctx_);
      --ctx_.depth;
      return ok;
    }
    return map_scalar(out_, buf_, false, element_, typmod_, ctx_);
  }

  std::string& out_;
  std::string_view s_;
  std::size_t pos_ = 0;
  char delim_;
  Resolved element_;
  std::int32_t typmod_;
  Ctx& ctx_;
  std::string& buf_;
};

bool map_array(std::string& out, std::string_view text, const Resolved& r, std::int32_t typmod,
               Ctx& ctx) {
  std::size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  if (i < text.size() && text[i] == '[') {
    // A dimension decoration ("[0:2]={7,8,9}": a lower bound other than 1): the elements as a JSON
    // array like any other (a column's JSON type must not change from row to row; Debezium does
    // the same), the bounds dropped (docs/events.md).
    const auto eq = text.find('=', i);
    if (eq == std::string_view::npos) return fail(ctx, r.oid, text, "malformed array bounds");
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      spdlog::warn(
          "an array value with explicit bounds ({}) is published as a JSON array without its "
          "bounds, as Debezium does (said once)",
          text.substr(i, eq - i));
    }
    text = text.substr(eq + 1);
    i = 0;
    while (i < text.size() && is_space(text[i])) ++i;
  }
  if (i >= text.size() || text[i] != '{') {
    // A vector type that is not a brace literal (int2vector, oidvector): the PostgreSQL text as a
    // JSON string.
    json::append_string(out, text);
    return true;
  }
  const Resolved element = classify(r.element, ctx.types);
  // typdelim of the element type (a domain carries its base type's delimiter in pg_type).
  const TypeInfo* et = ctx.types.find(r.element);
  if (et == nullptr) et = ctx.types.find(element.oid);
  const char delim = et != nullptr ? et->delimiter : ',';
  auto& bufs = tl_elements;
  const auto depth = static_cast<std::size_t>(ctx.depth);
  if (bufs.size() <= depth) bufs.resize(depth + 1);
  std::string& buf = bufs[depth];
  // An array of a domain: the column has no modifier, the domain carries its base type's.
  if (typmod < 0 && element.oid != r.element) typmod = ctx.types.domain_typmod(r.element);
  ArrayParser parser(out, text, delim, element, typmod, ctx, buf);
  return parser.parse();
}

}  // namespace

ResolvedType resolve_type(std::uint32_t type_oid, std::int32_t typmod, const TypeRegistry& types) {
  const Resolved r = classify(type_oid, types);
  ResolvedType t;
  t.type_oid = type_oid;
  t.typmod = typmod;
  t.kind = r.kind;
  t.base_oid = r.oid;
  t.element = r.element;
  // A domain column has no modifier of its own (atttypmod -1): use its base type's.
  t.value_typmod = typmod < 0 && r.oid != type_oid ? types.domain_typmod(type_oid) : typmod;
  t.generation = types.generation();
  return t;
}

bool append_value(std::string& out, std::string_view token, std::uint32_t type_oid,
                  std::int32_t typmod, const TypeRegistry& types, const ValueMappingOptions& opts,
                  std::string& error) {
  if (token == "null") {
    out += "null";
    return true;
  }
  return append_value(out, token, resolve_type(type_oid, typmod, types), types, opts, error);
}

bool append_value(std::string& out, std::string_view token, const ResolvedType& type,
                  const TypeRegistry& types, const ValueMappingOptions& opts, std::string& error) {
  if (token == "null") {
    out.append(token);
    return true;
  }
  Ctx ctx{types, opts, error, type.type_oid};
  const Resolved r{type.kind, type.base_oid, type.element};
  const bool quoted = json::is_string_token(token);

  // Fast paths: the token already is the JSON we want.
  if (quoted &&
      (r.kind == Kind::kText || (r.kind == Kind::kJson && (opts.format == ValueFormat::kDebezium ||
                                                           !opts.json_as_document)))) {
    out.append(token);
    return true;
  }
  if (!quoted && r.kind == Kind::kText) {
    out.append(token);
    return true;
  }

  std::string_view text = token;
  if (quoted && token.size() >= 2 && token.back() == '"' &&
      token.find('\\', 1) == std::string_view::npos) {
    text = token.substr(1, token.size() - 2);  // nothing escaped: the text is the token's inside
  } else if (quoted) {
    auto& buf = tl_text;
    buf.clear();
    if (!json::unescape_string(token, buf))
      return fail(ctx, type.type_oid, token, "malformed JSON string token");
    text = buf;
  } else if (r.kind != Kind::kInt && r.kind != Kind::kFloat && r.kind != Kind::kNumeric &&
             r.kind != Kind::kBool) {
    return fail(ctx, type.type_oid, token, "expected a JSON string token");
  }
  return map_scalar(out, text, !quoted, r, type.value_typmod, ctx);
}

}  // namespace walrelay::router
