#include <algorithm>

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

bool glob_covers(const std::string& pattern, const std::string& other) {
  // Each `*` of `other` becomes a character no name holds ('\0'), which only a `*` of `pattern`
  // can match: whatever `other`'s `*`s stand for, the `*` of `pattern` that took it takes that.
  std::string symbolic = other;
  std::replace(symbolic.begin(), symbolic.end(), '*', '\0');
  return glob_match(pattern, symbolic);
}

}  // namespace walrelay::config
