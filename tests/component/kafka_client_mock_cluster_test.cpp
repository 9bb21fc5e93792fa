// Component tests of the Kafka client library's consumer and topic admin (kafka/consumer.hpp,
// kafka/admin.hpp) against librdkafka's mock cluster: records produced with kafka::Producer are
// read back read_committed from the beginning and from an offset after a seek; watermarks, the
// end-of-partition event and committed offsets; the admin's bounded polls; and a producer's
// fabricated fatal error reaching its handler typed.
//
// librdkafka 2.0.2's mock cluster creates a topic whenever metadata names it, answers -1 to a
// timestamp lookup and has no controller for CreateTopics: a missing topic, reading from a
// timestamp, a group subscription and topic creation are tested on real Kafka
// (tests/integration/kafka_client_test.cpp).

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mock_cluster.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/core/record.hpp"
#include "walrelay/kafka/admin.hpp"
#include "walrelay/kafka/consumer.hpp"
#include "walrelay/kafka/producer.hpp"
#include "walrelay/kafka/transactions.hpp"

namespace walrelay::kafka {
namespace {

using namespace std::chrono_literals;

constexpr int kRecords = 10;

class KafkaClientMockTest : public component_test::MockClusterFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(MockClusterFixture::SetUp());
    ASSERT_NO_FATAL_FAILURE(create_topic("orders", 1));
  }

  [[nodiscard]] config::KafkaConfig kafka_config() const {
    config::KafkaConfig cfg;
    cfg.bootstrap_servers = bootstraps_;
    cfg.properties = {{"retry.backoff.ms", "50"}, {"reconnect.backoff.ms", "50"}};
    return cfg;
  }

  /// Produces `kRecords` records keyed k0.. with values v0.. and timestamps 1000, 2000, ... ms to
  /// `topic` partition 0, inside one Kafka transaction when `transactional`; waits for them.
  void produce_records(const std::string& topic, bool transactional) {
    boost::asio::io_context io;
    const config::KafkaConfig cfg =
        transactional ? transactional_properties(kafka_config(), "walrelay-client-test")
                      : kafka_config();
    int failed = 0;
    std::vector<Error> fatal;
    Producer p(
        io.get_executor(), cfg, "walrelay-client-test",
        [&](const DeliveryReport& r) { failed += r.err != RD_KAFKA_RESP_ERR_NO_ERROR ? 1 : 0; },
        [&](const Error& e) { fatal.push_back(e); });
    p.start();
    Transactions txn(p);
    if (transactional) {
      ASSERT_TRUE(txn.init(30s).ok());
      ASSERT_TRUE(txn.begin().ok());
    }
    for (int i = 0; i < kRecords; ++i) {
      const std::string key = "k" + std::to_string(i);
      const std::string value = "v" + std::to_string(i);
      Record rec{topic, std::string_view(key), std::string_view(value), {}, 1000 * (i + 1)};
      // All to partition 0: a one-partition topic.
      ASSERT_EQ(p.produce(rec, static_cast<std::uint64_t>(i)), RD_KAFKA_RESP_ERR_NO_ERROR);
    }
    if (transactional) {
      ASSERT_TRUE(txn.commit(30s).ok());
    }
    EXPECT_EQ(p.flush(30s), 0);
    p.stop();
    EXPECT_EQ(failed, 0);
    EXPECT_TRUE(fatal.empty());
  }

  /// Polls `c` until `n` records came (or 30 s passed); returns them as "key=value@offset".
  static std::vector<std::string> read(Consumer& c, int n) {
    std::vector<std::string> out;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (static_cast<int>(out.size()) < n && std::chrono::steady_clock::now() < deadline) {
      auto m = c.poll(100ms);
      if (!m || !m->is_record()) continue;
      out.push_back(std::string(m->key().value_or("")) + "=" +
                    std::string(m->value().value_or("")) + "@" + std::to_string(m->offset()));
    }
    return out;
  }

  static ConsumerOptions options(const std::string& group) {
    ConsumerOptions o;
    o.group_id = group;
    o.properties = {{"fetch.wait.max.ms", "10"}, {"auto.offset.reset", "earliest"}};
    return o;
  }
};

// Records of a committed transaction, read back read_committed (the default) from the beginning;
// the watermarks; a seek back to an offset; the end-of-partition event.
TEST_F(KafkaClientMockTest, ConsumerReadsBackSeeksAndReportsWatermarks) {
  ASSERT_NO_FATAL_FAILURE(produce_records("orders", /*transactional=*/true));
  ConsumerOptions o = options("walrelay-client-test");
  o.partition_eof = true;
  auto c = Consumer::create(kafka_config(), o);
  ASSERT_TRUE(c.has_value()) << c.error().message;

  const auto described = c->describe_topic("orders", 10s);
  ASSERT_TRUE(described.has_value()) << described.error().message;
  EXPECT_TRUE(described->exists());
  EXPECT_EQ(described->partitions, std::vector<std::int32_t>{0});

  const auto marks = c->watermarks("orders", 0, 10s);
  ASSERT_TRUE(marks.has_value()) << marks.error().message;
  EXPECT_EQ(marks->low, 0);
  // The mock cluster writes no control record for the commit: the high watermark is the count.
  EXPECT_EQ(marks->high, kRecords);

  ASSERT_TRUE(c->assign({{"orders", 0, kOffsetBeginning}}));
  const auto all = read(*c, kRecords);
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kRecords));
  EXPECT_EQ(all.front(), "k0=v0@0");
  EXPECT_EQ(all.back(), "k9=v9@9");

  // The end of the partition, then nothing more.
  bool eof = false;
  for (int i = 0; i < 50 && !eof; ++i) {
    if (auto m = c->poll(100ms); m && m->end_of_partition()) {
      eof = true;
      EXPECT_EQ(m->offset(), kRecords);
      EXPECT_EQ(m->error().code, RD_KAFKA_RESP_ERR__PARTITION_EOF);
    }
  }
  EXPECT_TRUE(eof);

  ASSERT_TRUE(c->seek({{"orders", 0, 7}}, 10s));
  EXPECT_EQ(read(*c, 3), (std::vector<std::string>{"k7=v7@7", "k8=v8@8", "k9=v9@9"}));

  // Seeking a partition that is not assigned fails, typed.
  const auto bad = c->seek({{"orders", 5, 0}}, 1s);
  EXPECT_FALSE(bad.has_value());
}

// Offsets committed for the group (no group joined: assign only) are read back, and a consumer
// assigned at the stored offset starts there.
TEST_F(KafkaClientMockTest, ConsumerCommitsOffsetsAndStartsFromThem) {
  ASSERT_NO_FATAL_FAILURE(produce_records("orders", /*transactional=*/false));
  auto c = Consumer::create(kafka_config(), options("walrelay-inbox-test"));
  ASSERT_TRUE(c.has_value()) << c.error().message;
  ASSERT_TRUE(c->assign({{"orders", 0, kOffsetBeginning}}));
  EXPECT_EQ(read(*c, kRecords).size(), static_cast<std::size_t>(kRecords));
  const auto committed = c->commit({{"orders", 0, 6}}, 10s);
  ASSERT_TRUE(committed.has_value()) << committed.error().message;
  const auto back = c->committed({{"orders", 0, 0}}, 10s);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ(back->front().offset, 6);
  c->close();

  auto again = Consumer::create(kafka_config(), options("walrelay-inbox-test"));
  ASSERT_TRUE(again.has_value()) << again.error().message;
  ASSERT_TRUE(again->assign({{"orders", 0, kOffsetStored}}));
  const auto rest = read(*again, kRecords - 6);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.front(), "k6=v6@6");
}

// A refused property is typed and named, without its value.
TEST_F(KafkaClientMockTest, ConsumerRefusesABadProperty) {
  config::KafkaConfig cfg = kafka_config();
  cfg.properties["security.protocol"] = "carrier-pigeon";
  const auto c = Consumer::create(cfg, options("g"));
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, RD_KAFKA_RESP_ERR__INVALID_ARG);
  EXPECT_TRUE(c.error().message.starts_with("kafka.properties.security.protocol: "))
      << c.error().message;
}

// One creation at a time, a topic librdkafka refuses to describe, and a request without an
// answer (no controller): each typed, each poll within about its wait.
TEST_F(KafkaClientMockTest, TopicAdminPollsAreBoundedAndItsErrorsTyped) {
  auto admin = TopicAdmin::connect(kafka_config());
  ASSERT_TRUE(admin.has_value()) << admin.error().message;
  const auto refused = admin->create({"bad", -5, -1, {}}, 1s);  // -1 or 1..100000 partitions
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, RD_KAFKA_RESP_ERR__INVALID_ARG);
  EXPECT_FALSE(admin->creating());
  const NewTopic topic{"app.walrelay.positions", 1, -1, {{"cleanup.policy", "compact"}}};
  ASSERT_TRUE(admin->create(topic, 1s));
  EXPECT_TRUE(admin->creating());
  const auto second = admin->create(topic, 1s);
  ASSERT_FALSE(second.has_value()) << "one creation in flight at a time";
  EXPECT_EQ(second.error().code, RD_KAFKA_RESP_ERR__STATE);
  std::optional<std::expected<CreateOutcome, Error>> outcome;
  const auto started = std::chrono::steady_clock::now();
  while (!outcome && std::chrono::steady_clock::now() - started < 20s) {
    const auto before = std::chrono::steady_clock::now();
    outcome = admin->poll(100ms);
    EXPECT_LT(std::chrono::steady_clock::now() - before, 400ms);
  }
  ASSERT_TRUE(outcome.has_value());
  ASSERT_FALSE(outcome->has_value());
  EXPECT_TRUE(outcome->error().code == RD_KAFKA_RESP_ERR__TIMED_OUT) << outcome->error().describe();
  EXPECT_FALSE(admin->creating());
  const auto described = admin->describe("orders", 10s);
  ASSERT_TRUE(described.has_value()) << described.error().message;
  EXPECT_TRUE(described->exists());
}

// A producer's fatal error reaches its handler typed: the original code behind ERR__FATAL, the
// fatal flag, and the text for logs ("<name>: <text>"), so the connector classifies it with
// is_fencing_error rather than by the text.
TEST_F(KafkaClientMockTest, ProducerFatalErrorReachesTheHandlerTyped) {
  boost::asio::io_context io;
  std::vector<Error> fatal;
  Producer p(
      io.get_executor(), kafka_config(), "walrelay-client-test", [](const DeliveryReport&) {},
      [&](const Error& e) { fatal.push_back(e); });
  p.start();
  ASSERT_EQ(rd_kafka_test_fatal_error(p.handle(), RD_KAFKA_RESP_ERR_PRODUCER_FENCED, "fenced"),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (fatal.empty() && std::chrono::steady_clock::now() < deadline) {
    p.poll();
    io.run_for(50ms);
  }
  p.stop();
  ASSERT_EQ(fatal.size(), 1u);
  EXPECT_EQ(fatal[0].code, RD_KAFKA_RESP_ERR_PRODUCER_FENCED);
  EXPECT_TRUE(fatal[0].fatal);
  EXPECT_TRUE(is_fencing_error(fatal[0]));
  EXPECT_TRUE(fatal[0].describe().starts_with("PRODUCER_FENCED: ")) << fatal[0].describe();
}

}  // namespace
}  // namespace walrelay::kafka
