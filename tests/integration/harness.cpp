#include "harness.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <signal.h>
#include <simdjson.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

extern char** environ;

#ifndef WALRELAY_BINARY
#error "WALRELAY_BINARY must be defined (path of the walrelay executable)"
#endif
#ifndef WALRELAY_SERVICES_DIR
#error "WALRELAY_SERVICES_DIR must be defined (tests/services)"
#endif

namespace walrelay::itest {

namespace {

using Clock = std::chrono::steady_clock;

std::string read_file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void append_file_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << text;
}

}  // namespace

// ------------------------------------------------------------------------------- environment

std::expected<TestEnv, std::string> load_test_env() {
  TestEnv env;
  std::vector<std::string> missing;
  auto get = [&](const char* name, std::string& out) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') {
      missing.emplace_back(name);
    } else {
      out = v;
    }
  };
  get("WALRELAY_TEST_PG_CONNINFO", env.pg_conninfo);
  get("WALRELAY_TEST_PG_ADMIN_CONNINFO", env.pg_admin_conninfo);
  get("WALRELAY_TEST_KAFKA_BOOTSTRAP", env.kafka_bootstrap);
  if (!missing.empty()) {
    std::string msg = "integration tests need real services; missing environment variable(s):";
    for (const auto& m : missing) msg += " " + m;
    msg +=
        ". Start them with `bash tests/services/start.sh DIR` and `source DIR/env` before "
        "running `ctest -L integration`.";
    return std::unexpected(std::move(msg));
  }
  return env;
}

// ------------------------------------------------------------------------------------- names

std::string unique_name(std::string_view tag) {
  static std::atomic<unsigned> counter{0};
  std::string name = "it_" + std::to_string(::getpid()) + "_" + std::to_string(++counter) + "_";
  for (char c : tag) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      name.push_back(static_cast<char>(std::tolower(u)));
    } else {
      name.push_back('_');
    }
  }
  if (name.size() > 50) name.resize(50);
  return name;
}

// ---------------------------------------------------------------------------------- waiting

bool wait_until(const std::function<bool()>& predicate, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(poll);
  }
  return predicate();
}

std::size_t count_occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// --------------------------------------------------------------------------------------- Pg

Pg::Pg(const std::string& conninfo) {
  conn_ = PQconnectdb(conninfo.c_str());
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    std::string msg = "cannot connect to PostgreSQL (" + conninfo +
                      "): " + (conn_ ? PQerrorMessage(conn_) : "out of memory");
    PQfinish(conn_);
    conn_ = nullptr;
    throw PgError(msg);
  }
  // NOTICEs (e.g. "schema does not exist, skipping") are noise in test output.
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
}

Pg::~Pg() {
  PQfinish(conn_);
}

std::vector<Pg::Row> Pg::query(const std::string& sql) {
  PGresult* res = PQexec(conn_, sql.c_str());
  const ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    std::string msg = "SQL failed: ";
    msg += res ? PQresultErrorMessage(res) : PQerrorMessage(conn_);
    msg += "  in: " + sql;
    PQclear(res);
    throw PgError(msg);
  }
  std::vector<Row> rows;
  const int n = PQntuples(res);
  const int m = PQnfields(res);
  rows.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    Row row;
    row.reserve(static_cast<std::size_t>(m));
    for (int j = 0; j < m; ++j) {
      if (PQgetisnull(res, i, j)) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(
            std::string(PQgetvalue(res, i, j), static_cast<std::size_t>(PQgetlength(res, i, j))));
      }
    }
    rows.push_back(std::move(row));
  }
  PQclear(res);
  return rows;
}

namespace {
std::string transaction_sql(const std::vector<std::string>& statements, const char* end) {
  std::string sql = "BEGIN;";
  for (const auto& st : statements) sql += st + ";";
  return sql + end;
}
}  // namespace

void Pg::commit(const std::vector<std::string>& statements) {
  exec(transaction_sql(statements, "COMMIT"));
}

void Pg::rollback(const std::vector<std::string>& statements) {
  exec(transaction_sql(statements, "ROLLBACK"));
}

std::optional<std::string> Pg::scalar(const std::string& sql) {
  auto rows = query(sql);
  if (rows.empty() || rows[0].empty()) throw PgError("query returned no rows: " + sql);
  return rows[0][0];
}

std::string Pg::value(const std::string& sql) {
  auto v = scalar(sql);
  if (!v) throw PgError("query returned NULL: " + sql);
  return *v;
}

std::string sql_literal(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out.push_back('\'');
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

std::string sql_ident(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

ScopedRole::ScopedRole(Pg& pg, std::string name) : pg_(pg), name_(std::move(name)) {
  pg_.exec("CREATE ROLE " + sql_ident(name_) + " LOGIN REPLICATION");
}

ScopedRole::~ScopedRole() {
  try {
    pg_.exec("DROP OWNED BY " + sql_ident(name_) + "; DROP ROLE " + sql_ident(name_));
  } catch (...) {
  }
}

std::optional<SlotState> slot_state(Pg& pg, const std::string& slot) {
  auto rows = pg.query(
      "SELECT active::text, confirmed_flush_lsn::text FROM pg_replication_slots "
      "WHERE slot_name = " +
      sql_literal(slot));
  if (rows.empty()) return std::nullopt;
  return SlotState{rows[0][0].value_or("") == "true", rows[0][1]};
}

bool wait_slot_active(Pg& pg, const std::string& slot, std::chrono::milliseconds timeout) {
  return wait_until(
      [&] {
        auto s = slot_state(pg, slot);
        return s && s->active;
      },
      timeout);
}

bool wait_slot_inactive(Pg& pg, const std::string& slot, std::chrono::milliseconds timeout) {
  return wait_until(
      [&] {
        auto s = slot_state(pg, slot);
        return !s || !s->active;
      },
      timeout);
}

void drop_slot_quietly(Pg& pg, const std::string& slot) {
  try {
    wait_slot_inactive(pg, slot, 10s);
    pg.exec(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = " +
        sql_literal(slot));
  } catch (const std::exception& e) {
    std::cerr << "[harness] could not drop slot " << slot << ": " << e.what() << "\n";
  }
}

bool lsn_after(Pg& pg, const std::string& a, const std::string& b) {
  return pg.value("SELECT (" + sql_literal(a) + "::pg_lsn > " + sql_literal(b) +
                  "::pg_lsn)::text") == "true";
}

bool wait_confirmed_past(Pg& pg, const std::string& slot, const std::string& lsn,
                         std::string& confirmed, std::chrono::milliseconds timeout) {
  return wait_until(
      [&] {
        auto s = slot_state(pg, slot);
        confirmed = s && s->confirmed_flush_lsn ? *s->confirmed_flush_lsn : "0/0";
        return lsn_after(pg, confirmed, lsn);
      },
      timeout);
}

// ------------------------------------------------------------------------------ lock waits

std::string waiting_sessions_sql(const std::string& application_name,
                                 const std::string& wait_condition) {
  return "SELECT count(*)::text FROM pg_stat_activity WHERE application_name = left(" +
         sql_literal(application_name) + ", 63) AND " + wait_condition;
}

bool wait_for_waiting_session(Pg& observer, const std::string& waiting_sql,
                              std::chrono::milliseconds timeout) {
  return wait_until([&] { return observer.value(waiting_sql) == "1"; }, timeout);
}

void warm_up_slot_queries(Pg& pg, const std::string& slot) {
  (void)lsn_after(pg, "0/1", "0/0");
  (void)slot_state(pg, slot);
}

void hold_exclusive_lock(Pg& locker, const std::string& table) {
  locker.exec("BEGIN");
  locker.exec("LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE");
}

// ------------------------------------------------------------------------------------ Kafka

std::string KafkaRecord::header(const std::string& name) const {
  const auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

std::string KafkaRecord::describe() const {
  std::string s = topic + "/" + std::to_string(partition) + "@" + std::to_string(offset);
  s += " key=" + (key ? *key : std::string("<null>"));
  for (const auto& [k, v] : headers) s += " " + k + "=" + v;
  s += " value=" + (value ? *value : std::string("<null>"));
  return s;
}

void sort_by_partition_order(std::vector<KafkaRecord>& records) {
  std::stable_sort(records.begin(), records.end(), [](const KafkaRecord& a, const KafkaRecord& b) {
    return std::tie(a.topic, a.partition, a.offset) < std::tie(b.topic, b.partition, b.offset);
  });
}

std::string describe(const std::vector<KafkaRecord>& records) {
  std::string s;
  for (const auto& r : records) s += "  " + r.describe() + "\n";
  if (records.empty()) s = "  (no records)\n";
  return s;
}

rd_kafka_t* new_assign_consumer(const std::string& bootstrap,
                                const std::vector<std::pair<const char*, std::string>>& extra) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[512];
  std::vector<std::pair<const char*, std::string>> settings = {
      {"bootstrap.servers", bootstrap},
      {"group.id", unique_name("reader")},  // required by the API; never joined
      {"enable.auto.commit", "false"},
      {"enable.auto.offset.store", "false"},
      {"enable.partition.eof", "true"},
      {"auto.offset.reset", "earliest"},
      {"allow.auto.create.topics", "false"},
      {"log_level", "3"},
  };
  settings.insert(settings.end(), extra.begin(), extra.end());
  for (const auto& [k, v] : settings) {
    if (rd_kafka_conf_set(conf, k, v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(std::string("librdkafka config ") + k + ": " + err);
    }
  }
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("cannot create Kafka consumer: ") + err);
  }
  rd_kafka_poll_set_consumer(rk);
  return rk;
}

namespace {

/// A librdkafka consumer used only with assign(): no subscription, no commits.
class Consumer {
 public:
  explicit Consumer(const std::string& bootstrap,
                    const std::vector<std::pair<std::string, std::string>>& properties = {})
      : rk_(new_assign_consumer(bootstrap, settings(properties))) {}
  ~Consumer() {
    rd_kafka_assign(rk_, nullptr);
    rd_kafka_consumer_close(rk_);
    rd_kafka_destroy(rk_);
  }
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  /// Partition ids of every existing topic (all topics, so no request can auto-create one).
  /// Topics still being created (no partitions yet, or a topic-level error) are left out.
  std::map<std::string, std::vector<std::int32_t>> topics() {
    const rd_kafka_metadata_t* md = nullptr;
    const rd_kafka_resp_err_t err = rd_kafka_metadata(rk_, 1, nullptr, &md, 10'000);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      throw std::runtime_error(std::string("Kafka metadata request failed: ") +
                               rd_kafka_err2str(err));
    }
    std::map<std::string, std::vector<std::int32_t>> out;
    for (int i = 0; i < md->topic_cnt; ++i) {
      const rd_kafka_metadata_topic_t& t = md->topics[i];
      if (t.err != RD_KAFKA_RESP_ERR_NO_ERROR || t.partition_cnt <= 0) continue;
      auto& parts = out[t.topic];
      for (int j = 0; j < t.partition_cnt; ++j) parts.push_back(t.partitions[j].id);
      std::sort(parts.begin(), parts.end());
    }
    rd_kafka_metadata_destroy(md);
    return out;
  }

  /// (lo, hi) watermarks of a partition.
  std::pair<std::int64_t, std::int64_t> watermarks(const std::string& topic, std::int32_t p) {
    std::int64_t lo = 0;
    std::int64_t hi = 0;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    // Right after a broker restart (the fault tests) a partition may have no leader for a while:
    // retry those errors for up to 30 s.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (true) {
      err = rd_kafka_query_watermark_offsets(rk_, topic.c_str(), p, &lo, &hi, 10'000);
      const bool transient = err == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION ||
                             err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
                             err == RD_KAFKA_RESP_ERR__TRANSPORT ||
                             err == RD_KAFKA_RESP_ERR__TIMED_OUT;
      if (!transient || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      throw std::runtime_error("cannot query watermarks of " + topic + "/" + std::to_string(p) +
                               ": " + rd_kafka_err2str(err));
    }
    return {lo, hi};
  }

  /// Replaces the assignment; each partition starts at the given offset.
  void assign(const std::map<std::pair<std::string, std::int32_t>, std::int64_t>& from) {
    rd_kafka_topic_partition_list_t* list =
        rd_kafka_topic_partition_list_new(static_cast<int>(from.size()));
    for (const auto& [tp, offset] : from) {
      rd_kafka_topic_partition_list_add(list, tp.first.c_str(), tp.second)->offset = offset;
    }
    const rd_kafka_resp_err_t err = rd_kafka_assign(rk_, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      throw std::runtime_error(std::string("rd_kafka_assign failed: ") + rd_kafka_err2str(err));
    }
  }

  /// One poll. Returns a message (caller destroys it) or nullptr on timeout.
  rd_kafka_message_t* poll(int timeout_ms) { return rd_kafka_consumer_poll(rk_, timeout_ms); }

 private:
  static std::vector<std::pair<const char*, std::string>> settings(
      const std::vector<std::pair<std::string, std::string>>& properties) {
    std::vector<std::pair<const char*, std::string>> out = {
        {"topic.metadata.refresh.interval.ms", "500"}};
    for (const auto& [k, v] : properties) out.emplace_back(k.c_str(), v);
    return out;
  }

  rd_kafka_t* rk_ = nullptr;
};

KafkaRecord to_record(const rd_kafka_message_t* m) {
  KafkaRecord r;
  r.topic = rd_kafka_topic_name(m->rkt);
  r.partition = m->partition;
  r.offset = m->offset;
  rd_kafka_timestamp_type_t timestamp_type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
  r.timestamp_ms = rd_kafka_message_timestamp(m, &timestamp_type);
  if (m->key != nullptr) r.key = std::string(static_cast<const char*>(m->key), m->key_len);
  if (m->payload != nullptr) {
    r.value = std::string(static_cast<const char*>(m->payload), m->len);
  }
  rd_kafka_headers_t* hdrs = nullptr;
  // rd_kafka_message_headers takes a non-const message (it parses lazily).
  if (rd_kafka_message_headers(const_cast<rd_kafka_message_t*>(m), &hdrs) ==
          RD_KAFKA_RESP_ERR_NO_ERROR &&
      hdrs != nullptr) {
    const char* name = nullptr;
    const void* val = nullptr;
    std::size_t size = 0;
    for (std::size_t i = 0;
         rd_kafka_header_get_all(hdrs, i, &name, &val, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
      r.headers[name] = val ? std::string(static_cast<const char*>(val), size) : std::string();
      r.header_list.emplace_back(name, r.headers[name]);
    }
  }
  return r;
}

/// True for consumer errors that only mean "not there yet" (a topic being created).
bool transient(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR__PARTITION_EOF ||
         err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
         err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION || err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
         err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
         err == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION || err == RD_KAFKA_RESP_ERR__TRANSPORT;
}

}  // namespace

KafkaReader::KafkaReader(std::string bootstrap_servers,
                         std::vector<std::pair<std::string, std::string>> properties)
    : bootstrap_(std::move(bootstrap_servers)), properties_(std::move(properties)) {}

std::vector<KafkaRecord> KafkaReader::read_at_least(const std::vector<std::string>& topics,
                                                    std::size_t count,
                                                    std::chrono::milliseconds timeout) {
  Consumer consumer(bootstrap_, properties_);
  const auto deadline = Clock::now() + timeout;
  const std::set<std::string> wanted(topics.begin(), topics.end());
  std::set<std::string> found;
  // Next offset to read per assigned partition (BEGINNING until something was read).
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> next;
  std::vector<KafkaRecord> out;
  auto next_metadata = Clock::now();
  while (out.size() < count && Clock::now() < deadline) {
    if (found.size() < wanted.size() && Clock::now() >= next_metadata) {
      bool added = false;
      for (const auto& [topic, parts] : consumer.topics()) {
        if (!wanted.contains(topic) || found.contains(topic)) continue;
        found.insert(topic);
        for (std::int32_t p : parts) next[{topic, p}] = RD_KAFKA_OFFSET_BEGINNING;
        added = true;
      }
      if (added) consumer.assign(next);
      next_metadata = Clock::now() + 200ms;
    }
    rd_kafka_message_t* m = consumer.poll(100);
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      out.push_back(to_record(m));
      next[{out.back().topic, out.back().partition}] = out.back().offset + 1;
    } else if (!transient(m->err)) {
      std::cerr << "[harness] Kafka consumer: " << rd_kafka_message_errstr(m) << "\n";
    }
    rd_kafka_message_destroy(m);
  }
  return out;
}

std::vector<KafkaRecord> KafkaReader::read_all(const std::vector<std::string>& topics,
                                               std::chrono::milliseconds timeout) {
  Consumer consumer(bootstrap_, properties_);
  const auto deadline = Clock::now() + timeout;
  const auto existing = consumer.topics();
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> from;
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> end;  // high watermark
  for (const auto& topic : topics) {
    const auto it = existing.find(topic);
    if (it == existing.end()) continue;
    for (std::int32_t p : it->second) {
      const auto [lo, hi] = consumer.watermarks(topic, p);
      if (hi > lo) {
        from[{topic, p}] = RD_KAFKA_OFFSET_BEGINNING;
        end[{topic, p}] = hi;
      }
    }
  }
  std::vector<KafkaRecord> out;
  if (end.empty()) return out;
  consumer.assign(from);
  // A partition is done once a record or the end-of-partition event reaches its watermark.
  std::set<std::pair<std::string, std::int32_t>> done;
  while (done.size() < end.size()) {
    if (Clock::now() >= deadline) {
      throw std::runtime_error("read_all: could not read " + std::to_string(end.size()) +
                               " partitions to their high watermarks in time (" +
                               std::to_string(done.size()) + " done, " +
                               std::to_string(out.size()) + " records read)");
    }
    rd_kafka_message_t* m = consumer.poll(100);
    if (m == nullptr) continue;
    const std::pair<std::string, std::int32_t> tp{m->rkt ? rd_kafka_topic_name(m->rkt) : "",
                                                  m->partition};
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      const auto it = end.find(tp);
      if (it != end.end() && m->offset < it->second) out.push_back(to_record(m));
      if (it != end.end() && m->offset + 1 >= it->second) done.insert(tp);
    } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      const auto it = end.find(tp);
      if (it != end.end() && m->offset >= it->second) done.insert(tp);
    } else if (!transient(m->err)) {
      std::cerr << "[harness] Kafka consumer: " << rd_kafka_message_errstr(m) << "\n";
    }
    rd_kafka_message_destroy(m);
  }
  return out;
}

std::vector<std::string> KafkaReader::topics_with_prefix(const std::string& prefix) {
  Consumer consumer(bootstrap_, properties_);
  std::vector<std::string> out;
  for (const auto& [topic, parts] : consumer.topics()) {
    if (topic.starts_with(prefix)) out.push_back(topic);
  }
  return out;
}

// ------------------------------------------------------------------------------------- JSON

namespace {

simdjson::dom::element parse_at(simdjson::dom::parser& parser, const simdjson::padded_string& doc,
                                std::string_view pointer) {
  simdjson::dom::element root;
  if (const auto err = parser.parse(doc).get(root); err) {
    throw std::runtime_error(std::string("invalid JSON (") + simdjson::error_message(err) +
                             "): " + std::string(doc.data(), doc.size()));
  }
  if (pointer.empty()) return root;
  simdjson::dom::element el;
  if (const auto err = root.at_pointer(pointer).get(el); err) {
    throw std::runtime_error("no JSON element at " + std::string(pointer) + " (" +
                             simdjson::error_message(err) + ") in " +
                             std::string(doc.data(), doc.size()));
  }
  return el;
}

}  // namespace

std::string json_at(std::string_view document, std::string_view pointer) {
  simdjson::dom::parser parser;
  const simdjson::padded_string doc(document);
  return simdjson::minify(parse_at(parser, doc, pointer));
}

std::string json_string_at(std::string_view document, std::string_view pointer) {
  simdjson::dom::parser parser;
  const simdjson::padded_string doc(document);
  std::string_view s;
  if (parse_at(parser, doc, pointer).get_string().get(s)) {
    throw std::runtime_error("JSON element at " + std::string(pointer) + " is not a string in " +
                             std::string(document));
  }
  return std::string(s);
}

bool json_equal(std::string_view a, std::string_view b) {
  try {
    return json_at(a, "") == json_at(b, "");
  } catch (const std::exception&) {
    return false;
  }
}

// ------------------------------------------------------------------------------- walrelay

WalrelayConfig WalrelayConfig::for_test(const TestEnv& env, const std::string& name) {
  WalrelayConfig c;
  c.name = name;
  c.slot = name;
  c.prefix = name;
  c.conninfo = env.pg_conninfo;
  c.bootstrap = env.kafka_bootstrap;
  const auto dir = std::filesystem::temp_directory_path() / "walrelay-itest-state" / name;
  std::filesystem::remove_all(dir);
  c.state_dir = dir.string();
  return c;
}

std::string WalrelayConfig::to_yaml() const {
  // Double-quoted YAML scalars: only `"` and `\` need escaping for the values used here.
  auto q = [](const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
    return out;
  };
  std::string y;
  y += "name: " + q(name) + "\n";
  y += "source:\n";
  y += "  conninfo: " + q(conninfo) + "\n";
  y += "  slot: " + q(slot) + "\n";
  y += "  create_slot: true\n";
  y += "  status_interval: " + status_interval + "\n";
  if (!state_dir.empty()) y += "  state_dir: " + q(state_dir) + "\n";
  y += "kafka:\n";
  y += "  bootstrap_servers: " + q(bootstrap) + "\n";
  y += "topics:\n";
  y += "  prefix: " + q(prefix) + "\n";
  y += "tables:\n";
  for (const auto& t : tables) {
    y += "  - name: " + q(t.name) + "\n";
    if (!t.outbox_lines.empty()) {
      y += "    outbox:\n";
      for (const auto& line : t.outbox_lines) y += "      " + line + "\n";
    }
  }
  y += "snapshot:\n";
  y += "  mode: " + snapshot_mode + "\n";
  y += snapshot_lines;
  y += "log:\n";
  y += "  level: " + log_level + "\n";
  y += "  progress_interval: " + progress_interval + "\n";
  if (extra_yaml.find("metrics:") == std::string::npos) {
    y += "metrics:\n  listen: " + q(metrics_listen) + "\n";
  }
  y += extra_yaml;
  return y;
}

WalrelayProcess::WalrelayProcess(const std::string& config_yaml, std::string label)
    : label_(std::move(label)) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("walrelay-itest-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
  }
  dir_ = tmpl;
  config_path_ = dir_ / "walrelay.yaml";
  std::ofstream(config_path_, std::ios::binary) << config_yaml;
}

WalrelayProcess::~WalrelayProcess() {
  kill();
  if (::testing::Test::HasFailure()) {
    std::cerr << "\n----- " << label_ << " (" << WALRELAY_BINARY << "), files kept in "
              << dir_.string() << " -----\n"
              << "config:\n"
              << read_file_text(config_path_) << logs() << "----- end of " << label_ << " -----\n";
  } else {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

void WalrelayProcess::start(const std::vector<std::string>& args) {
  if (running()) throw std::runtime_error(label_ + " is already running");
  std::vector<std::string> argv_s = {WALRELAY_BINARY};
  if (args.empty()) {
    argv_s.insert(argv_s.end(), {"run", "--config", config_path_.string()});
  } else {
    argv_s.insert(argv_s.end(), args.begin(), args.end());
  }
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  const std::string out_path = (dir_ / "stdout.log").string();
  const std::string err_path = (dir_ / "stderr.log").string();
  std::string banner = "===== harness: start";
  for (const auto& a : argv_s) banner += " " + a;
  banner += " =====\n";
  append_file_text(out_path, banner);
  append_file_text(err_path, banner);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigset_t all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    throw std::runtime_error("cannot start " + argv_s[0] + ": " + std::strerror(rc));
  }
  pid_ = pid;
  last_exit_.reset();
}

int WalrelayProcess::reap(bool block) {
  if (pid_ < 0) return last_exit_.value_or(kNotRunning);
  int status = 0;
  pid_t r = -1;
  do {
    r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return kNotRunning;  // still running
  int code = kNotRunning;
  if (r == pid_) {
    if (WIFEXITED(status)) {
      code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      code = 128 + WTERMSIG(status);
    }
  }
  pid_ = -1;
  last_exit_ = code;
  return code;
}

bool WalrelayProcess::running() {
  if (pid_ < 0) return false;
  return reap(false) == kNotRunning && pid_ >= 0;
}

int WalrelayProcess::stop(int sig, std::chrono::milliseconds timeout) {
  if (!running()) return last_exit_.value_or(kNotRunning);
  ::kill(pid_, sig);
  return wait_exit(timeout);
}

int WalrelayProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (!wait_until([this] { return !running(); }, timeout, 20ms)) {
    ::kill(pid_, SIGKILL);
    reap(true);
    last_exit_ = kTimedOut;
    return kTimedOut;
  }
  return last_exit_.value_or(kNotRunning);
}

void WalrelayProcess::kill() {
  if (!running()) return;
  ::kill(pid_, SIGKILL);
  reap(true);
}

bool WalrelayProcess::wait_for_log(const std::string& text, std::chrono::milliseconds timeout) {
  wait_until([&] { return stderr_text().find(text) != std::string::npos || !running(); }, timeout);
  return stderr_text().find(text) != std::string::npos;
}

std::string WalrelayProcess::stdout_text() const {
  return read_file_text(dir_ / "stdout.log");
}

std::string WalrelayProcess::stderr_text() const {
  return read_file_text(dir_ / "stderr.log");
}

std::string WalrelayProcess::logs() const {
  return "stdout:\n" + stdout_text() + "stderr:\n" + stderr_text();
}

// ------------------------------------------------------------------------------ services

std::string services_state_dir() {
  const char* v = std::getenv("WALRELAY_TEST_STATE_DIR");
  return v != nullptr ? std::string(v) : std::string();
}

int run_service_script(const std::string& script, const std::string& args) {
  const std::string cmd = std::string("bash ") + WALRELAY_SERVICES_DIR + "/" + script + " " +
                          services_state_dir() + (args.empty() ? "" : " " + args) + " 2>&1";
  std::cout << "[services] $ " << cmd << std::endl;
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

KafkaOutage::~KafkaOutage() {
  if (stopped_) (void)run_service_script("kafka-ctl.sh", "start");
}

int KafkaOutage::stop() {
  stopped_ = true;
  return run_service_script("kafka-ctl.sh", "stop");
}

int KafkaOutage::start() {
  const int rc = run_service_script("kafka-ctl.sh", "start");
  if (rc == 0) stopped_ = false;
  return rc;
}

std::optional<long> proc_status_kb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(field + ":"))
      return std::strtol(line.c_str() + field.size() + 1, nullptr, 10);
  }
  return std::nullopt;
}

// ------------------------------------------------------------------------------- fixture

void IntegrationTest::SetUp() {
  auto env = load_test_env();
  ASSERT_TRUE(env.has_value()) << env.error();
  env_ = *env;
  name_ = unique_name(::testing::UnitTest::GetInstance()->current_test_info()->name());
  schema_ = name_;
  pg_ = std::make_unique<Pg>(env_.pg_conninfo);
  pg_->exec("CREATE SCHEMA " + sql_ident(schema_));
  kafka_ = std::make_unique<KafkaReader>(env_.kafka_bootstrap);
}

void IntegrationTest::TearDown() {
  if (!pg_) return;
  drop_slot_quietly(*pg_, name_);
  try {
    pg_->exec("DROP SCHEMA IF EXISTS " + sql_ident(schema_) + " CASCADE");
  } catch (const std::exception& e) {
    std::cerr << "[harness] could not drop schema " << schema_ << ": " << e.what() << "\n";
  }
}

WalrelayConfig IntegrationTest::make_config(std::vector<TableEntry> tables) const {
  WalrelayConfig c = WalrelayConfig::for_test(env_, name_);
  c.tables = std::move(tables);
  return c;
}

void IntegrationTest::start_streaming(WalrelayProcess& proc, const std::string& slot) {
  // Streaming = START_REPLICATION succeeded (walrelay logs "streaming: " right after it; the logs
  // accumulate over restarts, so count them). The slot alone is not enough: it is active already
  // while CREATE_REPLICATION_SLOT waits for running transactions to end, and a change committed
  // before the slot's consistent point is not in the slot.
  const auto streaming_lines = [&] {
    const std::string text = proc.stderr_text();
    std::size_t n = 0;
    for (auto pos = text.find(" streaming: "); pos != std::string::npos;
         pos = text.find(" streaming: ", pos + 1)) {
      ++n;
    }
    return n;
  };
  const std::size_t before = streaming_lines();
  proc.start();
  bool exited = false;
  const bool ok = wait_until([&] {
    if (!proc.running()) {
      exited = true;
      return true;
    }
    auto s = slot_state(*pg_, slot);
    return s && s->active && streaming_lines() > before;
  });
  if (!ok || exited) {
    throw std::runtime_error(
        exited ? "walrelay exited with code " + std::to_string(proc.last_exit_code().value_or(-2)) +
                     " before streaming from slot " + slot + "\n" + proc.logs()
               : "walrelay did not start streaming from slot " + slot + " in time\n" + proc.logs());
  }
}

bool IntegrationTest::stop_gracefully(WalrelayProcess& proc, const std::string& slot) {
  const int rc = proc.stop(SIGTERM);
  EXPECT_EQ(rc, 0) << "walrelay exit code after SIGTERM (-1 = did not exit in time)";
  const bool released = wait_slot_inactive(*pg_, slot);
  EXPECT_TRUE(released) << "slot " << slot << " still active after walrelay stopped";
  return rc == 0 && released;
}

// ------------------------------------------------------------------------------- http

int connect_local(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// One raw request; the whole response until the server closes.
HttpResult http_raw(int port, const std::string& request) {
  HttpResult r;
  const int fd = connect_local(port);
  if (fd < 0) return r;
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    all.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  if (all.rfind("HTTP/1.1 ", 0) == 0) r.status = std::stoi(all.substr(9, 3));
  if (const auto at = all.find("\r\n\r\n"); at != std::string::npos) r.body = all.substr(at + 4);
  return r;
}

HttpResult http_get(int port, const std::string& path) {
  return http_raw(port, "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

/// The port walrelay logged for its endpoint (metrics.listen 127.0.0.1:0 picks a free one).
std::optional<int> metrics_port(WalrelayProcess& proc) {
  if (!proc.wait_for_log("metrics and health on http://", 10s)) return std::nullopt;
  std::smatch m;
  const std::string log = proc.stderr_text();
  if (!std::regex_search(log, m,
                         std::regex(R"(metrics and health on http://127\.0\.0\.1:(\d+)/)"))) {
    return std::nullopt;
  }
  return std::stoi(m[1]);
}

}  // namespace walrelay::itest
