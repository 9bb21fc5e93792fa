// reconcile's break ages (reconcile/break_ages.hpp): a break seen again keeps its first-seen
// time, one no longer seen is closed, other tables' breaks are kept, and the state file reads
// back what was written (ids with tabs, newlines and backslashes included).

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "walrelay/reconcile/break_ages.hpp"

namespace walrelay::reconcile {
namespace {

Report report_at(std::int64_t now, std::vector<Break> breaks, std::string table = "public.outbox") {
  Report r;
  r.now_ms = now;
  TableReport t;
  t.table = std::move(table);
  t.found.breaks = std::move(breaks);
  r.tables.push_back(std::move(t));
  return r;
}

TEST(ReconcileBreakAges, SeenAgainKeepsItsFirstSeenTimeAndUnseenAreClosed) {
  BreakAges ages;
  // First run at t=100 s: a phantom without an event time, a missing row whose event is older.
  auto first = report_at(100'000, {Break{BreakClass::kPhantom, "ghost", -1, ""},
                                   Break{BreakClass::kMissing, "lost", 40'000, ""}});
  apply_break_ages(first, ages);
  EXPECT_EQ(first.tables[0].found.breaks[0].first_seen_ms, 100'000);
  EXPECT_EQ(first.tables[0].found.breaks[1].first_seen_ms, 40'000);  // at least its event's age
  EXPECT_EQ(ages.size(), 2u);

  // Second run at t=160 s: the phantom again (its age grows), "lost" gone (repaired), a new one.
  auto second = report_at(160'000, {Break{BreakClass::kPhantom, "ghost", -1, ""},
                                    Break{BreakClass::kConflict, "e-5", 150'000, ""}});
  apply_break_ages(second, ages);
  EXPECT_EQ(second.tables[0].found.breaks[0].first_seen_ms, 100'000);
  EXPECT_EQ(break_age_ms(second.tables[0].found.breaks[0], second.now_ms), 60'000);
  EXPECT_EQ(second.tables[0].found.breaks[1].first_seen_ms, 150'000);
  EXPECT_EQ(ages.size(), 2u);
  EXPECT_FALSE(ages.contains({"public.outbox", "missing", "lost"}));

  // A run of another table only (--table) leaves this table's breaks open.
  auto other = report_at(170'000, {}, "public.other_outbox");
  apply_break_ages(other, ages);
  EXPECT_EQ(ages.size(), 2u);
  EXPECT_EQ((ages[{"public.outbox", "phantom", "ghost"}]), 100'000);
}

TEST(ReconcileBreakAges, TheStateFileReadsBackWhatWasWritten) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("walrelay-break-ages-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::string path = break_ages_path(dir.string(), "walrelay_slot");
  EXPECT_EQ(path, dir.string() + "/walrelay_slot.reconcile");
  auto none = load_break_ages(path);
  ASSERT_TRUE(none) << none.error();
  EXPECT_TRUE(none->empty());  // the first run: no file yet

  BreakAges ages;
  ages[{"public.outbox", "phantom", "odd\tid\nwith\\escapes\r"}] = 1'700'000'000'123;
  ages[{"public.outbox", "missing", "e-1"}] = 5;
  ASSERT_TRUE(save_break_ages(dir.string(), path, ages));
  auto back = load_break_ages(path);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, ages);

  std::ofstream(path, std::ios::app) << "12\tonly-two-fields\n";
  auto bad = load_break_ages(path);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find(path + " line 5"), std::string::npos) << bad.error();
  std::filesystem::remove_all(dir);
}

TEST(ReconcileBreakAges, SummaryAndJsonShowTheAgeFromFirstSeen) {
  auto r = report_at(3'700'000, {Break{BreakClass::kPhantom, "ghost", 3'600'000, "", 100'000}});
  std::ostringstream summary;
  write_summary(summary, r);
  EXPECT_NE(summary.str().find("1h0m"), std::string::npos) << summary.str();
  std::ostringstream json;
  write_json(json, r);
  EXPECT_NE(json.str().find(R"("since_ms":3600000,"age_s":3600,"first_seen_ms":100000)"),
            std::string::npos)
      << json.str();
}

}  // namespace
}  // namespace walrelay::reconcile
