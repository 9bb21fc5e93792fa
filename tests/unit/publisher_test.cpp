// The publish path's exactly-once hooks (sink/publisher.hpp): reports held back until the Kafka
// transaction commits, dropped when it aborts, and failures passed on at once.

#include "walrelay/sink/publisher.hpp"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace walrelay::sink {
namespace {

DeliveryReport report(RecordSource source, std::uint64_t unit, std::size_t bytes,
                      rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR) {
  DeliveryReport r;
  r.opaque = unit | (static_cast<std::uint64_t>(source) << 62);
  r.bytes = bytes;
  r.err = err;
  return r;
}

TEST(Publisher, HeldReportsReachTheSourceOnlyAfterTheCommit) {
  Publisher p;
  std::vector<std::uint64_t> snapshot_units;
  std::vector<std::uint64_t> stream_units;
  std::vector<rd_kafka_resp_err_t> snapshot_errors;
  p.listen(RecordSource::kSnapshot, [&](const DeliveryReport& r) {
    if (r.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      snapshot_units.push_back(r.opaque);
    } else {
      snapshot_errors.push_back(r.err);
    }
  });
  p.listen(RecordSource::kStream,
           [&](const DeliveryReport& r) { stream_units.push_back(r.opaque); });
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
  EXPECT_EQ(p.publish(RecordSource::kStream, rec, 1), RD_KAFKA_RESP_ERR__QUEUE_FULL);
  gate = RD_KAFKA_RESP_ERR__STATE;
  EXPECT_EQ(p.publish(RecordSource::kSnapshot, rec, 2), RD_KAFKA_RESP_ERR__STATE);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(p.in_flight_events(RecordSource::kStream), 0u);
  EXPECT_EQ(p.in_flight_events(RecordSource::kSnapshot), 0u);
  EXPECT_EQ(p.in_flight_bytes(RecordSource::kStream), 0u);
}

}  // namespace
}  // namespace walrelay::sink
