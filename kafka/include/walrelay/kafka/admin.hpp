#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "walrelay/config/config.hpp"
#include "walrelay/kafka/consumer.hpp"
#include "walrelay/kafka/error.hpp"

namespace walrelay::kafka {

/// A topic to create (Admin API CreateTopics, KIP-4).
struct NewTopic {
  std::string name;
  int partitions = 1;
  /// -1: the broker's default.replication.factor (KIP-464, Kafka >= 2.4).
  int replication_factor = -1;
  std::map<std::string, std::string> configs;  ///< topic configs, e.g. cleanup.policy=compact
};

/// What a creation found.
enum class CreateOutcome : std::uint8_t {
  kCreated,  ///< the topic was created
  kExists,   ///< it existed already (TOPIC_ALREADY_EXISTS); its settings were not compared
};

/// A small admin client for topics that never blocks for long: `create` sends a CreateTopics
/// request and returns at once, `poll` waits a bounded time for its answer (an event loop polls it
/// on a timer); `describe` reads a topic's metadata. One creation in flight at a time. Move-only;
/// destroying it abandons a request still in flight. Not thread-safe: all calls on one thread.
class TopicAdmin {
 public:
  /// Creates the admin client (a librdkafka producer handle, no I/O yet) with bootstrap.servers
  /// and the connection and security settings of kafka.properties (as ConsumerOptions says).
  /// librdkafka's error log lines read "librdkafka (<log_name>) <facility>: <text>". An error: a
  /// property librdkafka refuses (ERR__INVALID_ARG, "kafka.properties.<name>: <reason>") or the
  /// client cannot be created ("cannot create a Kafka admin client: <reason>").
  static std::expected<TopicAdmin, Error> connect(const config::KafkaConfig& cfg,
                                                  const std::string& log_name = "admin");

  /// Sends the request to create `topic`, `timeout` (ms) being the request's timeout (the broker
  /// waits up to it for the creation to complete); returns at once. An error: the topic cannot
  /// be described to librdkafka (a bad name or partition count: rd_kafka_NewTopic_new's reason,
  /// ERR__INVALID_ARG), or a creation is in flight already (ERR__STATE).
  std::expected<void, Error> create(const NewTopic& topic, std::chrono::milliseconds timeout);
  /// Waits up to `wait` (ms, 0 = just look) for the answer to `create`. nullopt: none yet, call
  /// again. Otherwise the outcome: kCreated, kExists, or the error: the request's
  /// (rd_kafka_event_error_string), the topic's (its code, message "<rd_kafka_err2str>: <the
  /// broker's text>", e.g. TOPIC_AUTHORIZATION_FAILED, POLICY_VIOLATION), or ERR__TIMED_OUT "no
  /// answer from Kafka within the timeout" once `timeout` + 1 s have passed since `create`.
  /// After an outcome the next `create` may follow.
  std::optional<std::expected<CreateOutcome, Error>> poll(std::chrono::milliseconds wait);
  /// Whether a creation waits for its answer.
  [[nodiscard]] bool creating() const;

  /// The topic's metadata (rd_kafka_metadata, without creating it), blocking up to `timeout`.
  /// An error when the request got no answer or failed; a missing topic is a description with
  /// UNKNOWN_TOPIC_OR_PART.
  std::expected<TopicDescription, Error> describe(const std::string& topic,
                                                  std::chrono::milliseconds timeout);

  TopicAdmin(TopicAdmin&&) noexcept;
  TopicAdmin& operator=(TopicAdmin&&) noexcept;
  ~TopicAdmin();

 private:
  struct State;
  explicit TopicAdmin(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Creates `topic` with `admin` blocking up to `timeout` (ms) + 1 s (a blocking helper for
/// commands and tests; an event loop polls instead).
std::expected<CreateOutcome, Error> create_topic(TopicAdmin& admin, const NewTopic& topic,
                                                 std::chrono::milliseconds timeout);

}  // namespace walrelay::kafka
