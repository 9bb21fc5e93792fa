#pragma once

#include <librdkafka/rdkafka.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "walrelay/config/config.hpp"
#include "walrelay/core/record.hpp"
#include "walrelay/kafka/error.hpp"

namespace walrelay::kafka {

/// Outcome of one message, from its librdkafka delivery report (or a synchronous produce failure).
struct DeliveryReport {
  std::uint64_t opaque = 0;  ///< what the caller passed to `produce` (the AckTracker txn seq)
  std::size_t bytes = 0;     ///< key + value bytes (`record_bytes` of the produced Record)
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::string_view topic;  ///< valid during the callback only
  std::string_view key;    ///< valid during the callback only; empty for a null key
  bool has_key = false;
  std::string_view value;  ///< the record's value bytes (callback only); empty for a tombstone
  bool has_value = false;
  std::string_view event_id;  ///< the record's `id` header (callback only); empty if none
  std::int32_t partition = -1;
  std::int64_t offset = -1;
  /// `err` typed (Error::from_code: rd_kafka_err2str's text, the code's documented flags).
  [[nodiscard]] Error error() const { return Error::from_code(err); }
};

/// Why a delivery can never succeed: the message's error is permanent, or the producer hit a
/// fatal error (librdkafka ERR__FATAL, e.g. a broken idempotence sequence; see librdkafka
/// INTRODUCTION.md "Idempotent Producer" / "Fatal errors").
bool is_permanent_failure(rd_kafka_resp_err_t err);

/// Blanks the values of secret properties (config::is_secret_property: `*password*`,
/// `*secret*`, `sasl.*`, `ssl.key.pem`) out of librdkafka's error texts and log lines, which
/// sometimes quote a property's value. Immutable after construction; safe from any thread.
class SecretRedactor {
 public:
  explicit SecretRedactor(const std::map<std::string, std::string>& properties);
  /// `text` with every secret value replaced by `****`.
  [[nodiscard]] std::string redact(std::string_view text) const;

 private:
  std::vector<std::string> values_;
};

/// librdkafka producer driven from an Asio executor.
///
/// Configuration (librdkafka CONFIGURATION.md): `enable.idempotence=true`, `acks=all`,
/// `partitioner=murmur2_random` (the Java client's key placement, so keys land where Debezium put
/// them), `compression.type=lz4` (measured in benchmarks/RESULTS.md), `message.timeout.ms=0` (never
/// time out: a broker outage is backpressure, never a hole that lets the next event of a key
/// overtake its replay), then every `kafka.properties` entry as given, which wins. Delivery reports
/// are served on the executor's thread when librdkafka signals its main queue through a pipe
/// (`rd_kafka_queue_io_event_enable`); no busy polling.
///
/// Owned by the connector; all calls on the executor's thread.
class Producer {
 public:
  using DeliveryHandler = std::function<void(const DeliveryReport&)>;
  /// Called when the producer hits a fatal error (`error.fatal`, its original code, e.g.
  /// PRODUCER_FENCED: librdkafka INTRODUCTION.md "Fatal errors") or a broker connection fails for
  /// a reason retrying cannot fix (a code security_failure classifies, security.hpp; librdkafka
  /// itself does not flag those fatal). The message has secret values redacted;
  /// `error.describe()` is "<rd_kafka_err2name>: <text>".
  using FatalHandler = std::function<void(const Error& error)>;

  /// Creates the producer. Throws std::runtime_error naming the property when librdkafka rejects
  /// a configuration property (the message never contains property values: they may be secrets).
  Producer(boost::asio::any_io_executor executor, const config::KafkaConfig& cfg,
           const std::string& client_id, DeliveryHandler on_delivery, FatalHandler on_fatal);
  ~Producer();
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  /// Starts watching the delivery-report pipe on the executor.
  void start();

  /// Enqueues `record` (librdkafka copies key, value and headers). `opaque` comes back in the
  /// delivery report. Returns NO_ERROR, or the synchronous error librdkafka raised (e.g.
  /// MSG_SIZE_TOO_LARGE for a record over `message.max.bytes`, QUEUE_FULL, or ERR__FATAL); no
  /// delivery report follows a synchronous error.
  rd_kafka_resp_err_t produce(const Record& record, std::uint64_t opaque);

  /// Serves every delivery report that is ready (called by the pipe watcher; also safe to call).
  void poll();

  /// Blocks up to `timeout` for outstanding messages, serving their delivery reports. Only for
  /// shutdown. Returns the number of messages still outstanding (0 = all delivered or failed).
  int flush(std::chrono::milliseconds timeout);

  /// Drops every message still queued or in flight (their delivery reports carry ERR__PURGE_*).
  /// Only on shutdown, after `flush` timed out.
  void purge();

  /// Number of messages librdkafka still holds (queued or in flight).
  [[nodiscard]] int outstanding() const;

  /// Stops the pipe watcher (before the io_context is destroyed).
  void stop();

  /// The librdkafka handle (for the transactional API, transactions.hpp); owned here.
  [[nodiscard]] rd_kafka_t* handle() const { return rk_; }

 private:
  rd_kafka_topic_t* topic_handle(std::string_view name);
  static void on_dr(rd_kafka_t* rk, const rd_kafka_message_t* msg, void* opaque);
  static void on_error(rd_kafka_t* rk, int err, const char* reason, void* opaque);
  void arm();

  rd_kafka_t* rk_ = nullptr;
  rd_kafka_queue_t* main_queue_ = nullptr;
  int pipe_read_ = -1;
  int pipe_write_ = -1;
  std::unique_ptr<boost::asio::posix::stream_descriptor> watcher_;
  DeliveryHandler on_delivery_;
  FatalHandler on_fatal_;
  SecretRedactor redactor_;
  std::string last_error_;  // rate limit of repeated error_cb texts (error_cb runs on poll)
  std::chrono::steady_clock::time_point last_error_at_;
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, rd_kafka_topic_t*, StringHash, std::equal_to<>> topics_;
  // The handle topic_handle returned last, and its name (a key of topics_: node-based, so the
  // view stays valid while the map only grows).
  rd_kafka_topic_t* last_topic_ = nullptr;
  std::string_view last_topic_name_;
  bool stopped_ = false;
  // The pipe watcher's queued handler holds a weak_ptr to this (the producer is replaced after a
  // fatal error).
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

/// Bytes of a record counted against `kafka.max_in_flight_bytes`: key plus value.
inline std::size_t record_bytes(const Record& r) {
  return (r.key ? r.key->size() : 0) + (r.value ? r.value->size() : 0);
}

/// Why probe_brokers failed.
struct ProbeError {
  /// The configuration itself: a property librdkafka rejects (each named as
  /// `kafka.properties.<name>: <reason>`, one a line) or a producer librdkafka cannot create
  /// from them; `run` exits 2 (ExitCode::kConfigError) on the same. False: the cluster did not
  /// answer within the timeout.
  bool config = false;
  std::string message;  ///< librdkafka's error text (secrets redacted)
  /// The code of the failure: a security failure (security.hpp) when a broker connection
  /// failed for one, else the metadata request's error (e.g. ERR__TRANSPORT).
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
};

/// Asks the cluster for metadata within `timeout` (a blocking probe for `walrelay check`), with
/// the producer configuration `run` uses (walrelay's defaults overlaid by `cfg.properties`).
/// Returns the number of brokers, or a ProbeError; a security failure (refused credentials, a
/// failed TLS handshake) ends the probe as soon as librdkafka reports it.
std::expected<int, ProbeError> probe_brokers(const config::KafkaConfig& cfg,
                                             std::chrono::milliseconds timeout);

/// The effective librdkafka configuration: walrelay's defaults overlaid by `cfg.properties`.
std::map<std::string, std::string> effective_producer_properties(const config::KafkaConfig& cfg,
                                                                 const std::string& client_id);

}  // namespace walrelay::kafka
