#include "walrelay/config/config.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <sstream>
#include <system_error>

#include "loader.hpp"
#include "text.hpp"
#include "walrelay/core/headers.hpp"

namespace walrelay::config {

using loading::kDecimalHandlings;
using loading::kDeliveries;
using loading::kErrorPolicies;
using loading::kNewTables;
using loading::kPartitions;
using loading::kSnapshotModes;
using loading::kValueFormats;
using loading::Loader;
using loading::spelling;

namespace {

LoadResult single_error(std::string reason) {
  LoadResult result;
  result.errors.push_back(ConfigError{"", std::move(reason)});
  return result;
}

}  // namespace

std::string default_slot_name(std::string_view connector_name) {
  std::string slot = "walrelay_";
  for (char c : connector_name) {
    if (c >= 'A' && c <= 'Z') {
      slot += static_cast<char>(c - 'A' + 'a');
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') {
      slot += c;
    } else {
      slot += '_';
    }
  }
  return slot;
}

namespace {

// Parses without building nodes (yaml-cpp's event API).
class NullEventHandler final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Number of YAML documents in `text`, counting at most `limit`.
int count_documents(const std::string& text, int limit) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  NullEventHandler handler;
  int n = 0;
  while (n < limit && parser.HandleNextDocument(handler)) ++n;
  return n;
}

}  // namespace

namespace loading {

LoadResult load_text(const std::string& yaml_text, const std::string& source_name,
                     const EnvLookup& env, Purpose purpose) {
  const std::string where = source_name.empty() ? std::string() : source_name + ": ";
  try {
    // yaml-cpp's Load would silently drop every document after the first, so count them first,
    // but only up to two: yaml-cpp 0.7's LoadAll never ends on input such as "," (it keeps adding
    // empty documents; jbeder/yaml-cpp#1040, found by tests/fuzz/fuzz_config).
    if (count_documents(yaml_text, 2) > 1) {
      return single_error(where + "expected one YAML document, found several");
    }
    Loader loader(env, purpose);
    return loader.load(YAML::Load(yaml_text));
  } catch (const YAML::ParserException& e) {
    return single_error(where + "YAML syntax error at line " + std::to_string(e.mark.line + 1) +
                        ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  } catch (const YAML::Exception& e) {
    return single_error(where + e.what());
  }
}

}  // namespace loading

LoadResult load_config_text(const std::string& yaml_text, const std::string& source_name,
                            const EnvLookup& env) {
  return loading::load_text(yaml_text, source_name, env, loading::Purpose::kConnector);
}

LoadResult load_config_text(const std::string& yaml_text, const std::string& source_name) {
  return load_config_text(yaml_text, source_name, process_env);
}

LoadResult load_config_file(const std::string& path) {
  return loading::load_file(path, loading::Purpose::kConnector);
}

LoadResult loading::load_file(const std::string& path, Purpose purpose) {
  const auto cannot_read = [&path](int err) {
    return single_error("cannot read " + path + ": " +
                        std::error_code(err, std::generic_category()).message());
  };
  // stdio rather than ifstream: it keeps errno, so the message says why (ENOENT, EACCES, EISDIR).
  errno = 0;
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                             &std::fclose);
  if (!file) return cannot_read(errno);
  std::string text;
  char buffer[8192];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) text.append(buffer, n);
  if (std::ferror(file.get())) return cannot_read(errno);
  return load_text(text, path, process_env, purpose);
}

std::string_view to_string(Delivery value) {
  return spelling(kDeliveries, value);
}
std::string_view to_string(ErrorPolicy value) {
  return spelling(kErrorPolicies, value);
}
std::string_view to_string(SnapshotMode value) {
  return spelling(kSnapshotModes, value);
}
std::string_view to_string(NewTables value) {
  return spelling(kNewTables, value);
}
std::string_view to_string(ValueFormat value) {
  return spelling(kValueFormats, value);
}
std::string_view to_string(DecimalHandling value) {
  return spelling(kDecimalHandlings, value);
}
std::string_view to_string(Partitions value) {
  return spelling(kPartitions, value);
}

}  // namespace walrelay::config
