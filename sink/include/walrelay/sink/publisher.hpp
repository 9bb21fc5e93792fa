#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "walrelay/core/record.hpp"
#include "walrelay/sink/kafka_producer.hpp"

namespace walrelay::sink {

/// Where a record comes from. Each source tracks its own units (a streamed transaction, a
/// snapshot chunk) and decides what they allow to be confirmed.
enum class RecordSource : std::uint8_t {
  kStream = 0,    ///< changes decoded from the replication slot
  kSnapshot = 1,  ///< rows read by an initial or resumed snapshot
};

/// The one publish path every source of records shares: record → producer → delivery report →
/// the source's own acknowledgement tracking. It tags each message's opaque with its source,
/// counts what is in flight per source (for the `kafka.max_in_flight_*` bounds) and hands every
/// delivery report to the source that published it, with the source's own 62-bit unit.
///
/// Owned by the connector; all calls on the io_context thread.
class Publisher {
 public:
  /// A delivery report whose `opaque` is the unit the source passed to `publish`.
  using Listener = std::function<void(const DeliveryReport&)>;
  static constexpr std::uint64_t kUnitMask = (1ull << 62) - 1;

  /// Publishes through `producer` (not owned; replaced after a fatal error with `attach`).
  void attach(KafkaProducer* producer) {
    producer_ = producer;
    in_flight_events_.fill(0);
    in_flight_bytes_.fill(0);
  }
  void listen(RecordSource source, Listener listener) {
    listeners_[static_cast<std::size_t>(source)] = std::move(listener);
  }

  /// Hands `record` to the producer with `unit` (< 2^62) for `source`. Returns librdkafka's
  /// synchronous result (NO_ERROR, QUEUE_FULL, MSG_SIZE_TOO_LARGE, ERR__FATAL, ...); only on
  /// NO_ERROR does a delivery report follow, and the record counts as in flight until then.
  rd_kafka_resp_err_t publish(RecordSource source, const Record& record, std::uint64_t unit) {
    const auto s = static_cast<std::size_t>(source);
    const rd_kafka_resp_err_t err =
        producer_->produce(record, (unit & kUnitMask) | (static_cast<std::uint64_t>(s) << 62));
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      ++in_flight_events_[s];
      in_flight_bytes_[s] += record_bytes(record);
    }
    return err;
  }

  /// The producer's delivery report: counts it and passes it on with the unit as `opaque`.
  void on_delivery(const DeliveryReport& report) {
    const auto s = static_cast<std::size_t>(report.opaque >> 62);
    if (in_flight_events_[s] > 0) --in_flight_events_[s];
    in_flight_bytes_[s] -= std::min(in_flight_bytes_[s], report.bytes);
    DeliveryReport r = report;
    r.opaque = report.opaque & kUnitMask;
    if (listeners_[s]) listeners_[s](r);
  }

  [[nodiscard]] std::size_t in_flight_events(RecordSource source) const {
    return in_flight_events_[static_cast<std::size_t>(source)];
  }
  [[nodiscard]] std::size_t in_flight_bytes(RecordSource source) const {
    return in_flight_bytes_[static_cast<std::size_t>(source)];
  }

 private:
  KafkaProducer* producer_ = nullptr;
  std::array<Listener, 4> listeners_;
  std::array<std::size_t, 4> in_flight_events_{};
  std::array<std::size_t, 4> in_flight_bytes_{};
};

}  // namespace walrelay::sink
