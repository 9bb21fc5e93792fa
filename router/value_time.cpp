// Dates and times in PostgreSQL's text, proleptic Gregorian like PostgreSQL and java.time
// (value_text.hpp).

#include <cstdint>
#include <string>
#include <string_view>

#include "value_text.hpp"

namespace walrelay::router::values {

namespace {

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

/// Removes a trailing " BC" (DateStyle ISO era suffix); true when present.
bool strip_bc(std::string_view& s) {
  if (s.size() > 3 && s.substr(s.size() - 3) == " BC") {
    s.remove_suffix(3);
    return true;
  }
  return false;
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

}  // namespace

std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

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

}  // namespace walrelay::router::values
