#include "state_store.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
