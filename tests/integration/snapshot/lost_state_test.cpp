// The state directory's files damaged between two runs (issue 25 item 7): `<slot>.snapshot` (the
// initial snapshot's progress), `<slot>.incremental` (the incremental snapshot queue) and
// `<slot>.state` (the slot record), each missing, empty and corrupt. Without proof that a snapshot
// finished its tables are read again (at least once) and the log says why; a damaged slot record
// stops walrelay (exit 1) without touching the slot.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "harness.hpp"

namespace walrelay::itest {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// How a file is damaged.
enum class Damage { kMissing, kEmpty, kCorrupt, kOtherShape };

const char* damage_name(Damage d) {
  switch (d) {
    case Damage::kMissing:
      return "missing";
    case Damage::kEmpty:
      return "empty";
    case Damage::kCorrupt:
      return "corrupt";
    case Damage::kOtherShape:
      return "other_shape";
  }
  return "?";
}

void damage(const fs::path& file, Damage d) {
  ASSERT_TRUE(fs::exists(file)) << file;
  switch (d) {
    case Damage::kMissing:
      fs::remove(file);
      break;
    case Damage::kEmpty:
      std::ofstream(file, std::ios::trunc);
      break;
    case Damage::kCorrupt:  // a torn write: bytes that are no YAML, no key=value
      std::ofstream(file, std::ios::trunc | std::ios::binary) << std::string("\0\x8f{[\n\xff", 6);
      break;
    case Damage::kOtherShape:  // valid YAML that lists no table (before: "no table left")
      std::ofstream(file, std::ios::trunc) << "slot: x\nlsn: 0/1\nxid: 1\ntables: 5\n";
      break;
  }
}

class LostStateTest : public IntegrationTest {
 protected:
  void create_rows_table(const std::string& name, std::size_t rows) {
    pg_->exec("CREATE TABLE " + table(name) + " (id bigint PRIMARY KEY, v int NOT NULL, t text)");
    pg_->exec("INSERT INTO " + table(name) + " SELECT g, g % 1000, 'row ' || g FROM " +
              "generate_series(1, " + std::to_string(rows) + ") g");
  }

  // A config of its own (`variant`: connector, slot, prefix and state directory) snapshotting
  // `t` in chunks of `chunk` rows with one chunk in flight (a chunk per Kafka round trip).
  WalrelayConfig config(const std::string& variant, std::size_t chunk) {
    auto cfg = make_config({{table("t")}});
    cfg.name = cfg.slot = cfg.prefix = name_ + "_" + variant;
    cfg.state_dir = (fs::path(cfg.state_dir).parent_path() / cfg.name).string();
    fs::remove_all(cfg.state_dir);
    cfg.snapshot_mode = "initial";
    cfg.snapshot_lines = "  chunk_size: " + std::to_string(chunk) + "\n";
    cfg.extra_yaml = "";
    return cfg;
  }
  static std::string yaml_of(const WalrelayConfig& cfg, std::size_t chunk) {
    std::string yaml = cfg.to_yaml();
    yaml.insert(yaml.find("kafka:\n") + 7,
                "  max_in_flight_events: " + std::to_string(chunk) + "\n");
    return yaml;
  }
  static fs::path file_of(const WalrelayConfig& cfg, const std::string& suffix) {
    return fs::path(cfg.state_dir) / (cfg.slot + suffix);
  }
  std::string topic_of(const WalrelayConfig& cfg) const { return cfg.prefix + "." + table("t"); }

  // The initial snapshot's acknowledged rows of its first table (0 while there is none).
  static std::size_t progress_rows(const fs::path& file) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    std::smatch m;
    const std::string s = text.str();
    if (std::regex_search(s, m, std::regex("rows: ([0-9]+)"))) return std::stoul(m[1]);
    return 0;
  }

  // Distinct ids with an event in the topic, and how many `r` events it holds.
  std::pair<std::set<std::string>, std::size_t> keys_and_reads(const WalrelayConfig& cfg) {
    std::set<std::string> ids;
    std::size_t reads = 0;
    for (const auto& r : kafka_->read_all({topic_of(cfg)}, 120s)) {
      if (r.key) ids.insert(json_at(*r.key, "/id"));
      if (r.value && json_string_at(*r.value, "/op") == "r") ++reads;
    }
    return {ids, reads};
  }

  // Starts `proc`, SIGKILLs it once the initial snapshot acknowledged `threshold` of `rows` rows.
  // False (with a failure recorded) when it got there too late or not at all.
  bool kill_mid_snapshot(WalrelayProcess& proc, const WalrelayConfig& cfg, std::size_t threshold,
                         std::size_t rows) {
    proc.start();
    const fs::path progress = file_of(cfg, ".snapshot");
    const bool reached = wait_until([&] { return progress_rows(progress) >= threshold; }, 60s, 5ms);
    proc.kill();
    const std::size_t before = progress_rows(progress);
    if (!reached || before >= rows) {
      ADD_FAILURE() << "progress " << before << " of " << rows << " at the kill\n" << proc.logs();
      return false;
    }
    return true;
  }

  void slot_drop(const WalrelayConfig& cfg) { drop_slot_quietly(*pg_, cfg.slot); }
};

// The case, smaller: SIGKILL during the initial snapshot, then `<slot>.snapshot` lost
// (deleted, torn, or replaced by YAML listing no table; an empty one is below) with
// `<slot>.state` kept. Every row must reach Kafka: the table is read again, with a warning saying
// why. Before, the missing and the table-less file were taken as "done" (2,400 of 20,000 rows
// published) and the torn one stopped walrelay.
TEST_F(LostStateTest, LostSnapshotProgressIsNotTakenAsDone) {
  constexpr std::size_t kRows = 20'000;
  constexpr std::size_t kChunk = 100;
  create_rows_table("t", kRows);
  for (const Damage d : {Damage::kMissing, Damage::kCorrupt, Damage::kOtherShape}) {
    SCOPED_TRACE(damage_name(d));
    const auto cfg = config(damage_name(d), kChunk);
    WalrelayProcess proc(yaml_of(cfg, kChunk), std::string("walrelay ") + damage_name(d));
    if (!kill_mid_snapshot(proc, cfg, kRows / 10, kRows)) return;
    ASSERT_TRUE(fs::exists(file_of(cfg, ".state")));
    damage(file_of(cfg, ".snapshot"), d);
    start_streaming(proc, cfg.slot);
    // Rows first: before, the missing and the table-less file streamed with no snapshot.
    const bool done = proc.wait_for_log("incremental snapshot: " + table("t") + " done", 30s);
    ASSERT_TRUE(stop_gracefully(proc, cfg.slot));
    const auto [ids, reads] = keys_and_reads(cfg);
    EXPECT_EQ(ids.size(), kRows) << "rows never published";
    EXPECT_GE(reads, kRows);
    EXPECT_TRUE(done) << proc.logs();
    EXPECT_NE(
        proc.stderr_text().find("no proof that the snapshot of slot " + cfg.slot + " finished"),
        std::string::npos)
        << proc.logs();
    slot_drop(cfg);
  }
}

// The same snapshot handed over to an incremental snapshot (a second run after the kill), killed
// again, and then `<slot>.incremental` lost: the `.snapshot` says the table is done (it was
// handed over), so only the queue knew that its rows were still owed. Every row must reach Kafka.
TEST_F(LostStateTest, LostIncrementalQueueAfterTheHandOverReadsTheTablesAgain) {
  constexpr std::size_t kRows = 20'000;
  constexpr std::size_t kChunk = 100;
  create_rows_table("t", kRows);
  for (const Damage d : {Damage::kMissing, Damage::kCorrupt}) {
    SCOPED_TRACE(damage_name(d));
    const auto cfg = config(std::string("q_") + damage_name(d), kChunk);
    WalrelayProcess proc(yaml_of(cfg, kChunk), std::string("walrelay ") + damage_name(d));
    if (!kill_mid_snapshot(proc, cfg, kRows / 10, kRows)) return;
    proc.start();
    ASSERT_TRUE(proc.wait_for_log("finish as an incremental snapshot")) << proc.logs();
    ASSERT_TRUE(proc.wait_for_log(" info streaming: ")) << proc.logs();
    proc.kill();
    ASSERT_EQ(
        count_occurrences(proc.stderr_text(), "incremental snapshot: " + table("t") + " done"), 0u)
        << "finished before the second kill\n"
        << proc.logs();
    damage(file_of(cfg, ".incremental"), d);
    start_streaming(proc, cfg.slot);
    const bool done = proc.wait_for_log("incremental snapshot: " + table("t") + " done", 30s);
    ASSERT_TRUE(stop_gracefully(proc, cfg.slot));
    EXPECT_EQ(keys_and_reads(cfg).first.size(), kRows) << "rows never published";
    EXPECT_TRUE(done) << proc.logs();
    EXPECT_NE(proc.stderr_text().find("incremental snapshot queue lost"), std::string::npos)
        << proc.logs();
    slot_drop(cfg);
  }
}

// After a finished snapshot: each progress file damaged in each way. A damaged `.snapshot` or
// `.incremental` is no proof, so the rows are read again (10 more `r` events, saying why); a
// damaged slot record stops walrelay with exit 1 naming the file and the way out, the slot as it
// was; a missing slot record trusts the slot's own position (nothing is read again).
TEST_F(LostStateTest, EachStateFileMissingEmptyOrCorruptIsHandledSafely) {
  create_rows_table("t", 10);
  int variant = 0;
  for (const std::string suffix : {".snapshot", ".incremental", ".state"}) {
    for (const Damage d : {Damage::kMissing, Damage::kEmpty, Damage::kCorrupt}) {
      SCOPED_TRACE(suffix + " " + damage_name(d));
      const auto cfg = config("f" + std::to_string(variant++), 4);
      WalrelayProcess proc(yaml_of(cfg, 4), "walrelay " + suffix + " " + damage_name(d));
      start_streaming(proc, cfg.slot);
      ASSERT_TRUE(proc.wait_for_log("snapshot: complete")) << proc.logs();
      ASSERT_TRUE(stop_gracefully(proc, cfg.slot));
      ASSERT_EQ(keys_and_reads(cfg).second, 10u);
      const auto slot_before = slot_state(*pg_, cfg.slot);
      ASSERT_TRUE(slot_before.has_value());
      damage(file_of(cfg, suffix), d);
      if (suffix == ".state" && d != Damage::kMissing) {
        proc.start();
        EXPECT_EQ(proc.wait_exit(30s), 1) << proc.logs();
        EXPECT_NE(proc.stderr_text().find(file_of(cfg, ".state").string()), std::string::npos)
            << proc.logs();
        EXPECT_NE(proc.stderr_text().find("remove it to trust the slot's own position"),
                  std::string::npos)
            << proc.logs();
        const auto slot_after = slot_state(*pg_, cfg.slot);
        ASSERT_TRUE(slot_after.has_value()) << "the slot was dropped";
        EXPECT_EQ(slot_after->confirmed_flush_lsn, slot_before->confirmed_flush_lsn);
        slot_drop(cfg);
        continue;
      }
      start_streaming(proc, cfg.slot);
      if (suffix == ".state") {
        pg_->exec("UPDATE " + table("t") + " SET v = v + 1 WHERE id = 1");
        ASSERT_EQ(kafka_->read_at_least({topic_of(cfg)}, 11).size(), 11u) << proc.logs();
        ASSERT_TRUE(stop_gracefully(proc, cfg.slot));
        EXPECT_EQ(keys_and_reads(cfg).second, 10u) << "read again\n" << proc.logs();
        pg_->exec("UPDATE " + table("t") + " SET v = v - 1 WHERE id = 1");
        slot_drop(cfg);
        continue;
      }
      ASSERT_TRUE(proc.wait_for_log(suffix == ".snapshot" ? "no proof that the snapshot"
                                                          : "incremental snapshot queue lost"))
          << proc.logs();
      ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("t") + " done"))
          << proc.logs();
      ASSERT_TRUE(stop_gracefully(proc, cfg.slot));
      EXPECT_EQ(keys_and_reads(cfg).second, 20u) << proc.logs();
      // Read again once: the next start finds the files whole.
      start_streaming(proc, cfg.slot);
      ASSERT_TRUE(stop_gracefully(proc, cfg.slot));
      EXPECT_EQ(count_occurrences(proc.stderr_text(), "no proof that the snapshot") +
                    count_occurrences(proc.stderr_text(), "incremental snapshot queue lost"),
                1u)
          << proc.logs();
      EXPECT_EQ(keys_and_reads(cfg).second, 20u) << proc.logs();
      slot_drop(cfg);
    }
  }
}

}  // namespace
}  // namespace walrelay::itest
