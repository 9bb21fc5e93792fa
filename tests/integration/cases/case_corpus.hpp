#pragma once

// Data-driven integration tests over a corpus of real-world cases (the SQL files in this directory,
// adapted from inputs that broke other connectors): each case runs its SQL against the test
// PostgreSQL while walrelay streams from its own new slot, collects what walrelay publishes to
// Kafka, and checks it against expectations written by hand from the case's "Expected connector
// output" (never copied from walrelay's output). Where a case allows several correct shapes (e.g.
// numeric as JSON number text or as a string, a timestamp kept as PostgreSQL's ISO text or
// converted), every allowed shape is accepted and everything the case says must NOT happen is
// rejected.
//
// This header holds the corpus's support (raw JSON scanning, record helpers, psql, the fixture);
// the cases are in cases_*.cpp by family, registered in case_corpus_test.cpp.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "walrelay/core/lsn.hpp"

extern char** environ;

#ifndef WALRELAY_CASES_DIR
#error "WALRELAY_CASES_DIR must be defined (directory of the adapted case SQL files)"
#endif

namespace walrelay::itest {

using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------------------ raw JSON
// A small scanner that keeps every token's exact text (numbers are never converted), so that
// exactness can be checked on values a double or int64 would change.

struct Scanner {
  std::string_view s;
  std::size_t i = 0;

  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  }
  bool skip_string() {
    if (i >= s.size() || s[i] != '"') return false;
    ++i;
    while (i < s.size()) {
      const char c = s[i++];
      if (c == '\\') {
        if (i >= s.size()) return false;
        ++i;
      } else if (c == '"') {
        return true;
      }
    }
    return false;
  }
  /// Skips one value; returns its text (without surrounding whitespace) or nullopt if malformed.
  std::optional<std::string_view> value() {
    ws();
    if (i >= s.size()) return std::nullopt;
    const std::size_t start = i;
    const char c = s[i];
    if (c == '"') {
      if (!skip_string()) return std::nullopt;
    } else if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++i;
      ws();
      if (i < s.size() && s[i] == close) {
        ++i;
      } else {
        while (true) {
          if (c == '{') {
            ws();
            if (!skip_string()) return std::nullopt;
            ws();
            if (i >= s.size() || s[i] != ':') return std::nullopt;
            ++i;
          }
          if (!value()) return std::nullopt;
          ws();
          if (i >= s.size()) return std::nullopt;
          if (s[i] == ',') {
            ++i;
            continue;
          }
          if (s[i] == close) {
            ++i;
            break;
          }
          return std::nullopt;
        }
      }
    } else {
      while (i < s.size() && std::string_view(",}] \n\r\t:").find(s[i]) == std::string_view::npos) {
        ++i;
      }
      if (i == start) return std::nullopt;
    }
    return s.substr(start, i - start);
  }
};

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

/// The text of a JSON string token (with its quotes), escapes resolved.
inline std::string unescape(std::string_view tok) {
  std::string out;
  if (tok.size() < 2 || tok.front() != '"' || tok.back() != '"') return std::string(tok);
  auto hex4 = [&](std::size_t at) -> std::uint32_t {
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4 && at + k < tok.size(); ++k) {
      const char h = tok[at + k];
      v = v * 16 + static_cast<std::uint32_t>(
                       std::isdigit(static_cast<unsigned char>(h))
                           ? h - '0'
                           : (std::tolower(static_cast<unsigned char>(h)) - 'a' + 10));
    }
    return v;
  };
  for (std::size_t i = 1; i + 1 < tok.size(); ++i) {
    const char c = tok[i];
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    const char e = tok[++i];
    switch (e) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'u': {
        std::uint32_t cp = hex4(i + 1);
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < tok.size() && tok[i + 1] == '\\' &&
            tok[i + 2] == 'u') {
          const std::uint32_t lo = hex4(i + 3);
          if (lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          }
        }
        append_utf8(out, cp);
        break;
      }
      default:
        out.push_back(e);
        break;  // \" \\ \/
    }
  }
  return out;
}

/// A JSON string token for `text` (canonical escaping).
inline std::string jstr(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

/// Canonical text of a JSON value: no whitespace, strings re-escaped canonically, numbers and
/// literals verbatim (never converted). "<invalid>" when the text is not one JSON value.
inline std::string canon(std::string_view text) {
  Scanner sc{text};
  const auto tok = sc.value();
  sc.ws();
  if (!tok || sc.i != text.size()) return "<invalid JSON: " + std::string(text) + ">";
  const char c = tok->front();
  if (c == '"') return jstr(unescape(*tok));
  if (c != '{' && c != '[') return std::string(*tok);
  std::string out(1, c);
  Scanner in{*tok, 1};
  in.ws();
  bool first = true;
  const char close = c == '{' ? '}' : ']';
  while (in.i < tok->size() && (*tok)[in.i] != close) {
    if (!first) out.push_back(',');
    first = false;
    if (c == '{') {
      const std::size_t k0 = in.i;
      in.skip_string();
      out += jstr(unescape(tok->substr(k0, in.i - k0)));
      in.ws();
      ++in.i;  // ':'
      out.push_back(':');
    }
    const auto v = in.value();
    out += canon(*v);
    in.ws();
    if ((*tok)[in.i] == ',') ++in.i;
    in.ws();
  }
  out.push_back(close);
  return out;
}

/// Members of a JSON object token: (unescaped key, raw value text); nullopt if not an object.
inline std::optional<std::vector<std::pair<std::string, std::string_view>>> members(
    std::string_view tok) {
  Scanner sc{tok};
  sc.ws();
  if (sc.i >= tok.size() || tok[sc.i] != '{') return std::nullopt;
  ++sc.i;
  std::vector<std::pair<std::string, std::string_view>> out;
  sc.ws();
  if (sc.i < tok.size() && tok[sc.i] == '}') return out;
  while (sc.i < tok.size()) {
    sc.ws();
    const std::size_t k0 = sc.i;
    if (!sc.skip_string()) return std::nullopt;
    std::string key = unescape(tok.substr(k0, sc.i - k0));
    sc.ws();
    if (sc.i >= tok.size() || tok[sc.i] != ':') return std::nullopt;
    ++sc.i;
    const auto v = sc.value();
    if (!v) return std::nullopt;
    out.emplace_back(std::move(key), *v);
    sc.ws();
    if (sc.i < tok.size() && tok[sc.i] == ',') {
      ++sc.i;
      continue;
    }
    if (sc.i < tok.size() && tok[sc.i] == '}') return out;
    return std::nullopt;
  }
  return std::nullopt;
}

/// The raw text of the value at a JSON pointer (object keys only), nullopt when absent.
inline std::optional<std::string_view> raw_at(std::string_view doc, std::string_view pointer) {
  std::string_view cur = doc;
  while (!pointer.empty()) {
    pointer.remove_prefix(1);  // '/'
    const std::size_t slash = pointer.find('/');
    const std::string_view seg = pointer.substr(0, slash);
    pointer = slash == std::string_view::npos ? std::string_view{} : pointer.substr(slash);
    const auto ms = members(cur);
    if (!ms) return std::nullopt;
    const auto it = std::ranges::find_if(*ms, [&](const auto& m) { return m.first == seg; });
    if (it == ms->end()) return std::nullopt;
    cur = it->second;
  }
  Scanner sc{cur};
  return sc.value();
}

// ------------------------------------------------------------------------------ records

/// (commit LSN, position) of a row-change record's `id` header.
inline std::optional<std::pair<Lsn, long>> id_of(const KafkaRecord& r) {
  const std::string id = r.header("id");
  const auto colon = id.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const auto lsn = Lsn::parse(std::string_view(id).substr(0, colon));
  if (!lsn) return std::nullopt;
  try {
    return std::pair{*lsn, std::stol(id.substr(colon + 1))};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

/// Raw (canonical) JSON at `pointer` of the record's value; "<tombstone>" for a null value,
/// "<missing>" when the member is absent.
inline std::string raw(const KafkaRecord& r, std::string_view pointer) {
  if (!r.value) return "<tombstone>";
  const auto v = raw_at(*r.value, pointer);
  return v ? canon(*v) : "<missing>";
}

/// "c", "u", "d", "t" or "tombstone".
inline std::string op(const KafkaRecord& r) {
  if (!r.value) return "tombstone";
  const auto v = raw_at(*r.value, "/op");
  return v ? unescape(*v) : "<no op>";
}

inline std::string key_of(const KafkaRecord& r) {
  return r.key ? canon(*r.key) : "<null key>";
}

/// Accepts a token equal (canonically) to one of `allowed` (each written as JSON text).
inline ::testing::AssertionResult one_of(const KafkaRecord& r, std::string_view pointer,
                                         const std::vector<std::string>& allowed) {
  const std::string actual = raw(r, pointer);
  for (const auto& a : allowed) {
    if (canon(a) == actual) return ::testing::AssertionSuccess();
  }
  std::string list;
  for (const auto& a : allowed) list += "\n    " + a;
  return ::testing::AssertionFailure() << pointer << " = " << actual << "; expected one of:" << list
                                       << "\n  record: " << r.describe();
}

inline ::testing::AssertionResult is(const KafkaRecord& r, std::string_view pointer,
                                     const std::string& expected) {
  return one_of(r, pointer, {expected});
}

/// An exact decimal written either as JSON number text or as a JSON string of the same digits.
inline std::vector<std::string> decimal(const std::string& digits) {
  return {digits, jstr(digits)};
}

/// Text that may stay PostgreSQL's or be converted: JSON strings of each form.
inline std::vector<std::string> texts(std::initializer_list<std::string_view> forms) {
  std::vector<std::string> out;
  for (auto f : forms) out.push_back(jstr(f));
  return out;
}

/// `before` of an UPDATE under REPLICA IDENTITY DEFAULT: null, or an object whose `key` members
/// have the given values and whose other members are null.
inline ::testing::AssertionResult before_null_or_key(
    const KafkaRecord& r, const std::map<std::string, std::string>& key) {
  const std::string b = raw(r, "/before");
  if (b == "null") return ::testing::AssertionSuccess();
  const auto ms = members(b);
  if (!ms) return ::testing::AssertionFailure() << "before is " << b << ": " << r.describe();
  std::set<std::string> seen;
  for (const auto& [k, v] : *ms) {
    const auto it = key.find(k);
    if (it == key.end()) {
      if (canon(v) != "null") {
        return ::testing::AssertionFailure()
               << "before." << k << " = " << v << " (not key-only): " << r.describe();
      }
    } else if (canon(v) != canon(it->second)) {
      return ::testing::AssertionFailure()
             << "before." << k << " = " << v << ", expected " << it->second << ": " << r.describe();
    } else {
      seen.insert(k);
    }
  }
  if (seen.size() != key.size()) {
    return ::testing::AssertionFailure() << "before lacks key columns: " << r.describe();
  }
  return ::testing::AssertionSuccess();
}

inline std::string ops_of(const std::vector<KafkaRecord>& rs) {
  std::string s;
  for (const auto& r : rs) s += (s.empty() ? "" : " ") + op(r);
  return s;
}

inline std::string keys_of(const std::vector<KafkaRecord>& rs) {
  std::string s;
  for (const auto& r : rs) s += (s.empty() ? "" : " ") + key_of(r);
  return s;
}

// ------------------------------------------------------------------------------ psql

struct PsqlResult {
  int code = -1;
  std::string output;
};

/// Runs `sql` with `psql -X -q -v ON_ERROR_STOP=1 -f <file>` (statement by statement, autocommit,
/// meta-commands allowed, exactly as the case scripts are meant to run).
inline PsqlResult run_psql(const std::string& conninfo, const std::string& sql) {
  char tmpl[] = "/tmp/walrelay-case-sql-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) return {-1, "mkstemp failed"};
  {
    std::size_t off = 0;
    while (off < sql.size()) {
      const ssize_t n = ::write(fd, sql.data() + off, sql.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
    ::close(fd);
  }
  const std::string sql_path = tmpl;
  const std::string out_path = sql_path + ".out";
  std::vector<std::string> args = {"psql", "-X",     "-q", "-v",    "ON_ERROR_STOP=1",
                                   "-d",   conninfo, "-f", sql_path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, "psql", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  PsqlResult res;
  if (rc != 0) {
    res.output = std::string("cannot run psql: ") + std::strerror(rc);
  } else {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    res.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::ifstream in(out_path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    res.output = ss.str();
  }
  std::filesystem::remove(sql_path);
  std::filesystem::remove(out_path);
  return res;
}

/// Sum of the high watermarks of a topic's partitions (= records written to a fresh topic).
inline std::int64_t topic_record_count(const std::string& bootstrap, const std::string& topic) {
  char err[256];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "group.id", "walrelay-case-watermarks", err, sizeof err);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (rk == nullptr) return -1;
  std::int64_t total = 0;
  for (std::int32_t p = 0; p < 64; ++p) {
    std::int64_t lo = 0;
    std::int64_t hi = 0;
    if (rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &lo, &hi, 2000) !=
        RD_KAFKA_RESP_ERR_NO_ERROR) {
      break;
    }
    total += hi;
  }
  rd_kafka_destroy(rk);
  return total;
}

inline std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (std::size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) {
    s.replace(at, from.size(), to);
  }
  return s;
}

inline std::string yq(const std::string& s) {  // YAML double-quoted scalar
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

// ------------------------------------------------------------------------------ fixture

class CaseCorpusTest : public IntegrationTest, public ::testing::WithParamInterface<std::string> {
 public:
  // ---- names
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] const std::string& schema() const { return schema_; }
  [[nodiscard]] Pg& pg() { return *pg_; }
  [[nodiscard]] const TestEnv& env() const { return env_; }
  [[nodiscard]] KafkaReader& kafka() { return *kafka_; }
  [[nodiscard]] std::string row_topic(const std::string& table) const { return topic(table); }
  [[nodiscard]] std::string marker_topic() const { return topic("case_marker"); }
  [[nodiscard]] std::string qualified(const std::string& table) const {
    return schema_ + "." + table;
  }

  // ---- per-case configuration (set before start())
  std::vector<std::string> table_lines;  ///< YAML lines of `tables:` items (after the marker's)
  std::vector<std::string> event_lines;  ///< YAML lines under `events:`
  std::vector<std::string> kafka_lines;  ///< extra YAML lines under `kafka:`
  std::map<std::string, std::string> kafka_properties;
  std::optional<std::string> conninfo;    ///< source.conninfo (default: the test's)
  std::vector<std::string> source_lines;  ///< extra YAML lines under `source:`
  std::vector<std::string> top_lines;     ///< extra top-level YAML lines (e.g. an errors section)
  std::string snapshot_mode = "never";    ///< snapshot.mode
  std::vector<std::string> cleanup_sql;   ///< run (as the test role) before the schema is dropped
  std::vector<std::function<void()>> cleanups;

  // ---- run state
  std::unique_ptr<WalrelayProcess> proc;
  std::vector<KafkaRecord> records;  ///< everything published under this test's names, no marker
  std::vector<std::string> topics;   ///< topics under this test's prefix, marker excluded

  void SetUp() override {
    IntegrationTest::SetUp();
    if (HasFatalFailure()) return;
    const auto path = std::filesystem::path(WALRELAY_CASES_DIR) / (GetParam() + ".sql");
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << path;
    std::ostringstream ss;
    ss << in.rdbuf();
    std::string text = replace_all(ss.str(), "@S@", schema_);
    const std::string mark = "-- @@ workload\n";
    const auto at = text.find(mark);
    ASSERT_NE(at, std::string::npos) << path << " has no '-- @@ workload' line";
    setup_sql_ = text.substr(0, at);
    workload_sql_ = text.substr(at + mark.size());
  }

  void TearDown() override {
    if (proc) proc->kill();
    for (const auto& sql : cleanup_sql) {
      try {
        pg_->exec(sql);
      } catch (const std::exception& e) {
        std::cerr << "[case] cleanup failed: " << e.what() << "\n";
      }
    }
    for (const auto& f : cleanups) {
      try {
        f();
      } catch (const std::exception& e) {
        std::cerr << "[case] cleanup failed: " << e.what() << "\n";
      }
    }
    IntegrationTest::TearDown();
  }

  /// Runs SQL in this test's schema through psql; a failure fails the test.
  void psql(const std::string& sql) {
    const auto res =
        run_psql(env_.pg_conninfo, "SET search_path = " + sql_ident(schema_) + ", public;\n" + sql);
    ASSERT_EQ(res.code, 0) << "psql failed:\n" << res.output << "\nSQL:\n" << sql;
  }

  void run_setup() {
    ASSERT_NO_FATAL_FAILURE(psql("CREATE TABLE case_marker (id int PRIMARY KEY);\n" + setup_sql_));
  }
  void run_workload() { ASSERT_NO_FATAL_FAILURE(psql(workload_sql_)); }

  [[nodiscard]] std::string yaml() const {
    std::string y;
    y += "name: " + yq(name_) + "\n";
    y += "source:\n";
    y += "  conninfo: " + yq(conninfo.value_or(env_.pg_conninfo)) + "\n";
    y += "  slot: " + yq(name_) + "\n";
    y += "  create_slot: true\n";
    y += "  status_interval: 1s\n";
    if (state_dir_.empty()) {
      // walrelay's slot record: this test's own directory, kept across its restarts.
      state_dir_ =
          (std::filesystem::temp_directory_path() / "walrelay-itest-state" / name_).string();
      std::filesystem::remove_all(state_dir_);
    }
    y += "  state_dir: " + yq(state_dir_) + "\n";
    for (const auto& l : source_lines) y += "  " + l + "\n";
    y += "kafka:\n";
    y += "  bootstrap_servers: " + yq(env_.kafka_bootstrap) + "\n";
    y += "  flush_timeout: 20s\n";
    for (const auto& l : kafka_lines) y += "  " + l + "\n";
    if (!kafka_properties.empty()) {
      y += "  properties:\n";
      for (const auto& [k, v] : kafka_properties) y += "    " + k + ": " + yq(v) + "\n";
    }
    y += "topics:\n";
    y += "  prefix: " + yq(name_) + "\n";
    if (!event_lines.empty()) {
      y += "events:\n";
      for (const auto& l : event_lines) y += "  " + l + "\n";
    }
    y += "tables:\n";
    y += "  - name: " + yq(qualified("case_marker")) + "\n";
    for (const auto& l : table_lines) y += "  " + l + "\n";
    // Each case's expected output is what its scenario streams; the rows its set-up writes before
    // walrelay starts are not part of it (unless a case asks for a snapshot).
    y += "snapshot:\n  mode: " + snapshot_mode + "\n";
    y += "log:\n  level: info\n  progress_interval: 1s\n";
    y += "metrics:\n  listen: \"127.0.0.1:0\"\n";
    for (const auto& l : top_lines) y += l + "\n";
    return y;
  }

  mutable std::string state_dir_;

  /// Starts walrelay with the case's configuration and waits until it streams from its slot.
  void start(const std::string& label = "walrelay") {
    proc = std::make_unique<WalrelayProcess>(yaml(), label);
    ASSERT_NO_THROW(start_streaming(*proc, name_));
  }

  /// Commits a marker row, waits until walrelay published it (so every earlier transaction was
  /// routed), stops walrelay with SIGTERM (exit 0 expected: everything in flight is flushed) and
  /// reads everything published under this test's prefix.
  void finish(int marker_id = 1) {
    pg_->exec("INSERT INTO " + qualified("case_marker") + " VALUES (" + std::to_string(marker_id) +
              ")");
    const auto seen = kafka_->read_at_least({marker_topic()}, 1, 20s);
    ASSERT_FALSE(seen.empty()) << "the marker transaction was not published within 20 s\n"
                               << proc->logs();
    ASSERT_TRUE(stop_gracefully(*proc, name_));
    collect();
  }

  void collect() {
    records.clear();
    topics.clear();
    for (const auto& t : kafka_->topics_with_prefix(name_ + ".")) {
      if (t != marker_topic()) topics.push_back(t);
    }
    // A topic auto-created a moment ago may not have a partition leader yet: retry a little.
    for (int attempt = 0; !topics.empty(); ++attempt) {
      try {
        records = kafka_->read_all(topics, 10s);
        break;
      } catch (const std::exception&) {
        if (attempt == 10) throw;
        std::this_thread::sleep_for(500ms);
      }
    }
    if (std::getenv("WALRELAY_CASE_DUMP") != nullptr) {  // debugging aid
      std::cerr << "[case " << GetParam() << "] published:\n" << describe(records);
    }
    for (const auto& r : records) {
      // A dead-letter record has an id only when its event had one (docs/operations.md "Error
      // policy").
      if (!r.header("walrelay.error.kind").empty()) continue;
      EXPECT_FALSE(r.header("id").empty()) << "record without header id: " << r.describe();
    }
  }

  /// Records of `topic`, in transaction order: by (commit LSN, position) from the id header for
  /// row changes, else in partition order.
  [[nodiscard]] std::vector<KafkaRecord> on(const std::string& t) const {
    std::vector<KafkaRecord> out;
    for (const auto& r : records) {
      if (r.topic == t) out.push_back(r);
    }
    std::ranges::stable_sort(out, [](const KafkaRecord& a, const KafkaRecord& b) {
      const auto ia = id_of(a);
      const auto ib = id_of(b);
      if (ia && ib) return *ia < *ib;
      return std::tie(a.partition, a.offset) < std::tie(b.partition, b.offset);
    });
    return out;
  }

  /// Expects exactly these topics (besides the marker's) under this test's prefix.
  void expect_topics(std::set<std::string> expected) const {
    EXPECT_EQ(std::set<std::string>(topics.begin(), topics.end()), expected)
        << "topics under prefix " << name_ << ".\n"
        << describe(records);
  }

  /// The slot's remaining wal2json lines (peeked, not consumed) for the given tables.
  /// What the slot still holds for `tables` (BEGIN/COMMIT lines left out). Logical messages are
  /// database-wide, so only those with one of `own_prefixes` (this case's own) are listed: other
  /// tests running at the same time write heartbeats, watermarks, signals and outbox messages.
  std::vector<std::string> remaining_in_slot(const std::vector<std::string>& tables,
                                             const std::set<std::string>& own_prefixes = {}) {
    std::string add;
    for (const auto& t : tables) add += (add.empty() ? "" : ",") + qualified(t);
    std::vector<std::string> out;
    for (const auto& row : pg_->query(
             "SELECT data FROM pg_logical_slot_peek_changes(" + sql_literal(name_) +
             ", NULL, NULL, 'format-version', '2', 'add-tables', " + sql_literal(add) + ")")) {
      const std::string d = row[0].value_or("");
      if (d.starts_with("{\"action\":\"B\"") || d.starts_with("{\"action\":\"C\"")) continue;
      if (d.starts_with("{\"action\":\"M\"")) {
        const std::string key = "\"prefix\":\"";
        const auto at = d.find(key);
        const auto end = at == std::string::npos ? at : d.find('"', at + key.size());
        const std::string prefix = end == std::string::npos
                                       ? std::string()
                                       : d.substr(at + key.size(), end - at - key.size());
        if (!own_prefixes.contains(prefix)) continue;
      }
      out.push_back(d);
    }
    return out;
  }

  std::optional<Lsn> confirmed() {
    const auto s = slot_state(*pg_, name_);
    if (!s || !s->confirmed_flush_lsn) return std::nullopt;
    return Lsn::parse(*s->confirmed_flush_lsn);
  }

  /// Stops the running walrelay with SIGTERM and waits for the slot to be released.
  bool stop_gracefully_now() { return stop_gracefully(*proc, name_); }

  /// The adapted script's two parts (for cases that run them their own way).
  [[nodiscard]] const std::string& setup_sql() const { return setup_sql_; }
  [[nodiscard]] const std::string& workload_sql() const { return workload_sql_; }

  /// Default flow: setup SQL, start walrelay, workload SQL, marker, stop, collect.
  void run_default() {
    ASSERT_NO_FATAL_FAILURE(run_setup());
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_NO_FATAL_FAILURE(run_workload());
    ASSERT_NO_FATAL_FAILURE(finish());
  }

 private:
  std::string setup_sql_;
  std::string workload_sql_;
};

using CaseFn = void (*)(CaseCorpusTest&);

inline std::string row_entry(const CaseCorpusTest& t, const std::string& table) {
  return "- name: " + yq(t.qualified(table));
}

/// Lines of walrelay's stderr that mention `needle`, excluding the start-up table summary.
inline std::vector<std::string> log_lines_about(const WalrelayProcess& p,
                                                const std::regex& needle) {
  std::vector<std::string> out;
  std::istringstream in(p.stderr_text());
  for (std::string line; std::getline(in, line);) {
    if (line.find("tables (") != std::string::npos) continue;
    if (line.find("harness:") != std::string::npos) continue;
    if (std::regex_search(line, needle)) out.push_back(line);
  }
  return out;
}

// The cases, one function each (cases_*.cpp).
void bug01(CaseCorpusTest& t);
void bug03(CaseCorpusTest& t);
void bug04(CaseCorpusTest& t);
void bug05(CaseCorpusTest& t);
void bug07(CaseCorpusTest& t);
void bug09(CaseCorpusTest& t);
void bug10(CaseCorpusTest& t);
void bug11(CaseCorpusTest& t);
void bug12(CaseCorpusTest& t);
void bug14(CaseCorpusTest& t);
void bug15(CaseCorpusTest& t);
void bug17(CaseCorpusTest& t);
void bug18(CaseCorpusTest& t);
void bug20(CaseCorpusTest& t);
void bug22(CaseCorpusTest& t);
void bug23(CaseCorpusTest& t);
void bug24(CaseCorpusTest& t);
void bug27(CaseCorpusTest& t);
void case05(CaseCorpusTest& t);
void case01(CaseCorpusTest& t);
void case06(CaseCorpusTest& t);
void case09(CaseCorpusTest& t);

}  // namespace walrelay::itest
