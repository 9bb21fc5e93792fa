#include <array>
#include <charconv>
#include <cstdint>
#include <limits>

#include "text.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay::config {

namespace {

struct Unit {
  std::string_view suffix;
  std::uint64_t factor;
};

/// An unsigned decimal integer and the text after it (spaces between are skipped).
struct NumberAndUnit {
  std::uint64_t number = 0;
  std::string_view unit;
  bool overflow = false;
};

std::optional<NumberAndUnit> split_number(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  NumberAndUnit out;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, out.number);
  (void)ptr;
  out.overflow = ec == std::errc::result_out_of_range;
  std::size_t rest = digits;
  while (rest < text.size() && text[rest] == ' ') ++rest;
  out.unit = text.substr(rest);
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

using detail::quoted;

/// number * factor, or nullopt on overflow of `limit`.
std::optional<std::uint64_t> scale(std::uint64_t number, std::uint64_t factor,
                                   std::uint64_t limit) {
  if (number > limit / factor) return std::nullopt;
  return number * factor;
}

}  // namespace

std::expected<std::chrono::milliseconds, std::string> parse_duration(std::string_view text) {
  // Lower-case units only: `M` could be read as months, `S` is unusual enough to be a typo.
  static constexpr std::array<Unit, 5> kUnits{{
      {"", 1},
      {"ms", 1},
      {"s", 1000},
      {"m", 60 * 1000},
      {"h", 60 * 60 * 1000},
  }};
  const std::string expected =
      "expected a positive duration such as 500ms, 10s, 1m or 1h (a bare integer is "
      "milliseconds), got " +
      quoted(text);
  const std::optional<NumberAndUnit> parsed = split_number(text);
  if (!parsed || parsed->number == 0) return std::unexpected(expected);
  for (const Unit& unit : kUnits) {
    if (parsed->unit != unit.suffix) continue;
    // Bound by the representation of std::chrono::milliseconds (int64).
    const auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    const std::optional<std::uint64_t> ms =
        parsed->overflow ? std::nullopt : scale(parsed->number, unit.factor, limit);
    if (!ms) return std::unexpected("duration " + quoted(text) + " is too large");
    return std::chrono::milliseconds(static_cast<std::int64_t>(*ms));
  }
  return std::unexpected(expected);
}

std::expected<std::size_t, std::string> parse_size(std::string_view text) {
  static constexpr std::uint64_t kKi = 1024;
  static constexpr std::uint64_t kK = 1000;
  static constexpr std::array<Unit, 10> kUnits{{
      {"", 1},
      {"B", 1},
      {"KB", kK},
      {"MB", kK * kK},
      {"GB", kK * kK * kK},
      {"TB", kK * kK * kK * kK},
      {"KiB", kKi},
      {"MiB", kKi * kKi},
      {"GiB", kKi * kKi * kKi},
      {"TiB", kKi * kKi * kKi * kKi},
  }};
  const std::string expected =
      "expected a positive size such as 1048576, 512KiB, 64MiB, 1GiB or 10MB (a bare integer is "
      "bytes), got " +
      quoted(text);
  const std::optional<NumberAndUnit> parsed = split_number(text);
  if (!parsed || parsed->number == 0) return std::unexpected(expected);
  for (const Unit& unit : kUnits) {
    if (!iequals(parsed->unit, unit.suffix)) continue;
    const std::optional<std::uint64_t> bytes =
        parsed->overflow
            ? std::nullopt
            : scale(parsed->number, unit.factor, std::numeric_limits<std::size_t>::max());
    if (!bytes) return std::unexpected("size " + quoted(text) + " is too large");
    return static_cast<std::size_t>(*bytes);
  }
  return std::unexpected(expected);
}

}  // namespace walrelay::config
