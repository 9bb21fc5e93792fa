#include "state_store.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "snapshot/snapshot_progress.hpp"

using walrelay::Lsn;
using walrelay::SlotRecord;
using walrelay::StateStore;

namespace {
std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("walrelay-state-test-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  return dir.string();
}
}  // namespace

TEST(StateStore, MissingRecordIsNoRecord) {
  StateStore store(temp_dir("missing"), "slot_a");
  auto loaded = store.load();
  ASSERT_TRUE(loaded);
  EXPECT_FALSE(loaded->has_value());
}

TEST(StateStore, SavesAndLoadsTheRecord) {
  const auto dir = temp_dir("roundtrip");
  StateStore store(dir, "slot_a");
  SlotRecord r{"7713803581145093918", 3, "app", "slot_a", *Lsn::parse("16/B374D848")};
  ASSERT_TRUE(store.save(r));
  EXPECT_EQ(store.path(), dir + "/slot_a.state");
  auto loaded = StateStore(dir, "slot_a").load();
  ASSERT_TRUE(loaded && loaded->has_value());
  EXPECT_EQ((*loaded)->system_id, "7713803581145093918");
  EXPECT_EQ((*loaded)->timeline, 3u);
  EXPECT_EQ((*loaded)->database, "app");
  EXPECT_EQ((*loaded)->confirmed.to_string(), "16/B374D848");
  // Saving again replaces it; no temporary file is left behind.
  r.confirmed = *Lsn::parse("16/B3750000");
  ASSERT_TRUE(store.save(r));
  EXPECT_EQ((*StateStore(dir, "slot_a").load())->confirmed.to_string(), "16/B3750000");
  EXPECT_FALSE(std::filesystem::exists(dir + "/slot_a.state.tmp"));
  std::filesystem::remove_all(dir);
}

TEST(StateStore, MalformedRecordIsAnError) {
  const auto dir = temp_dir("malformed");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/slot_a.state") << "system_id=1\ntimeline=1\nconfirmed_lsn=zz\n";
  auto loaded = StateStore(dir, "slot_a").load();
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().find("confirmed_lsn"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// TIMELINE_HISTORY content of timeline 3 (PostgreSQL docs §55.4): timeline 1 ended at 0/3000000,
// timeline 2 at 0/5000060.
// `walrelay slot drop`: every file of the dropped slot goes, files of other slots stay.
TEST(StateStore, RemoveSlotFilesRemovesTheRecordAndTheSnapshotProgressOfThatSlotOnly) {
  const auto dir = temp_dir("remove");
  std::filesystem::create_directories(dir);
  for (const char* name : {"slot_a.state", "slot_a.snapshot", "slot_a.incremental",
                           "slot_a.state.tmp", "slot_ab.state", "slot_b.snapshot"}) {
    std::ofstream(dir + "/" + name) << "x\n";
  }
  auto removed = walrelay::remove_slot_files(dir, "slot_a");
  ASSERT_TRUE(removed) << removed.error();
  EXPECT_EQ(*removed,
            (std::vector<std::string>{dir + "/slot_a.state", dir + "/slot_a.state.tmp",
                                      dir + "/slot_a.snapshot", dir + "/slot_a.incremental"}));
  EXPECT_FALSE(std::filesystem::exists(dir + "/slot_a.state"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/slot_ab.state"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/slot_b.snapshot"));
  auto again = walrelay::remove_slot_files(dir, "slot_a");
  ASSERT_TRUE(again) << again.error();
  EXPECT_TRUE(again->empty());
  // A directory that does not exist holds no files of the slot.
  auto none = walrelay::remove_slot_files(dir + "/missing", "slot_a");
  ASSERT_TRUE(none) << none.error();
  EXPECT_TRUE(none->empty());
}

TEST(TimelineHistory, FindsWhereATimelineEnded) {
  const std::string history =
      "1\t0/3000000\tno recovery target specified\n"
      "\n"
      "2\t0/5000060\tno recovery target specified\n";
  EXPECT_EQ(walrelay::timeline_switchpoint(history, 1)->to_string(), "0/3000000");
  EXPECT_EQ(walrelay::timeline_switchpoint(history, 2)->to_string(), "0/5000060");
  EXPECT_FALSE(walrelay::timeline_switchpoint(history, 3));
  EXPECT_FALSE(walrelay::timeline_switchpoint("", 1));
}

TEST(SnapshotProgressStore, MissingIsNoneAndARoundTripKeepsKeysExactly) {
  using walrelay::snapshot::SnapshotProgress;
  using walrelay::snapshot::SnapshotProgressStore;
  using walrelay::snapshot::TableProgress;
  const auto dir = temp_dir("snapshot");
  SnapshotProgressStore store(dir, "slot_a");
  auto none = store.load();
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());

  SnapshotProgress p;
  p.slot = "slot_a";
  p.lsn = *Lsn::parse("16/B374D848");
  p.xid = 4242;
  TableProgress done;
  done.schema = "public";
  done.table = "Orders \"2024\"";
  done.done = true;
  done.rows = 20000;
  done.chunks = 3;
  done.last_key = walrelay::snapshot::KeyText{"a: b\n\"c\" #d", std::nullopt, "", "null"};
  TableProgress pending;
  pending.schema = "s";
  pending.table = "t";
  p.tables = {done, pending};
  ASSERT_TRUE(store.save(p));
  EXPECT_FALSE(p.complete());

  auto loaded = store.load();
  ASSERT_TRUE(loaded) << loaded.error();
  ASSERT_TRUE(loaded->has_value());
  const SnapshotProgress& q = **loaded;
  EXPECT_EQ(q.slot, "slot_a");
  EXPECT_EQ(q.lsn.to_string(), "16/B374D848");
  EXPECT_EQ(q.xid, 4242u);
  ASSERT_EQ(q.tables.size(), 2u);
  EXPECT_EQ(q.tables[0].table, "Orders \"2024\"");
  EXPECT_TRUE(q.tables[0].done);
  EXPECT_EQ(q.tables[0].rows, 20000u);
  EXPECT_EQ(q.tables[0].chunks, 3u);
  ASSERT_TRUE(q.tables[0].last_key);
  EXPECT_EQ(*q.tables[0].last_key, *done.last_key);  // SQL NULL stays apart from "null" and ""
  EXPECT_FALSE(q.tables[1].done);
  EXPECT_FALSE(q.tables[1].last_key);
  SnapshotProgress finished = q;
  finished.tables[1].done = true;
  EXPECT_TRUE(finished.complete());
}

TEST(SnapshotProgressStore, MalformedFileIsAnError) {
  const auto dir = temp_dir("snapshot-bad");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/slot_a.snapshot") << "slot: [unclosed\n";
  walrelay::snapshot::SnapshotProgressStore store(dir, "slot_a");
  EXPECT_FALSE(store.load());
}
