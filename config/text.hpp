#pragma once

// Small text helpers shared by the config loader's files (not part of the public interface).

#include <string>
#include <string_view>

namespace walrelay::config::detail {

/// `text` in double quotes, for error messages.
inline std::string quoted(std::string_view text) {
  // Appends instead of `"\"" + std::string(text)`: GCC 12 at -O2/-O3 reports a false -Wrestrict
  // in operator+(const char*, std::string&&) (GCC bug 105329).
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  out += text;
  out += '"';
  return out;
}

}  // namespace walrelay::config::detail
