#include "walrelay/reconcile/break_ages.hpp"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "walrelay/state/state_store.hpp"

namespace walrelay::reconcile {

namespace {

constexpr const char* kHeader =
    "# walrelay reconcile: first-seen times of open breaks (docs/reconcile.md \"Break ages\")\n";
constexpr const char* kVersion = "version=1";

void append_escaped(std::string& out, const std::string& field) {
  for (const char c : field) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
}

/// Splits `line` at its tabs and unescapes each field; false when an escape is unknown.
bool split_fields(const std::string& line, std::vector<std::string>& fields) {
  fields.assign(1, std::string());
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\t') {
      fields.emplace_back();
      continue;
    }
    if (c != '\\') {
      fields.back() += c;
      continue;
    }
    if (++i == line.size()) return false;
    switch (line[i]) {
      case '\\':
        fields.back() += '\\';
        break;
      case 't':
        fields.back() += '\t';
        break;
      case 'n':
        fields.back() += '\n';
        break;
      case 'r':
        fields.back() += '\r';
        break;
      default:
        return false;
    }
  }
  return true;
}

}  // namespace

std::string break_ages_path(const std::string& state_dir, const std::string& slot) {
  return state_dir + "/" + slot + ".reconcile";
}

std::expected<BreakAges, std::string> load_break_ages(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BreakAges ages;
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return ages;
    return std::unexpected("cannot read " + path);
  }
  std::string line;
  std::vector<std::string> fields;
  std::size_t number = 0;
  bool versioned = false;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const std::string where = path + " line " + std::to_string(number);
    if (!versioned) {
      if (line != kVersion) return std::unexpected(where + ": expected " + kVersion);
      versioned = true;
      continue;
    }
    std::int64_t ms = 0;
    if (!split_fields(line, fields) || fields.size() != 4 ||
        std::from_chars(fields[0].data(), fields[0].data() + fields[0].size(), ms).ptr !=
            fields[0].data() + fields[0].size()) {
      return std::unexpected(where + ": expected <first_seen_ms>\\t<table>\\t<class>\\t<id>");
    }
    ages[{fields[1], fields[2], fields[3]}] = ms;
  }
  if (in.bad()) return std::unexpected("cannot read " + path);
  return ages;
}

std::expected<void, std::string> save_break_ages(const std::string& dir, const std::string& path,
                                                 const BreakAges& ages) {
  std::string text = kHeader;
  text += kVersion;
  text += '\n';
  for (const auto& [key, ms] : ages) {
    text += std::to_string(ms);
    for (const std::string* field : {&std::get<0>(key), &std::get<1>(key), &std::get<2>(key)}) {
      text += '\t';
      append_escaped(text, *field);
    }
    text += '\n';
  }
  return write_file_durably(dir, path, text);
}

void apply_break_ages(Report& report, BreakAges& ages) {
  std::set<std::string> compared;
  for (const auto& t : report.tables) compared.insert(t.table);
  BreakAges next;
  for (const auto& [key, ms] : ages) {
    if (!compared.contains(std::get<0>(key))) next.emplace(key, ms);
  }
  for (auto& t : report.tables) {
    for (auto& b : t.found.breaks) {
      BreakAgeKey key{t.table, std::string(to_string(b.cls)), b.id};
      std::int64_t first = report.now_ms;
      if (b.since_ms >= 0 && b.since_ms < first) first = b.since_ms;
      if (const auto it = ages.find(key); it != ages.end() && it->second < first) {
        first = it->second;
      }
      b.first_seen_ms = first;
      next[std::move(key)] = first;
    }
  }
  ages = std::move(next);
}

}  // namespace walrelay::reconcile
