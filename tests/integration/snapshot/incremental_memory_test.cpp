// Issue 19 §1: an incremental snapshot while walrelay drains a backlog holds memory bounded by
// configuration, not by the backlog. A slot made before walrelay first runs, with a backlog of N
// inserted rows in it (1,000-row transactions): walrelay streams the backlog and, since the slot
// existed before it, reads the same table by an incremental snapshot, whose first chunk's
// watermarks are written at the head of the WAL while the stream is N rows behind. The peak RSS
// (VmHWM) when the stream has caught up must not grow with N: at a 2 M-row backlog it may exceed
// that at a 0.5 M-row backlog by a few MB only (before the fix the streamed keys of the whole
// backlog were kept until the low watermark: +150 MB or more).
//
// A property, not a speed: the test asserts nothing about time. Kafka is a librdkafka mock
// cluster in a process of its own (benchmarks/mock_broker.cpp), so 2.5 M records never reach the
// shared test broker's disk; the mock's memory is its own process's, not walrelay's.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "harness.hpp"

#ifndef WALRELAY_MOCK_BROKER
#error "WALRELAY_MOCK_BROKER must be defined (path of benchmarks' mock_broker)"
#endif

namespace walrelay::itest {
namespace {

using namespace std::chrono_literals;

/// benchmarks' mock_broker as a child process: its first stdout line is the bootstrap list.
class MockBroker {
 public:
  MockBroker() {
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      ::execl(WALRELAY_MOCK_BROKER, WALRELAY_MOCK_BROKER, "--partitions", "6",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    char c = 0;
    while (::read(out[0], &c, 1) == 1 && c != '\n') bootstrap_.push_back(c);
    ::close(out[0]);
  }
  ~MockBroker() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  MockBroker(const MockBroker&) = delete;
  MockBroker& operator=(const MockBroker&) = delete;
  [[nodiscard]] const std::string& bootstrap() const { return bootstrap_; }

 private:
  pid_t pid_ = -1;
  std::string bootstrap_;
};

class IncrementalMemoryTest : public IntegrationTest {
 protected:
  /// walrelay's VmHWM in kB once it has streamed a backlog of `rows` inserted rows of a table
  /// that an incremental snapshot reads meanwhile (defaults otherwise); -1 when it failed.
  long peak_rss_kb_through_a_backlog(const MockBroker& broker, long rows);
};

long IncrementalMemoryTest::peak_rss_kb_through_a_backlog(const MockBroker& broker, long rows) {
  const std::string tag = "b" + std::to_string(rows);
  const std::string slot = name_ + "_" + tag;
  pg_->exec("CREATE TABLE " + table(tag) + " (id bigint PRIMARY KEY, a int, b int, t text)");
  // The slot first, then the backlog: walrelay has not run yet, so it finds N rows in the slot
  // and, the slot having existed before it, reads the table by an incremental snapshot.
  pg_->exec("SELECT pg_create_logical_replication_slot(" + sql_literal(slot) + ", 'wal2json')");
  pg_->exec("DO $$ BEGIN FOR i IN 0.." + std::to_string(rows / 1000 - 1) + " LOOP INSERT INTO " +
            table(tag) +
            " SELECT g, g % 1000, g % 7, md5(g::text) FROM generate_series(i * 1000 + 1, "
            "i * 1000 + 1000) g; COMMIT; END LOOP; END $$");
  const std::string backlog_end = pg_->value("SELECT pg_current_wal_lsn()::text");

  auto cfg = make_config({{table(tag)}});
  cfg.slot = slot;
  cfg.bootstrap = broker.bootstrap();
  cfg.snapshot_mode = "initial";
  cfg.state_dir += "/" + tag;
  cfg.extra_yaml = "heartbeat:\n  enabled: false\n";
  std::string yaml = cfg.to_yaml();
  WalrelayProcess proc(yaml, "walrelay-" + tag);
  proc.start();
  const pid_t pid = proc.pid();
  std::string confirmed;
  const bool caught_up = wait_confirmed_past(*pg_, slot, backlog_end, confirmed, 900s);
  const long hwm_kb = proc_status_kb(pid, "VmHWM").value_or(-1);
  const std::string log = proc.stderr_text();
  proc.stop(SIGTERM, 60s);
  drop_slot_quietly(*pg_, slot);
  pg_->exec("DROP TABLE " + table(tag));
  EXPECT_TRUE(caught_up) << "walrelay did not confirm past the backlog (" << confirmed << " < "
                         << backlog_end << ")\n"
                         << proc.logs();
  EXPECT_NE(log.find("existed before walrelay"), std::string::npos)
      << "no incremental snapshot during the backlog\n"
      << proc.logs();
  std::cout << "[memory] backlog of " << rows << " rows with an incremental snapshot: VmHWM "
            << hwm_kb / 1024 << " MiB" << std::endl;
  return caught_up ? hwm_kb : -1;
}

TEST_F(IncrementalMemoryTest, PeakMemoryDoesNotGrowWithTheBacklogDuringAnIncrementalSnapshot) {
  MockBroker broker;
  ASSERT_FALSE(broker.bootstrap().empty()) << "mock_broker printed no bootstrap servers";
  const long small_kb = peak_rss_kb_through_a_backlog(broker, 500'000);
  ASSERT_GT(small_kb, 0);
  const long large_kb = peak_rss_kb_through_a_backlog(broker, 2'000'000);
  ASSERT_GT(large_kb, 0);
  // "A few MB": allocator and librdkafka buffer noise, never the backlog (1.5 M more rows).
  EXPECT_LE(large_kb - small_kb, 8 * 1024)
      << "peak RSS grew from " << small_kb / 1024 << " MiB at a 0.5 M-row backlog to "
      << large_kb / 1024 << " MiB at 2 M rows";
}

}  // namespace
}  // namespace walrelay::itest
