#pragma once

#include <librdkafka/rdkafka.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "walrelay/kafka/producer.hpp"

namespace walrelay::sink {

/// What Kafka acknowledged, by topic and op, and the deliveries that failed: the publish metrics of
/// every source (stream, initial and incremental snapshots, dead letters), counted in one place,
/// the publish path (sink::Publisher), so that no source can be left out.
///
/// Not thread-safe: the io_context thread, like the Publisher that feeds it.
class PublishMetrics {
 public:
  /// A record Kafka acknowledged: `topic` (its name; the pointer is librdkafka's topic handle's,
  /// stable while the producer lives, used to reuse the last counter), `op` the record's
  /// (docs/operations.md "Metrics and health", `walrelay_events_published_total{topic,op}`: the
  /// row-change envelope's `c`, `u`, `d`, `r`, `t`, "tombstone" for a null value, "" for anything
  /// else, as Publisher::op_label names Record::op), `bytes` its key + value bytes.
  void on_acknowledged(std::string_view topic, std::string_view op, std::size_t bytes);
  /// A delivery report with an error. Purges (ERR__PURGE_QUEUE, ERR__PURGE_INFLIGHT: records a
  /// stop or an aborted Kafka transaction took back, published again later) are not failures and
  /// are not counted.
  void on_failed(rd_kafka_resp_err_t err);
  /// The producer is replaced: its topic name pointers are no longer valid.
  void forget_topic_handles() { last_ = {}; }

  /// Calls `f(topic, op, count)` for every (topic, op) acknowledged so far, in name order.
  void for_each_published(
      const std::function<void(std::string_view, std::string_view, std::uint64_t)>& f) const;
  [[nodiscard]] std::uint64_t published_bytes() const { return bytes_; }
  [[nodiscard]] std::uint64_t delivery_errors() const { return errors_; }

 private:
  std::map<std::string, std::uint64_t, std::less<>> by_topic_;  // "topic\0op" → records
  std::string key_;                                             // scratch for a lookup
  struct Last {
    const char* topic = nullptr;
    std::string op;
    std::uint64_t* count = nullptr;
  } last_;
  std::uint64_t bytes_ = 0;
  std::uint64_t errors_ = 0;
};

}  // namespace walrelay::sink
