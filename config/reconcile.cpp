#include <charconv>
#include <optional>
#include <set>

#include "reconcile_section.hpp"
#include "text.hpp"

namespace walrelay::config::detail {

namespace {

constexpr std::size_t kMaxBuckets = 16'777'216;

class SectionReader {
 public:
  SectionReader(const EnvLookup& env, std::vector<ConfigError>& errors)
      : env_(env), errors_(errors) {}

  void error(const std::string& key, std::string reason) {
    errors_.push_back(ConfigError{key, std::move(reason)});
  }

  std::optional<std::string> scalar(const YAML::Node& node, const std::string& path,
                                    std::string_view expected) {
    if (!node.IsScalar()) {
      error(path, "expected " + std::string(expected));
      return std::nullopt;
    }
    auto value = substitute_env(node.Scalar(), env_);
    if (!value) {
      error(path, std::move(value.error()));
      return std::nullopt;
    }
    return std::move(*value);
  }

  std::optional<std::size_t> count(const YAML::Node& node, const std::string& path,
                                   std::size_t max) {
    const auto value = scalar(node, path, "a positive integer");
    if (!value) return std::nullopt;
    std::size_t n = 0;
    const char* end = value->data() + value->size();
    const auto [ptr, ec] = std::from_chars(value->data(), end, n);
    if (ec != std::errc() || ptr != end || n == 0 || value->front() == '-' || n > max) {
      error(path,
            "expected an integer from 1 to " + std::to_string(max) + ", got " + quoted(*value));
      return std::nullopt;
    }
    return n;
  }

  std::optional<std::chrono::milliseconds> duration(const YAML::Node& node,
                                                    const std::string& path) {
    const auto value = scalar(node, path, "a duration");
    if (!value) return std::nullopt;
    auto parsed = parse_duration(*value);
    if (!parsed) {
      error(path, std::move(parsed.error()));
      return std::nullopt;
    }
    return *parsed;
  }

 private:
  const EnvLookup& env_;
  std::vector<ConfigError>& errors_;
};

}  // namespace

void read_reconcile(const YAML::Node& node, const std::string& path, const EnvLookup& env,
                    ReconcileConfig& out, std::vector<ConfigError>& errors) {
  SectionReader r(env, errors);
  if (!node.IsMap()) {
    r.error(path, "expected a map");
    return;
  }
  std::set<std::string> seen;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) {
      r.error(path, "expected a plain key");
      continue;
    }
    const std::string key = entry.first.Scalar();
    const std::string child = path + "." + key;
    if (!seen.insert(key).second) {
      r.error(child, "duplicate key");
      continue;
    }
    const YAML::Node& v = entry.second;
    if (key == "buckets") {
      if (auto n = r.count(v, child, kMaxBuckets)) out.buckets = *n;
    } else if (key == "max_expanded_entries") {
      if (auto n = r.count(v, child, std::size_t{1} << 40)) out.max_expanded_entries = *n;
    } else if (key == "in_flight_limit") {
      if (auto d = r.duration(v, child)) out.in_flight_limit = *d;
    } else if (key == "read_timeout") {
      if (auto d = r.duration(v, child)) out.read_timeout = *d;
    } else {
      r.error(child,
              "unknown key (expected buckets, max_expanded_entries, in_flight_limit, "
              "read_timeout)");
    }
  }
}

}  // namespace walrelay::config::detail
