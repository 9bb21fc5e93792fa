// The Kafka client library (kafka/) on real Kafka, for what librdkafka's mock cluster does not
// implement (tests/component/kafka_client_mock_cluster_test.cpp): topic creation through the
// controller (created, then "exists"), a missing topic described without creating it, the offset
// of a timestamp (ListOffsets, KIP-79), and a group subscription that resumes from its commit.
// Each test uses topics and groups of its own (named after the time), so it runs beside others.

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "walrelay/config/config.hpp"
#include "walrelay/core/record.hpp"
#include "walrelay/kafka/admin.hpp"
#include "walrelay/kafka/consumer.hpp"
#include "walrelay/kafka/producer.hpp"

namespace walrelay::kafka {
namespace {

using namespace std::chrono_literals;

constexpr int kRecords = 10;

/// A minute ago, in ms since the epoch: record timestamps within the topics' retention.
std::int64_t a_minute_ago_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() -
         60'000;
}

class KafkaClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bootstrap = std::getenv("WALRELAY_TEST_KAFKA_BOOTSTRAP");
    ASSERT_NE(bootstrap, nullptr) << "WALRELAY_TEST_KAFKA_BOOTSTRAP is not set "
                                     "(source the environment tests/services/start.sh wrote)";
    cfg_.bootstrap_servers = bootstrap;
    suffix_ = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
  }

  /// `name` unique to this run.
  [[nodiscard]] std::string unique(const std::string& name) const {
    return "walrelay.kafka_client_test." + name + "." + suffix_;
  }

  void create(const std::string& topic, int partitions) {
    auto admin = TopicAdmin::connect(cfg_);
    ASSERT_TRUE(admin.has_value()) << admin.error().message;
    const auto created = create_topic(*admin, {topic, partitions, -1, {}}, 30s);
    ASSERT_TRUE(created.has_value()) << created.error().describe();
  }

  /// Produces kRecords records k0=v0.. to partition 0 of `topic` (one partition), with
  /// timestamps `base_ms`, `base_ms` + 1000, ...; waits for their delivery.
  void produce(const std::string& topic, std::int64_t base_ms) {
    boost::asio::io_context io;
    int failed = 0;
    Producer p(
        io.get_executor(), cfg_, "walrelay-kafka-client-test",
        [&](const DeliveryReport& r) { failed += r.err != RD_KAFKA_RESP_ERR_NO_ERROR ? 1 : 0; },
        [](const Error&) {});
    p.start();
    for (int i = 0; i < kRecords; ++i) {
      const std::string key = "k" + std::to_string(i);
      const std::string value = "v" + std::to_string(i);
      const Record rec{
          topic, std::string_view(key), std::string_view(value), {}, base_ms + 1000 * i};
      ASSERT_EQ(p.produce(rec, 0), RD_KAFKA_RESP_ERR_NO_ERROR);
    }
    EXPECT_EQ(p.flush(30s), 0);
    p.stop();
    EXPECT_EQ(failed, 0);
  }

  static std::vector<std::string> read(Consumer& c, int n) {
    std::vector<std::string> out;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
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
    o.properties = {{"auto.offset.reset", "earliest"}};
    return o;
  }

  config::KafkaConfig cfg_;
  std::string suffix_;
};

TEST_F(KafkaClientTest, TopicAdminCreatesATopicThenFindsItExists) {
  auto admin = TopicAdmin::connect(cfg_);
  ASSERT_TRUE(admin.has_value()) << admin.error().message;
  const NewTopic topic{unique("created"), 3, -1, {{"cleanup.policy", "compact"}}};
  const auto missing = admin->describe(topic.name, 30s);
  ASSERT_TRUE(missing.has_value()) << missing.error().describe();
  EXPECT_FALSE(missing->exists()) << "describing does not create the topic";
  for (const CreateOutcome expected : {CreateOutcome::kCreated, CreateOutcome::kExists}) {
    ASSERT_TRUE(admin->create(topic, 30s));
    std::optional<std::expected<CreateOutcome, Error>> outcome;
    const auto started = std::chrono::steady_clock::now();
    while (!outcome && std::chrono::steady_clock::now() - started < 40s) {
      const auto before = std::chrono::steady_clock::now();
      outcome = admin->poll(100ms);
      EXPECT_LT(std::chrono::steady_clock::now() - before, 400ms);
    }
    ASSERT_TRUE(outcome.has_value());
    ASSERT_TRUE(outcome->has_value()) << outcome->error().describe();
    EXPECT_EQ(**outcome, expected);
  }
  std::optional<TopicDescription> described;
  for (int i = 0; i < 50 && !(described && described->partitions.size() == 3); ++i) {
    auto d = admin->describe(topic.name, 10s);
    ASSERT_TRUE(d.has_value()) << d.error().describe();
    described = *d;
    if (described->partitions.size() != 3) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(described->exists());
  EXPECT_EQ(described->partitions.size(), 3u);
}

TEST_F(KafkaClientTest, ConsumerStartsFromATimestamp) {
  const std::string topic = unique("timestamps");
  ASSERT_NO_FATAL_FAILURE(create(topic, 1));
  const std::int64_t base = a_minute_ago_ms();
  ASSERT_NO_FATAL_FAILURE(produce(topic, base));
  auto c = Consumer::create(cfg_, options(unique("group")));
  ASSERT_TRUE(c.has_value()) << c.error().message;
  const auto from = c->offsets_for_time(topic, {0}, base + 3500, 30s);
  ASSERT_TRUE(from.has_value()) << from.error().describe();
  ASSERT_EQ(from->size(), 1u);
  EXPECT_EQ(from->front().offset, 4) << "the first record at or after base + 3500 ms is k4";
  const auto later = c->offsets_for_time(topic, {0}, base + 3'600'000, 30s);
  ASSERT_TRUE(later.has_value()) << later.error().describe();
  EXPECT_EQ(later->front().offset, kOffsetEnd) << "no record that late: the end";
  ASSERT_TRUE(c->assign(*from));
  const auto rest = read(*c, kRecords - 4);
  ASSERT_EQ(rest.size(), static_cast<std::size_t>(kRecords - 4));
  EXPECT_EQ(rest.front(), "k4=v4@4");
  const auto marks = c->watermarks(topic, 0, 30s);
  ASSERT_TRUE(marks.has_value()) << marks.error().describe();
  EXPECT_EQ(marks->high, kRecords);
}

TEST_F(KafkaClientTest, GroupSubscriptionResumesFromItsCommit) {
  const std::string topic = unique("group");
  const std::string group = unique("group");
  ASSERT_NO_FATAL_FAILURE(create(topic, 1));
  ASSERT_NO_FATAL_FAILURE(produce(topic, a_minute_ago_ms()));
  {
    auto c = Consumer::create(cfg_, options(group));
    ASSERT_TRUE(c.has_value()) << c.error().message;
    ASSERT_TRUE(c->subscribe({topic}));
    EXPECT_EQ(read(*c, kRecords).size(), static_cast<std::size_t>(kRecords));
    const auto committed = c->commit({{topic, 0, 6}}, 30s);
    ASSERT_TRUE(committed.has_value()) << committed.error().describe();
    c->close();
  }
  auto again = Consumer::create(cfg_, options(group));
  ASSERT_TRUE(again.has_value()) << again.error().message;
  const auto back = again->committed({{topic, 0, 0}}, 30s);
  ASSERT_TRUE(back.has_value()) << back.error().describe();
  EXPECT_EQ(back->front().offset, 6);
  ASSERT_TRUE(again->subscribe({topic}));
  const auto rest = read(*again, kRecords - 6);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.front(), "k6=v6@6");
}

}  // namespace
}  // namespace walrelay::kafka
