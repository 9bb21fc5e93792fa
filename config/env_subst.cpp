#include <cstdlib>

#include "walrelay/config/config.hpp"

namespace walrelay::config {

namespace {

bool is_name_start(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9');
}

bool valid_name(std::string_view name) {
  if (name.empty() || !is_name_start(name.front())) return false;
  for (char c : name) {
    if (!is_name_char(c)) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> process_env(const std::string& name) {
  // getenv is not thread-safe against setenv; configuration is loaded once at start-up, before any
  // thread exists.
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::expected<std::string, std::string> substitute_env(std::string_view text,
                                                       const EnvLookup& env) {
  std::string out;
  out.reserve(text.size());
  // Every unset variable of the value is named at once, like every bad key of the file.
  std::vector<std::string> unset;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c != '$' || i + 1 >= text.size()) {
      out += c;
      ++i;
      continue;
    }
    const char next = text[i + 1];
    if (next == '$') {
      out += '$';
      i += 2;
      continue;
    }
    if (next != '{') {
      // A lone `$` is literal: secrets often contain one, and docker-compose treats it the same.
      out += c;
      ++i;
      continue;
    }
    const std::size_t close = text.find('}', i + 2);
    if (close == std::string_view::npos) {
      return std::unexpected("unterminated \"${\" (write \"$${\" for a literal \"${\")");
    }
    const std::string_view body = text.substr(i + 2, close - (i + 2));
    const std::size_t sep = body.find(":-");
    const std::string_view name = body.substr(0, sep);
    if (!valid_name(name)) {
      return std::unexpected("invalid environment variable name \"" + std::string(name) +
                             "\" in \"${" + std::string(body) + "}\"");
    }
    const std::optional<std::string> value = env(std::string(name));
    if (sep != std::string_view::npos) {
      // Shell semantics of `:-`: the default also replaces a variable that is set but empty.
      if (value && !value->empty()) {
        out += *value;
      } else {
        out += body.substr(sep + 2);
      }
    } else if (value) {
      out += *value;
    } else {
      unset.emplace_back(name);
    }
    i = close + 1;
  }
  if (!unset.empty()) {
    std::string reason = unset.size() == 1 ? "environment variable " : "environment variables ";
    for (std::size_t k = 0; k < unset.size(); ++k) {
      if (k > 0) reason += ", ";
      reason += unset[k];
    }
    reason += unset.size() == 1 ? " is not set" : " are not set";
    reason += " (use ${" + unset.front() + ":-default} for a default)";
    return std::unexpected(std::move(reason));
  }
  return out;
}

}  // namespace walrelay::config
