#include "walrelay/state/state_store.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "walrelay/snapshot/snapshot_progress.hpp"

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

// Issue 25 item 7: a slot record that is empty, torn or garbled stops walrelay (never a silent
// fresh start, which would not notice a lost slot), and the message says how to recover.
TEST(StateStore, EmptyTornOrGarbledRecordIsAnErrorSayingHowToRecover) {
  const auto dir = temp_dir("damaged");
  std::filesystem::create_directories(dir);
  const std::vector<std::string> bodies = {
      "",                                                   // empty
      "system_id=7713803581145093918\ntimeline=3\n",        // cut before confirmed_lsn
      std::string("\0\x8f{[\n\xff", 6),                     // garbage
      "system_id=77138x\ntimeline=3\nconfirmed_lsn=0/1\n",  // system_id not a number
      "system_id=7713803581145093918\ntimeline=3a\nconfirmed_lsn=0/1\n"};  // timeline
  for (const auto& body : bodies) {
    std::ofstream(dir + "/slot_a.state", std::ios::trunc | std::ios::binary) << body;
    auto loaded = StateStore(dir, "slot_a").load();
    ASSERT_FALSE(loaded) << body;
    EXPECT_NE(loaded.error().find(dir + "/slot_a.state"), std::string::npos) << loaded.error();
    EXPECT_NE(loaded.error().find("remove it to trust the slot's own position"), std::string::npos)
        << loaded.error();
  }
  std::filesystem::remove_all(dir);
}

TEST(StateStore, TheIncrementalQueueMarkRoundTrips) {
  const auto dir = temp_dir("kept");
  SlotRecord r{"1", 1, "app", "slot_a", *Lsn::parse("0/10")};
  ASSERT_TRUE(StateStore(dir, "slot_a").save(r));
  EXPECT_FALSE((*StateStore(dir, "slot_a").load())->incremental_kept);  // older records
  r.incremental_kept = true;
  ASSERT_TRUE(StateStore(dir, "slot_a").save(r));
  EXPECT_TRUE((*StateStore(dir, "slot_a").load())->incremental_kept);
  std::filesystem::remove_all(dir);
}

// An empty, comment-only or table-less progress file is an error, never "no table left" (before,
// `tables: 5` or no `tables` at all loaded as a complete snapshot).
TEST(SnapshotProgressStore, EmptyOrTablelessFileIsAnErrorNotComplete) {
  const auto dir = temp_dir("snapshot-empty");
  std::filesystem::create_directories(dir);
  for (const std::string body :
       {"", "# walrelay snapshot progress: do not edit while walrelay runs\n",
        "slot: \"slot_a\"\nlsn: 0/16B3748\nxid: 740\nresumed: false\n",
        "slot: \"slot_a\"\nlsn: 0/16B3748\nxid: 740\nresumed: false\ntables: 5\n", "- a\n- b\n"}) {
    std::ofstream(dir + "/slot_a.snapshot", std::ios::trunc) << body;
    EXPECT_FALSE(walrelay::snapshot::SnapshotProgressStore(dir, "slot_a").load()) << body;
  }
  std::ofstream(dir + "/slot_a.snapshot", std::ios::trunc)
      << "slot: \"slot_a\"\nlsn: 0/16B3748\nxid: 740\nresumed: false\ntables: []\n";
  auto none = walrelay::snapshot::SnapshotProgressStore(dir, "slot_a").load();
  ASSERT_TRUE(none && *none);  // no captured table: a valid, complete snapshot
  EXPECT_TRUE((*none)->complete());
  // As walrelay writes it.
  walrelay::snapshot::SnapshotProgress empty;
  empty.slot = "slot_a";
  empty.lsn = *Lsn::parse("0/16B3748");
  ASSERT_TRUE(walrelay::snapshot::SnapshotProgressStore(dir, "slot_a").save(empty));
  auto saved = walrelay::snapshot::SnapshotProgressStore(dir, "slot_a").load();
  ASSERT_TRUE(saved && *saved) << (saved ? "" : saved.error());
  EXPECT_EQ(**saved, empty);
  std::filesystem::remove_all(dir);
}
