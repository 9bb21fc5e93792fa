// Component tests of the publish path every source shares (sink::Publisher, sink::DeadLetterWriter)
// against librdkafka's mock cluster, with fake sources in place of the stream and the snapshots:
// typed publish results and the resume after a full queue, the dead-letter records of every kind
// from every source with the same headers, the publish metrics of every source, and delivery
// exactly_once's acknowledgement at the commit (the mock cluster implements the transaction
// coordinator). No PostgreSQL.

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mock_cluster.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/core/lsn.hpp"
#include "walrelay/core/record.hpp"
#include "walrelay/kafka/producer.hpp"
#include "walrelay/kafka/transactions.hpp"
#include "walrelay/sink/dead_letter.hpp"
#include "walrelay/sink/publisher.hpp"

namespace walrelay::sink {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// One record read back from the mock cluster.
struct Consumed {
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::string>> headers;  // in order
};

class PipelineTest : public component_test::MockClusterFixture {
 protected:
  void SetUp() override {
    MockClusterFixture::SetUp();
    create_topic("events", 1);
    create_topic("dlq", 1);
  }

  void TearDown() override {
    if (producer_) {
      producer_->stop();
      io_.restart();
      io_.poll();
      producer_.reset();
    }
    MockClusterFixture::TearDown();
  }

  /// `transactional_id` non-empty: a transactional producer (delivery exactly_once's settings).
  void start(std::map<std::string, std::string> extra = {},
             const std::string& transactional_id = "") {
    config::KafkaConfig cfg;
    cfg.bootstrap_servers = bootstraps_;
    cfg.properties = {{"reconnect.backoff.ms", "50"}, {"retry.backoff.ms", "50"}};
    for (auto& [k, v] : extra) cfg.properties[k] = v;
    if (!transactional_id.empty()) cfg = kafka::transactional_properties(cfg, transactional_id);
    producer_ = std::make_unique<kafka::Producer>(
        io_.get_executor(), cfg, "walrelay-pipeline-test",
        [this](const kafka::DeliveryReport& r) { publisher_.on_delivery(r); },
        [](const kafka::Error& error) { ADD_FAILURE() << "fatal: " << error.describe(); });
    publisher_.attach(producer_.get());
    for (RecordSource s : {RecordSource::kStream, RecordSource::kSnapshot}) {
      publisher_.listen(s, [this, s](const kafka::DeliveryReport& r) {
        auto& seen = reports_[s];
        seen.push_back({r.opaque, r.err});
      });
    }
    producer_->start();
  }

  bool run_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 30s) {
    const auto deadline = Clock::now() + timeout;
    while (!pred()) {
      if (Clock::now() >= deadline) return false;
      io_.run_one_for(20ms);
    }
    return true;
  }

  [[nodiscard]] std::size_t in_flight() const {
    return publisher_.in_flight_events(RecordSource::kStream) +
           publisher_.in_flight_events(RecordSource::kSnapshot);
  }

  /// Reads `n` records of partition 0 of `topic` from the start.
  std::vector<Consumed> consume(const std::string& topic, std::size_t n) {
    char errstr[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    EXPECT_EQ(
        rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps_.c_str(), errstr, sizeof errstr),
        RD_KAFKA_CONF_OK);
    EXPECT_EQ(rd_kafka_conf_set(conf, "group.id", "pipeline-test", errstr, sizeof errstr),
              RD_KAFKA_CONF_OK);
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    EXPECT_NE(rk, nullptr) << errstr;
    std::vector<Consumed> out;
    if (rk == nullptr) return out;
    rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, topic.c_str(), 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    EXPECT_EQ(rd_kafka_assign(rk, parts), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(parts);
    const auto deadline = Clock::now() + 30s;
    while (out.size() < n && Clock::now() < deadline) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
      if (m == nullptr) continue;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        Consumed c;
        if (m->key != nullptr) c.key.emplace(static_cast<const char*>(m->key), m->key_len);
        if (m->payload != nullptr) c.value.emplace(static_cast<const char*>(m->payload), m->len);
        rd_kafka_headers_t* hdrs = nullptr;
        if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
          const char* name = nullptr;
          const void* value = nullptr;
          std::size_t size = 0;
          for (std::size_t i = 0;
               rd_kafka_header_get_all(hdrs, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
               ++i) {
            c.headers.emplace_back(name, std::string(static_cast<const char*>(value), size));
          }
        }
        out.push_back(std::move(c));
      }
      rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return out;
  }

  struct Report {
    std::uint64_t unit;
    rd_kafka_resp_err_t err;
  };
  boost::asio::io_context io_;
  std::unique_ptr<kafka::Producer> producer_;
  Publisher publisher_;
  std::map<RecordSource, std::vector<Report>> reports_;
};

std::vector<std::pair<std::string, std::string>> expected_headers(std::string_view kind,
                                                                  std::string_view reason,
                                                                  std::string_view source,
                                                                  std::string_view lsn,
                                                                  std::string_view id) {
  std::vector<std::pair<std::string, std::string>> h = {
      {"walrelay.error.kind", std::string(kind)},
      {"walrelay.error.reason", std::string(reason)},
      {"walrelay.source", std::string(source)},
      {"walrelay.lsn", std::string(lsn)}};
  if (!id.empty()) h.emplace_back("id", std::string(id));
  return h;
}

// Every kind of dead letter, from the stream and from a snapshot, is one record shape: the
// original's key and bytes, and the headers kind, reason, source, LSN and (when the event has
// one) id, in that order. Each counts as in flight for its source's unit and its delivery report
// comes back to that source with that unit.
TEST_F(PipelineTest, DeadLettersOfEveryKindFromEverySourceCarryTheSameHeaders) {
  start();
  DeadLetterWriter writer(publisher_, "dlq");
  const Lsn lsn = *Lsn::parse("0/16B3748");
  struct Case {
    RecordSource source;
    std::uint64_t unit;
    DeadLetter dead_letter;
  };
  const std::vector<Case> cases = {
      {RecordSource::kStream,
       7,
       {DeadLetterKind::kMapping, "column x is not UTF-8 (xid 750, LSN 0/16B3748)", "public.t", lsn,
        "", std::nullopt, std::string_view(R"({"action":"I"})")}},
      {RecordSource::kStream,
       8,
       {DeadLetterKind::kOversize, "too large", "events", lsn, "0/16B3748:0",
        std::string_view("k1"), std::nullopt}},
      {RecordSource::kStream,
       9,
       {DeadLetterKind::kDelivery, "delivery failed for good", "events", lsn, "0/16B3748:1",
        std::string_view("k2"), std::string_view("{\"v\":1}")}},
      {RecordSource::kSnapshot,
       3,
       {DeadLetterKind::kMapping, "snapshot of public.t: bad", "public.t", lsn,
        "0/16B3748:r:public.t:0:5", std::nullopt, std::string_view(R"({"id":"5"})")}},
      {RecordSource::kSnapshot,
       4,
       {DeadLetterKind::kOversize, "too large", "public.t", lsn, "0/16B3748:r:public.t:0:6",
        std::string_view("k6"), std::nullopt}},
      {RecordSource::kSnapshot,
       5,
       {DeadLetterKind::kDelivery, "delivery failed", "events", lsn, "0/16B3748:r:public.t:0:7",
        std::string_view("k7"), std::string_view("{}")}},
  };
  for (const Case& c : cases) {
    const auto r = writer.publish(c.source, c.unit, c.dead_letter);
    ASSERT_TRUE(r.queued()) << r.error;
    EXPECT_EQ(r.bytes, (c.dead_letter.key ? c.dead_letter.key->size() : 0) +
                           (c.dead_letter.body ? c.dead_letter.body->size() : 0));
  }
  EXPECT_EQ(publisher_.in_flight_events(RecordSource::kStream), 3u);
  EXPECT_EQ(publisher_.in_flight_events(RecordSource::kSnapshot), 3u);
  ASSERT_TRUE(run_until([&] { return in_flight() == 0; }));
  for (RecordSource s : {RecordSource::kStream, RecordSource::kSnapshot}) {
    ASSERT_EQ(reports_[s].size(), 3u);
    for (const Report& r : reports_[s]) EXPECT_EQ(r.err, RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  EXPECT_EQ(reports_[RecordSource::kStream][0].unit, 7u);
  EXPECT_EQ(reports_[RecordSource::kSnapshot][2].unit, 5u);

  const std::vector<Consumed> got = consume("dlq", cases.size());
  ASSERT_EQ(got.size(), cases.size());
  const char* kinds[] = {"mapping", "oversize", "delivery", "mapping", "oversize", "delivery"};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const DeadLetter& d = cases[i].dead_letter;
    SCOPED_TRACE("dead letter " + std::to_string(i));
    EXPECT_EQ(got[i].headers,
              expected_headers(kinds[i], d.reason, d.source, "0/16B3748", d.event_id));
    EXPECT_EQ(got[i].key, d.key ? std::optional<std::string>(*d.key) : std::nullopt);
    EXPECT_EQ(got[i].value, d.body ? std::optional<std::string>(*d.body) : std::nullopt);
  }
}

// A dead letter whose body is itself over message.max.bytes goes without its body, from any
// source: the headers still say what and why.
TEST_F(PipelineTest, ADeadLetterTooLargeForTheBrokerGoesWithoutItsBody) {
  start({{"message.max.bytes", "2000"}});
  DeadLetterWriter writer(publisher_, "dlq");
  const std::string big(5000, 'x');
  for (RecordSource s : {RecordSource::kStream, RecordSource::kSnapshot}) {
    const auto r = writer.publish(s, 1,
                                  {DeadLetterKind::kMapping, "cannot map", "public.big",
                                   *Lsn::parse("0/10"), "", std::string_view("key"), big});
    ASSERT_TRUE(r.queued()) << r.error;
    EXPECT_EQ(r.bytes, 3u);
  }
  ASSERT_TRUE(run_until([&] { return in_flight() == 0; }));
  const auto got = consume("dlq", 2);
  ASSERT_EQ(got.size(), 2u);
  for (const Consumed& c : got) {
    EXPECT_EQ(c.key, std::optional<std::string>("key"));
    EXPECT_EQ(c.value, std::nullopt);
    EXPECT_EQ(c.headers, expected_headers("mapping", "cannot map", "public.big", "0/10", ""));
  }
}

// The publish results are typed: a record over message.max.bytes is kTooLarge (no report
// follows), a full producer queue is kQueueFull, and once delivery reports free room the same
// record is published; nothing stays counted in flight.
TEST_F(PipelineTest, AFullQueueIsTypedAndPublishingResumesOnceReportsFreeRoom) {
  start({{"message.max.bytes", "2000"}, {"queue.buffering.max.messages", "10"}});
  const std::string big(5000, 'x');
  const Record too_large{"events", std::string_view("k"), std::string_view(big), {}, 0};
  EXPECT_EQ(publisher_.publish(RecordSource::kStream, too_large, 1).status,
            PublishStatus::kTooLarge);
  EXPECT_EQ(publisher_.in_flight_events(RecordSource::kStream), 0u);

  std::size_t queued = 0;
  std::size_t full = 0;
  const std::size_t want = 100;
  std::vector<std::string> values;
  for (std::size_t i = 0; i < want; ++i) values.push_back("v" + std::to_string(i));
  std::size_t next = 0;
  while (next < want) {
    const Record rec{"events", std::string_view("k"), std::string_view(values[next]), {}, 0};
    const RecordSource source = next % 2 == 0 ? RecordSource::kStream : RecordSource::kSnapshot;
    const PublishResult r = publisher_.publish(source, rec, next);
    if (r.status == PublishStatus::kQueueFull) {
      ++full;
      EXPECT_LE(in_flight(), 10u);
      // Wait for reports to free room, as the sources do.
      ASSERT_TRUE(run_until([&] { return in_flight() < 10; }));
      continue;
    }
    ASSERT_TRUE(r.queued()) << r.error();
    ++queued;
    ++next;
  }
  EXPECT_GT(full, 0u) << "the queue never filled: the test did not test the bound";
  ASSERT_TRUE(run_until([&] { return in_flight() == 0; }));
  EXPECT_EQ(queued, want);
  EXPECT_EQ(reports_[RecordSource::kStream].size() + reports_[RecordSource::kSnapshot].size(),
            want);
  const auto got = consume("events", want);
  ASSERT_EQ(got.size(), want);
  for (std::size_t i = 0; i < want; ++i) EXPECT_EQ(got[i].value, values[i]) << "in key order";
}

// Every source's acknowledged records count in the publish metrics (the stream, the snapshots,
// their dead letters); the exactly-once position record does not.
TEST_F(PipelineTest, EverySourcesRecordsCountInThePublishMetrics) {
  start();
  const std::string stream_value = R"({"before":null,"after":{"id":1},"op":"c","ts_ms":1})";
  const std::string snapshot_value = R"({"before":null,"after":{"id":2},"op":"r","ts_ms":1})";
  // Record::op as the router sets it (the label never comes from reading the value).
  const Record s1{"events", std::string_view("1"), std::string_view(stream_value), {}, 0, 'c'};
  const Record s2{"events", std::string_view("2"), std::string_view(snapshot_value), {}, 0, 'r'};
  const Record pos{"events", std::string_view("pos"), std::string_view("{}"), {}, 0};
  ASSERT_TRUE(publisher_.publish(RecordSource::kStream, s1, 1).queued());
  ASSERT_TRUE(publisher_.publish(RecordSource::kSnapshot, s2, 1).queued());
  ASSERT_TRUE(publisher_.publish(RecordSource::kSnapshot, s2, 2).queued());
  ASSERT_TRUE(publisher_.publish(RecordSource::kPosition, pos, 0).queued());
  DeadLetterWriter writer(publisher_, "dlq");
  ASSERT_TRUE(writer
                  .publish(RecordSource::kSnapshot, 3,
                           {DeadLetterKind::kMapping, "bad", "public.t", Lsn{}, "", std::nullopt,
                            std::string_view("{}")})
                  .queued());
  ASSERT_TRUE(run_until([&] {
    return in_flight() == 0 && publisher_.in_flight_events(RecordSource::kPosition) == 0;
  }));
  std::map<std::string, std::uint64_t> by;
  publisher_.metrics().for_each_published(
      [&](std::string_view topic, std::string_view op, std::uint64_t n) {
        by[std::string(topic) + "/" + std::string(op)] = n;
      });
  const std::map<std::string, std::uint64_t> want = {{"events/c", 1}, {"events/r", 2}, {"dlq/", 1}};
  EXPECT_EQ(by, want);
  EXPECT_EQ(publisher_.metrics().published_bytes(),
            1 + stream_value.size() + 2 * (1 + snapshot_value.size()) + 2);
  EXPECT_EQ(publisher_.metrics().delivery_errors(), 0u);
}

// delivery exactly_once through the pipeline: a source's records are acknowledged to it only
// once their Kafka transaction committed (what a read_committed consumer can see), counted in
// the publish metrics then, and never after an abort (their records are published again). The
// Publisher's hook opens a transaction for the first record of each.
TEST_F(PipelineTest, ExactlyOnceAcknowledgesAtTheCommitAndNothingOfAnAbortedTransaction) {
  start({}, kafka::transactional_id_for("pipeline-test"));
  kafka::Transactions txn(*producer_);
  ASSERT_TRUE(txn.init(30s).ok());
  publisher_.hold_reports(RecordSource::kStream, true);
  publisher_.hold_reports(RecordSource::kSnapshot, true);
  int opened = 0;
  publisher_.before_publish([&]() -> rd_kafka_resp_err_t {
    if (txn.open()) return RD_KAFKA_RESP_ERR_NO_ERROR;
    ++opened;
    return txn.begin().ok() ? RD_KAFKA_RESP_ERR_NO_ERROR : RD_KAFKA_RESP_ERR__STATE;
  });
  const std::string value = R"({"before":null,"after":{"id":1},"op":"c","ts_ms":1})";
  const Record rec{"events", std::string_view("1"), std::string_view(value), {}, 0};
  const auto published = [&] {
    std::uint64_t n = 0;
    publisher_.metrics().for_each_published(
        [&](std::string_view, std::string_view, std::uint64_t c) { n += c; });
    return n;
  };

  // Committed: the stream's units 1 and 2 and a snapshot's unit 7, all in one transaction.
  ASSERT_TRUE(publisher_.publish(RecordSource::kStream, rec, 1).queued());
  ASSERT_TRUE(publisher_.publish(RecordSource::kStream, rec, 2).queued());
  ASSERT_TRUE(publisher_.publish(RecordSource::kSnapshot, rec, 7).queued());
  EXPECT_EQ(opened, 1);
  ASSERT_TRUE(run_until([&] { return in_flight() == 0; }));
  EXPECT_TRUE(reports_.empty()) << "acknowledged before the commit";
  EXPECT_EQ(published(), 0u);
  ASSERT_TRUE(txn.commit(30s).ok());
  publisher_.release_held();
  ASSERT_EQ(reports_[RecordSource::kStream].size(), 2u);
  EXPECT_EQ(reports_[RecordSource::kStream][0].unit, 1u);
  EXPECT_EQ(reports_[RecordSource::kStream][1].unit, 2u);
  ASSERT_EQ(reports_[RecordSource::kSnapshot].size(), 1u);
  EXPECT_EQ(reports_[RecordSource::kSnapshot][0].unit, 7u);
  EXPECT_EQ(published(), 3u);

  // Aborted: its records reach no source and no metric.
  ASSERT_TRUE(publisher_.publish(RecordSource::kStream, rec, 3).queued());
  EXPECT_EQ(opened, 2);
  ASSERT_TRUE(run_until([&] { return in_flight() == 0; }));
  ASSERT_TRUE(txn.abort(30s).ok());
  publisher_.drop_held();
  publisher_.release_held();
  EXPECT_EQ(reports_[RecordSource::kStream].size(), 2u);
  EXPECT_EQ(published(), 3u);
  EXPECT_EQ(publisher_.metrics().delivery_errors(), 0u);
}

}  // namespace
}  // namespace walrelay::sink
