#include "walrelay/router/commit_timestamp.hpp"

#include "router_helpers.hpp"

namespace walrelay::router {

using detail::floor_div;

namespace {

int digits(std::string_view s, std::size_t pos, std::size_t n, bool& ok) {
  int v = 0;
  if (pos + n > s.size()) {
    ok = false;
    return 0;
  }
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') {
      ok = false;
      return 0;
    }
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

}  // namespace

std::optional<std::chrono::microseconds> parse_commit_timestamp(std::string_view s) {
  // YYYY-MM-DD HH:MM:SS[.ffffff][(+|-)HH[:MM]]
  bool ok = true;
  const int year = digits(s, 0, 4, ok);
  const int month = digits(s, 5, 2, ok);
  const int day = digits(s, 8, 2, ok);
  const int hour = digits(s, 11, 2, ok);
  const int minute = digits(s, 14, 2, ok);
  const int second = digits(s, 17, 2, ok);
  if (!ok || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  std::size_t pos = 19;
  std::int64_t micros = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int scale = 100'000;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      micros += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
  }
  std::int64_t offset_s = 0;
  if (pos < s.size()) {
    const char sign = s[pos];
    if (sign != '+' && sign != '-') return std::nullopt;
    const int oh = digits(s, pos + 1, 2, ok);
    pos += 3;
    int om = 0;
    if (pos < s.size() && s[pos] == ':') {
      om = digits(s, pos + 1, 2, ok);
      pos += 3;
    }
    if (!ok || pos < s.size()) return std::nullopt;
    offset_s = (oh * 3600 + om * 60) * (sign == '-' ? -1 : 1);
  }
  const std::int64_t days =
      days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const std::int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  return std::chrono::microseconds(secs * 1'000'000 + micros);
}

std::optional<std::int64_t> parse_commit_timestamp_ms(std::string_view s) {
  const auto t = parse_commit_timestamp(s);
  if (!t) return std::nullopt;
  return floor_div(t->count(), 1000);
}

}  // namespace walrelay::router
