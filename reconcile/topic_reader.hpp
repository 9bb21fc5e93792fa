#pragma once

// Reads the topics of one table to fixed end offsets, once per comparison pass: every partition
// from its first offset still in the log up to (not including) the high watermark taken when the
// reader was opened, with a kafka::Consumer (assign, no group joined, nothing committed,
// read_committed: records of aborted transactions are never compared). Memory: librdkafka's
// fetch queue, capped here (queued.max.messages.kbytes) besides the record being visited.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "walrelay/config/config.hpp"
#include "walrelay/kafka/consumer.hpp"
#include "walrelay/kafka/error.hpp"

namespace walrelay::reconcile {

/// One record as reconcile compares it.
struct TopicEvent {
  std::string_view id;  ///< the `id` header; "" when the record has none
  std::string_view
      digest;  ///< the `payload_digest` header, else SHA-256 of the value; "" tombstone
  std::int64_t timestamp_ms = -1;
  std::string_view topic;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
};

class TopicReader {
 public:
  /// Describes `topics` and takes each partition's end offset now (call it after the slot passed
  /// the source's snapshot). A topic that does not exist has no partitions. Errors: the consumer
  /// cannot be created, or the cluster did not answer within `timeout`.
  static std::expected<TopicReader, kafka::Error> open(const config::Config& cfg,
                                                       const std::vector<std::string>& topics,
                                                       std::chrono::milliseconds timeout);

  /// Reads every partition to its end offset, calling `visit` for each record. Error: nothing
  /// arrived for `idle_timeout` while a partition's end was not reached, a fatal consumer error,
  /// or `*cancel` was set (ERR__INTR; polled between records, at least every 200 ms).
  std::expected<void, kafka::Error> read(const std::function<void(const TopicEvent&)>& visit,
                                         std::chrono::milliseconds idle_timeout,
                                         const std::atomic<bool>* cancel = nullptr);

  /// Records below the end offsets (low to high), over every partition: an upper bound of what
  /// read() visits (read_committed skips control records and aborted transactions).
  [[nodiscard]] std::uint64_t span() const;

 private:
  struct Range {
    std::string topic;
    std::int32_t partition = 0;
    std::int64_t low = 0;
    std::int64_t end = 0;
  };
  TopicReader(kafka::Consumer consumer, std::vector<Range> ranges)
      : consumer_(std::move(consumer)), ranges_(std::move(ranges)) {}

  kafka::Consumer consumer_;
  std::vector<Range> ranges_;
  std::string digest_;
};

}  // namespace walrelay::reconcile
