// Reliability under faults, against the real PostgreSQL (wal2json) and Kafka of
// tests/services/start.sh: PostgreSQL restart, walsender termination, a second instance waiting on
// the busy slot, a lost slot, poison and oversize changes, idle WAL, and a broker outage.
//
// Every test here runs alone (RUN_SERIAL): some restart PostgreSQL or Kafka, and the WAL/flush
// measurements must not be disturbed by other tests' traffic. They leave the services running.
// The service scripts (tests/services/pg-restart.sh, kafka-ctl.sh) find the services through
// WALRELAY_TEST_STATE_DIR, which start.sh writes into its env file.
//
// Loss is checked against the ground truth: after the writers stop, every row in the table (every
// committed transaction, including one whose COMMIT reply was lost in a fault) must have an event
// in Kafka, per key, duplicates (same `id` header) allowed and counted.

#include <gtest/gtest.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
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

// ------------------------------------------------------------------------------ helpers

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Inserts `lines` (each without indentation) right under the top-level `section:` line of a
/// generated configuration, indented by two spaces (to add keys to `source:` or `kafka:`).
std::string with_keys(std::string yaml, const std::string& section,
                      const std::vector<std::string>& lines) {
  const std::string header = section + ":\n";
  std::size_t pos = yaml.rfind("\n" + header);
  pos = (yaml.starts_with(header)) ? 0 : (pos == std::string::npos ? pos : pos + 1);
  if (pos == std::string::npos) throw std::runtime_error("no section " + section + " in config");
  std::string block;
  for (const auto& l : lines) block += "  " + l + "\n";
  yaml.insert(pos + header.size(), block);
  return yaml;
}

/// Connects, retrying for `timeout` (PostgreSQL may still be starting up).
std::unique_ptr<Pg> connect_retrying(const std::string& conninfo,
                                     std::chrono::milliseconds timeout = 60s) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    try {
      return std::make_unique<Pg>(conninfo);
    } catch (const PgError&) {
      if (Clock::now() >= deadline) throw;
      std::this_thread::sleep_for(200ms);
    }
  }
}

std::optional<Lsn> confirmed_lsn(Pg& pg, const std::string& slot) {
  auto s = slot_state(pg, slot);
  if (!s || !s->confirmed_flush_lsn) return std::nullopt;
  return Lsn::parse(*s->confirmed_flush_lsn);
}

/// active_pid of the slot (the walsender streaming it), nullopt when inactive or missing.
std::optional<long> slot_active_pid(Pg& pg, const std::string& slot) {
  auto v = pg.scalar(
      "SELECT coalesce(max(active_pid), 0) FROM pg_replication_slots "
      "WHERE active AND slot_name = " +
      sql_literal(slot));
  const long pid = std::stol(v.value_or("0"));
  return pid > 0 ? std::optional<long>(pid) : std::nullopt;
}

/// Commit LSN part of a row-change event's `id` header (`<commit lsn>:<position>`).
std::optional<Lsn> commit_lsn_of(const KafkaRecord& r) {
  const std::string id = r.header("id");
  const auto colon = id.find(':');
  if (colon == std::string::npos) return std::nullopt;
  return Lsn::parse(std::string_view(id).substr(0, colon));
}

Lsn max_commit_lsn(const std::vector<KafkaRecord>& records) {
  Lsn max;
  for (const auto& r : records) {
    if (auto l = commit_lsn_of(r); l && *l > max) max = *l;
  }
  return max;
}

// ------------------------------------------------------------------------------- writer

/// Commits small transactions into `table (id int primary key, v text)` from its own thread and
/// connection until stopped: `rows` rows per transaction, ids increasing from 1, every
/// `interval`. A failed statement (server restarting, connection lost) drops the connection,
/// skips that transaction's ids (its COMMIT may have happened) and reconnects, forever.
class Writer {
 public:
  Writer(std::string conninfo, std::string table, int rows, std::chrono::milliseconds interval,
         int pad_bytes = 20)
      : conninfo_(std::move(conninfo)),
        table_(std::move(table)),
        rows_(rows),
        interval_(interval),
        pad_(pad_bytes) {}
  ~Writer() { stop(); }

  void start() {
    thread_ = std::thread([this] { loop(); });
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  /// Rows whose COMMIT returned success.
  [[nodiscard]] long committed() const { return committed_; }
  /// Transactions that failed (some may still have committed).
  [[nodiscard]] long failed_txns() const { return failed_; }
  /// Waits until `n` more rows than now are committed; false on timeout.
  bool wait_more(long n, std::chrono::milliseconds timeout = 60s) const {
    const long target = committed_ + n;
    return wait_until([&] { return committed_ >= target; }, timeout);
  }

 private:
  void loop() {
    std::unique_ptr<Pg> pg;
    long next = 1;
    while (!stop_) {
      try {
        if (!pg) pg = std::make_unique<Pg>(conninfo_);
        const long first = next;
        next += rows_;
        pg->commit({"INSERT INTO " + table_ + " SELECT g, repeat('x', " + std::to_string(pad_) +
                    ") || g FROM generate_series(" + std::to_string(first) + ", " +
                    std::to_string(first + rows_ - 1) + ") g"});
        committed_ += rows_;
      } catch (const PgError&) {
        if (pg) ++failed_;
        pg.reset();
        std::this_thread::sleep_for(100ms);
        continue;
      }
      std::this_thread::sleep_for(interval_);
    }
  }

  std::string conninfo_;
  std::string table_;
  int rows_;
  std::chrono::milliseconds interval_;
  int pad_;
  std::atomic<bool> stop_{false};
  std::atomic<long> committed_{0};
  std::atomic<long> failed_{0};
  std::thread thread_;
};

// ----------------------------------------------------------------------------- coverage

/// What Kafka holds for a row-change table versus the rows in the table.
struct Coverage {
  std::size_t records = 0;     ///< records read (with duplicates)
  std::size_t unique_ids = 0;  ///< distinct `id` headers
  std::size_t duplicates = 0;  ///< records - unique_ids
  std::size_t table_rows = 0;  ///< rows in the table (committed inserts)
  std::size_t missing = 0;     ///< rows without a create event
  std::vector<long> missing_sample;
  Lsn max_commit;

  [[nodiscard]] std::string summary() const {
    std::string s =
        "table_rows=" + std::to_string(table_rows) + " records=" + std::to_string(records) +
        " unique_ids=" + std::to_string(unique_ids) + " duplicates=" + std::to_string(duplicates) +
        " missing=" + std::to_string(missing);
    if (!missing_sample.empty()) {
      s += " (e.g. ids";
      for (long id : missing_sample) s += " " + std::to_string(id);
      s += ")";
    }
    return s;
  }
};

Coverage coverage_of(const std::set<long>& rows, const std::vector<KafkaRecord>& records) {
  Coverage c;
  c.records = records.size();
  c.table_rows = rows.size();
  std::set<std::string> ids;
  std::set<long> keys;
  for (const auto& r : records) {
    ids.insert(r.header("id"));
    if (!r.key || !r.value) continue;
    try {
      if (json_string_at(*r.value, "/op") != "c") continue;
      keys.insert(std::stol(json_at(*r.key, "/id")));
    } catch (const std::exception&) {
      ADD_FAILURE() << "unexpected record: " << r.describe();
    }
  }
  c.unique_ids = ids.size();
  c.duplicates = c.records - c.unique_ids;
  for (long id : rows) {
    if (!keys.contains(id)) {
      ++c.missing;
      if (c.missing_sample.size() < 10) c.missing_sample.push_back(id);
    }
  }
  c.max_commit = max_commit_lsn(records);
  return c;
}

std::set<long> table_ids(Pg& pg, const std::string& table) {
  std::set<long> ids;
  for (const auto& row : pg.query("SELECT id FROM " + table)) ids.insert(std::stol(*row[0]));
  return ids;
}

/// Reads `topic` until every row of `table` has an event or `timeout` passes.
Coverage await_coverage(KafkaReader& kafka, Pg& pg, const std::string& table,
                        const std::string& topic, std::chrono::milliseconds timeout = 90s) {
  const std::set<long> rows = table_ids(pg, table);
  const auto deadline = Clock::now() + timeout;
  Coverage c;
  for (;;) {
    const auto records = kafka.read_all({topic}, 60s);
    c = coverage_of(rows, records);
    if (c.missing == 0 || Clock::now() >= deadline) return c;
    std::this_thread::sleep_for(1s);
  }
}

/// Waits until the slot's confirmed_flush_lsn is at least `lsn`.
bool wait_confirmed_at_least(Pg& pg, const std::string& slot, Lsn lsn,
                             std::chrono::milliseconds timeout = 30s) {
  return wait_until(
      [&] {
        auto c = confirmed_lsn(pg, slot);
        return c && *c >= lsn;
      },
      timeout, 200ms);
}

// ---------------------------------------------------------------------------- fixture

class FaultTest : public IntegrationTest {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_FALSE(services_state_dir().empty())
        << "WALRELAY_TEST_STATE_DIR is not set: source the env file of tests/services/start.sh";
  }

  void TearDown() override {
    // A test that restarted PostgreSQL left the fixture's connection broken.
    try {
      pg_->exec("SELECT 1");
    } catch (const PgError&) {
      pg_ = connect_retrying(env_.pg_conninfo);
    }
    IntegrationTest::TearDown();
  }

  /// Table `t (id int primary key, v text)` and a configuration streaming it, with a quick
  /// reconnect backoff.
  std::string row_table_config(const std::vector<std::string>& source_keys = {}) {
    pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
    std::vector<std::string> keys = {"reconnect_min: 200ms", "reconnect_max: 2s"};
    keys.insert(keys.end(), source_keys.begin(), source_keys.end());
    return with_keys(make_config({table("t")}).to_yaml(), "source", keys);
  }

  /// The common check after a fault: the same process is still running and streaming again,
  /// nothing committed is missing, and the slot's confirmed position reaches the last event.
  void expect_recovered(WalrelayProcess& proc, Writer& writer, const std::string& what,
                        std::optional<Lsn> confirmed_before_fault) {
    EXPECT_TRUE(proc.running()) << "walrelay exited instead of reconnecting:\n" << proc.logs();
    EXPECT_TRUE(wait_slot_active(*pg_, name_)) << "slot not streamed again";
    const Coverage c = await_coverage(*kafka_, *pg_, table("t"), topic("t"));
    const auto confirmed_end = [&] { return confirmed_lsn(*pg_, name_).value_or(Lsn{}); };
    EXPECT_TRUE(wait_confirmed_at_least(*pg_, name_, c.max_commit))
        << "confirmed_flush_lsn " << confirmed_end().to_string()
        << " did not reach the last event's commit LSN " << c.max_commit.to_string();
    const Lsn after = confirmed_end();
    const std::string log = proc.stderr_text();
    std::cout << "[fault] " << what << ": committed_by_writer=" << writer.committed()
              << " failed_txns=" << writer.failed_txns() << " " << c.summary()
              << " confirmed_before=" << confirmed_before_fault.value_or(Lsn{}).to_string()
              << " confirmed_after=" << after.to_string()
              << " last_commit=" << c.max_commit.to_string()
              << " sessions(streaming: lines)=" << count_occurrences(log, " info streaming: ")
              << " reconnect_warnings=" << count_occurrences(log, "reconnecting in") << std::endl;
    EXPECT_EQ(c.missing, 0u) << what << ": committed rows without an event: " << c.summary();
    EXPECT_GE(static_cast<long>(c.table_rows), writer.committed());
    if (confirmed_before_fault) {
      EXPECT_GT(after, *confirmed_before_fault)
          << "confirmed_flush_lsn did not move after " << what;
    }
    EXPECT_TRUE(proc.running()) << proc.logs();
  }
};

// 1. PostgreSQL restart (pg_ctl restart -m fast) while a writer commits before and after:
//    walrelay reconnects by itself, nothing is lost, the confirmed position moves on.
TEST_F(FaultTest, PostgresRestartMidStreamReconnectsWithoutLoss) {
  WalrelayProcess proc(row_table_config());
  start_streaming(proc, name_);
  Writer writer(env_.pg_conninfo, table("t"), 2, 20ms);
  writer.start();
  ASSERT_TRUE(writer.wait_more(60)) << "writer stuck before the restart";
  ASSERT_TRUE(wait_until([&] { return confirmed_lsn(*pg_, name_).has_value(); }));
  const auto before = confirmed_lsn(*pg_, name_);

  const auto t0 = Clock::now();
  ASSERT_EQ(run_service_script("pg-restart.sh"), 0) << "pg-restart.sh failed";
  std::cout << "[fault] pg restart took " << seconds_since(t0) << " s" << std::endl;
  pg_ = connect_retrying(env_.pg_conninfo);

  ASSERT_TRUE(writer.wait_more(60)) << "writer did not commit again after the restart";
  EXPECT_TRUE(wait_slot_active(*pg_, name_)) << "walrelay did not stream again\n" << proc.logs();
  std::cout << "[fault] walrelay streaming again " << seconds_since(t0)
            << " s after the restart began" << std::endl;
  // A schema change after the restart: walrelay's catalog connection (opened before the
  // restart) must serve the new table shape.
  pg_->exec("ALTER TABLE " + table("t") + " ADD COLUMN note text DEFAULT 'after-restart'");
  ASSERT_TRUE(writer.wait_more(60));
  writer.stop();
  expect_recovered(proc, writer, "pg restart", before);
  EXPECT_GE(count_occurrences(proc.stderr_text(), " info streaming: "), 2u) << proc.logs();
  std::size_t with_note = 0;
  for (const auto& r : kafka_->read_all({topic("t")})) {
    if (r.value && r.value->find(R"("note":"after-restart")") != std::string::npos) ++with_note;
  }
  std::cout << "[fault] pg restart: events with the column added after the restart: " << with_note
            << std::endl;
  EXPECT_GT(with_note, 0u) << "rows written after ALTER TABLE lack the new column\n" << proc.logs();
  stop_gracefully(proc, name_);
}

// 1b. PostgreSQL restarted without a checkpoint (`pg_ctl restart -m immediate`) after walrelay
//    confirmed changes (issue 25 item 9): a slot's confirmed_flush_lsn is durable only as of its
//    last save, so the slot comes back at an older position and the changes in between are
//    published again (at least once). walrelay's slot record knew the later position: it says so
//    once (how far back, how many bytes) and counts it on /metrics.
TEST_F(FaultTest, SlotMovedBackByARestartWithoutCheckpointIsLoggedOnceAndCounted) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
  // Slow reconnects: the test reads the slot's position after the restart before walrelay
  // streams (and confirms) again.
  WalrelayProcess proc(with_keys(make_config({table("t")}).to_yaml(), "source",
                                 {"reconnect_min: 4s", "reconnect_max: 8s"}));
  start_streaming(proc, name_);
  const auto current_lsn = [&] {
    return Lsn::parse(pg_->value("SELECT pg_current_wal_lsn()::text")).value_or(Lsn{});
  };
  int next_id = 1;
  std::optional<Lsn> told;  // the slot's position before the restart
  std::optional<Lsn> back;  // and after it
  // The server may save the slot in between (it does when restart_lsn moves, e.g. after the
  // bgwriter logs running transactions every 15 s): then nothing moved back, and it is tried again.
  for (int attempt = 0; attempt < 3 && !back; ++attempt) {
    // The slot saved now (a checkpoint), confirmed past it, then 20 transactions after it
    // confirmed only in memory.
    Pg(env_.pg_admin_conninfo).exec("CHECKPOINT");
    ASSERT_TRUE(wait_confirmed_at_least(*pg_, name_, current_lsn())) << proc.logs();
    for (int i = 0; i < 20; ++i, ++next_id) {
      pg_->exec("INSERT INTO " + table("t") + " VALUES (" + std::to_string(next_id) + ", 'x')");
    }
    ASSERT_TRUE(wait_confirmed_at_least(*pg_, name_, current_lsn())) << proc.logs();
    told = confirmed_lsn(*pg_, name_);
    ASSERT_TRUE(told);
    ASSERT_EQ(run_service_script("pg-restart.sh", "immediate"), 0) << "pg-restart.sh failed";
    pg_ = connect_retrying(env_.pg_conninfo);
    const auto now = confirmed_lsn(*pg_, name_);
    ASSERT_TRUE(now);
    std::cout << "[fault] immediate restart: slot confirmed " << told->to_string() << " before, "
              << now->to_string() << " after" << std::endl;
    if (*now < *told) back = now;
    ASSERT_TRUE(wait_until([&] { return slot_active_pid(*pg_, name_).has_value(); }, 60s))
        << proc.logs();
  }
  ASSERT_TRUE(back) << "the server kept the slot's position in every attempt";
  ASSERT_TRUE(proc.wait_for_log("moved back")) << proc.logs();
  const std::string log = proc.stderr_text();
  const std::uint64_t bytes = told->value() - back->value();
  // The record's position is the one the server had confirmed, or later (idle keepalives).
  const std::regex line("slot " + name_ +
                        " moved back: its confirmed_flush_lsn ([0-9A-F/]+) is ([0-9]+) bytes "
                        "behind ([0-9A-F/]+), the position walrelay confirmed");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, line)) << log;
  EXPECT_EQ(m[1].str(), back->to_string());
  const auto record = Lsn::parse(m[3].str());
  ASSERT_TRUE(record);
  EXPECT_GE(*record, *told);
  EXPECT_EQ(std::stoull(m[2].str()), record->value() - back->value());
  EXPECT_GE(std::stoull(m[2].str()), bytes);
  // The replayed changes were published again, with their ids.
  const auto records = kafka_->read_at_least({topic("t")}, static_cast<std::size_t>(next_id), 60s);
  std::map<std::string, int> ids;
  for (const auto& r : records) ++ids[r.header("id")];
  EXPECT_TRUE(std::any_of(ids.begin(), ids.end(), [](const auto& e) { return e.second > 1; }))
      << describe(records);
  // Counted on /metrics.
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  const std::string text = http_get(*port, "/metrics").body;
  EXPECT_NE(text.find("\nwalrelay_slot_rewinds_total 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nwalrelay_slot_rewind_bytes_total " + m[2].str() + "\n"), std::string::npos)
      << text;
  // Once: a later session (its walsender terminated) does not say it again.
  pg_->exec("INSERT INTO " + table("t") + " VALUES (" + std::to_string(next_id++) + ", 'y')");
  ASSERT_TRUE(wait_confirmed_at_least(*pg_, name_, current_lsn())) << proc.logs();
  const std::size_t sessions = count_occurrences(proc.stderr_text(), " info streaming: ");
  pg_->exec("SELECT pg_terminate_backend(pid) FROM pg_stat_replication WHERE application_name = " +
            sql_literal("walrelay-" + name_));
  ASSERT_TRUE(wait_until(
      [&] { return count_occurrences(proc.stderr_text(), " info streaming: ") > sessions; }, 60s))
      << proc.logs();
  EXPECT_EQ(count_occurrences(proc.stderr_text(), "moved back"), 1u) << proc.logs();
  stop_gracefully(proc, name_);
}

// 2. The server terminates walrelay's walsender mid-stream: same guarantees.
TEST_F(FaultTest, WalsenderTerminationReconnectsWithoutLoss) {
  WalrelayProcess proc(row_table_config());
  start_streaming(proc, name_);
  Writer writer(env_.pg_conninfo, table("t"), 2, 20ms);
  writer.start();
  ASSERT_TRUE(writer.wait_more(60));
  const auto before = confirmed_lsn(*pg_, name_);
  const auto old_pid = slot_active_pid(*pg_, name_);
  ASSERT_TRUE(old_pid.has_value());

  // Only our own walsender: application_name is walrelay-<connector name>.
  const std::string terminated = pg_->value(
      "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_replication "
      "WHERE application_name = " +
      sql_literal("walrelay-" + name_));
  EXPECT_EQ(terminated, "1") << "walrelay's walsender not found in pg_stat_replication";
  const auto t0 = Clock::now();
  EXPECT_TRUE(wait_until(
      [&] {
        auto p = slot_active_pid(*pg_, name_);
        return p && p != old_pid;
      },
      30s))
      << "no new walsender on the slot\n"
      << proc.logs();
  std::cout << "[fault] walsender " << *old_pid << " terminated; streaming again after "
            << seconds_since(t0) << " s" << std::endl;
  ASSERT_TRUE(writer.wait_more(60));
  writer.stop();
  expect_recovered(proc, writer, "walsender termination", before);
  EXPECT_GE(count_occurrences(proc.stderr_text(), " info streaming: "), 2u) << proc.logs();
  stop_gracefully(proc, name_);
}

// 3. A second instance with the same configuration waits as a hot standby while the slot is in
//    use, and takes over within 10 s when the first one is SIGKILLed; no loss across the switch.
TEST_F(FaultTest, StandbyTakesOverBusySlotAfterKill) {
  const std::string yaml = row_table_config();
  WalrelayProcess a(yaml, "walrelay-A");
  start_streaming(a, name_);
  Writer writer(env_.pg_conninfo, table("t"), 2, 20ms);
  writer.start();
  ASSERT_TRUE(writer.wait_more(40));
  const auto a_walsender = slot_active_pid(*pg_, name_);
  ASSERT_TRUE(a_walsender.has_value());

  WalrelayProcess b(yaml, "walrelay-B");
  b.start();
  EXPECT_TRUE(b.wait_for_log("is in use by another process (active_pid " +
                             std::to_string(*a_walsender) + ")"))
      << b.logs();
  EXPECT_TRUE(b.wait_for_log("waiting as a hot standby")) << b.logs();
  ASSERT_TRUE(writer.wait_more(40));
  EXPECT_TRUE(b.running()) << b.logs();
  EXPECT_EQ(count_occurrences(b.stderr_text(), " info streaming: "), 0u)
      << "B streamed while A did";
  EXPECT_EQ(slot_active_pid(*pg_, name_), a_walsender);

  a.kill();
  const auto t0 = Clock::now();
  const bool took_over = wait_until(
      [&] {
        auto p = slot_active_pid(*pg_, name_);
        return p && p != a_walsender &&
               b.stderr_text().find(" info streaming: ") != std::string::npos;
      },
      10s, 100ms);
  const double took = seconds_since(t0);
  std::cout << "[fault] standby B streaming " << took << " s after SIGKILL of A" << std::endl;
  EXPECT_TRUE(took_over) << "B not streaming within 10 s of A's SIGKILL\n" << b.logs();
  ASSERT_TRUE(writer.wait_more(60));
  writer.stop();
  expect_recovered(b, writer, "standby takeover", std::nullopt);
  stop_gracefully(b, name_);
}

// 4. The slot disappears after walrelay streamed it: exit 5 naming the last safe LSN; with
//    source.allow_slot_reset a new slot is created and streamed.
TEST_F(FaultTest, LostSlotStopsWithExit5UnlessResetAllowed) {
  const std::string yaml = row_table_config();
  {
    WalrelayProcess first(yaml, "walrelay-first");
    start_streaming(first, name_);
    pg_->commit({"INSERT INTO " + table("t") + " VALUES (1, 'one')"});
    const auto seen = kafka_->read_at_least({topic("t")}, 1);
    ASSERT_EQ(seen.size(), 1u);
    ASSERT_TRUE(stop_gracefully(first, name_));
  }
  // The slot record (source.state_dir is the harness's per-test directory).
  const auto record =
      std::filesystem::temp_directory_path() / "walrelay-itest-state" / name_ / (name_ + ".state");
  EXPECT_TRUE(std::filesystem::exists(record)) << record;
  const auto confirmed = confirmed_lsn(*pg_, name_);
  ASSERT_TRUE(confirmed.has_value());
  pg_->exec("SELECT pg_drop_replication_slot(" + sql_literal(name_) + ")");

  WalrelayProcess second(yaml, "walrelay-second");
  second.start();
  const int rc = second.wait_exit(30s);
  const std::string log = second.stderr_text();
  const auto at = log.find("Last safe LSN: ");
  const std::string named = at == std::string::npos
                                ? ""
                                : log.substr(at + 15, log.find_first_of(". \n", at + 15) - at - 15);
  std::cout << "[fault] slot lost: exit code " << rc << ", last safe LSN named " << named
            << ", slot's confirmed_flush_lsn before the drop " << confirmed->to_string()
            << std::endl;
  EXPECT_EQ(rc, 5) << second.logs();
  EXPECT_NE(log.find("no longer exists"), std::string::npos) << second.logs();
  EXPECT_EQ(named, confirmed->to_string()) << second.logs();
  EXPECT_FALSE(slot_state(*pg_, name_).has_value()) << "a slot was created despite exit 5";

  WalrelayProcess third(with_keys(yaml, "source", {"allow_slot_reset: true"}), "walrelay-reset");
  start_streaming(third, name_);
  EXPECT_TRUE(third.wait_for_log("created replication slot " + name_)) << third.logs();
  pg_->commit({"INSERT INTO " + table("t") + " VALUES (2, 'two')"});
  const auto seen = kafka_->read_at_least({topic("t")}, 2);
  ASSERT_EQ(seen.size(), 2u) << describe(seen);
  EXPECT_EQ(
      std::ranges::count_if(seen, [](const KafkaRecord& r) { return r.key == R"({"id":2})"; }), 1)
      << describe(seen);
  stop_gracefully(third, name_);
}

// ----------------------------------------------------------------- poison and oversize

class PoisonTest : public FaultTest {
 protected:
  /// Outbox table `ob` (payload text) and a configuration for it with
  /// kafka.properties.message.max.bytes=100000 and the given extra sections.
  std::string outbox_config(const std::string& extra_yaml) {
    pg_->exec("CREATE TABLE " + table("ob") +
              " (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL,"
              " payload text)");
    WalrelayConfig c =
        make_config({{table("ob"), {"topic: \"" + name_ + ".ev.{aggregate_type}\""}}});
    c.extra_yaml = extra_yaml;
    return with_keys(c.to_yaml(), "kafka", {"properties:", "  message.max.bytes: 100000"});
  }
  std::string event_topic() const { return name_ + ".ev.Order"; }
  std::string dlq_topic() const { return name_ + ".dlq"; }

  static std::string uuid(int n) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "00000000-0000-4000-8000-%012d", n);
    return buf;
  }
  /// Commits one outbox row; `payload_sql` is an SQL expression.
  void insert_event(int n, const std::string& payload_sql) {
    pg_->commit({"INSERT INTO " + table("ob") + " VALUES (" + sql_literal(uuid(n)) +
                 ", 'Order', 'order-" + std::to_string(n) + "', " + payload_sql + ")"});
  }
  static std::string oversize_payload_sql() {
    return "'{\"blob\":\"' || repeat('a', 200000) || '\"}'";  // ~200 kB of valid JSON
  }
  /// Whether decoding the slot from its confirmed position still yields a change holding
  /// `marker` (the slot must be inactive).
  bool slot_still_has(const std::string& marker) {
    const std::string n = pg_->value(
        "SELECT count(*) FROM pg_logical_slot_peek_changes(" + sql_literal(name_) +
        ", NULL, NULL, 'format-version', '2') WHERE strpos(data, " + sql_literal(marker) + ") > 0");
    return n != "0";
  }
};

// 5a. errors.policy dead_letter: a non-JSON payload and a payload over message.max.bytes go to
//     the dead-letter topic with kind/reason/LSN headers; everything committed after them is
//     delivered and confirmed.
TEST_F(PoisonTest, DeadLetterPolicyParksPoisonAndOversizeAndGoesOn) {
  WalrelayProcess proc(outbox_config("errors:\n  policy: dead_letter\n  dead_letter_topic: \"" +
                                     dlq_topic() + "\"\n"));
  start_streaming(proc, name_);
  insert_event(1, "'{\"n\": 1}'");
  insert_event(2, "'this is {not JSON'");
  insert_event(3, oversize_payload_sql());
  for (int n = 4; n <= 13; ++n) insert_event(n, "'{\"n\": " + std::to_string(n) + "}'");
  const Lsn after_all = *Lsn::parse(pg_->value("SELECT pg_current_wal_lsn()::text"));

  const auto events = kafka_->read_at_least({event_topic()}, 11, 60s);
  const auto dlq = kafka_->read_at_least({dlq_topic()}, 2, 60s);
  std::set<std::string> event_ids;
  for (const auto& r : events) event_ids.insert(r.header("id"));
  std::cout << "[fault] dead_letter policy: events=" << events.size()
            << " distinct=" << event_ids.size() << " dead-lettered=" << dlq.size() << std::endl;
  for (const auto& r : dlq) {
    std::cout << "[fault]   dlq kind=" << r.header("walrelay.error.kind")
              << " lsn=" << r.header("walrelay.lsn") << " source=" << r.header("walrelay.source")
              << " id=" << r.header("id") << " value_bytes=" << (r.value ? r.value->size() : 0)
              << " reason=" << r.header("walrelay.error.reason") << std::endl;
  }
  std::set<std::string> expected_ids;
  for (int n : {1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}) expected_ids.insert(uuid(n));
  EXPECT_EQ(event_ids, expected_ids) << describe(events);
  ASSERT_EQ(dlq.size(), 2u) << describe(dlq) << proc.logs();

  std::map<std::string, KafkaRecord> by_kind;
  for (const auto& r : dlq) by_kind[r.header("walrelay.error.kind")] = r;
  ASSERT_TRUE(by_kind.contains("mapping")) << describe(dlq);
  ASSERT_TRUE(by_kind.contains("oversize")) << describe(dlq);
  const KafkaRecord& poison = by_kind["mapping"];
  const KafkaRecord& big = by_kind["oversize"];
  EXPECT_NE(poison.header("walrelay.error.reason").find("not JSON"), std::string::npos)
      << poison.describe();
  EXPECT_EQ(poison.header("walrelay.source"), table("ob"));
  EXPECT_TRUE(poison.value && poison.value->find("this is {not JSON") != std::string::npos)
      << "the original change is the dead-letter value: " << poison.describe();
  EXPECT_NE(big.header("walrelay.error.reason").find("too large"), std::string::npos)
      << big.describe();
  EXPECT_EQ(big.header("id"), uuid(3)) << big.describe();
  const auto poison_lsn = Lsn::parse(poison.header("walrelay.lsn"));
  const auto big_lsn = Lsn::parse(big.header("walrelay.lsn"));
  ASSERT_TRUE(poison_lsn && big_lsn) << describe(dlq);
  EXPECT_LT(*poison_lsn, *big_lsn);
  EXPECT_GT(poison_lsn->value(), 0u);

  EXPECT_TRUE(wait_confirmed_at_least(*pg_, name_, after_all))
      << "confirmed_flush_lsn " << confirmed_lsn(*pg_, name_).value_or(Lsn{}).to_string()
      << " did not pass the last commit " << after_all.to_string();
  EXPECT_TRUE(proc.running()) << proc.logs();
  stop_gracefully(proc, name_);
}

// 5b. errors.policy fail (default): a non-JSON payload stops walrelay with exit 4, and the slot
//     still holds the bad transaction.
TEST_F(PoisonTest, FailPolicyStopsOnPoisonWithExit4WithoutConfirmingIt) {
  WalrelayProcess proc(outbox_config(""));
  start_streaming(proc, name_);
  insert_event(1, "'{\"n\": 1}'");
  ASSERT_EQ(kafka_->read_at_least({event_topic()}, 1).size(), 1u);
  const std::string before = pg_->value("SELECT pg_current_wal_lsn()::text");
  insert_event(2, "'this is {not JSON'");
  const int rc = proc.wait_exit(30s);
  ASSERT_TRUE(wait_slot_inactive(*pg_, name_));
  const auto confirmed = confirmed_lsn(*pg_, name_);
  const bool still_there = slot_still_has(uuid(2));
  std::cout << "[fault] fail policy, poison: exit code " << rc << ", confirmed_flush_lsn "
            << confirmed.value_or(Lsn{}).to_string() << ", WAL before the bad txn " << before
            << ", bad txn still decodable from the slot: " << still_there << std::endl;
  EXPECT_EQ(rc, 4) << proc.logs();
  EXPECT_NE(proc.stderr_text().find("not JSON"), std::string::npos) << proc.logs();
  EXPECT_TRUE(still_there) << "the slot confirmed past the bad transaction";
}

// 5b'. shared/cases/CASE-02, the real thing (not injected): a row whose wal2json line would be
//      ~1.2 GB (200,000,000 x U+0001, each escaped to six characters) fails every decoding
//      attempt with SQLSTATE 54000 at the same LSN. walrelay publishes and confirms the
//      transaction before it, never skips the row, and after source.max_repeated_errors
//      identical failures stops with exit 6 naming the LSN, the error and the ways on. (Each
//      attempt costs the server ~1.2 GB of memory for a few seconds: this suite runs alone.)
TEST_F(FaultTest, ARowTheServerCannotDecodeStopsWithExit6AfterRepeatedIdenticalErrors) {
  const std::string yaml = row_table_config({"max_repeated_errors: 2"});
  WalrelayProcess proc(yaml);
  start_streaming(proc, name_);
  pg_->exec("INSERT INTO " + table("t") + " VALUES (1, 'small')");
  ASSERT_EQ(kafka_->read_at_least({topic("t")}, 1).size(), 1u);
  const std::string before = pg_->value("SELECT pg_current_wal_lsn()::text");
  pg_->exec("INSERT INTO " + table("t") + " VALUES (2, repeat(chr(1), 200000000))");
  pg_->exec("INSERT INTO " + table("t") + " VALUES (3, 'after')");
  const int rc = proc.wait_exit(180s);
  ASSERT_TRUE(wait_slot_inactive(*pg_, name_, 60s));
  const auto confirmed = confirmed_lsn(*pg_, name_);
  std::cout << "[fault] undecodable row: exit " << rc << ", confirmed_flush_lsn "
            << confirmed.value_or(Lsn{}).to_string() << ", WAL before the row " << before
            << std::endl;
  EXPECT_EQ(rc, 6) << proc.logs();
  const std::string log = proc.stderr_text();
  EXPECT_NE(log.find("the server failed 2 times in a row with the same error"), std::string::npos)
      << proc.logs();
  EXPECT_NE(log.find("SQLSTATE 54000"), std::string::npos) << proc.logs();
  EXPECT_NE(log.find("pg_replication_slot_advance"), std::string::npos) << proc.logs();
  // Row 1's transaction was confirmed (promptly, source.confirm_interval); nothing past row 2.
  ASSERT_TRUE(confirmed.has_value());
  EXPECT_GE(*confirmed, *Lsn::parse(before)) << "row 1's transaction was not confirmed";
  const auto events = kafka_->read_all({topic("t")});
  for (const auto& r : events) {
    EXPECT_EQ(r.key, R"({"id":1})") << "published past the undecodable row: " << r.describe();
  }
  // The bad row is still in the slot: walrelay skipped nothing.
  EXPECT_EQ(pg_->value("SELECT count(*) FROM pg_replication_slots WHERE slot_name = " +
                       sql_literal(name_) + " AND confirmed_flush_lsn < '" + before +
                       "'::pg_lsn + 1000000"),
            "1");
}

// 5c. errors.policy fail: a payload over message.max.bytes stops walrelay with exit 3, and the
//     slot still holds the bad transaction.
TEST_F(PoisonTest, FailPolicyStopsOnOversizeWithExit3WithoutConfirmingIt) {
  WalrelayProcess proc(outbox_config(""));
  start_streaming(proc, name_);
  insert_event(1, "'{\"n\": 1}'");
  ASSERT_EQ(kafka_->read_at_least({event_topic()}, 1).size(), 1u);
  const std::string before = pg_->value("SELECT pg_current_wal_lsn()::text");
  insert_event(2, oversize_payload_sql());
  const int rc = proc.wait_exit(30s);
  ASSERT_TRUE(wait_slot_inactive(*pg_, name_));
  const auto confirmed = confirmed_lsn(*pg_, name_);
  const bool still_there = slot_still_has(uuid(2));
  std::cout << "[fault] fail policy, oversize: exit code " << rc << ", confirmed_flush_lsn "
            << confirmed.value_or(Lsn{}).to_string() << ", WAL before the bad txn " << before
            << ", bad txn still decodable from the slot: " << still_there << std::endl;
  EXPECT_EQ(rc, 3) << proc.logs();
  EXPECT_TRUE(still_there) << "the slot confirmed past the bad transaction";
}

// ------------------------------------------------------------------------------ idle WAL

class IdleWalTest : public FaultTest {
 protected:
  void TearDown() override {
    if (!other_table_.empty()) {
      try {
        Pg admin(env_.pg_admin_conninfo);
        admin.exec("DROP TABLE IF EXISTS " + other_table_);
      } catch (const std::exception& e) {
        std::cerr << "[fault] could not drop " << other_table_ << ": " << e.what() << "\n";
      }
    }
    FaultTest::TearDown();
  }

  struct Sample {
    double t;
    Lsn confirmed;
    long lag;
  };

  /// Streams an (unwritten) table of walrelay_test while another database gets writes for
  /// `seconds`; samples the slot every second. Returns the samples.
  std::vector<Sample> run_idle(const std::string& heartbeat_yaml, int seconds) {
    pg_->exec("CREATE TABLE " + table("quiet") + " (id int PRIMARY KEY)");
    WalrelayConfig c = make_config({table("quiet")});
    c.extra_yaml = heartbeat_yaml;
    WalrelayProcess proc(c.to_yaml());
    start_streaming(proc, name_);

    other_table_ = "public." + name_ + "_other";
    Pg admin(env_.pg_admin_conninfo);
    EXPECT_EQ(admin.value("SELECT current_database()"), "postgres");
    admin.exec("CREATE TABLE " + other_table_ + " (id serial PRIMARY KEY, v text)");
    Writer writer(env_.pg_admin_conninfo, other_table_, 20, 50ms, 100);
    writer.start();

    std::vector<Sample> samples;
    const auto t0 = Clock::now();
    for (int i = 1; i <= seconds; ++i) {
      std::this_thread::sleep_until(t0 + std::chrono::seconds(i));
      auto rows = pg_->query(
          "SELECT confirmed_flush_lsn::text, pg_wal_lsn_diff(pg_current_wal_lsn(), "
          "confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = " +
          sql_literal(name_));
      if (rows.empty()) break;
      samples.push_back(
          {seconds_since(t0), *Lsn::parse(*rows[0][0]), std::stol(rows[0][1].value_or("-1"))});
    }
    writer.stop();
    std::cout << "[fault] idle WAL ("
              << (heartbeat_yaml.find("enabled: false") != std::string::npos ? "heartbeat disabled"
                                                                             : "heartbeat 1s")
              << "): " << writer.committed() << " rows written to database postgres\n";
    for (const auto& s : samples) {
      std::cout << "[fault]   t=" << static_cast<int>(s.t + 0.5)
                << "s confirmed_flush_lsn=" << s.confirmed.to_string() << " lag_bytes=" << s.lag
                << "\n";
    }
    std::cout << std::flush;
    EXPECT_TRUE(proc.running()) << proc.logs();
    stop_gracefully(proc, name_);
    return samples;
  }

  /// Distinct confirmed positions among the samples, and the largest lag after the first 3 s.
  static std::pair<std::size_t, long> summarize(const std::vector<Sample>& samples) {
    std::set<Lsn> distinct;
    long max_lag = 0;
    for (const auto& s : samples) {
      distinct.insert(s.confirmed);
      if (s.t > 3) max_lag = std::max(max_lag, s.lag);
    }
    return {distinct.size(), max_lag};
  }

  std::string other_table_;
};

// 6a. Writes only in another database, heartbeat every second: the slot keeps up with the WAL.
TEST_F(IdleWalTest, HeartbeatKeepsSlotAdvancingWhileOnlyAnotherDatabaseWrites) {
  const auto samples = run_idle("heartbeat:\n  enabled: true\n  interval: 1s\n", 15);
  ASSERT_GE(samples.size(), 14u);
  const auto [distinct, max_lag] = summarize(samples);
  std::cout << "[fault] heartbeat 1s: " << distinct << " distinct confirmed positions in "
            << samples.size() << " samples, max lag after 3 s " << max_lag << " bytes" << std::endl;
  EXPECT_GE(distinct, samples.size() - 3) << "confirmed_flush_lsn did not keep advancing";
  EXPECT_LT(max_lag, 1 << 20) << "WAL piles up behind the slot";
  EXPECT_LT(samples.back().lag, 1 << 20);
}

// 6b. The same without heartbeat: the server's keepalives (wal_end) move the position.
TEST_F(IdleWalTest, KeepalivesKeepSlotAdvancingWithoutHeartbeat) {
  const auto samples = run_idle("heartbeat:\n  enabled: false\n", 12);
  ASSERT_GE(samples.size(), 11u);
  const auto [distinct, max_lag] = summarize(samples);
  std::cout << "[fault] heartbeat disabled: " << distinct << " distinct confirmed positions in "
            << samples.size() << " samples, max lag after 3 s " << max_lag << " bytes" << std::endl;
  EXPECT_GE(distinct, samples.size() - 3) << "confirmed_flush_lsn did not keep advancing";
  EXPECT_LT(max_lag, 1 << 20) << "WAL piles up behind the slot";
}

// -------------------------------------------------------------------------- broker outage

// 7. The real broker is stopped for WALRELAY_OUTAGE_SECONDS (default 30) under a steady write
//    load: the confirmed position freezes while it is down, memory stays bounded
//    (max_in_flight_bytes 16MiB), and after it is back every committed row is delivered.
TEST_F(FaultTest, KafkaOutageFreezesFlushAndLosesNothing) {
  const char* env_secs = std::getenv("WALRELAY_OUTAGE_SECONDS");
  const int outage = env_secs != nullptr ? std::atoi(env_secs) : 30;
  ASSERT_GT(outage, 2);
  std::string yaml = with_keys(row_table_config(), "kafka", {"max_in_flight_bytes: 16MiB"});
  // /ready must say no while the broker is gone (issue "Operations"): a short bound here.
  yaml = with_keys(yaml, "metrics", {"max_lag: 3s"});
  WalrelayProcess proc(yaml);
  start_streaming(proc, name_);
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  const pid_t pid = proc.pid();
  ASSERT_GT(pid, 0) << "walrelay's pid not found";

  // ~100 rows/s of ~8 kB: about 0.8 MB/s of event values, so a 30 s outage exceeds 16 MiB.
  Writer writer(env_.pg_conninfo, table("t"), 5, 50ms, 8000);
  writer.start();
  ASSERT_TRUE(writer.wait_more(100));
  ASSERT_GE(kafka_->read_at_least({topic("t")}, 100, 60s).size(), 100u) << proc.logs();

  KafkaOutage kafka_outage;  // whatever happens, the broker runs again at the end
  const auto t_stop = Clock::now();
  ASSERT_EQ(kafka_outage.stop(), 0);
  const auto t_down = Clock::now();
  const long committed_at_stop = writer.committed();
  std::cout << "[fault] kafka stopped in " << std::chrono::duration<double>(t_down - t_stop).count()
            << " s; outage " << outage << " s" << std::endl;

  // walrelay_lag_seconds as /metrics serves it (-1 when it cannot be read).
  const auto lag_seconds = [&] {
    const std::string text = http_get(*port, "/metrics").body;
    const auto at = text.find("\nwalrelay_lag_seconds ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + 22));
  };
  std::vector<std::pair<double, Lsn>> samples;
  int not_ready_during = 0;
  std::string not_ready_body;
  double max_lag_during = -1;
  for (int i = 1; i <= outage; ++i) {
    std::this_thread::sleep_until(t_down + std::chrono::seconds(i));
    samples.emplace_back(seconds_since(t_down), confirmed_lsn(*pg_, name_).value_or(Lsn{}));
    if (i > 6) {
      const HttpResult ready = http_get(*port, "/ready");
      if (ready.status == 503) {
        ++not_ready_during;
        not_ready_body = ready.body;
      }
      max_lag_during = std::max(max_lag_during, lag_seconds());
    }
    if (!proc.running()) break;
  }
  std::cout << "[fault] /ready 503 in " << not_ready_during << " samples of the outage ("
            << not_ready_body << "); walrelay_lag_seconds up to " << max_lag_during << std::endl;
  EXPECT_GT(not_ready_during, 0) << "/ready stayed 200 while the broker was down";
  // The age of the oldest unacknowledged change grows with the outage (issue "Operations"): well
  // past the 3 s bound of a 30 s outage, and back near 0 once the broker returns (below).
  EXPECT_GT(max_lag_during, outage / 3.0) << "walrelay_lag_seconds did not rise in the outage";
  const long committed_in_outage = writer.committed() - committed_at_stop;
  const long hwm_in_outage_kb = proc_status_kb(pid, "VmHWM").value_or(-1);
  const std::string progress_during = proc.stderr_text();
  EXPECT_TRUE(proc.running()) << "walrelay exited during the broker outage\n" << proc.logs();

  const auto t_start = Clock::now();
  ASSERT_EQ(kafka_outage.start(), 0);
  std::cout << "[fault] kafka started again in " << seconds_since(t_start) << " s" << std::endl;
  ASSERT_TRUE(writer.wait_more(100));
  writer.stop();

  // Frozen: after the first 2 s of the outage the confirmed position must not move.
  std::optional<Lsn> frozen;
  std::size_t moves = 0;
  for (const auto& [t, lsn] : samples) {
    if (t < 2.0) continue;
    if (!frozen) frozen = lsn;
    if (lsn != *frozen) ++moves;
  }
  std::cout << "[fault] outage samples:";
  for (const auto& [t, lsn] : samples) std::cout << " " << lsn.to_string();
  std::cout << "\n[fault] rows committed during the outage: " << committed_in_outage
            << ", confirmed_flush_lsn changes after 2 s of outage: " << moves << std::endl;
  EXPECT_EQ(moves, 0u) << "confirmed_flush_lsn moved while Kafka was down";
  EXPECT_GT(committed_in_outage, 0);

  expect_recovered(proc, writer, "kafka outage", frozen);
  EXPECT_TRUE(wait_until([&] { return http_get(*port, "/ready").status == 200; }, 60s))
      << "/ready did not come back after the broker returned: " << http_get(*port, "/ready").body;
  EXPECT_TRUE(wait_until([&] { return lag_seconds() >= 0 && lag_seconds() < outage / 3.0; }, 60s))
      << "walrelay_lag_seconds stayed at " << lag_seconds() << " after the broker returned";
  const long hwm_kb = proc_status_kb(pid, "VmHWM").value_or(-1);
  const long rss_kb = proc_status_kb(pid, "VmRSS").value_or(-1);
  const std::string log = proc.stderr_text();
  std::cout << "[fault] walrelay memory: VmHWM " << hwm_kb / 1024 << " MiB (at the end of the "
            << "outage " << hwm_in_outage_kb / 1024 << " MiB), VmRSS now " << rss_kb / 1024
            << " MiB; backpressure pauses logged during outage: "
            << count_occurrences(progress_during, "(paused: backpressure)") << std::endl;
  EXPECT_GT(hwm_kb, 0);
  EXPECT_LT(hwm_kb, 256 * 1024) << "walrelay's peak RSS exceeds 256 MiB";
  stop_gracefully(proc, name_);
}

}  // namespace
}  // namespace walrelay::itest
