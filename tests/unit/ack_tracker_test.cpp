#include "walrelay/sink/ack_tracker.hpp"

#include <gtest/gtest.h>

using walrelay::Lsn;
using walrelay::sink::AckTracker;

TEST(AckTracker, FlushIsNextLsnOfFullyAckedTransaction) {
  AckTracker t;
  const auto s = t.begin(Lsn(0x200));
  t.add_event(10);
  t.add_event(20);
  t.commit();
  EXPECT_EQ(t.flush_lsn(), Lsn(0));
  EXPECT_FALSE(t.on_ack(s, 10));
  EXPECT_EQ(t.flush_lsn(), Lsn(0));
  EXPECT_TRUE(t.on_ack(s, 20));
  EXPECT_EQ(t.flush_lsn(), Lsn(0x200));
  EXPECT_EQ(t.in_flight_events(), 0u);
  EXPECT_EQ(t.in_flight_bytes(), 0u);
}

TEST(AckTracker, OutOfOrderAcksAcrossPartitionsNeverPassAnUnackedTransaction) {
  AckTracker t;
  const auto a = t.begin(Lsn(0x100));  // event on a slow partition
  t.add_event(1);
  t.commit();
  const auto b = t.begin(Lsn(0x200));  // events on fast partitions
  t.add_event(1);
  t.add_event(1);
  t.commit();
  const auto c = t.begin(Lsn(0x300));
  t.add_event(1);
  t.commit();

  t.on_ack(c, 1);
  t.on_ack(b, 1);
  t.on_ack(b, 1);
  EXPECT_EQ(t.flush_lsn(), Lsn(0)) << "transaction a is not acknowledged yet";
  t.on_ack(a, 1);
  EXPECT_EQ(t.flush_lsn(), Lsn(0x300));
  EXPECT_EQ(t.pending_transactions(), 0u);
}

TEST(AckTracker, OpenTransactionHoldsFlushEvenWhenItsEventsAreAcked) {
  AckTracker t;
  const auto a = t.begin(Lsn(0x100));
  t.add_event(1);
  t.on_ack(a, 1);
  EXPECT_EQ(t.flush_lsn(), Lsn(0)) << "COMMIT not seen yet";
  t.commit();
  EXPECT_EQ(t.flush_lsn(), Lsn(0x100));
}

TEST(AckTracker, EmptyTransactionsAdvanceBehindAckedOnes) {
  AckTracker t;
  const auto a = t.begin(Lsn(0x100));
  t.add_event(1);
  t.commit();
  t.begin(Lsn(0x180));  // empty B/C pair (DDL, filtered tables)
  t.commit();
  EXPECT_EQ(t.flush_lsn(), Lsn(0));
  t.on_ack(a, 1);
  EXPECT_EQ(t.flush_lsn(), Lsn(0x180));
}

TEST(AckTracker, FailureStopsFlushForGood) {
  AckTracker t;
  const auto a = t.begin(Lsn(0x100));
  t.add_event(1);
  t.commit();
  const auto b = t.begin(Lsn(0x200));
  t.add_event(1);
  t.add_event(1);
  t.commit();
  const auto c = t.begin(Lsn(0x300));
  t.add_event(1);
  t.commit();
  t.on_ack(a, 1);
  EXPECT_EQ(t.flush_lsn(), Lsn(0x100));
  t.on_failure(b, 1);
  t.on_ack(b, 1);
  t.on_ack(c, 1);
  EXPECT_TRUE(t.failed());
  EXPECT_EQ(t.flush_lsn(), Lsn(0x100));
  EXPECT_FALSE(t.advance_idle(Lsn(0x900)));
  EXPECT_EQ(t.flush_lsn(), Lsn(0x100));
}

TEST(AckTracker, OnlyMovesForward) {
  AckTracker t;
  t.set_confirmed(Lsn(0x500));
  const auto a = t.begin(Lsn(0x400));  // e.g. a non-transactional message at an earlier LSN
  t.add_event(1);
  t.commit();
  t.on_ack(a, 1);
  EXPECT_EQ(t.flush_lsn(), Lsn(0x500));
  t.set_confirmed(Lsn(0x100));
  EXPECT_EQ(t.flush_lsn(), Lsn(0x500));
}

TEST(AckTracker, IdleAdvanceOnlyWhenNothingIsOpenOrInFlight) {
  AckTracker t;
  EXPECT_TRUE(t.advance_idle(Lsn(0x100)));
  EXPECT_EQ(t.flush_lsn(), Lsn(0x100));
  EXPECT_FALSE(t.advance_idle(Lsn(0x80)));
  const auto a = t.begin(Lsn(0x200));
  EXPECT_FALSE(t.advance_idle(Lsn(0x900))) << "a transaction is open";
  t.add_event(1);
  t.commit();
  EXPECT_FALSE(t.advance_idle(Lsn(0x900))) << "an event is in flight";
  t.on_ack(a, 1);
  EXPECT_TRUE(t.advance_idle(Lsn(0x900)));
  EXPECT_EQ(t.flush_lsn(), Lsn(0x900));
}

TEST(AckTracker, CountsInFlightBytesForBackpressure) {
  AckTracker t;
  const auto a = t.begin(Lsn(0x100));
  t.add_event(100);
  t.add_event(50);
  EXPECT_EQ(t.in_flight_events(), 2u);
  EXPECT_EQ(t.in_flight_bytes(), 150u);
  t.on_ack(a, 100);
  EXPECT_EQ(t.in_flight_bytes(), 50u);
}

TEST(AckTracker, MisuseIsAnError) {
  AckTracker t;
  EXPECT_THROW(t.add_event(1), std::logic_error);
  EXPECT_THROW(t.commit(), std::logic_error);
  t.begin(Lsn(1));
  EXPECT_THROW(t.begin(Lsn(2)), std::logic_error);
}
