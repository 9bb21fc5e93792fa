#pragma once

#include <chrono>
#include <expected>
#include <memory>
#include <optional>
#include <string>

#include "walrelay/config/config.hpp"
#include "walrelay/sink/position_record.hpp"

namespace walrelay::sink {

/// Reading the last position of a connector without blocking for long: `start` creates an
/// isolation.level=read_committed kafka::Consumer (assign only, no group is joined, nothing
/// committed),
/// `poll` works for a bounded time per call (an event loop polls it on a timer): the topic's
/// metadata, its partitions' offsets, then its records from the beginning to the end. Move-only;
/// destroying it closes the consumer. All calls on one thread.
class PositionReader {
 public:
  /// Creates the consumer for `topic`, the last record under `key` wanted, within `timeout` (ms)
  /// from now on overall; returns at once. An error is the reason (a setting librdkafka refuses,
  /// the consumer cannot be created).
  static std::expected<PositionReader, std::string> start(const config::KafkaConfig& cfg,
                                                          const std::string& topic,
                                                          const std::string& key,
                                                          std::chrono::milliseconds timeout);
  /// Works for up to `wait` (ms; each librdkafka call in it blocks at most what is left of `wait`
  /// and of the overall timeout). nullopt: not at the end yet, call again. Otherwise the outcome,
  /// as read_position's: the last position stored under `key` (nullopt: none, or no such topic),
  /// or the reason (metadata or offsets unreadable, the end not reached within the timeout: "a
  /// transaction of another producer may still be open"). Once it returned an outcome, call it
  /// no more.
  std::optional<std::expected<std::optional<StreamPosition>, std::string>> poll(
      std::chrono::milliseconds wait);

  PositionReader(PositionReader&&) noexcept;
  PositionReader& operator=(PositionReader&&) noexcept;
  ~PositionReader();

 private:
  struct State;
  explicit PositionReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Reads `topic` from the beginning to its end with an isolation.level=read_committed consumer
/// (PositionReader) and returns the last position stored under `key`; nullopt when there is none
/// (or the topic does not exist). Blocks up to `timeout` (ms); an error is the reason. Read it
/// after `kafka::Transactions::init`, which aborts any transaction a killed instance left open
/// (until then the last stable offset cannot pass it).
std::expected<std::optional<StreamPosition>, std::string> read_position(
    const config::KafkaConfig& cfg, const std::string& topic, const std::string& key,
    std::chrono::milliseconds timeout);

}  // namespace walrelay::sink
