// The publish path's exactly-once hooks (sink/publisher.hpp): reports held back until the Kafka
// transaction commits, dropped when it aborts, and failures passed on at once.

#include "walrelay/sink/publisher.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace walrelay::sink {
namespace {

kafka::DeliveryReport report(RecordSource source, std::uint64_t unit, std::size_t bytes,
                             rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR) {
  kafka::DeliveryReport r;
  r.opaque = Publisher::opaque_of(source, 0, unit);
  r.bytes = bytes;
  r.err = err;
  return r;
}

TEST(Publisher, HeldReportsReachTheSourceOnlyAfterTheCommit) {
  Publisher p;
  std::vector<std::uint64_t> snapshot_units;
  std::vector<std::uint64_t> stream_units;
  std::vector<rd_kafka_resp_err_t> snapshot_errors;
  p.listen(RecordSource::kSnapshot, [&](const kafka::DeliveryReport& r) {
    if (r.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      snapshot_units.push_back(r.opaque);
    } else {
      snapshot_errors.push_back(r.err);
    }
  });
  p.listen(RecordSource::kStream,
           [&](const kafka::DeliveryReport& r) { stream_units.push_back(r.opaque); });
  p.hold_reports(RecordSource::kSnapshot, true);

  p.on_delivery(report(RecordSource::kSnapshot, 7, 10));
  p.on_delivery(report(RecordSource::kSnapshot, 8, 10));
  p.on_delivery(report(RecordSource::kStream, 3, 10));  // not held
  EXPECT_TRUE(snapshot_units.empty());
  EXPECT_EQ(stream_units, std::vector<std::uint64_t>{3});
  p.on_delivery(report(RecordSource::kSnapshot, 9, 10, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE));
  EXPECT_EQ(snapshot_errors.size(), 1u) << "a failure is not held";

  p.release_held();  // the Kafka transaction committed
  EXPECT_EQ(snapshot_units, (std::vector<std::uint64_t>{7, 8}));
  p.release_held();
  EXPECT_EQ(snapshot_units.size(), 2u) << "released once";

  p.on_delivery(report(RecordSource::kSnapshot, 10, 10));
  p.drop_held();  // aborted: the chunk is read and published again
  p.release_held();
  EXPECT_EQ(snapshot_units.size(), 2u);
}

// The publish metrics are counted once, in the publish path, for every source but the
// exactly-once position records; held reports count when released, under their own topic and op.
TEST(Publisher, CountsWhatKafkaAcknowledgedForEverySource) {
  Publisher p;
  const std::string topic_a = "shop.public.orders";  // stands for librdkafka's topic names
  const std::string topic_b = "shop.public.items";
  // The op rides in the opaque (Publisher::op_code of the published record): a report's value
  // is never read again, so an outbox payload's own "op" field cannot become a label.
  const auto acked = [&](RecordSource source, const std::string& topic, const Record& record) {
    kafka::DeliveryReport r = report(source, 1, 10);
    r.opaque = Publisher::opaque_of(source, Publisher::op_code(record), 1);
    r.topic = topic;
    p.on_delivery(r);
  };
  const auto row = [](char op) { return Record{"t", std::nullopt, "{}", {}, 0, op}; };
  acked(RecordSource::kStream, topic_a, row('c'));
  acked(RecordSource::kSnapshot, topic_a, row('r'));
  acked(RecordSource::kSnapshot, topic_a, row('r'));
  acked(RecordSource::kStream, topic_a, Record{"t", "k", std::nullopt, {}, 0, 0});  // tombstone
  acked(RecordSource::kStream, topic_b,
        Record{"t", "k", std::string_view(R"({"x":1,"op":"c"})"), {}, 0, 0});  // an outbox event
  acked(RecordSource::kPosition, topic_b, Record{"t", "k", std::string_view("{}"), {}, 0, 0});
  p.hold_reports(RecordSource::kStream, true);
  acked(RecordSource::kStream, topic_b, row('u'));
  p.on_delivery(report(RecordSource::kStream, 2, 10, RD_KAFKA_RESP_ERR__PURGE_QUEUE));
  p.on_delivery(report(RecordSource::kSnapshot, 3, 10, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE));

  std::map<std::string, std::uint64_t> seen;
  const auto read = [&] {
    seen.clear();
    p.metrics().for_each_published([&](std::string_view t, std::string_view op, std::uint64_t n) {
      seen[std::string(t) + "/" + std::string(op)] = n;
    });
  };
  read();
  EXPECT_EQ(seen, (std::map<std::string, std::uint64_t>{{topic_a + "/c", 1},
                                                        {topic_a + "/r", 2},
                                                        {topic_a + "/tombstone", 1},
                                                        {topic_b + "/", 1}}));
  p.release_held();  // the Kafka transaction committed
  read();
  EXPECT_EQ(seen[topic_b + "/u"], 1u);
  EXPECT_EQ(p.metrics().published_bytes(), 60u);
  EXPECT_EQ(p.metrics().delivery_errors(), 1u) << "a purge is no failure";
}

TEST(Publisher, EveryOpHasItsCodeAndLabel) {
  for (const char op : {'c', 'u', 'd', 'r', 't'}) {
    const Record r{"t", std::nullopt, "{}", {}, 0, op};
    EXPECT_EQ(Publisher::op_label(Publisher::op_code(r)), std::string_view(&op, 1));
  }
  EXPECT_EQ(Publisher::op_label(Publisher::op_code(Record{"t", "k", std::nullopt, {}, 0, 0})),
            "tombstone");
  EXPECT_EQ(Publisher::op_label(Publisher::op_code(Record{"t", "k", "{}", {}, 0, 0})), "");
  // The unit keeps its 59 bits, the source its 2, whatever the op.
  const std::uint64_t o = Publisher::opaque_of(RecordSource::kSnapshot, 6, Publisher::kUnitMask);
  EXPECT_EQ(o & Publisher::kUnitMask, Publisher::kUnitMask);
  EXPECT_EQ(o >> Publisher::kSourceShift, 1u);
  EXPECT_EQ((o >> Publisher::kOpShift) & 7, 6u);
}

TEST(Publisher, TheHookKeepsARecordBackWithItsOwnError) {
  // exactly_once: ERR__QUEUE_FULL while a commit is in progress (the caller waits as for a full
  // queue), ERR__STATE when no Kafka transaction could be opened. No producer is needed: the
  // record never reaches it.
  Publisher p;
  rd_kafka_resp_err_t gate = RD_KAFKA_RESP_ERR__QUEUE_FULL;
  int calls = 0;
  p.before_publish([&] {
    ++calls;
    return gate;
  });
  const Record rec{"t", std::string_view("k"), std::string_view("v"), {}, 0};
  EXPECT_EQ(p.publish(RecordSource::kStream, rec, 1).status, sink::PublishStatus::kQueueFull);
  gate = RD_KAFKA_RESP_ERR__STATE;
  EXPECT_EQ(p.publish(RecordSource::kSnapshot, rec, 2).status, sink::PublishStatus::kNoTransaction);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(p.in_flight_events(RecordSource::kStream), 0u);
  EXPECT_EQ(p.in_flight_events(RecordSource::kSnapshot), 0u);
  EXPECT_EQ(p.in_flight_bytes(RecordSource::kStream), 0u);
}

}  // namespace
}  // namespace walrelay::sink
