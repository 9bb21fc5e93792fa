// The relay's batch rules (relay/batch_outcome.hpp): what is marked sent, failed or counted for
// one claimed batch, and how delivery errors are classed.

#include <gtest/gtest.h>

#include "walrelay/relay/batch_outcome.hpp"

namespace walrelay::relay {
namespace {

RowOutcome row(std::string key, RowState state, std::int64_t attempts = 0) {
  return RowOutcome{std::move(key), state, attempts, state == RowState::kAcked ? "" : "why"};
}

TEST(RelayBatch, EveryRowAckedIsSent) {
  const std::vector<RowOutcome> rows = {row("a", RowState::kAcked), row("b", RowState::kAcked),
                                        row("a", RowState::kAcked)};
  const BatchDecision d = decide(rows, 8, true);
  EXPECT_FALSE(d.rollback);
  EXPECT_EQ(d.sent, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_TRUE(d.failures.empty());
}

// A batch publisher that marks rows 2 and 3 of a key sent after row 1 failed would publish
// 2, 3, 1: here the key stops at its first failure and its later rows stay pending.
TEST(RelayBatch, AKeyIsMarkedOnlyUpToItsFirstFailure) {
  const std::vector<RowOutcome> rows = {row("a", RowState::kOther, 2), row("b", RowState::kAcked),
                                        row("a", RowState::kAcked), row("a", RowState::kAcked)};
  const BatchDecision d = decide(rows, 8, true);
  EXPECT_FALSE(d.rollback);
  EXPECT_EQ(d.sent, (std::vector<std::size_t>{1}));
  ASSERT_EQ(d.failures.size(), 1u);
  EXPECT_EQ(d.failures[0].row, 0u);
  EXPECT_TRUE(d.failures[0].count_attempt);
  EXPECT_FALSE(d.failures[0].failed);
}

TEST(RelayBatch, NothingAcknowledgedAndKafkaFailedIsAWholeBatchFailure) {
  for (RowState s : {RowState::kTransient, RowState::kWaiting, RowState::kOther}) {
    const std::vector<RowOutcome> rows = {row("a", s), row("b", s),
                                          row("c", RowState::kBuildFailed)};
    const BatchDecision d = decide(rows, 1, true);
    EXPECT_TRUE(d.rollback);  // no attempt counted, nothing failed: the whole tick backs off
    EXPECT_TRUE(d.sent.empty());
    EXPECT_TRUE(d.failures.empty());
  }
}

TEST(RelayBatch, AttemptsEndInFailedAtMaxAttempts) {
  const std::vector<RowOutcome> rows = {row("a", RowState::kTransient, 7),
                                        row("b", RowState::kAcked)};
  const BatchDecision d = decide(rows, 8, true);
  ASSERT_EQ(d.failures.size(), 1u);
  EXPECT_TRUE(d.failures[0].failed);
  EXPECT_TRUE(d.failures[0].count_attempt);
}

TEST(RelayBatch, BuildFailuresAndRefusalsAreFailedAtOnce) {
  const std::vector<RowOutcome> rows = {row("a", RowState::kBuildFailed),
                                        row("b", RowState::kRefusedForGood),
                                        row("c", RowState::kAcked)};
  const BatchDecision d = decide(rows, 8, true);
  EXPECT_FALSE(d.rollback);
  EXPECT_EQ(d.sent, (std::vector<std::size_t>{2}));
  ASSERT_EQ(d.failures.size(), 2u);
  EXPECT_TRUE(d.failures[0].failed);
  EXPECT_FALSE(d.failures[0].count_attempt);  // never published
  EXPECT_TRUE(d.failures[1].failed);
  // Only build failures: nothing of Kafka's failed, so no rollback.
  const std::vector<RowOutcome> only = {row("a", RowState::kBuildFailed)};
  EXPECT_FALSE(decide(only, 8, true).rollback);
}

TEST(RelayBatch, FailedBlocksKeyDecidesWhetherLaterRowsOfTheKeyFlow) {
  const std::vector<RowOutcome> rows = {row("a", RowState::kRefusedForGood),
                                        row("a", RowState::kAcked)};
  EXPECT_TRUE(decide(rows, 8, true).sent.empty());
  EXPECT_EQ(decide(rows, 8, false).sent, (std::vector<std::size_t>{1}));
  // A row that stays pending always stops its key (its later rows are published again after it).
  const std::vector<RowOutcome> pending = {row("a", RowState::kOther, 0),
                                           row("a", RowState::kAcked)};
  EXPECT_TRUE(decide(pending, 8, false).sent.empty());
}

TEST(RelayBatch, NotPublishedRowsStopTheirKey) {
  const std::vector<RowOutcome> rows = {
      row("a", RowState::kAcked), row("a", RowState::kNotPublished), row("b", RowState::kAcked)};
  const BatchDecision d = decide(rows, 8, true);
  EXPECT_EQ(d.sent, (std::vector<std::size_t>{0, 2}));
  EXPECT_TRUE(d.failures.empty());
}

TEST(RelayBatch, DeliveryErrorsAreClassedByCode) {
  EXPECT_EQ(classify_delivery(RD_KAFKA_RESP_ERR_NO_ERROR), RowState::kAcked);
  EXPECT_EQ(classify_delivery(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE), RowState::kRefusedForGood);
  EXPECT_EQ(classify_delivery(RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION), RowState::kRefusedForGood);
  EXPECT_EQ(classify_delivery(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT), RowState::kTransient);
  EXPECT_EQ(classify_delivery(RD_KAFKA_RESP_ERR__TRANSPORT), RowState::kTransient);
  EXPECT_EQ(classify_delivery(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED), RowState::kOther);
}

}  // namespace
}  // namespace walrelay::relay
