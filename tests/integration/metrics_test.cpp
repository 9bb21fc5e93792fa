// The metrics and health endpoint (issue "Operations"): counters equal what reached Kafka, /ready
// says no while standing by, and a hostile client cannot stall the stream.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace walrelay::itest {
namespace {

/// A sample's value from the exposition text (first match), or nullopt.
std::optional<std::string> sample(const std::string& text, const std::string& name_and_labels) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name_and_labels + " ", 0) == 0) return line.substr(name_and_labels.size() + 1);
  }
  return std::nullopt;
}

class MetricsTest : public IntegrationTest {
 protected:
  /// `walrelay_events_published_total{topic=…,op=…}` of this test's table `t`.
  [[nodiscard]] std::string published(const std::string& op) const {
    return "walrelay_events_published_total{topic=\"" + topic("t") + "\",op=\"" + op + "\"}";
  }
  /// Waits until /metrics on `port` serves each (op, count) of `expected` for table `t`; the last
  /// exposition text read.
  std::string wait_for_published(int port, const std::map<std::string, std::string>& expected) {
    std::string text;
    EXPECT_TRUE(wait_until(
        [&] {
          text = http_get(port, "/metrics").body;
          return std::all_of(expected.begin(), expected.end(), [&](const auto& e) {
            return sample(text, published(e.first)) == e.second;
          });
        },
        10s))
        << text;
    return text;
  }
};

// The table of metrics in docs/operations.md (section "Metrics and health") names every metric
// /metrics serves, with its type, and nothing else.
TEST_F(MetricsTest, TheReadmeTableListsEveryMetricServedWithItsType) {
  std::ifstream in(std::string(WALRELAY_FIXTURES_DIR) + "/../../docs/operations.md");
  ASSERT_TRUE(in) << "docs/operations.md not found";
  std::map<std::string, std::string> documented;  // name -> type
  bool in_table = false;
  const std::regex name_re("walrelay_[a-z0-9_]+");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("| metric | type |")) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (!line.starts_with("|")) break;
    if (line.starts_with("| ---")) continue;
    // | `name{labels}`, `other` | type | meaning |
    const auto first = line.find('|', 1);
    const auto second = line.find('|', first + 1);
    ASSERT_NE(second, std::string::npos) << line;
    const std::string names = line.substr(1, first - 1);
    std::string type = line.substr(first + 1, second - first - 1);
    type.erase(0, type.find_first_not_of(' '));
    type.erase(type.find_last_not_of(' ') + 1);
    for (std::sregex_iterator it(names.begin(), names.end(), name_re), end; it != end; ++it) {
      EXPECT_TRUE(documented.emplace(it->str(), type).second) << "listed twice: " << it->str();
    }
  }
  ASSERT_FALSE(documented.empty()) << "no metrics table in docs/operations.md";

  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY)");
  WalrelayProcess proc(make_config({{table("t")}}).to_yaml());
  start_streaming(proc, name_);
  pg_->exec("INSERT INTO " + table("t") + " VALUES (1)");  // a labelled series too
  ASSERT_EQ(kafka_->read_at_least({topic("t")}, 1).size(), 1u);
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  const std::string text = http_get(*port, "/metrics").body;
  std::map<std::string, std::string> served;  // from "# TYPE name type"
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("# TYPE ")) continue;
    std::istringstream words(line.substr(7));
    std::string name, type;
    words >> name >> type;
    served[name] = type;
  }
  EXPECT_EQ(documented, served) << text;
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

// Issue "Snapshots", "Progress and speed": while an incremental snapshot reads a table, /metrics
// serves the progress line's figures (rows so far, pg_class.reltuples, rows/s); once it is done,
// no snapshot series is left.
TEST_F(MetricsTest, ARunningIncrementalSnapshotServesItsProgressFigures) {
  constexpr int kRows = 5000;
  pg_->exec("CREATE TABLE " + table("big") + " (id int PRIMARY KEY, v text)");
  pg_->exec("INSERT INTO " + table("big") + " SELECT g, 'row ' || g FROM generate_series(1, " +
            std::to_string(kRows) + ") g");
  pg_->exec("ANALYZE " + table("big"));
  auto cfg = make_config({{table("big")}});
  cfg.snapshot_lines = "  chunk_size: 10\n";  // 500 chunks: long enough to be seen running
  cfg.progress_interval = "100ms";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  pg_->exec("SELECT pg_logical_emit_message(true, 'walrelay-signal', " +
            sql_literal("{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" +
                        table("big") + "\"],\"type\":\"incremental\"}}") +
            ")");
  const std::string labels = "{snapshot=\"incremental\",table=\"" + table("big") + "\"}";
  bool partway = false;
  bool rate = false;
  std::string estimate;
  std::string text;
  EXPECT_TRUE(wait_until(
      [&] {
        text = http_get(*port, "/metrics").body;
        if (auto rows = sample(text, "walrelay_snapshot_table_rows" + labels)) {
          const long n = std::stol(*rows);
          partway = partway || (n > 0 && n < kRows);
        }
        if (auto e = sample(text, "walrelay_snapshot_table_rows_estimated" + labels);
            e && *e != "0") {
          estimate = *e;
        }
        if (auto r = sample(text, "walrelay_snapshot_rows_per_second{snapshot=\"incremental\"}")) {
          rate = rate || std::stod(*r) > 0;
        }
        return partway && rate && !estimate.empty();
      },
      60s))
      << "partway " << partway << ", rate " << rate << ", estimate '" << estimate << "'\n"
      << text << proc.logs();
  EXPECT_EQ(estimate, std::to_string(kRows));  // ANALYZE counted every row
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("big") + " done", 120s))
      << proc.logs();
  EXPECT_TRUE(proc.wait_for_log("rows/s, ETA", 5s)) << proc.logs();  // the progress line's figures
  // The chunk number and the chunk size are two figures, not "chunk 143 of ~1000".
  EXPECT_TRUE(
      std::regex_search(proc.stderr_text(), std::regex("incremental snapshot of " + schema_ +
                                                       "\\.big at chunk [0-9]+ \\(chunks of 10 "
                                                       "rows; 1 table\\(s\\) to go\\)")))
      << proc.logs();
  // The retained WAL is "unknown" until the slot's restart_lsn was read, then bytes and LSN.
  const std::string log = proc.stderr_text();
  EXPECT_EQ(log.find("retained WAL -1"), std::string::npos) << proc.logs();
  EXPECT_EQ(log.find("(restart_lsn )"), std::string::npos) << proc.logs();
  EXPECT_TRUE(std::regex_search(
      log, std::regex("retained WAL [0-9]+ bytes \\(restart_lsn [0-9A-F]+/[0-9A-F]+\\)")))
      << proc.logs();
  EXPECT_TRUE(wait_until(
      [&] {
        text = http_get(*port, "/metrics").body;
        return !sample(text, "walrelay_snapshot_table_rows" + labels);
      },
      30s))
      << text;
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

// walrelay_events_published_total counts every record Kafka acknowledged, whichever source made
// it: a 3,000-row initial snapshot, then 500 streamed rows, gives r 3000 and c 500 (the snapshot's
// records were missing: /metrics said 500 in all). The bytes counter grows with both.
TEST_F(MetricsTest, InitialSnapshotRecordsCountAsPublished) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 'x' FROM generate_series(1, 3000) g");
  auto cfg = make_config({{table("t")}});
  cfg.snapshot_mode = "initial";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  ASSERT_TRUE(proc.wait_for_log("snapshot: complete")) << proc.logs();
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 'y' FROM generate_series(3001, 3500) g");
  ASSERT_EQ(kafka_->read_at_least({topic("t")}, 3500).size(), 3500u);
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  const std::string text = wait_for_published(*port, {{"r", "3000"}, {"c", "500"}});
  EXPECT_GT(std::stol(sample(text, "walrelay_published_bytes_total").value_or("0")), 3500 * 20);
  EXPECT_EQ(sample(text, "walrelay_delivery_errors_total"), "0") << text;
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

// delivery exactly_once: snapshot rows' acknowledgements are held until their Kafka transaction
// commits, and counted then, under their own topic and op (they were never counted).
TEST_F(MetricsTest, ExactlyOnceCountsSnapshotRecordsAtTheCommitUnderTheirTopic) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 'x' FROM generate_series(1, 300) g");
  auto cfg = make_config({{table("t")}});
  cfg.snapshot_mode = "initial";
  cfg.extra_yaml = "delivery: exactly_once\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 'y' FROM generate_series(301, 310) g");
  pg_->exec("DELETE FROM " + table("t") + " WHERE id <= 2");
  ASSERT_EQ(kafka_->read_at_least({topic("t")}, 314).size(), 314u);
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  const std::string text =
      wait_for_published(*port, {{"r", "300"}, {"c", "10"}, {"d", "2"}, {"tombstone", "2"}});
  EXPECT_EQ(text.find("walrelay_events_published_total{topic=\"\""), std::string::npos) << text;
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

TEST_F(MetricsTest, CountersMatchKafkaAndHealthFollowsTheSlot) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
  const auto cfg = make_config({{table("t")}});
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  EXPECT_EQ(http_get(*port, "/live").status, 200);
  for (int i = 0; i < 25; ++i) {
    pg_->exec("INSERT INTO " + table("t") + " VALUES (" + std::to_string(i) + ", 'x')");
  }
  pg_->exec("DELETE FROM " + table("t") + " WHERE id < 5");  // 5 deletes + 5 tombstones
  const auto recs = kafka_->read_at_least({topic("t")}, 35);
  ASSERT_EQ(recs.size(), 35u) << describe(recs);
  // Counters equal what Kafka holds (acknowledgements arrive with the records, poll briefly).
  const auto series = [&](const std::string& op) {
    return "walrelay_events_published_total{topic=\"" + topic("t") + "\",op=\"" + op + "\"}";
  };
  std::string text;
  EXPECT_TRUE(wait_until(
      [&] {
        text = http_get(*port, "/metrics").body;
        return sample(text, series("c")) == "25" && sample(text, series("d")) == "5" &&
               sample(text, series("tombstone")) == "5";
      },
      10s))
      << text;
  EXPECT_EQ(sample(text, "walrelay_streaming"), "1") << text;
  EXPECT_EQ(sample(text, "walrelay_standby"), "0") << text;
  EXPECT_EQ(sample(text, "walrelay_in_flight_events"), "0") << text;
  EXPECT_EQ(sample(text, "walrelay_lag_seconds"), "0") << text;
  EXPECT_NE(text.find("# TYPE walrelay_events_published_total counter"), std::string::npos);
  const HttpResult ready = http_get(*port, "/ready");
  EXPECT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(http_get(*port, "/nope").status, 404);

  // A second instance on the same slot stands by: alive, not ready, standby 1.
  WalrelayProcess second(cfg.to_yaml(), "walrelay (standby)");
  second.start();
  ASSERT_TRUE(second.wait_for_log("waiting as a hot standby", 30s)) << second.logs();
  const auto port2 = metrics_port(second);
  ASSERT_TRUE(port2) << second.logs();
  EXPECT_EQ(http_get(*port2, "/live").status, 200);
  const HttpResult not_ready = http_get(*port2, "/ready");
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_NE(not_ready.body.find("standing by"), std::string::npos) << not_ready.body;
  EXPECT_EQ(sample(http_get(*port2, "/metrics").body, "walrelay_standby"), "1");
  // `walrelay health` (the image's HEALTHCHECK): 0 for the ready instance, 1 for the standby.
  const auto health = [](int p) {
    WalrelayProcess probe("name: unused\n", "walrelay health");
    probe.start({"health", "--address", "127.0.0.1:" + std::to_string(p)});
    return probe.wait_exit();
  };
  EXPECT_EQ(health(*port), 0);
  EXPECT_EQ(health(*port2), 1);
  EXPECT_EQ(second.stop(), 0) << second.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

// A process's resident memory in kB (VmRSS in /proc/<pid>/status); 0 when unreadable.
std::size_t rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
  }
  return 0;
}

// A process's open file descriptors (entries of /proc/<pid>/fd).
std::size_t open_fds(pid_t pid) {
  std::size_t n = 0;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

// Whether the server closed the connection `fd` (an orderly or a reset close; nothing read).
bool closed_by_server(int fd) {
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// Issue 10: "The HTTP endpoint under abuse (garbage, oversized headers, 1,000 idle connections):
// the stream keeps flowing at the same rate and the process keeps its memory bound." The
// endpoint's bound (32 connections) holds: excess connections are closed at once, not queued;
// walrelay's descriptors and resident memory stay bounded; rows stream while the connections are
// held, at a rate compared (generously) with the same workload before the abuse.
TEST_F(MetricsTest, AHostileClientCannotStallTheStream) {
  constexpr int kIdle = 1000;
  // 1,000 client sockets in this process: its soft descriptor limit up to the hard one.
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit raised = saved;
  raised.rlim_cur = raised.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &raised), 0) << std::strerror(errno);
  struct RestoreLimit {
    rlimit limit;
    ~RestoreLimit() { (void)::setrlimit(RLIMIT_NOFILE, &limit); }
  } restore{saved};
  ASSERT_GE(raised.rlim_cur, static_cast<rlim_t>(kIdle + 256))
      << "the hard RLIMIT_NOFILE is too low for " << kIdle << " connections";

  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
  WalrelayProcess proc(make_config({{table("t")}}).to_yaml());
  start_streaming(proc, name_);
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  // 200 single-row transactions, until Kafka has all of them (a fresh consumer each time, so the
  // two measurements carry the same overhead).
  auto stream_rows = [&](int first) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = first; i < first + 200; ++i) {
      pg_->exec("INSERT INTO " + table("t") + " VALUES (" + std::to_string(i) + ", 'x')");
    }
    const auto recs = kafka_->read_at_least({topic("t")}, static_cast<std::size_t>(first) + 200);
    EXPECT_EQ(recs.size(), static_cast<std::size_t>(first) + 200)
        << "the stream stalled behind hostile HTTP clients";
    return std::chrono::steady_clock::now() - start;
  };
  const auto before = stream_rows(0);
  const pid_t pid = proc.pid();
  const std::size_t rss_before = rss_kb(pid);
  const std::size_t fds_before = open_fds(pid);
  ASSERT_GT(rss_before, 0u);

  // Oversized headers: refused (431) without reading on; garbage: closed.
  for (int i = 0; i < 50; ++i) {
    const HttpResult big = http_raw(
        *port, "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(64 * 1024, 'a') + "\r\n\r\n");
    EXPECT_TRUE(big.status == 431 || big.status == 0) << big.status;
    EXPECT_EQ(http_raw(*port, "\x16\x03\x01 not http at all\r\n\r\n").status, 0);
  }
  // 1,000 idle connections that never send a request, held open while rows stream.
  std::vector<int> idle;
  for (int i = 0; i < kIdle; ++i) {
    const int fd = connect_local(*port);
    if (fd >= 0) idle.push_back(fd);
  }
  EXPECT_EQ(idle.size(), static_cast<std::size_t>(kIdle)) << std::strerror(errno);
  const auto during = stream_rows(200);
  EXPECT_TRUE(proc.running()) << proc.logs();
  // The bound holds: all but the 32 connections the endpoint serves are closed by walrelay at
  // once (before their 5 s request timeout), and walrelay holds no descriptor for them.
  std::size_t closed = 0;
  EXPECT_TRUE(wait_until(
      [&] {
        closed = 0;
        for (int fd : idle) closed += closed_by_server(fd) ? 1 : 0;
        return closed + 32 >= idle.size();
      },
      4s))
      << closed << " of " << idle.size() << " closed by the server";
  const std::size_t fds_during = open_fds(pid);
  EXPECT_LE(fds_during, fds_before + 32 + 8) << fds_before << " descriptors before the abuse";
  // Memory bound: well under 32 MB more than before the abuse.
  const std::size_t rss_during = rss_kb(pid);
  EXPECT_LE(rss_during, rss_before + 32 * 1024)
      << "VmRSS " << rss_before << " kB before the abuse, " << rss_during << " kB during it";
  // The same rate, generously: the 200 rows took at most 4 times as long (plus 5 s) as before.
  EXPECT_LE(during, 4 * before + std::chrono::seconds(5))
      << std::chrono::duration_cast<std::chrono::milliseconds>(before).count() << " ms before, "
      << std::chrono::duration_cast<std::chrono::milliseconds>(during).count() << " ms during";
  for (int fd : idle) ::close(fd);
  // Once they are gone (or timed out) the endpoint answers again.
  EXPECT_TRUE(wait_until([&] { return http_get(*port, "/live").status == 200; }, 15s));
  // The listener is on loopback only (127.0.0.1 as configured).
  const std::string tcp = [] {
    std::ifstream in("/proc/net/tcp");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  char hex_port[8];
  std::snprintf(hex_port, sizeof hex_port, "%04X", *port);
  EXPECT_NE(tcp.find("0100007F:" + std::string(hex_port)), std::string::npos);
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

// `walrelay slot status|drop` on a live slot: the server's view and walrelay's record side by side;
// drop refuses without --yes.
TEST_F(MetricsTest, SlotCommandShowsTheLiveSlot) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY)");
  const auto cfg = make_config({{table("t")}});
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  pg_->exec("INSERT INTO " + table("t") + " VALUES (1)");
  ASSERT_EQ(kafka_->read_at_least({topic("t")}, 1).size(), 1u);
  WalrelayProcess status(cfg.to_yaml(), "walrelay slot status");
  status.start({"slot", "status", "--json", "--config", proc.config_path().string()});
  ASSERT_EQ(status.wait_exit(), 0) << status.logs();
  const std::string out = status.stdout_text();
  EXPECT_NE(out.find("\"slot\":\"" + name_ + "\""), std::string::npos) << out;
  // Booleans and numbers are JSON booleans and numbers; LSNs stay strings.
  EXPECT_NE(out.find("\"exists\":true,"), std::string::npos) << out;
  EXPECT_NE(out.find("\"active\":true,"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\"active_pid\":[0-9]+,"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\"retained_wal_bytes\":[0-9]+,"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\"unconfirmed_wal_bytes\":[0-9]+,"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\"safe_wal_size\":(null|-?[0-9]+),"))) << out;
  EXPECT_TRUE(
      std::regex_search(out, std::regex("\"confirmed_flush_lsn\":\"[0-9A-F]+/[0-9A-F]+\",")))
      << out;
  EXPECT_NE(out.find("\"plugin\":\"wal2json\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"record_confirmed\":"), std::string::npos) << out;
  WalrelayProcess drop(cfg.to_yaml(), "walrelay slot drop");
  drop.start({"slot", "drop", "--config", proc.config_path().string()});
  EXPECT_EQ(drop.wait_exit(), 2) << drop.logs();
  EXPECT_TRUE(slot_state(*pg_, name_).has_value());
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

// `walrelay tail`: what Kafka would receive for a few statements, as JSON lines, without Kafka
// and without touching the configured slot; --from-slot refuses an active slot.
TEST_F(MetricsTest, TailPrintsTheRecordsWithoutKafka) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
  const auto cfg = make_config({{table("t")}});
  WalrelayProcess tail(cfg.to_yaml(), "walrelay tail");
  tail.start({"tail", "--max", "3", "--config", tail.config_path().string()});
  ASSERT_TRUE(tail.wait_for_log("temporary slot", 30s)) << tail.logs();
  std::this_thread::sleep_for(500ms);  // START_REPLICATION after the slot (wal2json 2.5: twice)
  pg_->exec("INSERT INTO " + table("t") + " VALUES (1, 'a'), (2, 'b')");
  pg_->exec("DELETE FROM " + table("t") + " WHERE id = 1");
  ASSERT_EQ(tail.wait_exit(30s), 0) << tail.logs();
  std::istringstream in(tail.stdout_text());
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("{\"topic\":", 0) == 0) lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 3u) << tail.logs();
  EXPECT_EQ(json_string_at(lines[0], "/topic"), topic("t"));
  EXPECT_EQ(json_string_at(lines[0], "/key"), R"({"id":1})");
  EXPECT_EQ(json_string_at(json_string_at(lines[1], "/value"), "/after/v"), "b");
  EXPECT_EQ(json_string_at(lines[2], "/key"), R"({"id":1})");
  EXPECT_FALSE(slot_state(*pg_, name_).has_value()) << "tail created the configured slot";
  // --from-slot on a slot walrelay streams: refused.
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  WalrelayProcess busy(cfg.to_yaml(), "walrelay tail --from-slot");
  busy.start({"tail", "--from-slot", "--config", busy.config_path().string()});
  EXPECT_EQ(busy.wait_exit(30s), 1) << busy.logs();
  EXPECT_NE(busy.stderr_text().find("is active"), std::string::npos) << busy.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

// `walrelay tail --max 1` prints one record, also when the first transaction has more (its other
// changes arrive with the first one, and are handed over after it); the temporary slot is logged
// once (wal2json 2.5 refuses an option at START_REPLICATION and tail starts again on a new slot),
// with the LSN of the slot it reads, once it reads it.
TEST_F(MetricsTest, TailStopsAtMaxAndNamesItsSlotOnce) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
  const auto cfg = make_config({{table("t")}});
  WalrelayProcess tail(cfg.to_yaml(), "walrelay tail --max 1");
  tail.start({"tail", "--max", "1", "--config", tail.config_path().string()});
  ASSERT_TRUE(tail.wait_for_log("temporary slot", 30s)) << tail.logs();
  std::smatch m;
  const std::string started = tail.stderr_text();
  ASSERT_TRUE(std::regex_search(
      started, m, std::regex("temporary slot (walrelay_tail_[0-9]+) from ([0-9A-F]+/[0-9A-F]+)")))
      << tail.logs();
  const std::string slot = m[1];
  const std::string from = m[2];
  EXPECT_EQ(pg_->value("SELECT coalesce((SELECT confirmed_flush_lsn::text || ' ' || active::text "
                       "FROM pg_replication_slots WHERE slot_name = " +
                       sql_literal(slot) + "), 'none')"),
            from + " true")
      << tail.logs();
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 'row ' || g FROM generate_series(1, 500) g");
  pg_->exec("INSERT INTO " + table("t") + " VALUES (501, 'd')");
  ASSERT_EQ(tail.wait_exit(30s), 0) << tail.logs();
  std::istringstream in(tail.stdout_text());
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("{\"topic\":", 0) == 0) lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 1u) << tail.stdout_text() << tail.logs();
  EXPECT_EQ(json_string_at(lines[0], "/key"), R"({"id":1})");
  EXPECT_EQ(count_occurrences(tail.stderr_text(), "temporary slot"), 1u) << tail.logs();
}

// --log-format json: every line one JSON object, secrets redacted as in the text format.
TEST_F(MetricsTest, JsonLogLinesAreObjectsWithoutSecrets) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY)");
  auto cfg = make_config({{table("t")}});
  cfg.conninfo += " password=s3cr3t-json-pw";  // trust auth here: any password connects
  WalrelayProcess proc(cfg.to_yaml());
  proc.start({"--log-format", "json", "run", "--config", proc.config_path().string()});
  ASSERT_TRUE(proc.wait_for_log("streaming: server", 30s)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  std::istringstream in(proc.stderr_text());
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.find("harness:") != std::string::npos) continue;
    ++lines;
    EXPECT_EQ(line.rfind("{\"ts\":\"", 0), 0u) << line;
    EXPECT_EQ(line.back(), '}') << line;
    EXPECT_NE(line.find("\"level\":\""), std::string::npos) << line;
    EXPECT_TRUE(json_equal(line, line)) << "not JSON: " << line;
  }
  EXPECT_GT(lines, 3);
  EXPECT_EQ(proc.stderr_text().find("s3cr3t-json-pw"), std::string::npos) << proc.logs();
}

}  // namespace
}  // namespace walrelay::itest
