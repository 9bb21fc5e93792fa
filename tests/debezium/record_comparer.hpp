// What the Debezium compatibility suite compares record by record, and how (tests/debezium:
// debezium_compat_test.cpp runs it against the real Debezium; record_comparer_test.cpp checks
// the comparison itself on hand-made records).
#pragma once

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "allowed_differences.hpp"
#include "harness.hpp"

namespace walrelay::itest {

// ============================================================================ JSON with raw text

/// A parsed JSON value that keeps each scalar's exact text and each object's member order.
struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  std::string raw;  ///< scalars: the token exactly as written (strings with their quotes)
  std::vector<std::pair<std::string, Json>> members;  ///< objects: raw key text, in order
  std::vector<Json> items;                            ///< arrays

  [[nodiscard]] const Json* get(std::string_view key) const {
    for (const auto& [k, v] : members) {
      if (k == key) return &v;
    }
    return nullptr;
  }
  [[nodiscard]] bool is_scalar() const { return kind != Kind::kArray && kind != Kind::kObject; }
  /// Compact text built from the raw tokens (the document's own bytes up to whitespace).
  [[nodiscard]] std::string text() const {
    switch (kind) {
      case Kind::kArray: {
        std::string s = "[";
        for (std::size_t i = 0; i < items.size(); ++i) s += (i ? "," : "") + items[i].text();
        return s + "]";
      }
      case Kind::kObject: {
        std::string s = "{";
        for (std::size_t i = 0; i < members.size(); ++i) {
          s += (i ? ",\"" : "\"") + members[i].first + "\":" + members[i].second.text();
        }
        return s + "}";
      }
      default:
        return raw;
    }
  }
  /// A string's text without quotes (escapes left as written), else the raw text.
  [[nodiscard]] std::string unquoted() const {
    return kind == Kind::kString ? raw.substr(1, raw.size() - 2) : text();
  }
};

/// A strict recursive-descent JSON parser (RFC 8259) that records raw token text.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : s_(text) {}

  Json parse() {
    Json v = value();
    ws();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON " + what + " at byte " + std::to_string(i_) + " of " +
                             std::string(s_));
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  std::string string_token() {
    const std::size_t start = i_++;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (static_cast<unsigned char>(s_[i_]) < 0x20) fail("control character in string");
      if (s_[i_] == '\\') ++i_;
      ++i_;
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return std::string(s_.substr(start, i_ - start));
  }
  Json value() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    Json v;
    const char c = s_[i_];
    if (c == '{') {
      v.kind = Json::Kind::kObject;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        return v;
      }
      while (true) {
        ws();
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a member name");
        std::string key = string_token();
        ws();
        if (i_ >= s_.size() || s_[i_] != ':') fail("expected ':'");
        ++i_;
        v.members.emplace_back(key.substr(1, key.size() - 2), value());
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') {
          ++i_;
          return v;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.kind = Json::Kind::kArray;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return v;
      }
      while (true) {
        v.items.push_back(value());
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') {
          ++i_;
          return v;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.kind = Json::Kind::kString;
      v.raw = string_token();
      return v;
    }
    if (literal("null")) {
      v.raw = "null";
      return v;
    }
    for (const char* word : {"true", "false"}) {
      if (literal(word)) {
        v.kind = Json::Kind::kBool;
        v.raw = word;
        return v;
      }
    }
    const std::size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' ||
                              s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-'))
      ++i_;
    if (i_ == start || (i_ == start + 1 && s_[start] == '-')) fail("unexpected character");
    v.kind = Json::Kind::kNumber;
    v.raw = std::string(s_.substr(start, i_ - start));
    return v;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

/// Appends the UTF-8 encoding of a code point.
inline void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

/// The characters a JSON string token stands for (escapes decoded, surrogate pairs joined).
inline std::string decode_string(std::string_view raw) {
  std::string out;
  const std::string_view s = raw.substr(1, raw.size() - 2);
  auto hex4 = [&](std::size_t at) {
    return static_cast<std::uint32_t>(std::stoul(std::string(s.substr(at, 4)), nullptr, 16));
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out.push_back(s[i]);
      continue;
    }
    const char e = s[++i];
    switch (e) {
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'u': {
        std::uint32_t cp = hex4(i + 1);
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < s.size() && s[i + 1] == '\\' &&
            s[i + 2] == 'u') {
          const std::uint32_t low = hex4(i + 3);
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          i += 6;
        }
        append_utf8(out, cp);
        break;
      }
      default:
        out.push_back(e);
        break;
    }
  }
  return out;
}

/// A text that is equal for two values exactly when they mean the same JSON (strings compared by
/// their characters, not their escapes; numbers and member order as written).
inline std::string canonical(const Json& v) {
  switch (v.kind) {
    case Json::Kind::kString: {
      std::string out = "\"";
      for (char c : decode_string(v.raw)) {
        if (c == '"' || c == '\\') out.push_back('\\');
        out.push_back(c);
      }
      return out + "\"";
    }
    case Json::Kind::kArray: {
      std::string out = "[";
      for (const auto& item : v.items) out += canonical(item) + ",";
      return out + "]";
    }
    case Json::Kind::kObject: {
      std::string out = "{";
      for (const auto& [k, m] : v.members) out += k + ":" + canonical(m) + ",";
      return out + "}";
    }
    default:
      return v.raw;
  }
}

/// canonical() of a record key (its bytes when they are not JSON).
inline std::string canonical_key(const KafkaRecord& r) {
  if (!r.key) return "<null>";
  try {
    return canonical(JsonParser(*r.key).parse());
  } catch (const std::exception&) {
    return *r.key;
  }
}

// ================================================================================== comparison

constexpr std::string_view kAbsent = "<absent>";

/// One difference between a Debezium record and the walrelay record at the same place.
struct Difference {
  std::string pair;  ///< Pair::name of the comparison that found it
  std::string table;
  std::string where;  ///< "<topic suffix> p<partition>@<offset>"
  std::string ops;    ///< the record's op ("~" for a tombstone)
  std::string path;
  std::string debezium;
  std::string walrelay;
};

/// `*`-glob match of the whole text.
inline bool glob_match(std::string_view pattern, std::string_view text) {
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star = std::string_view::npos;
  std::size_t mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

/// True when the entry's path matches `path` or a part of it that ends at a field boundary.
inline bool path_matches(std::string_view pattern, std::string_view path) {
  for (std::size_t end = 1; end <= path.size(); ++end) {
    const bool boundary =
        end == path.size() || path[end] == '.' || path[end] == '{' || path[end] == '[';
    if (boundary && glob_match(pattern, path.substr(0, end))) return true;
  }
  return false;
}

inline bool allowed_matches(const Allowed& a, const Difference& d) {
  if (a.pair != "*" && a.pair != d.pair) return false;
  if (a.table != "*" && a.table != d.table) return false;
  if (!a.ops.empty() && (d.ops.empty() || a.ops.find(d.ops) == std::string_view::npos)) {
    return false;
  }
  if (!a.debezium.empty() && !glob_match(a.debezium, d.debezium)) return false;
  return path_matches(a.path, d.path);
}

class Comparer {
 public:
  /// `pair`: the name of the comparison, recorded in each difference.
  explicit Comparer(std::string pair = "") { current_.pair = std::move(pair); }

  std::vector<Difference> diffs;

  /// Compares one Debezium record with the walrelay record at the same partition and offset.
  void records(const std::string& table, const KafkaRecord& d, const KafkaRecord& w) {
    current_.table = table;
    current_.where = table + " p" + std::to_string(d.partition) + "@" + std::to_string(d.offset);
    if (w.partition != d.partition || w.offset != d.offset) {
      current_.where +=
          " (walrelay p" + std::to_string(w.partition) + "@" + std::to_string(w.offset) + ")";
    }
    current_.ops = "~";
    std::optional<Json> dv;
    std::optional<Json> wv;
    try {
      if (d.value) dv = JsonParser(*d.value).parse();
      if (w.value) wv = JsonParser(*w.value).parse();
    } catch (const std::exception& e) {
      report("value", d.value.value_or("null"), w.value.value_or("null") + "  (" + e.what() + ")");
      return;
    }
    if (dv) {
      if (const Json* op = dv->get("op")) current_.ops = op->unquoted();
    }
    if (d.key != w.key) report("key", d.key.value_or("null"), w.key.value_or("null"));
    headers(d.headers, w.headers);
    if (dv.has_value() != wv.has_value()) {
      report("value", d.value.value_or("null"), w.value.value_or("null"));
      return;
    }
    if (dv) envelope(*dv, *wv);
  }

  /// A difference with no record pair behind it (counts, topic sets).
  void report_at(const std::string& table, const std::string& where, const std::string& path,
                 const std::string& debezium, const std::string& walrelay) {
    diffs.push_back({current_.pair, table, where, "", path, debezium, walrelay});
  }

 private:
  void report(const std::string& path, const std::string& debezium, const std::string& walrelay) {
    Difference d = current_;
    d.path = path;
    d.debezium = debezium;
    d.walrelay = walrelay;
    diffs.push_back(std::move(d));
  }

  /// Headers by name and value (the harness's reader keeps the last value of a repeated name;
  /// neither connector repeats one, and the order of headers is not compared).
  void headers(const std::map<std::string, std::string>& d,
               const std::map<std::string, std::string>& w) {
    std::set<std::string> names;
    for (const auto& [k, v] : d) names.insert(k);
    for (const auto& [k, v] : w) names.insert(k);
    for (const auto& name : names) {
      const auto di = d.find(name);
      const auto wi = w.find(name);
      const std::string dt = di == d.end() ? std::string(kAbsent) : di->second;
      const std::string wt = wi == w.end() ? std::string(kAbsent) : wi->second;
      if (dt != wt) report("header." + name, dt, wt);
    }
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  /// Compares two values: scalars by their exact text, objects member by member and by the order
  /// of the members both have, arrays as a whole (their compact text).
  void compare(const Json& d, const Json& w, const std::string& path) {
    if (d.kind == Json::Kind::kObject && w.kind == Json::Kind::kObject) {
      objects(d, w, path, {});
      return;
    }
    if (d.kind != w.kind || d.text() != w.text()) report(path, d.text(), w.text());
  }

  /// Members of `skip` are only checked for presence on both sides, not compared.
  void objects(const Json& d, const Json& w, const std::string& path,
               const std::set<std::string>& skip) {
    std::vector<std::string> d_common;
    std::vector<std::string> w_common;
    for (const auto& [k, v] : d.members) {
      const Json* other = w.get(k);
      if (other == nullptr) {
        report(join(path, k), v.text(), std::string(kAbsent));
        continue;
      }
      d_common.push_back(k);
      if (!skip.contains(k)) compare(v, *other, join(path, k));
    }
    for (const auto& [k, v] : w.members) {
      if (d.get(k) == nullptr) {
        report(join(path, k), std::string(kAbsent), v.text());
      } else {
        w_common.push_back(k);
      }
    }
    if (d_common != w_common) {
      auto list = [](const std::vector<std::string>& keys) {
        std::string s;
        for (const auto& k : keys) s += (s.empty() ? "" : ",") + k;
        return s;
      };
      report(path + "{order}", list(d_common), list(w_common));
    }
  }

  /// Processing time: present on both and not before the source's own time of the same unit.
  void processing_time(const Json& v, const std::string& field, bool debezium) {
    const Json* t = v.get(field);
    const Json* source = v.get("source");
    const Json* st = source != nullptr ? source->get(field) : nullptr;
    if (t == nullptr || st == nullptr) return;  // absence is reported by the member comparison
    std::string problem;
    try {
      if (std::stoll(t->raw) < std::stoll(st->raw)) problem = t->raw + " < source " + st->raw;
    } catch (const std::exception&) {
      problem = t->raw + " is not an integer";
    }
    if (!problem.empty()) {
      report(field + "(not before source." + field + ")", debezium ? problem : "ok",
             debezium ? "ok" : problem);
    }
  }

  void envelope(const Json& d, const Json& w) {
    if (d.kind != Json::Kind::kObject || w.kind != Json::Kind::kObject) {
      report("", d.text(), w.text());
      return;
    }
    // Processing timestamps differ between two connectors by nature: presence, and not before
    // source.ts_*, is what can be checked.
    const std::set<std::string> top_skip = {"ts_ms", "ts_us", "ts_ns", "source"};
    objects(d, w, "", top_skip);
    for (const char* f : {"ts_ms", "ts_us", "ts_ns"}) {
      processing_time(d, f, true);
      processing_time(w, f, false);
    }
    const Json* ds = d.get("source");
    const Json* ws = w.get("source");
    if (ds == nullptr || ws == nullptr) return;
    if (ds->kind != Json::Kind::kObject || ws->kind != Json::Kind::kObject) {
      compare(*ds, *ws, "source");
      return;
    }
    // version: each connector's own; name: the topic prefix, which differs by construction.
    std::set<std::string> source_skip = {"version", "name"};
    if (current_.ops == "r") {
      // A snapshot's own position and time: the two slots were created at different moments, so
      // their consistent points, snapshot transactions and read times differ.
      source_skip.insert({"ts_ms", "ts_us", "ts_ns", "lsn", "txId", "sequence", "xmin"});
    }
    objects(*ds, *ws, "source", source_skip);
  }

  Difference current_;
};

}  // namespace walrelay::itest
