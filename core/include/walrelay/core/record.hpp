#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace walrelay {

/// A Kafka record header (KIP-82). Views; the owner of the bytes is whoever built the Record.
struct Header {
  std::string_view name;
  std::string_view value;
};

/// One event ready for Kafka: what the router produces and the sink publishes.
/// All views point into the producer of the Record (the router's reused buffers) and are valid
/// until that producer's next call; the sink copies what it hands to librdkafka.
struct Record {
  std::string_view topic;
  /// Partition key bytes; nullopt for a null key (round-robin placement). Kafka places a non-null
  /// key with murmur2 (the Java client's default partitioner, KIP-480 aside).
  std::optional<std::string_view> key;
  /// Value bytes; nullopt for a tombstone (null value, KIP-87 / log compaction).
  std::optional<std::string_view> value;
  std::span<const Header> headers;
  /// Record timestamp in ms since the Unix epoch; 0 lets the producer use the current time.
  std::int64_t timestamp_ms = 0;
  /// The row-change envelope's `op` as the router wrote it ('c', 'u', 'd', 'r' or 't'); 0 for a
  /// record without one (a domain event, a dead letter, a tombstone: `value` tells that). Only the
  /// publish metrics read it (their `op` label, docs/operations.md "Metrics and health"), so that a
  /// delivery report never has to look into the value again.
  char op = 0;
};

}  // namespace walrelay
