#include "walrelay/core/lsn.hpp"

#include <array>

namespace walrelay {

namespace {

std::optional<std::uint32_t> parse_hex32(std::string_view digits) {
  if (digits.empty() || digits.size() > 8) return std::nullopt;
  std::uint32_t v = 0;
  for (char c : digits) {
    std::uint32_t d = 0;
    if (c >= '0' && c <= '9') {
      d = static_cast<std::uint32_t>(c - '0');
    } else if (c >= 'A' && c <= 'F') {
      d = static_cast<std::uint32_t>(c - 'A' + 10);
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<std::uint32_t>(c - 'a' + 10);
    } else {
      return std::nullopt;
    }
    v = (v << 4) | d;
  }
  return v;
}

std::size_t format_hex32(std::uint32_t v, char* out) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::array<char, 8> tmp{};
  std::size_t n = 0;
  do {
    tmp[n++] = kDigits[v & 0xF];
    v >>= 4;
  } while (v != 0);
  for (std::size_t i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  return n;
}

}  // namespace

std::optional<Lsn> Lsn::parse(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const auto hi = parse_hex32(text.substr(0, slash));
  const auto lo = parse_hex32(text.substr(slash + 1));
  if (!hi || !lo) return std::nullopt;
  return Lsn((static_cast<std::uint64_t>(*hi) << 32) | *lo);
}

std::size_t Lsn::format_to(char* out) const {
  std::size_t n = format_hex32(static_cast<std::uint32_t>(value_ >> 32), out);
  out[n++] = '/';
  n += format_hex32(static_cast<std::uint32_t>(value_ & 0xFFFFFFFFu), out + n);
  return n;
}

std::string Lsn::to_string() const {
  std::array<char, 17> buf{};
  const auto n = format_to(buf.data());
  return {buf.data(), n};
}

}  // namespace walrelay
