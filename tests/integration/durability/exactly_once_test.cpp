// delivery exactly_once (issue 11) on real PostgreSQL and real Kafka, beyond the SIGKILL loop of
// crash_test.cpp (DurabilityTest.ExactlyOnceCrashLoopHasNoDuplicates):
//   - a broker restart mid-stream,
//   - a commit that cannot complete (the broker stopped under an open Kafka transaction) leaves
//     the event loop free: /live and /metrics answer at once throughout; SIGTERM then waits for
//     the commit, a second signal aborts it,
//   - so does a session's start (init_transactions, the positions topic) and an abort while the
//     broker is away; SIGTERM during such a start stops walrelay at once,
//   - a zombie: the holder is SIGSTOPped, a standby takes over and publishes, the old one is
//     SIGCONTed: it is fenced (KIP-98) and exits with code 8,
//   - a PostgreSQL transaction larger than exactly_once.max_transaction_events, SIGKILLed after
//     part of it was committed to Kafka and resumed from the position inside it,
//   - SIGKILLs during an initial snapshot, the incremental snapshot that finishes it and a
//     signalled incremental snapshot (the snapshot progress travels in the position record).
// In each, a read_committed consumer (librdkafka's default isolation.level, which the harness
// keeps) sees every committed row exactly once and nothing else.
//
// These restart the shared Kafka or kill processes and measure the slot, so they run alone
// (RUN_SERIAL, tests/integration/CMakeLists.txt).

#include <gtest/gtest.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "walrelay/core/lsn.hpp"

namespace walrelay::itest {
namespace {

using Clock = std::chrono::steady_clock;

Lsn confirmed(Pg& pg, const std::string& slot) {
  const auto s = slot_state(pg, slot);
  if (!s || !s->confirmed_flush_lsn) return Lsn{};
  return Lsn::parse(*s->confirmed_flush_lsn).value_or(Lsn{});
}

/// One-row transactions into `table` (id bigint primary key), ids 1, 2, ... from one connection.
class Writer {
 public:
  Writer(std::string conninfo, std::string table, long first_id = 1)
      : conninfo_(std::move(conninfo)),
        table_(std::move(table)),
        first_(first_id),
        next_(first_id) {}
  ~Writer() { stop(); }
  void start() {
    thread_ = std::thread([this] {
      std::unique_ptr<Pg> pg;
      while (!stop_) {
        try {
          if (!pg) pg = std::make_unique<Pg>(conninfo_);
          pg->exec("INSERT INTO " + table_ + " (id, v) VALUES (" + std::to_string(next_.load()) +
                   ", 1)");
          ++next_;
        } catch (const PgError&) {
          pg.reset();  // PostgreSQL restarting: retry (the same id: it did not commit, or it did
                       // and the retry fails on the key and moves on below)
          std::this_thread::sleep_for(100ms);
          try {
            Pg check(conninfo_);
            if (check.scalar("SELECT 1 FROM " + table_ +
                             " WHERE id = " + std::to_string(next_.load()))) {
              ++next_;
            }
          } catch (const PgError&) {
          }
        }
        std::this_thread::sleep_for(3ms);
      }
    });
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  [[nodiscard]] long committed() const { return next_ - first_; }
  [[nodiscard]] long next_id() const { return next_; }
  bool wait_more(long n, std::chrono::milliseconds timeout = 60s) const {
    const long target = committed() + n;
    return wait_until([&] { return committed() >= target; }, timeout);
  }

 private:
  std::string conninfo_;
  std::string table_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  long first_;
  std::atomic<long> next_;
};

class ExactlyOnceTest : public IntegrationTest {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    pg_->exec("CREATE TABLE " + table("t") + " (id bigint PRIMARY KEY, v int NOT NULL)");
  }

  [[nodiscard]] std::string config(const std::string& commit_interval = "100ms",
                                   long max_events = 10000) const {
    WalrelayConfig cfg = make_config({{table("t")}});
    cfg.extra_yaml =
        "delivery: exactly_once\nexactly_once:\n  commit_interval: " + commit_interval +
        "\n  max_transaction_events: " + std::to_string(max_events) + "\n";
    return cfg.to_yaml();
  }

  /// delivery exactly_once with an initial snapshot of `names` (table() suffixes) in chunks of
  /// `chunk_size` rows. make_config starts the state directory afresh.
  [[nodiscard]] WalrelayConfig snapshot_config(const std::vector<std::string>& names,
                                               int chunk_size) const {
    std::vector<TableEntry> tables;
    for (const auto& n : names) tables.push_back({table(n)});
    WalrelayConfig cfg = make_config(tables);
    cfg.snapshot_mode = "initial";
    cfg.snapshot_lines = "  chunk_size: " + std::to_string(chunk_size) + "\n";
    cfg.extra_yaml = "delivery: exactly_once\n";
    return cfg;
  }

  /// snapshot_config in chunks of 100 rows and at most 300 events in flight: slow enough to be
  /// killed in its middle. make_config starts the state directory afresh; `state_dir` (when given)
  /// receives it.
  [[nodiscard]] std::string slow_snapshot_yaml(const std::vector<std::string>& names,
                                               std::string* state_dir = nullptr) const {
    const WalrelayConfig cfg = snapshot_config(names, 100);
    if (state_dir != nullptr) *state_dir = cfg.state_dir;
    std::string yaml = cfg.to_yaml();
    const std::string anchor = "  bootstrap_servers: ";
    yaml.insert(yaml.find('\n', yaml.find(anchor)) + 1, "  max_in_flight_events: 300\n");
    return yaml;
  }

  /// `topic` holds `rows` distinct keys, none of them twice.
  void expect_each_key_once(const std::string& topic, long rows, const std::string& logs) {
    std::map<std::string, int> reads;
    for (const auto& r : kafka_->read_all({topic}, 60s)) ++reads[r.key.value_or("")];
    std::size_t twice = 0;
    for (const auto& [key, n] : reads) twice += n > 1 ? 1 : 0;
    EXPECT_EQ(static_cast<long>(reads.size()), rows) << logs;
    EXPECT_EQ(twice, 0u);
  }

  /// Waits until the slot confirmed everything written so far (so the last instance published
  /// and committed it all).
  bool caught_up(WalrelayProcess& proc, std::chrono::milliseconds timeout = 120s) {
    const Lsn end = Lsn::parse(pg_->value("SELECT pg_current_wal_lsn()::text")).value_or(Lsn{});
    return wait_until([&] { return !proc.running() || confirmed(*pg_, name_) >= end; }, timeout,
                      200ms) &&
           proc.running();
  }

  /// Starts `standby` (same configuration as the holder, whose process is `holder_pid`), waits
  /// until it stands by, then pauses the holder (SIGSTOP) and ends its walsender (as
  /// wal_sender_timeout would, only sooner): the standby takes the slot and streams.
  void hand_slot_to_standby(pid_t holder_pid, WalrelayProcess& standby) {
    standby.start();
    ASSERT_TRUE(standby.wait_for_log("waiting as a hot standby")) << standby.logs();
    ASSERT_EQ(::kill(holder_pid, SIGSTOP), 0);
    pg_->exec(
        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = " +
        sql_literal(name_));
    ASSERT_TRUE(standby.wait_for_log(" info streaming: ", 30s)) << standby.logs();
  }

  /// Starts `proc` streaming and `writer` writing, and waits until `writes` more rows are
  /// committed and at least `in_kafka` records of the table are in Kafka.
  void stream_under_writes(WalrelayProcess& proc, Writer& writer, long writes,
                           std::size_t in_kafka) {
    start_streaming(proc, name_);
    writer.start();
    ASSERT_TRUE(writer.wait_more(writes));
    ASSERT_GE(kafka_->read_at_least({topic("t")}, in_kafka, 60s).size(), in_kafka) << proc.logs();
  }

  /// Waits until the last committed position record is inside a PostgreSQL transaction (part of
  /// a transaction larger than max_transaction_events is in Kafka); false after `timeout`.
  bool committed_inside_a_transaction(std::chrono::milliseconds timeout) {
    const std::string positions = name_ + ".walrelay.positions";
    return wait_until(
        [&] {
          const auto recs = kafka_->read_all({positions}, 30s);
          if (recs.empty() || !recs.back().value) return false;
          return recs.back().value->find("\"index\":-1") == std::string::npos;
        },
        timeout, 50ms);
  }

  /// Stops the broker under a writer until a commit stalls, then sends SIGTERM (and, with
  /// `second_signal`, another one a second later), starts the broker again and the process too.
  void sigterm_during_a_stalled_commit(bool second_signal) {
    WalrelayProcess proc(config(), "walrelay (exactly once, SIGTERM during a stalled commit)");
    Writer writer(env_.pg_conninfo, table("t"));
    ASSERT_NO_FATAL_FAILURE(stream_under_writes(proc, writer, 100, 50));
    KafkaOutage kafka_outage;
    ASSERT_EQ(kafka_outage.stop(), 0);
    ASSERT_TRUE(proc.wait_for_log("commit_transaction has not completed after", 30s))
        << proc.logs();
    writer.stop();
    ASSERT_EQ(::kill(proc.pid(), SIGTERM), 0);
    if (second_signal) {
      std::this_thread::sleep_for(1s);
      const auto signalled = Clock::now();
      ASSERT_EQ(::kill(proc.pid(), SIGTERM), 0);
      EXPECT_EQ(proc.wait_exit(60s), 0) << proc.logs();
      std::cout
          << "[eos] exited "
          << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - signalled).count()
          << " ms after the second signal" << std::endl;
      EXPECT_NE(proc.stderr_text().find("not waiting for the Kafka commit"), std::string::npos)
          << proc.logs();
      ASSERT_EQ(kafka_outage.start(), 0);
    } else {
      std::this_thread::sleep_for(2s);
      EXPECT_TRUE(proc.running()) << "stopped without waiting for the commit\n" << proc.logs();
      ASSERT_EQ(kafka_outage.start(), 0);
      EXPECT_EQ(proc.wait_exit(90s), 0) << proc.logs();
      // The broker, back, either completes the commit or refuses it with an abortable error (a
      // restarted broker may answer OUT_OF_ORDER_SEQUENCE_NUMBER): then the transaction is aborted
      // and the next start publishes it again. Either way exactly once holds (checked below).
      const std::string logs = proc.stderr_text();
      const bool committed = logs.find("commit_transaction completed after") != std::string::npos;
      const bool aborted =
          logs.find("the transaction is aborted and the next start publishes it again") !=
          std::string::npos;
      EXPECT_TRUE(committed || aborted) << proc.logs();
      std::cout << "[eos] the stalled commit " << (committed ? "completed" : "was aborted")
                << " once the broker was back" << std::endl;
    }
    proc.start();
    EXPECT_TRUE(caught_up(proc)) << proc.logs();
    ASSERT_TRUE(stop_gracefully(proc, name_));
    expect_exactly_once(second_signal ? "second signal during a stalled commit"
                                      : "SIGTERM during a stalled commit");
  }

  /// Probes /live and /metrics on `port` `probes` times, a second apart: each must answer 200
  /// within 2 s (the event loop is not blocked). Returns how many probes did.
  static int probe_responsive(int port, const std::string& during, int probes = 5) {
    int quick = 0;
    for (int i = 0; i < probes; ++i) {
      const auto started = Clock::now();
      const HttpResult live = http_get(port, "/live");
      const HttpResult metrics = http_get(port, "/metrics");
      const auto took =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
      std::cout << "[eos] " << during << ": /live " << live.status << " and /metrics "
                << metrics.status << " in " << took.count() << " ms" << std::endl;
      EXPECT_EQ(live.status, 200) << during;
      EXPECT_EQ(metrics.status, 200) << during;
      EXPECT_LT(took, 2s) << during << ": the event loop was blocked";
      if (live.status == 200 && metrics.status == 200 && took < 2s) ++quick;
      if (i + 1 < probes) std::this_thread::sleep_for(1s);
    }
    return quick;
  }

  /// The records walrelay had acknowledged by Kafka (walrelay_events_published_total, summed over
  /// its labels), -1 when /metrics does not answer.
  static long acknowledged(int port) {
    const HttpResult metrics = http_get(port, "/metrics");
    if (metrics.status != 200) return -1;
    long sum = 0;
    std::istringstream lines(metrics.body);
    for (std::string line; std::getline(lines, line);) {
      if (!line.starts_with("walrelay_events_published_total{")) continue;
      sum += std::stol(line.substr(line.rfind(' ') + 1));
    }
    return sum;
  }

  /// Waits until a read_committed consumer sees as many records in the topic as the table has
  /// rows: the commit's transaction markers reach the partitions shortly after it (a commit right
  /// before the stop may not be readable on every partition yet).
  void wait_until_readable() {
    const auto rows =
        static_cast<std::size_t>(std::stol(pg_->value("SELECT count(*) FROM " + table("t"))));
    (void)kafka_->read_at_least({topic("t")}, rows, 30s);
  }

  /// Every row of the table is in the topic exactly once (by id header and by key), nothing else.
  void expect_exactly_once(const std::string& what) {
    const long rows = std::stol(pg_->value("SELECT count(*) FROM " + table("t")));
    const auto records = kafka_->read_all({topic("t")}, 120s);
    std::map<std::string, int> by_key;
    std::set<std::string> ids;
    std::size_t duplicate_ids = 0;
    for (const auto& r : records) {
      ++by_key[r.key.value_or("<null>")];
      if (!ids.insert(r.header("id")).second) ++duplicate_ids;
    }
    std::size_t keys_twice = 0;
    for (const auto& [k, n] : by_key) keys_twice += n > 1 ? 1 : 0;
    std::cout << "[eos] " << what << ": rows " << rows << ", records " << records.size()
              << ", duplicate ids " << duplicate_ids << ", keys seen more than once " << keys_twice
              << std::endl;
    EXPECT_EQ(static_cast<long>(records.size()), rows) << what;
    EXPECT_EQ(static_cast<long>(by_key.size()), rows) << what << ": a row's event is missing";
    EXPECT_EQ(duplicate_ids, 0u) << what;
    EXPECT_EQ(keys_twice, 0u) << what;
  }
};

TEST_F(ExactlyOnceTest, BrokerRestartMidStreamStaysExactlyOnce) {
  WalrelayProcess proc(config(), "walrelay (exactly once, broker restart)");
  Writer writer(env_.pg_conninfo, table("t"));
  ASSERT_NO_FATAL_FAILURE(stream_under_writes(proc, writer, 300, 100));

  KafkaOutage kafka_outage;  // whatever happens, the broker runs again at the end
  ASSERT_EQ(kafka_outage.stop(), 0);
  ASSERT_TRUE(writer.wait_more(300));
  std::this_thread::sleep_for(3s);
  ASSERT_EQ(kafka_outage.start(), 0);
  ASSERT_TRUE(writer.wait_more(300));
  writer.stop();
  EXPECT_TRUE(caught_up(proc, 180s)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  expect_exactly_once("broker restart");
}

// The commit of a Kafka transaction runs in slices of at most 100 ms on the event loop: while the
// broker is away and the commit cannot complete, the health and metrics endpoints (and the standby
// status updates) are served as usual; once the broker is back the commit completes (or, after its
// 60 s budget, is aborted and replayed) and everything is in Kafka exactly once.
TEST_F(ExactlyOnceTest, StalledCommitLeavesTheEventLoopResponsive) {
  WalrelayProcess proc(config("100ms", 1000), "walrelay (exactly once, stalled commit)");
  Writer writer(env_.pg_conninfo, table("t"));
  ASSERT_NO_FATAL_FAILURE(stream_under_writes(proc, writer, 100, 50));
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  // Also a transaction split over Kafka transactions (ids apart from the writer's): the broker
  // goes away once part of it is committed, so (unless it was quicker) a split's commit stalls
  // with the rest of the transaction waiting.
  pg_->exec("INSERT INTO " + table("t") +
            " SELECT g, 1 FROM generate_series(1000000001, 1000030000) g");
  const bool inside = committed_inside_a_transaction(60s);
  std::cout << "[eos] broker stopped "
            << (inside ? "inside the split transaction" : "after the split transaction")
            << std::endl;

  KafkaOutage kafka_outage;  // whatever happens, the broker runs again at the end
  ASSERT_EQ(kafka_outage.stop(), 0);
  // The writer goes on: a Kafka transaction is opened and its commit cannot complete.
  ASSERT_TRUE(proc.wait_for_log("commit_transaction has not completed after", 30s)) << proc.logs();
  constexpr int kProbes = 5;
  EXPECT_EQ(probe_responsive(*port, "during the outage", kProbes), kProbes) << proc.logs();
  EXPECT_TRUE(proc.running()) << proc.logs();
  ASSERT_EQ(kafka_outage.start(), 0);
  ASSERT_TRUE(writer.wait_more(200));
  writer.stop();
  EXPECT_TRUE(caught_up(proc, 180s)) << proc.logs();
  const std::string log = proc.stderr_text();
  std::cout << "[eos] the stalled commit "
            << (log.find("commit_transaction completed after") != std::string::npos
                    ? "completed once the broker was back"
                    : "was aborted and replayed")
            << std::endl;
  ASSERT_TRUE(stop_gracefully(proc, name_));
  expect_exactly_once("stalled commit");
}

// SIGTERM while a commit cannot complete: the stopping process waits for it (blocking: it is
// stopping anyway) and commits it once the broker is back (or aborts it, when the broker answers
// with an abortable error); a second signal aborts it at once.
// Either way the next start publishes exactly once.
TEST_F(ExactlyOnceTest, SigtermDuringAStalledCommitCommitsItOnceTheBrokerIsBack) {
  sigterm_during_a_stalled_commit(/*second_signal=*/false);
}

TEST_F(ExactlyOnceTest, SecondSignalDuringAStalledCommitAbortsIt) {
  sigterm_during_a_stalled_commit(/*second_signal=*/true);
}

// A session's start runs on the event loop too: init_transactions in slices of at most 100 ms
// (30 s overall), the positions topic's creation and reading polled on a timer. Started again
// while the broker is away, walrelay answers /live and /metrics at once throughout (the first
// session's start fails after 30 s and the next one begins); once the broker is back it streams
// and everything is in Kafka exactly once.
TEST_F(ExactlyOnceTest, ASessionStartingWithKafkaDownLeavesTheEventLoopResponsive) {
  WalrelayProcess proc(config(), "walrelay (exactly once, session start without Kafka)");
  Writer writer(env_.pg_conninfo, table("t"));
  ASSERT_NO_FATAL_FAILURE(stream_under_writes(proc, writer, 100, 50));
  writer.stop();
  ASSERT_TRUE(stop_gracefully(proc, name_));

  KafkaOutage kafka_outage;  // whatever happens, the broker runs again at the end
  ASSERT_EQ(kafka_outage.stop(), 0);
  Writer more(env_.pg_conninfo, table("t"), writer.next_id());
  more.start();
  WalrelayProcess again(config(), "walrelay (exactly once, started again without Kafka)");
  again.start();
  const auto port = metrics_port(again);
  ASSERT_TRUE(port) << again.logs();
  ASSERT_TRUE(again.wait_for_log("init_transactions has not completed after", 30s)) << again.logs();
  constexpr int kProbes = 5;
  EXPECT_EQ(probe_responsive(*port, "while the session starts without Kafka", kProbes), kProbes)
      << again.logs();
  EXPECT_TRUE(again.running()) << again.logs();
  ASSERT_EQ(kafka_outage.start(), 0);
  ASSERT_TRUE(again.wait_for_log(" info streaming: ", 120s)) << again.logs();
  ASSERT_TRUE(more.wait_more(200));
  more.stop();
  EXPECT_TRUE(caught_up(again, 180s)) << again.logs();
  ASSERT_TRUE(stop_gracefully(again, name_));
  wait_until_readable();
  expect_exactly_once("session start without Kafka");
}

// SIGTERM while a session starts (init_transactions cannot complete: the broker is away) stops
// walrelay at once, gracefully (exit 0): nothing was published or confirmed by that session.
TEST_F(ExactlyOnceTest, SigtermWhileASessionStartsWithKafkaDownStopsAtOnce) {
  WalrelayProcess proc(config(), "walrelay (exactly once, SIGTERM while a session starts)");
  // The slot first (walrelay creates no slot while Kafka does not answer).
  start_streaming(proc, name_);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  {
    KafkaOutage kafka_outage;  // whatever happens, the broker runs again at the end
    ASSERT_EQ(kafka_outage.stop(), 0);
    proc.start();
    ASSERT_TRUE(proc.wait_for_log("init_transactions has not completed after", 60s)) << proc.logs();
    pg_->exec("INSERT INTO " + table("t") + " SELECT g, 1 FROM generate_series(1, 500) g");
    const auto signalled = Clock::now();
    EXPECT_EQ(proc.stop(SIGTERM, 10s), 0) << proc.logs();
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - signalled);
    std::cout << "[eos] exited " << took.count() << " ms after SIGTERM" << std::endl;
    EXPECT_LT(took, 5s) << proc.logs();
    EXPECT_NE(proc.stderr_text().find("flushing and stopping"), std::string::npos) << proc.logs();
    ASSERT_EQ(kafka_outage.start(), 0);
  }
  // The next start publishes the rows written since the slot was created, exactly once.
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 1 FROM generate_series(501, 1000) g");
  start_streaming(proc, name_);
  EXPECT_TRUE(caught_up(proc, 180s)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  wait_until_readable();
  expect_exactly_once("SIGTERM while a session starts");
}

// An abort runs on the event loop too, in slices of at most 100 ms (10 s overall): the session
// ends (its walsender is terminated) while a Kafka transaction is open and the broker is away, so
// abort_transaction cannot complete; /live and /metrics answer at once throughout, and after the
// broker is back the replay is exactly once.
TEST_F(ExactlyOnceTest, AnAbortWithKafkaDownLeavesTheEventLoopResponsive) {
  // A long commit interval: the Kafka transaction is open, not committing, when the session ends.
  WalrelayProcess proc(config("45s"), "walrelay (exactly once, abort without Kafka)");
  Writer writer(env_.pg_conninfo, table("t"));
  start_streaming(proc, name_);
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  writer.start();
  ASSERT_TRUE(writer.wait_more(100));
  // Records of the open Kafka transaction acknowledged: its partitions are registered with the
  // transaction coordinator, so aborting it needs the coordinator (an EndTxn request).
  ASSERT_TRUE(wait_until([&] { return acknowledged(*port) >= 50; }, 30s, 100ms)) << proc.logs();
  {
    KafkaOutage kafka_outage;  // whatever happens, the broker runs again at the end
    ASSERT_EQ(kafka_outage.stop(), 0);
    ASSERT_TRUE(writer.wait_more(50));
    EXPECT_EQ(proc.stderr_text().find("commit_transaction"), std::string::npos)
        << "a commit started before the session ended\n"
        << proc.logs();
    pg_->exec(
        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = " +
        sql_literal(name_));
    ASSERT_TRUE(proc.wait_for_log("abort_transaction has not completed after", 30s)) << proc.logs();
    constexpr int kProbes = 5;
    EXPECT_EQ(probe_responsive(*port, "while the transaction is aborted without Kafka", kProbes),
              kProbes)
        << proc.logs();
    EXPECT_TRUE(proc.running()) << proc.logs();
    writer.stop();
    ASSERT_EQ(kafka_outage.start(), 0);
  }
  // SIGTERM now (the next session may be starting), then a start with the usual commit interval.
  EXPECT_EQ(proc.stop(SIGTERM, 120s), 0) << proc.logs();
  WalrelayProcess again(config(), "walrelay (exactly once, after the abort)");
  start_streaming(again, name_);
  EXPECT_TRUE(caught_up(again, 180s)) << again.logs();
  ASSERT_TRUE(stop_gracefully(again, name_));
  wait_until_readable();
  expect_exactly_once("abort without Kafka");
}

TEST_F(ExactlyOnceTest, AWokenZombieHolderIsFencedOrStandsByAndPublishesNothing) {
  // A long commit interval keeps a Kafka transaction open when A is paused.
  const std::string yaml = config("2s");
  WalrelayProcess a(yaml, "walrelay-A");
  start_streaming(a, name_);
  const pid_t a_pid = a.pid();
  ASSERT_GT(a_pid, 0);
  Writer writer(env_.pg_conninfo, table("t"));
  writer.start();
  ASSERT_TRUE(writer.wait_more(200));
  WalrelayProcess b(yaml, "walrelay-B");
  ASSERT_NO_FATAL_FAILURE(hand_slot_to_standby(a_pid, b));
  ASSERT_TRUE(writer.wait_more(200));
  ASSERT_GE(
      kafka_->read_at_least({topic("t")}, static_cast<std::size_t>(writer.committed() / 2), 60s)
          .size(),
      1u);

  ASSERT_EQ(::kill(a_pid, SIGCONT), 0);
  // Woken, A publishes nothing more, whichever it notices first: its producer fenced by B's
  // (it stops with exit 8), or its replication connection gone (its session ends, its open Kafka
  // transaction is aborted, and it waits as the standby: the slot is B's). Both happen, by timing.
  const std::string standby_line = "waiting as a hot standby";
  bool fenced = false;
  bool standby = false;
  for (auto deadline = std::chrono::steady_clock::now() + 60s;
       std::chrono::steady_clock::now() < deadline && !fenced && !standby;
       std::this_thread::sleep_for(200ms)) {
    if (!a.running()) {
      fenced = a.last_exit_code() == 8;
      break;
    }
    standby = a.stderr_text().find(standby_line) != std::string::npos;
  }
  EXPECT_TRUE(fenced || standby) << "the woken zombie neither stopped as fenced nor stood by\n"
                                 << a.logs();
  if (fenced) {
    EXPECT_NE(a.stderr_text().find("fenced"), std::string::npos) << a.logs();
  }
  ASSERT_TRUE(writer.wait_more(100));
  writer.stop();
  EXPECT_TRUE(caught_up(b)) << b.logs();
  if (a.running()) {  // the standby goes first, so B keeps the slot to the end
    EXPECT_EQ(a.stop(), 0) << a.logs();
  }
  ASSERT_TRUE(stop_gracefully(b, name_));
  expect_exactly_once("zombie fencing");
}

// Hot standby both ways: A streams, B waits; A is paused while idle and loses the slot to B (B's
// producer fences A's transactional.id); A wakes up and waits as the standby; B is killed and A
// takes over again, with a new producer that fences B's: A goes on publishing (it must not stop
// as fenced), and every row is in Kafka once.
TEST_F(ExactlyOnceTest, StandbyTakeoverBothWaysKeepsPublishing) {
  const std::string yaml = config();
  WalrelayProcess a(yaml, "walrelay-A");
  start_streaming(a, name_);
  const pid_t a_pid = a.pid();
  ASSERT_GT(a_pid, 0);
  long next = 1;
  {
    Writer w(env_.pg_conninfo, table("t"), next);
    w.start();
    ASSERT_TRUE(w.wait_more(200));
    w.stop();
    next = w.next_id();
  }
  EXPECT_TRUE(caught_up(a)) << a.logs();  // idle: no Kafka transaction open
  WalrelayProcess b(yaml, "walrelay-B");
  ASSERT_NO_FATAL_FAILURE(hand_slot_to_standby(a_pid, b));
  Writer writer(env_.pg_conninfo, table("t"), next);
  writer.start();
  ASSERT_TRUE(writer.wait_more(200));
  ASSERT_EQ(::kill(a_pid, SIGCONT), 0);
  ASSERT_TRUE(a.wait_for_log("waiting as a hot standby", 30s)) << a.logs();
  ASSERT_TRUE(writer.wait_more(200));
  EXPECT_TRUE(a.running()) << a.logs();
  b.kill();
  ASSERT_TRUE(
      wait_until([&] { return count_occurrences(a.stderr_text(), " info streaming: ") >= 2; }, 30s))
      << a.logs();
  ASSERT_TRUE(writer.wait_more(300));
  writer.stop();
  EXPECT_TRUE(caught_up(a)) << a.logs();
  EXPECT_TRUE(a.running()) << "A stopped after taking the slot back\n" << a.logs();
  ASSERT_TRUE(stop_gracefully(a, name_));
  expect_exactly_once("standby takeover both ways");
}

TEST_F(ExactlyOnceTest, TransactionLargerThanTheSplitBoundResumesInsideIt) {
  const long rows = 60'000;
  WalrelayProcess proc(config("100ms", 1000), "walrelay (exactly once, split transaction)");
  start_streaming(proc, name_);
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 1 FROM generate_series(1, " +
            std::to_string(rows) + ") g");
  // Kill once some, but not all, of the transaction is committed to Kafka.
  const bool inside = committed_inside_a_transaction(60s);
  proc.kill();
  ASSERT_TRUE(inside) << "no position inside the transaction was committed\n" << proc.logs();
  proc.start();
  EXPECT_TRUE(proc.wait_for_log("records)")) << proc.logs();  // "(its first N records)"
  EXPECT_TRUE(caught_up(proc)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  expect_exactly_once("split transaction");
  EXPECT_GE(count_occurrences(proc.stderr_text(), "its first"), 1u);
}

// Aborted Kafka transactions (injected: every 4th commit fails as abortable, the test hook
// WALRELAY_TEST_ABORT_EVERY): each is aborted and its records published again from the last
// committed position; a read_committed consumer sees none of the aborted copies.
TEST_F(ExactlyOnceTest, AbortedKafkaTransactionsAreReplayedExactlyOnce) {
  WalrelayProcess proc(config(), "walrelay (exactly once, injected aborts)");
  ::setenv("WALRELAY_TEST_ABORT_EVERY", "4", 1);
  start_streaming(proc, name_);
  ::unsetenv("WALRELAY_TEST_ABORT_EVERY");
  Writer writer(env_.pg_conninfo, table("t"));
  writer.start();
  ASSERT_TRUE(writer.wait_more(1500, 120s));
  writer.stop();
  EXPECT_TRUE(caught_up(proc)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  const std::size_t aborts = count_occurrences(proc.stderr_text(), "injected abort");
  std::cout << "[eos] injected aborts: " << aborts << std::endl;
  EXPECT_GE(aborts, 3u) << proc.logs();
  expect_exactly_once("injected aborts");
}

// Dead-letter records (errors.policy dead_letter) are part of the Kafka transaction of the
// changes around them: a poison payload and an oversize one in PostgreSQL transactions with good
// events give one dead-letter record each and every good event once, across a SIGKILL and restart.
TEST_F(ExactlyOnceTest, DeadLetterRecordsArePartOfTheKafkaTransaction) {
  pg_->exec("CREATE TABLE " + table("ob") +
            " (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL,"
            " payload text)");
  WalrelayConfig cfg =
      make_config({{table("ob"), {"topic: \"" + name_ + ".ev.{aggregate_type}\""}}});
  const std::string dlq = name_ + ".dlq";
  cfg.extra_yaml =
      "delivery: exactly_once\nerrors:\n  policy: dead_letter\n  dead_letter_topic: \"" + dlq +
      "\"\n";
  std::string yaml = cfg.to_yaml();
  const std::string anchor = "  bootstrap_servers: ";
  yaml.insert(yaml.find('\n', yaml.find(anchor)) + 1,
              "  properties:\n    message.max.bytes: 100000\n");
  WalrelayProcess proc(yaml, "walrelay (exactly once, dead letters)");
  start_streaming(proc, name_);
  const auto uuid = [](int n) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "00000000-0000-4000-8000-%012d", n);
    return std::string(buf);
  };
  const auto row = [&](int n, const std::string& payload_sql) {
    return "INSERT INTO " + table("ob") + " VALUES (" + sql_literal(uuid(n)) + ", 'Order', 'o-" +
           std::to_string(n) + "', " + payload_sql + ")";
  };
  pg_->commit({row(1, "'{\"n\": 1}'"), row(2, "'this is {not JSON'"), row(3, "'{\"n\": 3}'")});
  pg_->commit({row(4, "'{\"blob\":\"' || repeat('a', 200000) || '\"}'"), row(5, "'{\"n\": 5}'")});
  ASSERT_GE(kafka_->read_at_least({name_ + ".ev.Order"}, 3, 60s).size(), 3u) << proc.logs();
  proc.kill();
  proc.start();
  pg_->commit({row(6, "'{\"n\": 6}'")});
  EXPECT_TRUE(caught_up(proc)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  const auto events = kafka_->read_all({name_ + ".ev.Order"}, 60s);
  const auto dead = kafka_->read_all({dlq}, 60s);
  std::multiset<std::string> ids;
  for (const auto& r : events) ids.insert(r.header("id"));
  std::multiset<std::string> kinds;
  for (const auto& r : dead) kinds.insert(r.header("walrelay.error.kind"));
  EXPECT_EQ(ids, (std::multiset<std::string>{uuid(1), uuid(3), uuid(5), uuid(6)}))
      << describe(events);
  EXPECT_EQ(kinds, (std::multiset<std::string>{"mapping", "oversize"})) << describe(dead);
}

// Snapshot rows go through the same Kafka transactions (their chunks count as acknowledged only
// once committed); the stream follows them, and a read_committed consumer sees each row once.
TEST_F(ExactlyOnceTest, SnapshotRowsAreCommittedInKafkaTransactions) {
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 1 FROM generate_series(1, 5000) g");
  WalrelayConfig cfg = snapshot_config({"t"}, 700);
  WalrelayProcess proc(cfg.to_yaml(), "walrelay (exactly once, snapshot)");
  start_streaming(proc, name_);
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 2 FROM generate_series(5001, 5100) g");
  EXPECT_TRUE(caught_up(proc)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  expect_exactly_once("snapshot then stream");
}

// Snapshot rows (op r) are exactly once too: the position record carries the snapshot progress
// in the same Kafka transaction as the rows. walrelay is SIGKILLed during the initial snapshot
// (read from the slot's exported snapshot), several times while it finishes as an incremental
// snapshot (the exported snapshot is gone), and twice during an incremental snapshot asked for by
// a signal (whose replay must not start it over). New rows are inserted and updated meanwhile.
// A read_committed consumer then sees each snapshot row once per snapshot, and replaying the topic
// gives the table.
TEST_F(ExactlyOnceTest, SnapshotRowsAreExactlyOnceAcrossSigkills) {
  constexpr long kRows = 50'000;
  constexpr long kSignalRows = 8'000;
  constexpr long kNewIds = 1'000'000;  // the writer's rows
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 1 FROM generate_series(1, " +
            std::to_string(kRows) + ") g");
  pg_->exec("CREATE TABLE " + table("s") + " (id bigint PRIMARY KEY, v int NOT NULL)");
  pg_->exec("INSERT INTO " + table("s") + " SELECT g, 1 FROM generate_series(1, " +
            std::to_string(kSignalRows) + ") g");
  WalrelayConfig cfg = snapshot_config({"t", "s"}, 500);
  cfg.extra_yaml += "exactly_once:\n  commit_interval: 200ms\n";
  // Few snapshot rows in flight (about 1,500 per Kafka transaction): the initial snapshot takes
  // some seconds, so the first kill comes in the middle of it.
  std::string yaml = cfg.to_yaml();
  const std::string anchor = "  bootstrap_servers: ";
  yaml.insert(yaml.find('\n', yaml.find(anchor)) + 1, "  max_in_flight_events: 2000\n");
  WalrelayProcess proc(yaml, "walrelay (exactly once, snapshot kills)");
  const std::filesystem::path incremental_file =
      std::filesystem::path(cfg.state_dir) / (cfg.slot + ".incremental");
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pause_ms(300, 1200);
  int kills = 0;
  std::size_t sessions = 0;  // streaming sessions of the instances so far
  // Waits until the running instance streams, kills it after a random pause and starts it again.
  const auto kill_streaming = [&] {
    ASSERT_TRUE(wait_until(
        [&] { return count_occurrences(proc.stderr_text(), " info streaming: ") > sessions; }, 60s))
        << proc.logs();
    sessions = count_occurrences(proc.stderr_text(), " info streaming: ");
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
    proc.kill();
    ++kills;
    proc.start();
  };

  proc.start();
  ASSERT_GE(kafka_->read_at_least({topic("t")}, 2000, 60s).size(), 2000u) << proc.logs();
  ASSERT_EQ(count_occurrences(proc.stderr_text(), "snapshot: complete"), 0u)
      << "the initial snapshot ended before the kill\n"
      << proc.logs();
  proc.kill();
  ++kills;
  proc.start();
  ASSERT_TRUE(proc.wait_for_log("finish as an incremental snapshot", 60s)) << proc.logs();

  // New rows meanwhile: inserted, and each updated once a little later.
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    Pg pg(env_.pg_conninfo);
    for (long id = kNewIds; !stop.load(); ++id) {
      pg.exec("INSERT INTO " + table("t") + " VALUES (" + std::to_string(id) + ", 1)");
      if (id - kNewIds >= 5) {
        pg.exec("UPDATE " + table("t") + " SET v = v + 1 WHERE id = " + std::to_string(id - 5));
      }
      std::this_thread::sleep_for(5ms);
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } join{stop, writer};

  for (int i = 0; i < 3; ++i) kill_streaming();
  ASSERT_FALSE(HasFatalFailure());
  const auto all_done = [&] {
    std::ifstream in(incremental_file);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    return text.find("done: false") == std::string::npos &&
           text.find("done: true") != std::string::npos;
  };
  ASSERT_TRUE(wait_until(all_done, 60s, 100ms)) << proc.logs();

  // An incremental snapshot asked for by a signal, killed twice.
  pg_->exec(
      "SELECT pg_logical_emit_message(true, 'walrelay-signal', "
      "'{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" +
      table("s") + "\"],\"type\":\"incremental\"}}')");
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot of " + table("s") + " queued", 30s))
      << proc.logs();
  for (int i = 0; i < 2; ++i) kill_streaming();
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(wait_until(all_done, 60s, 100ms)) << proc.logs();
  stop = true;
  writer.join();
  EXPECT_TRUE(caught_up(proc)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  // Restarts that found the local progress behind Kafka's (killed between a commit and the save).
  const std::size_t from_kafka =
      count_occurrences(proc.stderr_text(), "resume where Kafka's last committed position says");
  const std::size_t resumed =
      count_occurrences(proc.stderr_text(), "incremental snapshot: resuming");
  std::cout << "[eos] restarts taking the snapshot progress from Kafka: " << from_kafka
            << ", incremental snapshot resumptions: " << resumed << std::endl;
  EXPECT_GE(from_kafka, 1u) << proc.logs();
  {
    std::istringstream lines(proc.stderr_text());
    for (std::string line; std::getline(lines, line);) {
      if (line.find("resume where Kafka") != std::string::npos ||
          line.find("incremental snapshot: resuming") != std::string::npos ||
          line.find("Kafka has everything up to") != std::string::npos) {
        std::cout << "[eos]   " << line << std::endl;
      }
    }
  }

  // Each snapshot row once per snapshot (t: one, s: two), and the replay is the table.
  for (const auto& [name, snapshots] : {std::pair{std::string("t"), 1}, {std::string("s"), 2}}) {
    auto records = kafka_->read_all({topic(name)}, 120s);
    sort_by_partition_order(records);
    std::map<std::string, int> reads;         // key → r events
    std::map<std::string, std::string> last;  // key → last `after`
    for (const auto& r : records) {
      if (!r.key || !r.value) continue;
      const std::string key = json_at(*r.key, "");
      if (json_string_at(*r.value, "/op") == "r") ++reads[key];
      last[key] = json_at(*r.value, "/after");
    }
    std::map<std::string, std::string> rows;
    for (const auto& row : pg_->query("SELECT json_build_object('id', id)::text, "
                                      "json_build_object('id', id, 'v', v)::text FROM " +
                                      table(name))) {
      rows[json_at(*row[0], "")] = json_at(*row[1], "");
    }
    std::size_t duplicated = 0;
    std::size_t missing = 0;
    std::size_t differ = 0;
    for (const auto& [key, row] : rows) {
      const long id = std::stol(json_at(key, "/id"));
      const int n = reads.contains(key) ? reads.at(key) : 0;
      // The writer's rows may be read by a chunk too (at most once per snapshot).
      const int expected = id < kNewIds ? snapshots : std::min(n, snapshots);
      if (n > expected && ++duplicated <= 5) ADD_FAILURE() << name << " " << key << ": " << n;
      if (n < expected && ++missing <= 5) ADD_FAILURE() << name << " " << key << " read " << n;
      if (!last.contains(key) || last.at(key) != row) {
        if (++differ <= 5) {
          ADD_FAILURE() << name << " " << key << ": topic "
                        << (last.contains(key) ? last.at(key) : "<none>") << ", table " << row;
        }
      }
    }
    std::cout << "[eos] snapshot kills " << kills << ", table " << name << ": rows " << rows.size()
              << ", records " << records.size() << ", keys read more than expected " << duplicated
              << ", fewer " << missing << ", replay differs " << differ << std::endl;
    EXPECT_EQ(duplicated, 0u) << name;
    EXPECT_EQ(missing, 0u) << name;
    EXPECT_EQ(differ, 0u) << name;
    EXPECT_EQ(last.size(), rows.size()) << name;
  }
}

// The positions topic outlives the slot: a slot dropped while an incremental snapshot ran, and the
// local state started afresh, must not hand the old snapshot's progress (the position record's
// `incremental`, same connector and slot name) to the new slot, whose initial snapshot already
// reads every row: the new slot's rows are each read once.
TEST_F(ExactlyOnceTest, ADroppedSlotsIncrementalProgressIsNotResumedByItsSuccessor) {
  constexpr long kRows = 6'000;
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 1 FROM generate_series(1, " +
            std::to_string(kRows) + ") g");
  WalrelayConfig cfg = snapshot_config({"t"}, 20);
  WalrelayProcess proc(cfg.to_yaml(), "walrelay (exactly once, dropped slot)");
  start_streaming(proc, name_);
  pg_->exec(
      "SELECT pg_logical_emit_message(true, 'walrelay-signal', "
      "'{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" +
      table("t") + "\"],\"type\":\"incremental\"}}')");
  // Killed once Kafka holds part of the incremental snapshot.
  const std::string positions = name_ + ".walrelay.positions";
  ASSERT_TRUE(wait_until(
      [&] {
        const auto recs = kafka_->read_all({positions}, 30s);
        return !recs.empty() && recs.back().value &&
               recs.back().value->find("\"done\":false,\"rows\":") != std::string::npos &&
               recs.back().value->find("\"rows\":0,") == std::string::npos;
      },
      60s, 50ms))
      << proc.logs();
  proc.kill();
  ASSERT_TRUE(wait_until(
      [&] {
        try {
          pg_->exec("SELECT pg_drop_replication_slot(" + sql_literal(cfg.slot) + ")");
          return true;
        } catch (const PgError&) {
          return false;  // its walsender is still going away
        }
      },
      30s));
  for (const char* suffix : {".state", ".snapshot", ".incremental"}) {
    std::filesystem::remove(std::filesystem::path(cfg.state_dir) / (cfg.slot + suffix));
  }

  // The new slot's records (source.lsn of its snapshot rows: its consistent point and later).
  const Lsn new_slot = Lsn::parse(pg_->value("SELECT pg_current_wal_lsn()::text")).value_or(Lsn{});
  // The log holds the first run's lines too: wait for the second run's own.
  const auto seen = [&](const char* line) { return count_occurrences(proc.stderr_text(), line); };
  const std::size_t completes = seen("snapshot: complete");
  const std::size_t streams = seen(" info streaming: ");
  proc.start();
  ASSERT_TRUE(wait_until(
      [&] { return seen("snapshot: complete") > completes && seen(" info streaming: ") > streams; },
      60s))
      << proc.logs();
  std::this_thread::sleep_for(2s);  // a stale incremental snapshot would run now
  EXPECT_TRUE(caught_up(proc)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  std::map<std::string, int> reads;
  for (const auto& r : kafka_->read_all({topic("t")}, 60s)) {
    if (r.value && json_string_at(*r.value, "/op") == "r" &&
        std::stoull(json_at(*r.value, "/source/lsn")) >= new_slot.value()) {
      ++reads[r.key.value_or("<null>")];
    }
  }
  std::size_t twice = 0;
  for (const auto& [key, n] : reads) twice += n > 1 ? 1 : 0;
  std::cout << "[eos] new slot: keys read " << reads.size() << ", more than once " << twice
            << std::endl;
  EXPECT_EQ(static_cast<long>(reads.size()), kRows);
  EXPECT_EQ(twice, 0u) << proc.logs();
  EXPECT_EQ(count_occurrences(proc.stderr_text(), "incremental snapshot: resuming"), 0u)
      << proc.logs();
}

// A table taken out of `tables` while the initial snapshot was interrupted is not read on the
// restart (its rows would not be published, yet it would count as read) but stays queued, also in
// the position record: put back later, even with the local state files gone, it resumes where it
// stopped, and every row of it is published once.
TEST_F(ExactlyOnceTest, ATableRemovedDuringAnInterruptedSnapshotResumesWhenPutBack) {
  constexpr long kRows = 20'000;
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 1 FROM generate_series(1, " +
            std::to_string(kRows) + ") g");
  pg_->exec("CREATE TABLE " + table("u") + " (id bigint PRIMARY KEY, v int NOT NULL)");
  pg_->exec("INSERT INTO " + table("u") + " SELECT g, 1 FROM generate_series(1, 100) g");
  const auto yaml_of = [&](const std::vector<std::string>& names) {
    return slow_snapshot_yaml(names);
  };
  const std::string both = yaml_of({"t", "u"});
  const std::string only_u = yaml_of({"u"});
  {
    WalrelayProcess first(both, "walrelay (t and u)");
    first.start();
    ASSERT_GE(kafka_->read_at_least({topic("t")}, 1000, 60s).size(), 1000u) << first.logs();
    first.kill();
    ASSERT_EQ(count_occurrences(first.stderr_text(), "snapshot: complete"), 0u)
        << "the snapshot ended before the kill\n"
        << first.logs();
  }
  {
    WalrelayProcess without(only_u, "walrelay (u only)");
    start_streaming(without, name_);
    ASSERT_TRUE(without.wait_for_log("is no longer captured", 30s)) << without.logs();
    ASSERT_TRUE(without.wait_for_log("incremental snapshot: " + table("u") + " done", 30s))
        << without.logs();
    ASSERT_TRUE(stop_gracefully(without, name_));
  }
  WalrelayProcess back(yaml_of({"t", "u"}), "walrelay (t put back, no local state)");
  start_streaming(back, name_);
  ASSERT_TRUE(back.wait_for_log("incremental snapshot: " + table("t") + " done", 60s))
      << back.logs();
  ASSERT_TRUE(stop_gracefully(back, name_));
  expect_each_key_once(topic("t"), kRows, back.logs());
}

// Issue 25 item 7 with delivery exactly_once: the local <slot>.snapshot lost after a SIGKILL in
// the middle of the initial snapshot. Kafka's last committed position carries the progress
// consumers saw, so the snapshot resumes from it: every key once, and no "no proof" re-read.
TEST_F(ExactlyOnceTest, ALostLocalSnapshotProgressResumesFromKafkasProgress) {
  constexpr long kRows = 20'000;
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 1 FROM generate_series(1, " +
            std::to_string(kRows) + ") g");
  std::string state_dir;
  const std::string yaml = slow_snapshot_yaml({"t"}, &state_dir);
  WalrelayProcess proc(yaml, "walrelay (local snapshot progress lost)");
  proc.start();
  ASSERT_GE(kafka_->read_at_least({topic("t")}, 1000, 60s).size(), 1000u) << proc.logs();
  proc.kill();
  ASSERT_EQ(count_occurrences(proc.stderr_text(), "snapshot: complete"), 0u)
      << "the snapshot ended before the kill\n"
      << proc.logs();
  ASSERT_TRUE(std::filesystem::remove(std::filesystem::path(state_dir) / (name_ + ".snapshot")));
  start_streaming(proc, name_);
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("t") + " done", 60s))
      << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(count_occurrences(proc.stderr_text(), "no proof that the snapshot"), 0u) << proc.logs();
  expect_each_key_once(topic("t"), kRows, proc.logs());
}

// A table rewritten during the initial snapshot is handed over to an incremental snapshot; the
// initial snapshot's progress then says it is done, so the hand-over queue must be in the position
// record too: with the local <slot>.incremental lost after a SIGKILL, the table's remaining rows
// are still read (they were lost silently before).
TEST_F(ExactlyOnceTest, ATableHandedOverDuringTheInitialSnapshotIsFinishedFromKafkasProgress) {
  constexpr long kRows = 20'000;
  pg_->exec("INSERT INTO " + table("t") + " SELECT g, 1 FROM generate_series(1, " +
            std::to_string(kRows) + ") g");
  pg_->exec("CREATE TABLE " + table("u") + " (id bigint PRIMARY KEY, v int NOT NULL)");
  pg_->exec("INSERT INTO " + table("u") + " SELECT g, 1 FROM generate_series(1, " +
            std::to_string(kRows) + ") g");
  std::string state_dir;
  const std::string yaml = slow_snapshot_yaml({"t", "u"}, &state_dir);  // t is read first
  {
    WalrelayProcess first(yaml, "walrelay (t rewritten mid-snapshot)");
    first.start();
    ASSERT_GE(kafka_->read_at_least({topic("t")}, 1000, 60s).size(), 1000u) << first.logs();
    pg_->exec("VACUUM FULL " + table("t"));
    ASSERT_TRUE(first.wait_for_log("was rewritten after the slot's consistent point", 60s))
        << first.logs();
    // Kafka transactions committed after the hand-over: rows of u are visible.
    ASSERT_GE(kafka_->read_at_least({topic("u")}, 500, 60s).size(), 500u) << first.logs();
    first.kill();
    ASSERT_EQ(count_occurrences(first.stderr_text(), "snapshot: complete"), 0u)
        << "the snapshot ended before the kill\n"
        << first.logs();
  }
  std::size_t removed = 0;
  for (const auto& f : std::filesystem::directory_iterator(state_dir)) {
    if (f.path().extension() == ".incremental") removed += std::filesystem::remove(f.path());
  }
  ASSERT_EQ(removed, 1u) << "no local incremental queue in " << state_dir;
  WalrelayProcess second(yaml, "walrelay (local incremental queue lost)");
  start_streaming(second, name_);
  ASSERT_TRUE(second.wait_for_log("incremental snapshot: " + table("t") + " done", 120s))
      << second.logs();
  ASSERT_TRUE(stop_gracefully(second, name_));
  expect_each_key_once(topic("t"), kRows, second.logs());
}
}  // namespace
}  // namespace walrelay::itest
