#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walrelay {

/// A PostgreSQL WAL position (XLogRecPtr): a byte offset into the write-ahead log.
/// Printed and parsed in PostgreSQL's `X/X` form (two upper-case hex halves of 32 bits each,
/// e.g. `16/B374D848`), as pg_lsn and the replication protocol do (PostgreSQL docs §8.20 pg_lsn).
/// Value type; no ownership; usable from any thread.
class Lsn {
 public:
  constexpr Lsn() = default;
  constexpr explicit Lsn(std::uint64_t value) : value_(value) {}

  /// The raw 64-bit position (bytes).
  [[nodiscard]] constexpr std::uint64_t value() const { return value_; }
  /// True for the invalid position 0/0 (InvalidXLogRecPtr).
  [[nodiscard]] constexpr bool is_zero() const { return value_ == 0; }

  /// Parses `X/X` (1-8 hex digits each side, either case). Returns nullopt for anything else:
  /// empty halves, a missing slash, more than 8 digits, trailing characters.
  static std::optional<Lsn> parse(std::string_view text);

  /// Formats as `X/X` with upper-case hex and no leading zeros (`0/0`, `16/B374D848`).
  [[nodiscard]] std::string to_string() const;
  /// Writes `X/X` into `out` (needs at least 17 bytes) and returns the number of bytes written.
  std::size_t format_to(char* out) const;

  friend constexpr auto operator<=>(Lsn, Lsn) = default;

 private:
  std::uint64_t value_ = 0;
};

}  // namespace walrelay
