// libFuzzer target: the YAML configuration loader and the string helpers it relies on.
//
// The whole input is loaded as a configuration file (with a fixed environment, so a finding
// reproduces anywhere). Its lines are then fed to mask_conninfo, glob_match (pattern = one line,
// name = the next), and the other text parsers of config.hpp; a loaded configuration's own
// strings go through them too. Errors are expected results; crashes, sanitizer reports, leaks and
// exceptions escaping the loader ("does not throw for any input") are bugs.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "walrelay/config/config.hpp"

namespace {

namespace cfg = walrelay::config;

#define FUZZ_CHECK(cond)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

std::optional<std::string> fixed_env(const std::string& name) {
  if (name == "HOME") return "/home/walrelay";
  if (name == "PGPASSWORD") return "s3cr3t";
  if (name == "EMPTY") return "";
  if (name == "N") return "42";
  return std::nullopt;
}

volatile std::size_t g_sink = 0;

void text_helpers(const std::string& s, const cfg::EnvLookup& env) {
  g_sink = g_sink + cfg::mask_conninfo(s).size();
  g_sink = g_sink + cfg::is_secret_property(s);
  g_sink = g_sink + cfg::default_slot_name(s).size();
  if (auto r = cfg::substitute_env(s, env)) g_sink = g_sink + r->size();
  if (auto r = cfg::parse_duration(s)) g_sink = g_sink + static_cast<std::size_t>(r->count());
  if (auto r = cfg::parse_size(s)) g_sink = g_sink + *r;
  if (auto r = cfg::parse_table_name(s)) g_sink = g_sink + r->schema.size() + r->table.size();
  // Documented glob semantics: `*` matches anything; a pattern without `*` matches itself.
  FUZZ_CHECK(cfg::glob_match("*", s));
  if (s.find('*') == std::string::npos) FUZZ_CHECK(cfg::glob_match(s, s));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const cfg::EnvLookup env = fixed_env;

  const cfg::LoadResult result = cfg::load_config_text(text, "fuzz", env);
  FUZZ_CHECK(result.config.has_value() != !result.errors.empty());

  // Parts of the input: its lines (bounded, so one input stays fast).
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos <= text.size() && lines.size() < 64) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    lines.emplace_back(text, pos, end - pos);
    pos = end + 1;
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    text_helpers(lines[i], env);
    if (i + 1 < lines.size()) g_sink = g_sink + cfg::glob_match(lines[i], lines[i + 1]);
  }

  if (result.config) {
    const cfg::Config& c = *result.config;
    g_sink = g_sink + cfg::mask_conninfo(c.source.conninfo).size();
    for (const auto& [key, value] : c.kafka.properties) {
      g_sink = g_sink + cfg::is_secret_property(key) + value.size();
    }
    for (const cfg::TableConfig& t : c.tables) {
      for (const std::string& line : lines) {
        g_sink = g_sink + cfg::glob_match(t.schema_pattern, line) +
                 cfg::glob_match(t.table_pattern, line);
      }
      g_sink = g_sink + cfg::glob_match(t.table_pattern, t.name);
    }
  }
  return 0;
}
