#pragma once

// Helpers of the configuration loader tests (config_*_test.cpp): load YAML text with a fake
// environment and read the errors by key.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "walrelay/config/config.hpp"

namespace walrelay::config::test {

using namespace std::chrono_literals;

inline EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

inline LoadResult load(const std::string& yaml, const EnvLookup& env = env_of({})) {
  return load_config_text(yaml, "test.yaml", env);
}

inline std::string dump(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& e : errors) out += "  " + e.key + ": " + e.reason + "\n";
  return out;
}

inline std::vector<std::string> keys_of(const LoadResult& result) {
  std::vector<std::string> keys;
  for (const ConfigError& e : result.errors) keys.push_back(e.key);
  return keys;
}

/// The reason reported for `key`, or "" when there is no error for it.
inline std::string reason_for(const LoadResult& result, const std::string& key) {
  for (const ConfigError& e : result.errors) {
    if (e.key == key) return e.reason;
  }
  return "";
}

/// A valid configuration that tests extend with more top-level sections.
inline constexpr const char* kMinimal = R"(name: app
source:
  conninfo: host=db
tables:
  - name: public.t
)";

/// kMinimal with extra lines inside `source:` (indented by two) and extra top-level sections.
inline std::string with(const std::string& source_lines, const std::string& sections = "") {
  return "name: app\nsource:\n  conninfo: host=db\n" + source_lines +
         "tables:\n  - name: public.t\n" + sections;
}

inline Config load_ok(const std::string& yaml, const EnvLookup& env = env_of({})) {
  LoadResult result = load(yaml, env);
  EXPECT_TRUE(result.errors.empty()) << dump(result.errors);
  EXPECT_TRUE(result.config.has_value());
  return result.config.value_or(Config{});
}

inline std::string head(const std::string& rest) {
  return "name: app\nsource: {conninfo: host=db}\n" + rest;
}

inline walrelay::config::LoadResult load_with(const std::string& extra) {
  return walrelay::config::load_config_text(
      "name: billing\nsource:\n  conninfo: \"host=x\"\n" + extra + "tables:\n  - name: public.t\n",
      "test.yaml");
}
inline bool has_error(const walrelay::config::LoadResult& r, const std::string& key) {
  for (const auto& e : r.errors) {
    if (e.key == key) return true;
  }
  return false;
}

}  // namespace walrelay::config::test
