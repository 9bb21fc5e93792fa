#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "walrelay/core/record.hpp"
#include "walrelay/kafka/producer.hpp"
#include "walrelay/sink/publish_metrics.hpp"

namespace walrelay::sink {

/// Where a record comes from. Each source tracks its own units (a streamed transaction, a
/// snapshot chunk) and decides what they allow to be confirmed.
enum class RecordSource : std::uint8_t {
  kStream = 0,    ///< changes decoded from the replication slot
  kSnapshot = 1,  ///< rows read by an initial or resumed snapshot
  kPosition = 2,  ///< delivery exactly_once: the position record of a Kafka transaction
  kRelay = 3,     ///< rows of an outbox table read with a SELECT: claimed by the polling relay
               ///< (relay/), or re-emitted by `walrelay reconcile --repair` (reconcile/repair.hpp)
};

/// What became of a record handed to `Publisher::publish` (librdkafka's synchronous result of
/// rd_kafka_producev, classified here once so that sources never see librdkafka codes).
enum class PublishStatus : std::uint8_t {
  kQueued,     ///< handed to the producer: exactly one delivery report follows
  kQueueFull,  ///< no room: librdkafka's queue is full (ERR__QUEUE_FULL, its
               ///< queue.buffering.max.* limits) or, delivery exactly_once, the open Kafka
               ///< transaction is being committed; publish it again once reports free room
  kTooLarge,   ///< over the producer's message.max.bytes (ERR_MSG_SIZE_TOO_LARGE): never fits
  kFatal,      ///< the producer hit a fatal error (ERR__FATAL, librdkafka INTRODUCTION.md "Fatal
               ///< errors"): its fatal callback follows and a new producer takes over
  kNoTransaction,  ///< delivery exactly_once: no Kafka transaction could be opened (ERR__STATE);
                   ///< the session is aborted and restarted
  kRejected,       ///< any other refusal (e.g. ERR__UNKNOWN_PARTITION): it cannot be published
};

/// The result of `Publisher::publish`: its status and, when not queued, librdkafka's text.
struct PublishResult {
  PublishStatus status = PublishStatus::kQueued;
  rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;  ///< for `error()` and logs only

  [[nodiscard]] bool queued() const { return status == PublishStatus::kQueued; }
  /// The refusal as librdkafka words it (rd_kafka_err2str), "Success" when queued.
  [[nodiscard]] const char* error() const { return rd_kafka_err2str(code); }
  /// The session must restart (kFatal or kNoTransaction): nothing for the source to decide.
  [[nodiscard]] bool restart() const {
    return status == PublishStatus::kFatal || status == PublishStatus::kNoTransaction;
  }
};

/// Classifies rd_kafka_producev's result (librdkafka rdkafka.h, rd_kafka_producev "Returns").
inline PublishResult classify_produce(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
      return {PublishStatus::kQueued, err};
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
      return {PublishStatus::kQueueFull, err};
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
      return {PublishStatus::kTooLarge, err};
    case RD_KAFKA_RESP_ERR__FATAL:
      return {PublishStatus::kFatal, err};
    case RD_KAFKA_RESP_ERR__STATE:
      return {PublishStatus::kNoTransaction, err};
    default:
      return {PublishStatus::kRejected, err};
  }
}

/// The one publish path every source of records shares: record → producer → delivery report →
/// the source's own acknowledgement tracking. It tags each message's opaque with its source,
/// counts what is in flight per source (for the `kafka.max_in_flight_*` bounds) and hands every
/// delivery report to the source that published it, with the source's own 59-bit unit. The
/// publish metrics (records acknowledged by topic and op, bytes, failed deliveries) of the stream
/// and the snapshots are counted here, as the reports pass, so every source's records count alike
/// (position records of delivery exactly_once are walrelay's bookkeeping: not counted).
///
/// Owned by the connector; all calls on the io_context thread.
class Publisher {
 public:
  /// A delivery report whose `opaque` is the unit the source passed to `publish`.
  using Listener = std::function<void(const kafka::DeliveryReport&)>;
  /// A message's librdkafka opaque: the source's unit in bits 0-58, the record's op (Record::op,
  /// as op_code numbers it) in bits 59-61, the source in bits 62-63. The op rides along so that
  /// the `op` label of a report is known without reading the value again.
  static constexpr std::uint64_t kUnitMask = (1ull << 59) - 1;
  static constexpr int kOpShift = 59;
  static constexpr int kSourceShift = 62;

  /// Record::op → 0 (none), 1..5 ('c', 'u', 'd', 'r', 't'), 6 (a tombstone: no value).
  static std::uint64_t op_code(const Record& record) {
    if (!record.value) return 6;
    switch (record.op) {
      case 'c':
        return 1;
      case 'u':
        return 2;
      case 'd':
        return 3;
      case 'r':
        return 4;
      case 't':
        return 5;
      default:
        return 0;
    }
  }
  /// The `op` label of op_code `code`: "" for a record without an envelope op.
  static std::string_view op_label(std::uint64_t code) {
    static constexpr std::array<std::string_view, 8> kLabels = {"",  "c", "u",         "d",
                                                                "r", "t", "tombstone", ""};
    return kLabels[code & 7];
  }
  /// The opaque `publish` hands to the producer (public for tests that forge delivery reports).
  static std::uint64_t opaque_of(RecordSource source, std::uint64_t op, std::uint64_t unit) {
    return (unit & kUnitMask) | ((op & 7) << kOpShift) |
           (static_cast<std::uint64_t>(source) << kSourceShift);
  }

  /// Publishes through `producer` (not owned; replaced after a fatal error with `attach`).
  void attach(kafka::Producer* producer) {
    producer_ = producer;
    held_.clear();
    metrics_.forget_topic_handles();
    in_flight_events_.fill(0);
    in_flight_bytes_.fill(0);
  }
  void listen(RecordSource source, Listener listener) {
    listeners_[static_cast<std::size_t>(source)] = std::move(listener);
  }

  /// delivery exactly_once: called before each record is handed to the producer, to open a Kafka
  /// transaction if none is open (Transactions::begin). Unless it returns NO_ERROR the record
  /// is not produced and `publish` returns what it returned: ERR__STATE when no transaction could
  /// be opened, ERR__QUEUE_FULL while the open one is being committed (the caller waits as for a
  /// full producer queue and publishes the record again when told there is room). Empty (the
  /// default): no hook.
  void before_publish(std::function<rd_kafka_resp_err_t()> hook) {
    before_publish_ = std::move(hook);
  }

  /// delivery exactly_once: holds the successful delivery reports of `source` until
  /// `release_held` (called after the Kafka transaction committed), so that the source only counts
  /// as acknowledged what a read_committed consumer can see. Failed reports pass at once.
  void hold_reports(RecordSource source, bool hold) {
    hold_[static_cast<std::size_t>(source)] = hold;
  }
  /// Passes the held reports on (the transaction committed). Their topic, key and value are
  /// empty: only opaque, bytes and err are kept.
  void release_held() {
    std::vector<Held> held;
    held.swap(held_);
    for (const Held& h : held) {
      // What a read_committed consumer can see now: counted at the commit, not at the report.
      if (counted(h.source)) metrics_.on_acknowledged(h.topic, h.op, h.bytes);
      kafka::DeliveryReport r;
      r.opaque = h.opaque;
      r.bytes = h.bytes;
      if (listeners_[h.source]) listeners_[h.source](r);
    }
  }
  /// Forgets the held reports (the transaction was aborted: its records are published again).
  void drop_held() { held_.clear(); }

  /// Hands `record` to the producer with `unit` (< 2^59) for `source`. Only when the result is
  /// kQueued does a delivery report follow, and the record counts as in flight until then.
  PublishResult publish(RecordSource source, const Record& record, std::uint64_t unit) {
    const auto s = static_cast<std::size_t>(source);
    if (before_publish_) {
      if (const rd_kafka_resp_err_t gate = before_publish_(); gate != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return classify_produce(gate);
      }
    }
    const rd_kafka_resp_err_t err =
        producer_->produce(record, opaque_of(source, op_code(record), unit));
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      ++in_flight_events_[s];
      in_flight_bytes_[s] += kafka::record_bytes(record);
      return {};
    }
    return classify_produce(err);
  }

  /// The producer's delivery report: counts it and passes it on with the unit as `opaque`.
  void on_delivery(const kafka::DeliveryReport& report) {
    const auto s = static_cast<std::size_t>(report.opaque >> kSourceShift);
    const std::string_view op = op_label(report.opaque >> kOpShift);
    if (in_flight_events_[s] > 0) --in_flight_events_[s];
    in_flight_bytes_[s] -= std::min(in_flight_bytes_[s], report.bytes);
    kafka::DeliveryReport r = report;
    r.opaque = report.opaque & kUnitMask;
    if (hold_[s] && r.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      // The topic name is the producer's topic handle's (valid while the producer lives; held
      // reports are forgotten with it in attach()).
      held_.push_back({r.opaque, r.bytes, s, r.topic, op});
      return;
    }
    if (counted(s)) {
      if (r.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        metrics_.on_acknowledged(r.topic, op, r.bytes);
      } else {
        metrics_.on_failed(r.err);
      }
    }
    if (listeners_[s]) listeners_[s](r);
  }

  /// The publish metrics of every source but kPosition (docs/operations.md "Metrics and health").
  [[nodiscard]] const PublishMetrics& metrics() const { return metrics_; }

  [[nodiscard]] std::size_t in_flight_events(RecordSource source) const {
    return in_flight_events_[static_cast<std::size_t>(source)];
  }
  [[nodiscard]] std::size_t in_flight_bytes(RecordSource source) const {
    return in_flight_bytes_[static_cast<std::size_t>(source)];
  }

 private:
  struct Held {
    std::uint64_t opaque;
    std::size_t bytes;
    std::size_t source;
    std::string_view topic;  // the producer's topic handle's name
    std::string_view op;     // op_label's (static)
  };
  static bool counted(std::size_t source) {
    return source != static_cast<std::size_t>(RecordSource::kPosition);
  }
  PublishMetrics metrics_;
  kafka::Producer* producer_ = nullptr;
  std::function<rd_kafka_resp_err_t()> before_publish_;
  std::array<bool, 4> hold_{};
  std::vector<Held> held_;
  std::array<Listener, 4> listeners_;
  std::array<std::size_t, 4> in_flight_events_{};
  std::array<std::size_t, 4> in_flight_bytes_{};
};

}  // namespace walrelay::sink
