// kafka::SlicedCall (kafka/sliced_call.hpp): a resumable transactional call run in slices on an
// Asio timer, with a fake call in place of librdkafka's.

#include "walrelay/kafka/sliced_call.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

namespace walrelay::kafka {
namespace {

using namespace std::chrono_literals;

TxnResult retry(rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR__TIMED_OUT) {
  TxnResult r;
  r.action = TxnAction::kRetry;
  r.code = code;
  r.message = rd_kafka_err2str(code);
  return r;
}

TxnResult with(TxnAction action, rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR__FAIL) {
  TxnResult r;
  r.action = action;
  r.code = action == TxnAction::kNone ? RD_KAFKA_RESP_ERR_NO_ERROR : code;
  r.message = rd_kafka_err2str(r.code);
  return r;
}

SlicedCall::Limits limits(std::chrono::milliseconds budget = 5s) {
  SlicedCall::Limits l;
  l.slice = 20ms;
  l.budget = budget;
  l.retry_delay = 10ms;
  l.max_errors = 3;
  return l;
}

// A call that "blocks" for its whole timeout and times out `timeouts` times, then returns `last`.
struct FakeCall {
  int timeouts = 0;
  TxnResult last;
  std::vector<std::chrono::milliseconds> timeouts_seen;
  TxnResult operator()(std::chrono::milliseconds timeout) {
    timeouts_seen.push_back(timeout);
    if (static_cast<int>(timeouts_seen.size()) <= timeouts) {
      std::this_thread::sleep_for(timeout);
      return retry();
    }
    return last;
  }
};

TEST(SlicedCall, ResumesAfterEachTimedOutSliceAndReportsTheOutcomeOnce) {
  boost::asio::io_context io;
  SlicedCall call(io.get_executor());
  FakeCall fake{4, with(TxnAction::kNone), {}};
  std::vector<TxnResult> outcomes;
  call.start(
      "init_transactions", limits(), [&](std::chrono::milliseconds t) { return fake(t); },
      [&](const TxnResult& r) { outcomes.push_back(r); });
  // The first slice ran in start; the rest run on the timer.
  EXPECT_EQ(fake.timeouts_seen.size(), 1u);
  EXPECT_TRUE(call.running());
  io.run();
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].ok());
  EXPECT_FALSE(call.running());
  EXPECT_EQ(fake.timeouts_seen.size(), 5u);
  for (const auto t : fake.timeouts_seen) {
    EXPECT_LE(t, 20ms);
    EXPECT_GE(t, 1ms);
  }
}

TEST(SlicedCall, OtherHandlersRunBetweenTheSlices) {
  boost::asio::io_context io;
  SlicedCall call(io.get_executor());
  FakeCall fake{10, with(TxnAction::kNone), {}};
  std::vector<std::size_t> slices_when_served;  // how many slices had run when the timer fired
  boost::asio::steady_timer probe(io);
  std::function<void()> arm = [&] {
    probe.expires_after(30ms);
    probe.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      slices_when_served.push_back(fake.timeouts_seen.size());
      if (call.running()) arm();
    });
  };
  arm();
  bool done = false;
  call.start(
      "commit_transaction", limits(), [&](std::chrono::milliseconds t) { return fake(t); },
      [&](const TxnResult&) { done = true; });
  io.run();
  EXPECT_TRUE(done);
  // The 30 ms timer was served while the call went on (11 slices of 20 ms), not only after it.
  ASSERT_FALSE(slices_when_served.empty());
  EXPECT_LT(slices_when_served.front(), 11u);
}

TEST(SlicedCall, AFinalResultEndsTheCallAtOnce) {
  for (const TxnAction action : {TxnAction::kAbort, TxnAction::kFenced, TxnAction::kFatal}) {
    boost::asio::io_context io;
    SlicedCall call(io.get_executor());
    FakeCall fake{2, with(action, RD_KAFKA_RESP_ERR_PRODUCER_FENCED), {}};
    std::optional<TxnResult> outcome;
    call.start(
        "abort_transaction", limits(), [&](std::chrono::milliseconds t) { return fake(t); },
        [&](const TxnResult& r) { outcome = r; });
    io.run();
    ASSERT_TRUE(outcome);
    EXPECT_EQ(outcome->action, action);
    EXPECT_EQ(outcome->code, RD_KAFKA_RESP_ERR_PRODUCER_FENCED);
    EXPECT_EQ(fake.timeouts_seen.size(), 3u);
  }
}

TEST(SlicedCall, TheBudgetEndsACallThatNeverCompletes) {
  boost::asio::io_context io;
  SlicedCall call(io.get_executor());
  FakeCall fake{1'000'000, {}, {}};
  std::optional<TxnResult> outcome;
  SlicedCall::Limits l = limits(150ms);
  l.spent = TxnAction::kAbort;
  const auto started = std::chrono::steady_clock::now();
  call.start(
      "init_transactions", l, [&](std::chrono::milliseconds t) { return fake(t); },
      [&](const TxnResult& r) { outcome = r; });
  io.run();
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->action, TxnAction::kAbort);
  EXPECT_EQ(outcome->code, RD_KAFKA_RESP_ERR__TIMED_OUT);
  EXPECT_NE(outcome->message.find("not completed after"), std::string::npos) << outcome->message;
  EXPECT_GE(took, 150ms);
  EXPECT_LT(took, 1s);
  // The last slice is cut to what is left of the budget.
  for (const auto t : fake.timeouts_seen) EXPECT_LE(t, 20ms);
}

TEST(SlicedCall, RetriableErrorsAreRetriedAfterADelayUpToTheLimit) {
  boost::asio::io_context io;
  SlicedCall call(io.get_executor());
  int calls = 0;
  std::vector<std::chrono::steady_clock::time_point> at;
  std::optional<TxnResult> outcome;
  call.start(
      "commit_transaction", limits(),
      [&](std::chrono::milliseconds) {
        ++calls;
        at.push_back(std::chrono::steady_clock::now());
        return retry(RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE);
      },
      [&](const TxnResult& r) { outcome = r; });
  io.run();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(calls, 3);  // max_errors
  EXPECT_EQ(outcome->action, TxnAction::kAbort);
  EXPECT_NE(outcome->message.find("3 retriable errors"), std::string::npos) << outcome->message;
  for (std::size_t i = 1; i < at.size(); ++i) EXPECT_GE(at[i] - at[i - 1], 10ms);
}

TEST(SlicedCall, NotDrivenItRunsOnlyWhenStepped) {
  boost::asio::io_context io;
  SlicedCall call(io.get_executor());
  FakeCall fake{2, with(TxnAction::kNone), {}};
  bool done = false;
  call.start(
      "commit_transaction", limits(), [&](std::chrono::milliseconds t) { return fake(t); },
      [&](const TxnResult&) { done = true; }, /*drive=*/false);
  io.run();
  EXPECT_TRUE(fake.timeouts_seen.empty());
  EXPECT_TRUE(call.step());
  EXPECT_TRUE(call.step());
  EXPECT_FALSE(call.step());
  EXPECT_TRUE(done);
  EXPECT_FALSE(call.step());  // nothing in progress
  EXPECT_EQ(fake.timeouts_seen.size(), 3u);
}

TEST(SlicedCall, StopDrivingHandsTheCallToTheCaller) {
  boost::asio::io_context io;
  SlicedCall call(io.get_executor());
  FakeCall fake{3, with(TxnAction::kNone), {}};
  bool done = false;
  call.start(
      "commit_transaction", limits(), [&](std::chrono::milliseconds t) { return fake(t); },
      [&](const TxnResult&) { done = true; });
  call.stop_driving();
  io.run();
  EXPECT_EQ(fake.timeouts_seen.size(), 1u);
  EXPECT_TRUE(call.running());
  while (call.step()) {
  }
  EXPECT_TRUE(done);
}

TEST(SlicedCall, CancelledItNeitherGoesOnNorReports) {
  boost::asio::io_context io;
  SlicedCall call(io.get_executor());
  FakeCall fake{1'000, with(TxnAction::kNone), {}};
  bool done = false;
  call.start(
      "abort_transaction", limits(), [&](std::chrono::milliseconds t) { return fake(t); },
      [&](const TxnResult&) { done = true; });
  boost::asio::post(io, [&] { call.cancel(); });
  io.run();
  EXPECT_FALSE(done);
  EXPECT_FALSE(call.running());
  EXPECT_LE(fake.timeouts_seen.size(), 2u);
}

TEST(SlicedCall, ACallCancelledOrReplacedFromInsideItsSliceIsDropped) {
  boost::asio::io_context io;
  SlicedCall call(io.get_executor());
  bool first_done = false;
  bool second_done = false;
  call.start(
      "commit_transaction", limits(),
      [&](std::chrono::milliseconds) {
        // e.g. a delivery report served inside the call restarts the session: an abort replaces
        // the commit
        call.start(
            "abort_transaction", limits(),
            [](std::chrono::milliseconds) { return with(TxnAction::kNone); },
            [&](const TxnResult&) { second_done = true; }, /*drive=*/false);
        return with(TxnAction::kNone);
      },
      [&](const TxnResult&) { first_done = true; });
  EXPECT_FALSE(first_done);
  EXPECT_TRUE(call.running());
  EXPECT_FALSE(call.step());
  EXPECT_TRUE(second_done);
  io.run();
}

TEST(SlicedCall, DoneMayStartTheNextCall) {
  boost::asio::io_context io;
  SlicedCall call(io.get_executor());
  std::vector<std::string> order;
  call.start(
      "abort_transaction", limits(),
      [](std::chrono::milliseconds) { return with(TxnAction::kNone); },
      [&](const TxnResult&) {
        order.emplace_back("abort");
        call.start(
            "init_transactions", limits(),
            [n = 0](std::chrono::milliseconds t) mutable {
              return ++n < 3 ? (std::this_thread::sleep_for(t), retry()) : with(TxnAction::kNone);
            },
            [&](const TxnResult&) { order.emplace_back("init"); });
      });
  io.run();
  EXPECT_EQ(order, (std::vector<std::string>{"abort", "init"}));
}

}  // namespace
}  // namespace walrelay::kafka
