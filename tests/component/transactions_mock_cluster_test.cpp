// Component tests of delivery exactly_once's Kafka side (kafka/transactions.hpp, the position
// record read back with sink/position_reader.hpp) against
// librdkafka's mock cluster, which implements the transaction coordinator: the transactional calls
// and how their failures are classified (librdkafka INTRODUCTION.md "Transactional Producer":
// retriable / abort / fatal), an injected abortable error, fencing by a second producer with the
// same transactional.id (KIP-98), and the position record read back at start-up.
//
// The mock cluster does not filter aborted records for read_committed consumers; what a
// read_committed consumer sees after aborts and kills is checked on real Kafka
// (tests/integration/durability/exactly_once_test.cpp).

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mock_cluster.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/core/lsn.hpp"
#include "walrelay/core/record.hpp"
#include "walrelay/kafka/admin.hpp"
#include "walrelay/kafka/producer.hpp"
#include "walrelay/kafka/sliced_call.hpp"
#include "walrelay/kafka/transactions.hpp"
#include "walrelay/sink/position_reader.hpp"
#include "walrelay/sink/position_record.hpp"

namespace walrelay::kafka {
namespace {

namespace asio = boost::asio;
using sink::decode_position;
using sink::encode_position;
using sink::PositionReader;
using sink::positions_topic;
using sink::read_position;
using sink::StreamPosition;
using namespace std::chrono_literals;

constexpr std::int16_t kProduceApiKey = 0;  // RD_KAFKAP_Produce
constexpr std::int16_t kEndTxnApiKey = 26;  // RD_KAFKAP_EndTxn

class TransactionsMockTest : public component_test::MockClusterFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(MockClusterFixture::SetUp());
    ASSERT_NO_FATAL_FAILURE(create_topic("events", 3));
    ASSERT_NO_FATAL_FAILURE(create_topic("app.walrelay.positions", 1));
  }

  void TearDown() override {
    for (auto& p : producers_) p->stop();
    io_.restart();
    io_.poll();
    producers_.clear();
    MockClusterFixture::TearDown();
  }

  [[nodiscard]] config::KafkaConfig kafka_config() const {
    config::KafkaConfig cfg;
    cfg.bootstrap_servers = bootstraps_;
    cfg.properties = {{"retry.backoff.ms", "50"}, {"reconnect.backoff.ms", "50"}};
    return cfg;
  }

  /// A transactional producer with walrelay's settings for connector `name`.
  Producer& make_producer(const std::string& name) {
    producers_.push_back(std::make_unique<Producer>(
        io_.get_executor(), transactional_properties(kafka_config(), transactional_id_for(name)),
        "walrelay-" + name,
        [this](const DeliveryReport& r) {
          if (r.err != RD_KAFKA_RESP_ERR_NO_ERROR) failed_reports_.push_back(r.err);
        },
        [this](const Error& error) { fatal_.push_back(error.describe()); }));
    producers_.back()->start();
    return *producers_.back();
  }

  static rd_kafka_resp_err_t produce(Producer& p, const std::string& topic, const std::string& key,
                                     const std::string& value) {
    Record rec{topic, std::string_view(key), std::string_view(value), {}, 0};
    return p.produce(rec, 1);
  }

  /// Every broker of the mock cluster down (true) or up again (false).
  void brokers_down(bool down) {
    for (std::int32_t id = 1; id <= 3; ++id) {
      ASSERT_EQ(down ? rd_kafka_mock_broker_set_down(mcluster_, id)
                     : rd_kafka_mock_broker_set_up(mcluster_, id),
                RD_KAFKA_RESP_ERR_NO_ERROR);
    }
  }

  /// Runs `call` (named `name`) as the connector does, in slices of at most 100 ms on io_ within
  /// `budget`, the brokers coming back up `down_for` after the start; returns the outcome and
  /// records the longest one slice took in `longest`.
  TxnResult run_sliced(const std::string& name, const SlicedCall::Call& call,
                       std::chrono::milliseconds budget, std::chrono::milliseconds down_for,
                       std::chrono::milliseconds& longest) {
    SlicedCall sliced(io_.get_executor());
    SlicedCall::Limits limits;
    limits.budget = budget;
    std::optional<TxnResult> outcome;
    asio::steady_timer up(io_);
    up.expires_after(down_for);
    up.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) brokers_down(false);
    });
    io_.restart();
    longest = 0ms;
    int slices = 0;
    sliced.start(
        name, limits,
        [&](std::chrono::milliseconds t) {
          const auto before = std::chrono::steady_clock::now();
          TxnResult r = call(t);
          longest = std::max(longest, std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::steady_clock::now() - before));
          ++slices;
          return r;
        },
        [&](const TxnResult& r) { outcome = r; });
    const auto deadline = std::chrono::steady_clock::now() + budget + 10s;
    while (!outcome && std::chrono::steady_clock::now() < deadline) io_.run_one_for(200ms);
    up.cancel();
    io_.poll();
    std::cout << "[" << name << "] " << slices << " slices, the longest " << longest.count()
              << " ms" << std::endl;
    if (!outcome) {
      TxnResult none;
      none.action = TxnAction::kFatal;
      none.message = "no outcome";
      return none;
    }
    return *outcome;
  }

  asio::io_context io_;
  std::vector<std::unique_ptr<Producer>> producers_;
  std::vector<rd_kafka_resp_err_t> failed_reports_;
  std::vector<std::string> fatal_;
};

TEST(Position, EncodesAndDecodesTheIssueFields) {
  const StreamPosition p{"7312345678901234567", 2, Lsn(0x16B3748), 41, {}, {}};
  const std::string text = encode_position(p);
  EXPECT_EQ(text,
            R"({"system_id":"7312345678901234567","timeline":2,"lsn":"0/16B3748","index":41})");
  const auto back = decode_position(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->system_id, p.system_id);
  EXPECT_EQ(back->timeline, 2u);
  EXPECT_EQ(back->lsn, Lsn(0x16B3748));
  EXPECT_EQ(back->index, 41);
  EXPECT_EQ(decode_position(R"({"system_id":"1","timeline":1,"lsn":"0/10","index":-1})")->index,
            -1);
  EXPECT_FALSE(decode_position("{}").has_value());
  EXPECT_FALSE(decode_position(R"({"system_id":"1","timeline":1,"lsn":"x","index":-1})"));
  EXPECT_FALSE(decode_position(R"({"system_id":"1","timeline":1,"lsn":"0/10","index":-2})"));
  EXPECT_EQ(positions_topic("app"), "app.walrelay.positions");
  EXPECT_EQ(transactional_id_for("orders"), "walrelay-orders");
}

TEST(TransactionalProperties, SetsTheIdAndATransactionBoundMessageTimeout) {
  config::KafkaConfig cfg;
  auto out = transactional_properties(cfg, "walrelay-a");
  EXPECT_EQ(out.properties.at("transactional.id"), "walrelay-a");
  EXPECT_EQ(out.properties.at("transaction.timeout.ms"), "60000");
  EXPECT_EQ(out.properties.at("message.timeout.ms"), "60000");
  cfg.properties = {{"transaction.timeout.ms", "30000"}, {"transactional.id", "mine"}};
  out = transactional_properties(cfg, "walrelay-a");
  EXPECT_EQ(out.properties.at("transactional.id"), "mine");  // kafka.properties wins
  EXPECT_EQ(out.properties.at("message.timeout.ms"), "30000");
}

// Records and the position record in one transaction, twice; the last one is read back.
TEST_F(TransactionsMockTest, CommittedPositionIsReadBack) {
  Producer& p = make_producer("app");
  Transactions txn(p);
  ASSERT_TRUE(txn.init(30s).ok());
  EXPECT_FALSE(read_position(kafka_config(), "app.walrelay.positions", "app", 30s)->has_value());
  for (int t = 1; t <= 2; ++t) {
    ASSERT_TRUE(txn.begin().ok());
    EXPECT_TRUE(txn.open());
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(produce(p, "events", "k" + std::to_string(i), "v"), RD_KAFKA_RESP_ERR_NO_ERROR);
    }
    const StreamPosition pos{"42", 1, Lsn(0x1000u * static_cast<unsigned>(t)), -1, {}, {}};
    ASSERT_EQ(produce(p, "app.walrelay.positions", "app", encode_position(pos)),
              RD_KAFKA_RESP_ERR_NO_ERROR);
    const TxnResult r = txn.commit(30s);
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_FALSE(txn.open());
  }
  EXPECT_TRUE(failed_reports_.empty());
  EXPECT_TRUE(fatal_.empty());
  const auto read = read_position(kafka_config(), "app.walrelay.positions", "app", 30s);
  ASSERT_TRUE(read.has_value()) << read.error();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->lsn, Lsn(0x2000));
  EXPECT_EQ((*read)->index, -1);
  // Another connector's key is not this one's position.
  EXPECT_FALSE(read_position(kafka_config(), "app.walrelay.positions", "other", 30s)->has_value());
}

// An injected produce error that makes the transaction abortable: commit says kAbort, abort
// succeeds, and the next transaction commits (the connector replays the aborted one).
TEST_F(TransactionsMockTest, AbortableProduceErrorAbortsAndTheNextTransactionCommits) {
  Producer& p = make_producer("app");
  Transactions txn(p);
  ASSERT_TRUE(txn.init(30s).ok());
  ASSERT_TRUE(txn.begin().ok());
  rd_kafka_mock_push_request_errors(mcluster_, kProduceApiKey, 1,
                                    RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
  ASSERT_EQ(produce(p, "events", "k", "doomed"), RD_KAFKA_RESP_ERR_NO_ERROR);
  const TxnResult c = txn.commit(30s);
  EXPECT_EQ(c.action, TxnAction::kAbort) << c.message;
  EXPECT_FALSE(failed_reports_.empty()) << "the failed record's delivery report";
  const TxnResult a = txn.abort(30s);
  ASSERT_TRUE(a.ok()) << a.message;
  EXPECT_FALSE(txn.open());
  // The connector replays: abort again on kAbort (librdkafka bumps the epoch after a failed
  // idempotent sequence, KIP-360, which may take one more aborted attempt), never fatal.
  TxnResult again;
  for (int attempt = 0; attempt < 3; ++attempt) {
    ASSERT_TRUE(txn.begin().ok());
    ASSERT_EQ(produce(p, "events", "k", "replayed"), RD_KAFKA_RESP_ERR_NO_ERROR);
    again = txn.commit(30s);
    if (again.action != TxnAction::kAbort) break;
    ASSERT_TRUE(txn.abort(30s).ok());
  }
  EXPECT_TRUE(again.ok()) << static_cast<int>(again.action) << " " << again.message;
  EXPECT_TRUE(fatal_.empty());
}

// A retriable EndTxn error (coordinator moved) is retried by the same call or the next one.
TEST_F(TransactionsMockTest, CoordinatorMovedDuringCommitIsRetriable) {
  Producer& p = make_producer("app");
  Transactions txn(p);
  ASSERT_TRUE(txn.init(30s).ok());
  ASSERT_TRUE(txn.begin().ok());
  ASSERT_EQ(produce(p, "events", "k", "v"), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_mock_push_request_errors(mcluster_, kEndTxnApiKey, 2, RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
                                    RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE);
  TxnResult r = txn.commit(30s);
  for (int i = 0; i < 5 && r.action == TxnAction::kRetry; ++i) r = txn.commit(30s);
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_TRUE(fatal_.empty());
}

// Fencing (KIP-98): librdkafka reports a newer producer with the same transactional.id as a
// fatal error whose cause is ERR__FENCED or PRODUCER_FENCED; walrelay stops on it (exit 8)
// instead of creating a new producer. (librdkafka 2.0.2's mock cluster does not bump epochs, so
// the fencing itself is tested on real Kafka.)
// init_transactions while no broker answers: each slice times out (retriable) after at most
// 100 ms, and once the brokers are back the next slice resumes it and it completes (librdkafka:
// "resumable when a retriable timeout error is returned").
TEST_F(TransactionsMockTest, InitTransactionsResumesAcrossSlicesOnceTheBrokersAreBack) {
  Producer& p = make_producer("app");
  Transactions txn(p);
  ASSERT_NO_FATAL_FAILURE(brokers_down(true));
  std::chrono::milliseconds longest{0};
  const TxnResult r = run_sliced(
      "init_transactions", [&](std::chrono::milliseconds t) { return txn.init(t); }, 30s, 1500ms,
      longest);
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_TRUE(txn.initialized());
  EXPECT_LT(longest, 400ms) << "a slice blocked longer than its 100 ms";
  // The producer works: a transaction commits.
  ASSERT_TRUE(txn.begin().ok());
  ASSERT_EQ(produce(p, "events", "k", "v"), RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_TRUE(txn.commit(30s).ok());
}

// abort_transaction while no broker answers: the same, and the aborted records are purged.
TEST_F(TransactionsMockTest, AbortTransactionResumesAcrossSlicesOnceTheBrokersAreBack) {
  Producer& p = make_producer("app");
  Transactions txn(p);
  ASSERT_TRUE(txn.init(30s).ok());
  ASSERT_TRUE(txn.begin().ok());
  ASSERT_EQ(produce(p, "events", "k", "v"), RD_KAFKA_RESP_ERR_NO_ERROR);
  io_.restart();
  io_.run_for(500ms);  // the partition is added to the transaction, the record delivered
  ASSERT_NO_FATAL_FAILURE(brokers_down(true));
  std::chrono::milliseconds longest{0};
  const TxnResult r = run_sliced(
      "abort_transaction", [&](std::chrono::milliseconds t) { return txn.abort(t); }, 10s, 1500ms,
      longest);
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_FALSE(txn.open());
  EXPECT_LT(longest, 400ms) << "a slice blocked longer than its 100 ms";
  ASSERT_TRUE(txn.begin().ok());
  EXPECT_TRUE(txn.commit(30s).ok());
}

// The position read in bounded polls: each poll returns within about its wait, and the outcome
// is the blocking read_position's.
TEST_F(TransactionsMockTest, PositionIsReadInBoundedPolls) {
  Producer& p = make_producer("app");
  Transactions txn(p);
  ASSERT_TRUE(txn.init(30s).ok());
  ASSERT_TRUE(txn.begin().ok());
  const StreamPosition pos{"42", 1, Lsn(0x3000), 7, {}, {}};
  ASSERT_EQ(produce(p, "app.walrelay.positions", "app", encode_position(pos)),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  ASSERT_TRUE(txn.commit(30s).ok());
  auto reader = PositionReader::start(kafka_config(), "app.walrelay.positions", "app", 30s);
  ASSERT_TRUE(reader.has_value()) << reader.error();
  std::optional<std::expected<std::optional<StreamPosition>, std::string>> read;
  int polls = 0;
  while (!read) {
    const auto before = std::chrono::steady_clock::now();
    read = reader->poll(100ms);
    EXPECT_LT(std::chrono::steady_clock::now() - before, 400ms);
    ++polls;
  }
  ASSERT_TRUE(read->has_value()) << read->error();
  ASSERT_TRUE(read->value().has_value());
  EXPECT_EQ((*read)->value().lsn, Lsn(0x3000));
  EXPECT_EQ((*read)->value().index, 7);
  std::cout << "[positions] read in " << polls << " polls of at most 100 ms" << std::endl;
}

// No broker answers: every poll of the reading (and of the topic's creation) returns within about
// its wait, and the reading fails once its timeout has passed (the connector retries the session),
// not before: a broker may come back meanwhile.
TEST_F(TransactionsMockTest, PositionReadingWithoutBrokersFailsAfterItsTimeoutInBoundedPolls) {
  ASSERT_NO_FATAL_FAILURE(brokers_down(true));
  auto reader = PositionReader::start(kafka_config(), "app.walrelay.positions", "app", 2s);
  ASSERT_TRUE(reader.has_value()) << reader.error();
  const auto started = std::chrono::steady_clock::now();
  std::optional<std::expected<std::optional<StreamPosition>, std::string>> read;
  while (!read && std::chrono::steady_clock::now() - started < 20s) {
    const auto before = std::chrono::steady_clock::now();
    read = reader->poll(100ms);
    EXPECT_LT(std::chrono::steady_clock::now() - before, 400ms);
  }
  ASSERT_TRUE(read.has_value());
  EXPECT_FALSE(read->has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - started, 2s);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  auto admin = TopicAdmin::connect(kafka_config(), "positions");
  ASSERT_TRUE(admin.has_value()) << admin.error().message;
  ASSERT_TRUE(
      admin->create({"new.walrelay.positions", 1, -1, {{"cleanup.policy", "compact"}}}, 1s));
  std::optional<std::expected<CreateOutcome, Error>> created;
  const auto created_from = std::chrono::steady_clock::now();
  while (!created && std::chrono::steady_clock::now() - created_from < 20s) {
    const auto before = std::chrono::steady_clock::now();
    created = admin->poll(100ms);
    EXPECT_LT(std::chrono::steady_clock::now() - before, 400ms);
  }
  ASSERT_TRUE(created.has_value());
  EXPECT_FALSE(created->has_value());
  EXPECT_EQ(created->error().code, RD_KAFKA_RESP_ERR__TIMED_OUT);
  ASSERT_NO_FATAL_FAILURE(brokers_down(false));
}

TEST(ClassifyTxnError, FollowsLibrdkafkasTransactionalErrorRules) {
  EXPECT_TRUE(classify_txn_error(nullptr, nullptr).ok());
  EXPECT_EQ(
      classify_txn_error(nullptr, rd_kafka_error_new(RD_KAFKA_RESP_ERR__TIMED_OUT, "t")).action,
      TxnAction::kAbort);  // not flagged retriable by rd_kafka_error_new: state unknown
  EXPECT_EQ(classify_txn_error(nullptr, rd_kafka_error_new(RD_KAFKA_RESP_ERR__FENCED, "f")).action,
            TxnAction::kFenced);
  EXPECT_EQ(classify_txn_error(nullptr, rd_kafka_error_new(RD_KAFKA_RESP_ERR_PRODUCER_FENCED, "f"))
                .action,
            TxnAction::kFenced);
  EXPECT_TRUE(is_fencing_error(RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH));
  EXPECT_FALSE(is_fencing_error(RD_KAFKA_RESP_ERR_NOT_COORDINATOR));
}

}  // namespace
}  // namespace walrelay::kafka
