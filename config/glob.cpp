#include "walrelay/config/config.hpp"

namespace walrelay::config {

bool glob_match(const std::string& pattern, const std::string& name) {
  // Greedy match with one backtrack point (the last `*`): linear in practice and never exponential,
  // unlike the naive recursive version on patterns such as `*a*a*a*b`.
  std::size_t p = 0;
  std::size_t n = 0;
  std::size_t star = std::string::npos;  // position of the last `*` seen in pattern
  std::size_t resume = 0;                // position in name where that `*` currently stops
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != std::string::npos) {
      // Let the last `*` swallow one more character and retry from there.
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace walrelay::config
