// Component tests of the Kafka sink (kafka::Producer + AckTracker) against librdkafka's mock
// cluster: the delivery contract (flush LSN = next_lsn of the newest fully acknowledged prefix of
// transactions) under retriable produce errors, broker outages, out-of-order acknowledgements
// across partitions and permanent produce errors.
//
// The mock cluster is standalone (created from a separate dummy rd_kafka_t) and the producer under
// test connects to it through `bootstrap.servers`, exactly as it would to a real cluster.

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "mock_cluster.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/core/lsn.hpp"
#include "walrelay/core/record.hpp"
#include "walrelay/kafka/producer.hpp"
#include "walrelay/sink/ack_tracker.hpp"

namespace walrelay::sink {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kCheckTimeout = 30s;
constexpr std::int16_t kProduceApiKey = 0;  // RD_KAFKAP_Produce

/// One record the test hands to the producer.
struct Msg {
  std::string key;
  std::string value;
};

/// What the test knows about one transaction, independently of the AckTracker.
struct TxnInfo {
  Lsn next_lsn;
  std::size_t expected = 0;  ///< records produced successfully
  std::size_t acked = 0;
  std::size_t failed = 0;
  [[nodiscard]] bool fully_acked() const { return acked == expected; }
  [[nodiscard]] bool done() const { return acked + failed == expected; }
};

/// One delivery report as seen by the test (string_views copied).
struct Seen {
  std::uint64_t seq = 0;
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::string topic;
  std::string key;
  std::int32_t partition = -1;
  std::int64_t offset = -1;
};

/// Owns a standalone 3-broker mock cluster, an io_context and the producer under test, and wires
/// delivery reports into an AckTracker the way the connector does (src/connector.cpp
/// Connector::on_delivery). After every report it checks the delivery contract against the test's
/// own bookkeeping.
class MockClusterTest : public component_test::MockClusterFixture {
 protected:
  void TearDown() override {
    if (producer_) {
      producer_->stop();
      // Drain the io_context so the cancelled pipe wait completes before the producer goes away.
      io_.restart();
      io_.poll();
      producer_.reset();
    }
    if (inspector_ != nullptr) rd_kafka_destroy(inspector_);
    MockClusterFixture::TearDown();
  }

  /// Creates and starts the producer under test with walrelay's defaults plus `extra` properties.
  void start_producer(std::map<std::string, std::string> extra = {}) {
    config::KafkaConfig cfg;
    cfg.bootstrap_servers = bootstraps_;
    // Faster reconnects than librdkafka's defaults (up to 10 s) keep the outage test short.
    cfg.properties = {{"reconnect.backoff.ms", "50"},
                      {"reconnect.backoff.max.ms", "500"},
                      {"retry.backoff.ms", "50"}};
    for (auto& [k, v] : extra) cfg.properties[k] = v;
    producer_ = std::make_unique<kafka::Producer>(
        io_.get_executor(), cfg, "walrelay-component-test",
        [this](const kafka::DeliveryReport& r) { on_delivery(r); },
        [this](const kafka::Error& error) { fatal_.push_back(error.describe()); });
    producer_->start();
  }

  /// Opens a transaction ending at `next_lsn`, produces `msgs` to `topic`, commits. Like the
  /// connector, an event is counted only once librdkafka took it.
  AckTracker::TxnSeq produce_txn(const std::string& topic, Lsn next_lsn,
                                 const std::vector<Msg>& records) {
    const auto seq = tracker_.begin(next_lsn);
    TxnInfo& info = txns_[seq];
    info.next_lsn = next_lsn;
    for (const Msg& m : records) {
      Record rec;
      rec.topic = topic;
      rec.key = m.key;
      rec.value = m.value;
      const rd_kafka_resp_err_t err = producer_->produce(rec, seq);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        sync_errors_.push_back(err);
        continue;
      }
      tracker_.add_event(kafka::record_bytes(rec));
      ++info.expected;
      ++produced_;
    }
    tracker_.commit();
    check_contract("after commit");
    return seq;
  }

  /// Records `{prefix}-{i}` keyed by `keys[i % keys.size()]`.
  static std::vector<Msg> msgs(const std::string& prefix, std::size_t n,
                               const std::vector<std::string>& keys) {
    std::vector<Msg> out;
    for (std::size_t i = 0; i < n; ++i) {
      out.push_back({keys[i % keys.size()], prefix + "-" + std::to_string(i)});
    }
    return out;
  }

  /// Runs the io_context (the connector's thread) until `pred` holds or `timeout` passes.
  bool run_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!pred()) {
      if (Clock::now() >= deadline) return false;
      io_.run_one_for(20ms);
    }
    return true;
  }

  /// Runs the io_context for `d` regardless (the only fixed wait: "stays frozen" checks), calling
  /// `each` after every handler.
  void run_for(std::chrono::milliseconds d, const std::function<void()>& each = {}) {
    const auto deadline = Clock::now() + d;
    while (Clock::now() < deadline) {
      io_.run_one_for(20ms);
      if (each) each();
    }
  }

  bool txn_done(AckTracker::TxnSeq seq) const { return txns_.at(seq).done(); }
  bool all_done() const {
    for (const auto& [seq, t] : txns_) {
      if (!t.done()) return false;
    }
    return true;
  }
  std::size_t total_failed() const {
    std::size_t n = 0;
    for (const auto& [seq, t] : txns_) n += t.failed;
    return n;
  }

  /// Delivery handler: the connector's wiring, plus the contract checks.
  void on_delivery(const kafka::DeliveryReport& r) {
    seen_.push_back(
        {r.opaque, r.err, std::string(r.topic), std::string(r.key), r.partition, r.offset});
    const auto it = txns_.find(r.opaque);
    if (it == txns_.end()) {
      ADD_FAILURE() << "delivery report for unknown transaction seq " << r.opaque;
      return;
    }
    // Never let an exception escape into librdkafka's C stack.
    try {
      if (r.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        ++it->second.acked;
        tracker_.on_ack(r.opaque, r.bytes);
      } else {
        ++it->second.failed;
        tracker_.on_failure(r.opaque, r.bytes);
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "AckTracker threw: " << e.what();
    }
    if (it->second.acked + it->second.failed > it->second.expected) {
      ADD_FAILURE() << "more delivery reports than records for txn " << r.opaque;
    }
    check_contract("after delivery report");
  }

  /// The delivery contract, checked against the test's own bookkeeping:
  ///  - the flush LSN only moves forward;
  ///  - it never reaches the next_lsn of the oldest transaction that still has unacknowledged
  ///    (in flight or failed) events, nor of any failed transaction;
  ///  - when no failure happened, it equals the next_lsn of the newest transaction of the fully
  ///    acknowledged prefix (liveness: it does not lag behind either).
  void check_contract(const char* where) {
    const Lsn flush = tracker_.flush_lsn();
    if (flush < last_flush_) {
      ADD_FAILURE() << where << ": flush LSN went backwards from " << last_flush_.to_string()
                    << " to " << flush.to_string();
    }
    if (flush != last_flush_ || flush_history_.empty()) flush_history_.push_back(flush);
    last_flush_ = flush;

    Lsn prefix_end = initial_flush_;
    bool prefix_open = true;
    for (const auto& [seq, t] : txns_) {
      if (t.fully_acked() && prefix_open) {
        prefix_end = t.next_lsn;
        continue;
      }
      if (prefix_open && flush >= t.next_lsn) {
        ADD_FAILURE() << where << ": flush LSN " << flush.to_string() << " reached txn " << seq
                      << " (next_lsn " << t.next_lsn.to_string() << ") with " << t.acked << "/"
                      << t.expected << " acked, " << t.failed << " failed";
      }
      prefix_open = false;
    }
    if (flush > prefix_end) {
      ADD_FAILURE() << where << ": flush LSN " << flush.to_string()
                    << " beyond the fully acknowledged prefix ending at " << prefix_end.to_string();
    }
    if (total_failed() == 0 && flush != prefix_end) {
      ADD_FAILURE() << where << ": flush LSN " << flush.to_string()
                    << " lags the fully acknowledged prefix ending at " << prefix_end.to_string();
    }
  }

  /// Every acknowledged record was written exactly once: per partition, the acknowledged offsets
  /// are distinct, and the broker's log holds exactly as many records as were acknowledged (a
  /// retried-and-duplicated batch would show up as extra records).
  void expect_exactly_once(const std::string& topic, int partitions) {
    std::map<std::int32_t, std::set<std::int64_t>> offsets;
    std::size_t acks = 0;
    for (const Seen& s : seen_) {
      if (s.topic != topic || s.err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
      ++acks;
      EXPECT_TRUE(offsets[s.partition].insert(s.offset).second)
          << "offset " << s.offset << " of partition " << s.partition << " acknowledged twice";
    }
    if (inspector_ == nullptr) {
      char errstr[512];
      rd_kafka_conf_t* conf = rd_kafka_conf_new();
      rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps_.c_str(), errstr, sizeof errstr);
      rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
      inspector_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
      ASSERT_NE(inspector_, nullptr) << errstr;
    }
    std::size_t in_log = 0;
    for (int p = 0; p < partitions; ++p) {
      std::int64_t lo = -1;
      std::int64_t hi = -1;
      const rd_kafka_resp_err_t err =
          rd_kafka_query_watermark_offsets(inspector_, topic.c_str(), p, &lo, &hi, 10'000);
      ASSERT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(err);
      const auto acked_here = static_cast<std::int64_t>(offsets[p].size());
      EXPECT_EQ(hi - lo, acked_here) << "partition " << p << " of " << topic;
      if (!offsets[p].empty()) {
        EXPECT_EQ(*offsets[p].begin(), lo);
        EXPECT_EQ(*offsets[p].rbegin(), hi - 1);
      }
      in_log += static_cast<std::size_t>(hi - lo);
    }
    EXPECT_EQ(in_log, acks);
  }

  /// Learns which partition each key lands on by producing one record per key in a transaction
  /// ending at `next_lsn` and waiting for all its acknowledgements.
  std::map<std::string, std::int32_t> warm_up(const std::string& topic, Lsn next_lsn,
                                              const std::vector<std::string>& keys) {
    std::vector<Msg> m;
    for (const auto& k : keys) m.push_back({k, "warmup-" + k});
    const auto seq = produce_txn(topic, next_lsn, m);
    EXPECT_TRUE(run_until([&] { return txn_done(seq); }, kCheckTimeout))
        << "warm-up transaction not acknowledged";
    EXPECT_TRUE(txns_.at(seq).fully_acked());
    EXPECT_EQ(tracker_.flush_lsn(), next_lsn);
    std::map<std::string, std::int32_t> where;
    for (const Seen& s : seen_) {
      if (s.seq == seq) where[s.key] = s.partition;
    }
    return where;
  }

  rd_kafka_t* inspector_ = nullptr;  // watermark queries
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_ = asio::make_work_guard(io_);
  AckTracker tracker_;
  std::unique_ptr<kafka::Producer> producer_;

  std::map<AckTracker::TxnSeq, TxnInfo> txns_;
  std::vector<Seen> seen_;
  std::vector<std::string> fatal_;
  std::vector<rd_kafka_resp_err_t> sync_errors_;
  std::size_t produced_ = 0;
  Lsn initial_flush_;
  Lsn last_flush_;
  std::vector<Lsn> flush_history_;
};

const std::vector<std::string> kKeys = {"alpha",   "bravo", "charlie", "delta", "echo",
                                        "foxtrot", "golf",  "hotel",   "india", "juliet"};

// 1. Three transactions on a 3-partition topic, all acknowledged: flush = last next_lsn.
TEST_F(MockClusterTest, HappyPathFlushReachesLastTransaction) {
  create_topic("happy", 3);
  start_producer();

  produce_txn("happy", Lsn(0x100), msgs("t1", 5, kKeys));
  produce_txn("happy", Lsn(0x200), msgs("t2", 7, {"kilo", "lima", "mike", "november"}));
  produce_txn("happy", Lsn(0x300), msgs("t3", 6, {"oscar", "papa", "quebec", "romeo", "sierra"}));
  ASSERT_TRUE(sync_errors_.empty());
  EXPECT_LT(tracker_.flush_lsn(), Lsn(0x100));  // nothing acknowledged yet: nothing confirmable

  ASSERT_TRUE(run_until([&] { return all_done(); }, kCheckTimeout))
      << seen_.size() << "/" << produced_ << " delivery reports";
  EXPECT_EQ(total_failed(), 0u);
  EXPECT_EQ(tracker_.flush_lsn(), Lsn(0x300));
  EXPECT_EQ(tracker_.in_flight_events(), 0u);
  EXPECT_EQ(tracker_.in_flight_bytes(), 0u);
  EXPECT_EQ(tracker_.pending_transactions(), 0u);
  EXPECT_FALSE(tracker_.failed());
  EXPECT_EQ(seen_.size(), produced_);
  EXPECT_EQ(producer_->outstanding(), 0);
  EXPECT_TRUE(fatal_.empty());

  std::set<std::int32_t> partitions;
  for (const Seen& s : seen_) partitions.insert(s.partition);
  EXPECT_GT(partitions.size(), 1u) << "keys should spread over several partitions";
  expect_exactly_once("happy", 3);
}

// 2. Retriable produce errors (NOT_LEADER_FOR_PARTITION) on every leader: the flush LSN never
// passes a transaction with unacknowledged events; eventually everything is delivered once.
TEST_F(MockClusterTest, RetriableProduceErrorsDelayButNeverReorderFlush) {
  create_topic("retry", 3);
  for (int p = 0; p < 3; ++p) {
    ASSERT_EQ(rd_kafka_mock_partition_set_leader(mcluster_, "retry", p, p + 1),
              RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  start_producer();
  const auto where = warm_up("retry", Lsn(0x50), kKeys);
  const auto warm_reports = seen_.size();

  // Three errors on each broker's next Produce requests (broker stacks: counted below), plus
  // a few on the cluster-wide stack.
  for (int b = 1; b <= 3; ++b) {
    ASSERT_EQ(rd_kafka_mock_broker_push_request_error_rtts(
                  mcluster_, b, kProduceApiKey, 3, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, 0,
                  RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, 0,
                  RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, 0),
              RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  rd_kafka_mock_push_request_errors(mcluster_, kProduceApiKey, 2,
                                    RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                                    RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION);

  produce_txn("retry", Lsn(0x100), msgs("t1", 6, kKeys));
  produce_txn("retry", Lsn(0x200), msgs("t2", 9, kKeys));
  produce_txn("retry", Lsn(0x300), msgs("t3", 4, kKeys));
  ASSERT_TRUE(sync_errors_.empty());
  EXPECT_EQ(tracker_.flush_lsn(), Lsn(0x50));

  ASSERT_TRUE(run_until([&] { return all_done(); }, kCheckTimeout))
      << seen_.size() - warm_reports << " delivery reports after warm-up";
  EXPECT_EQ(total_failed(), 0u);
  EXPECT_FALSE(tracker_.failed());
  EXPECT_EQ(tracker_.flush_lsn(), Lsn(0x300));
  EXPECT_EQ(tracker_.in_flight_events(), 0u);
  EXPECT_EQ(tracker_.pending_transactions(), 0u);
  EXPECT_TRUE(fatal_.empty());
  // Exactly one report per record.
  EXPECT_EQ(seen_.size(), produced_);
  for (const auto& [seq, t] : txns_) EXPECT_EQ(t.acked, t.expected) << "txn " << seq;
  expect_exactly_once("retry", 3);

  // The injected errors were really served (i.e. the producer did retry): every broker that leads
  // a partition that got records has an empty stack.
  std::set<std::int32_t> used;
  for (const auto& [key, p] : where) used.insert(p);
  for (std::int32_t p : used) {
    size_t cnt = 99;
    ASSERT_EQ(rd_kafka_mock_broker_error_stack_cnt(mcluster_, p + 1, kProduceApiKey, &cnt),
              RD_KAFKA_RESP_ERR_NO_ERROR);
    EXPECT_EQ(cnt, 0u) << "broker " << p + 1 << " did not see its injected errors";
  }
}

// 3. All brokers down before txn 2: the flush LSN stays at txn 1 while they are down (messages
// never time out: message.timeout.ms=0), then everything arrives once they are back.
TEST_F(MockClusterTest, BrokersDownFreezeFlushUntilTheyReturn) {
  create_topic("outage", 3);
  start_producer();

  const auto t1 = produce_txn("outage", Lsn(0x100), msgs("t1", 4, kKeys));
  ASSERT_TRUE(run_until([&] { return txn_done(t1); }, kCheckTimeout));
  ASSERT_EQ(tracker_.flush_lsn(), Lsn(0x100));

  ASSERT_EQ(rd_kafka_mock_broker_set_down(mcluster_, -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  produce_txn("outage", Lsn(0x200), msgs("t2", 5, kKeys));
  produce_txn("outage", Lsn(0x300), msgs("t3", 3, kKeys));
  ASSERT_TRUE(sync_errors_.empty());

  const auto reports_before = seen_.size();
  run_for(3s, [&] { ASSERT_EQ(tracker_.flush_lsn(), Lsn(0x100)); });
  EXPECT_EQ(tracker_.flush_lsn(), Lsn(0x100));
  EXPECT_EQ(seen_.size(), reports_before) << "no delivery report while every broker is down";
  EXPECT_EQ(tracker_.in_flight_events(), 8u);
  EXPECT_EQ(tracker_.pending_transactions(), 2u);
  EXPECT_FALSE(tracker_.failed());
  EXPECT_EQ(producer_->outstanding(), 8);
  EXPECT_TRUE(fatal_.empty());

  ASSERT_EQ(rd_kafka_mock_broker_set_up(mcluster_, -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  ASSERT_TRUE(run_until([&] { return all_done(); }, kCheckTimeout))
      << seen_.size() << "/" << produced_ << " delivery reports after the brokers came back";
  EXPECT_EQ(total_failed(), 0u);
  EXPECT_EQ(tracker_.flush_lsn(), Lsn(0x300));
  EXPECT_EQ(tracker_.in_flight_events(), 0u);
  EXPECT_EQ(seen_.size(), produced_);
  EXPECT_TRUE(fatal_.empty());
  expect_exactly_once("outage", 3);
}

// 4. Out-of-order acknowledgements across partitions: txn 2 (fast partition) is acknowledged
// before txn 1 (partition led by a slow broker). The flush LSN must wait for txn 1, then jump
// straight to txn 2's next_lsn.
TEST_F(MockClusterTest, OutOfOrderAcksAcrossPartitionsWaitForOldestTransaction) {
  create_topic("ooo", 2);
  ASSERT_EQ(rd_kafka_mock_partition_set_leader(mcluster_, "ooo", 0, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
  ASSERT_EQ(rd_kafka_mock_partition_set_leader(mcluster_, "ooo", 1, 2), RD_KAFKA_RESP_ERR_NO_ERROR);
  start_producer();

  const auto where = warm_up("ooo", Lsn(0x80), kKeys);
  std::optional<std::string> slow_key;
  std::optional<std::string> fast_key;
  for (const auto& [key, p] : where) {
    if (p == 0 && !slow_key) slow_key = key;
    if (p == 1 && !fast_key) fast_key = key;
  }
  ASSERT_TRUE(slow_key && fast_key) << "the warm-up keys did not cover both partitions";

  // Broker 1 (leader of partition 0) answers 3 s late.
  ASSERT_EQ(rd_kafka_mock_broker_set_rtt(mcluster_, 1, 3000), RD_KAFKA_RESP_ERR_NO_ERROR);

  const auto t1 = produce_txn("ooo", Lsn(0x100), msgs("t1", 3, {*slow_key}));
  const auto t2 = produce_txn("ooo", Lsn(0x200), msgs("t2", 4, {*fast_key}));
  ASSERT_TRUE(sync_errors_.empty());

  ASSERT_TRUE(run_until([&] { return txns_.at(t2).done(); }, kCheckTimeout));
  ASSERT_TRUE(txns_.at(t2).fully_acked());
  ASSERT_FALSE(txns_.at(t1).done()) << "timing: the slow partition answered before the fast one";
  EXPECT_EQ(tracker_.flush_lsn(), Lsn(0x80)) << "txn 2 acknowledged, txn 1 not: must not move";
  EXPECT_EQ(tracker_.in_flight_events(), 3u);
  EXPECT_EQ(tracker_.pending_transactions(), 2u);

  ASSERT_TRUE(run_until([&] { return txns_.at(t1).done(); }, kCheckTimeout));
  EXPECT_TRUE(txns_.at(t1).fully_acked());
  EXPECT_EQ(tracker_.flush_lsn(), Lsn(0x200));
  EXPECT_EQ(tracker_.pending_transactions(), 0u);
  // The flush LSN went 0/80 -> 0/200 without ever stopping at txn 1's 0/100 (nothing between them
  // was confirmable on its own once txn 2 was already acknowledged).
  EXPECT_EQ(flush_history_, (std::vector<Lsn>{Lsn(0), Lsn(0x80), Lsn(0x200)}));

  // Many transactions alternating between the slow and the fast partition: acknowledgements keep
  // arriving out of order; check_contract() verifies after every one of them that the flush LSN
  // never passes the oldest transaction with unacknowledged events.
  ASSERT_EQ(rd_kafka_mock_broker_set_rtt(mcluster_, 1, 500), RD_KAFKA_RESP_ERR_NO_ERROR);
  for (int i = 0; i < 8; ++i) {
    const auto& key = i % 2 == 0 ? *slow_key : *fast_key;
    produce_txn("ooo", Lsn(0x1000 + 0x100 * static_cast<std::uint64_t>(i)),
                msgs("i" + std::to_string(i), 2, {key}));
    run_for(100ms);
  }
  ASSERT_TRUE(run_until([&] { return all_done(); }, kCheckTimeout));
  EXPECT_EQ(total_failed(), 0u);
  EXPECT_EQ(tracker_.flush_lsn(), Lsn(0x1700));
  EXPECT_EQ(tracker_.pending_transactions(), 0u);
  EXPECT_TRUE(fatal_.empty());

  ASSERT_EQ(rd_kafka_mock_broker_set_rtt(mcluster_, 1, 0), RD_KAFKA_RESP_ERR_NO_ERROR);
  expect_exactly_once("ooo", 2);
}

// 5. A permanent produce error (the broker rejects the batch with a non-retriable error): the
// delivery fails for good, tracker.failed() is set, and the flush LSN never passes the failed
// transaction, even once later transactions are acknowledged. librdkafka 2.0.2 with idempotence
// reports such errors as failed deliveries (observed); should a later version escalate to a fatal
// error instead, the FatalHandler must be called and nothing after the failure confirmed either.
class PermanentErrorTest : public MockClusterTest,
                           public ::testing::WithParamInterface<rd_kafka_resp_err_t> {};

TEST_P(PermanentErrorTest, StopsFlushBeforeFailedTransaction) {
  const rd_kafka_resp_err_t injected = GetParam();
  create_topic("perm", 1);
  start_producer();
  warm_up("perm", Lsn(0x80), {"a", "b"});

  rd_kafka_mock_push_request_errors(mcluster_, kProduceApiKey, 1, injected);
  const auto t1 = produce_txn("perm", Lsn(0x100), {{"a", "poison"}});
  ASSERT_TRUE(sync_errors_.empty());
  ASSERT_TRUE(run_until([&] { return txn_done(t1) || !fatal_.empty(); }, kCheckTimeout));
  EXPECT_EQ(tracker_.flush_lsn(), Lsn(0x80));

  // Later transactions: acknowledged (or refused synchronously after a fatal error), but never
  // confirmed past the failed one.
  const auto t2 = produce_txn("perm", Lsn(0x200), {{"a", "after-1"}, {"b", "after-2"}});
  const auto t3 = produce_txn("perm", Lsn(0x300), {{"b", "after-3"}});
  ASSERT_TRUE(run_until([&] { return txn_done(t2) && txn_done(t3); }, kCheckTimeout))
      << "later transactions got no delivery reports";

  if (fatal_.empty()) {
    // Failed delivery path.
    EXPECT_EQ(txns_.at(t1).failed, 1u);
    EXPECT_TRUE(tracker_.failed());
    const auto failed = std::find_if(seen_.begin(), seen_.end(), [](const Seen& x) {
      return x.err != RD_KAFKA_RESP_ERR_NO_ERROR;
    });
    ASSERT_NE(failed, seen_.end());
    EXPECT_EQ(failed->seq, t1);
    EXPECT_EQ(failed->err, injected) << rd_kafka_err2name(failed->err);
    EXPECT_TRUE(kafka::is_permanent_failure(failed->err));
    EXPECT_TRUE(sync_errors_.empty());
    EXPECT_TRUE(txns_.at(t2).fully_acked()) << txns_.at(t2).failed << " failed";
    EXPECT_TRUE(txns_.at(t3).fully_acked()) << txns_.at(t3).failed << " failed";
    EXPECT_EQ(tracker_.in_flight_events(), 0u);
    // The failed transaction and everything after it stay pending.
    EXPECT_EQ(tracker_.pending_transactions(), 3u);
  } else {
    // Fatal error path: the FatalHandler was called with librdkafka's reason; later produce calls
    // fail synchronously (ERR__FATAL) and nothing after the failure was confirmed.
    EXPECT_FALSE(fatal_.front().empty());
    for (const auto err : sync_errors_) EXPECT_EQ(err, RD_KAFKA_RESP_ERR__FATAL);
  }
  EXPECT_EQ(tracker_.flush_lsn(), Lsn(0x80));
  EXPECT_EQ(tracker_.next_lsn_of(t1), Lsn(0x100));
  // Idle advancement must not paper over the failure either.
  EXPECT_FALSE(tracker_.advance_idle(Lsn(0x1000)));
  EXPECT_EQ(tracker_.flush_lsn(), Lsn(0x80));
}

INSTANTIATE_TEST_SUITE_P(NonRetriable, PermanentErrorTest,
                         ::testing::Values(RD_KAFKA_RESP_ERR_INVALID_RECORD,
                                           RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE),
                         [](const ::testing::TestParamInfo<rd_kafka_resp_err_t>& p) {
                           return std::string(rd_kafka_err2name(p.param));
                         });

// The producer settings walrelay chooses, and that `kafka.properties` wins over each of them.
TEST(ProducerProperties, DefaultsAndUserOverrides) {
  config::KafkaConfig cfg;
  cfg.bootstrap_servers = "127.0.0.1:9092";
  auto props = kafka::effective_producer_properties(cfg, "walrelay-test");
  EXPECT_EQ(props.at("enable.idempotence"), "true");
  EXPECT_EQ(props.at("acks"), "all");
  EXPECT_EQ(props.at("partitioner"), "murmur2_random");
  EXPECT_EQ(props.at("message.timeout.ms"), "0");
  EXPECT_EQ(props.at("compression.type"), "lz4");
  cfg.properties["compression.type"] = "zstd";
  props = kafka::effective_producer_properties(cfg, "walrelay-test");
  EXPECT_EQ(props.at("compression.type"), "zstd");
}

}  // namespace
}  // namespace walrelay::sink
