// The acknowledgement tracking every source shares (sink/unit_tracker.hpp): units complete in the
// order they were opened, whatever order their records are acknowledged in.

#include "walrelay/sink/unit_tracker.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace walrelay::sink {
namespace {

using Tracker = UnitTracker<std::string>;

std::vector<std::string> done(Tracker& t) {
  std::vector<std::string> out;
  t.pop_done([&](Tracker::Seq seq, std::string&& unit) {
    out.push_back(std::to_string(seq) + "=" + unit);
  });
  return out;
}

// A later unit acknowledged first never completes before an earlier one: chunk 1's records are
// all acknowledged before chunk 0's last; nothing is done until chunk 0 is, then both, in order.
TEST(UnitTracker, ALaterUnitAcknowledgedFirstWaitsForTheEarlierOne) {
  Tracker t;
  const auto a = t.open("a");
  ASSERT_TRUE(t.add(a, 10));
  ASSERT_TRUE(t.add(a, 10));
  t.close(a);
  const auto b = t.open("b");
  ASSERT_TRUE(t.add(b, 5));
  t.close(b);
  EXPECT_EQ(t.in_flight_events(), 3u);
  EXPECT_EQ(t.in_flight_bytes(), 25u);
  t.ack(b, 5);
  t.ack(a, 10);
  EXPECT_TRUE(done(t).empty()) << "b is acknowledged but a is not";
  t.ack(a, 10);
  EXPECT_EQ(done(t), (std::vector<std::string>{"0=a", "1=b"}));
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.in_flight_events(), 0u);
  EXPECT_EQ(t.in_flight_bytes(), 0u);
}

// A unit is not done while it is open, even with every record so far acknowledged; a unit
// without records is done as soon as it is closed (and everything before it is).
TEST(UnitTracker, AnOpenUnitIsNotDoneAndAnEmptyClosedOneIs) {
  Tracker t;
  const auto a = t.open("a");
  ASSERT_TRUE(t.add(a, 1));
  t.ack(a, 1);
  EXPECT_TRUE(done(t).empty());
  t.close(a);
  const auto b = t.open("b");
  t.close(b);
  EXPECT_EQ(done(t), (std::vector<std::string>{"0=a", "1=b"}));
}

// A record that failed for good stops its unit and every later one for good.
TEST(UnitTracker, AFailedRecordStopsItsUnitAndEveryLaterOne) {
  Tracker t;
  const auto a = t.open("a");
  ASSERT_TRUE(t.add(a, 1));
  t.close(a);
  const auto b = t.open("b");
  ASSERT_TRUE(t.add(b, 1));
  ASSERT_TRUE(t.add(b, 1));
  t.close(b);
  const auto c = t.open("c");
  t.close(c);
  t.ack(a, 1);
  t.fail(b, 1);
  t.ack(b, 1);
  EXPECT_EQ(done(t), (std::vector<std::string>{"0=a"}));
  EXPECT_TRUE(t.failed());
  EXPECT_EQ(t.size(), 2u) << "b and c stay";
}

// Units are numbered from `first` (a resumed snapshot's next chunk); a report for a number not
// tracked is refused by ack (an error) and ignored by try_ack (a report of an earlier run).
TEST(UnitTracker, NumbersStartAtFirstAndUnknownReportsChangeNothing) {
  Tracker t(41);
  const auto a = t.open("a");
  EXPECT_EQ(a, 41u);
  EXPECT_EQ(t.next_seq(), 42u);
  ASSERT_TRUE(t.add(a, 3));
  EXPECT_FALSE(t.add(40, 3));
  EXPECT_FALSE(t.try_ack(40, 3));
  EXPECT_FALSE(t.try_ack(42, 3));
  EXPECT_THROW(t.ack(7, 3), std::logic_error);
  EXPECT_EQ(t.in_flight_events(), 1u);
  t.close(a);
  EXPECT_TRUE(t.try_ack(a, 3));
  EXPECT_EQ(done(t), (std::vector<std::string>{"41=a"}));
  EXPECT_EQ(t.unit(41), nullptr);
}

// for_each walks the tracked units oldest first with whether each is closed (what a snapshot's
// position record counts as handed over).
TEST(UnitTracker, ForEachWalksTheTrackedUnitsInOrder) {
  Tracker t(5);
  t.close(t.open("a"));
  (void)t.open("b");
  std::vector<std::string> seen;
  t.for_each([&](Tracker::Seq seq, const std::string& unit, bool closed) {
    seen.push_back(std::to_string(seq) + unit + (closed ? "+" : "-"));
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"5a+", "6b-"}));
  EXPECT_FALSE(t.back_closed());
  ASSERT_NE(t.back(), nullptr);
  EXPECT_EQ(*t.back(), "b");
}

}  // namespace
}  // namespace walrelay::sink
