#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "walrelay/core/lsn.hpp"
#include "walrelay/sink/publisher.hpp"

namespace walrelay::sink {

/// Why a record went to the dead-letter topic (its `walrelay.error.kind` header;
/// docs/operations.md "Error policy").
enum class DeadLetterKind : std::uint8_t {
  kMapping,   ///< a change or snapshot row that cannot be decoded or mapped
  kOversize,  ///< a record over the producer's message.max.bytes (refused synchronously)
  kDelivery,  ///< a record whose delivery failed for good (its delivery report)
};

/// The header value of `kind`: "mapping", "oversize", "delivery".
std::string_view to_string(DeadLetterKind kind);

/// What a log line about a dead letter adds after its reason: " (LSN X/X)", or "" when the reason
/// names that LSN already (a mapping error's "(xid …, LSN …)").
std::string lsn_suffix(std::string_view reason, Lsn lsn);

/// One dead-letter record, as every source describes it. Views: valid during `publish` only.
struct DeadLetter {
  DeadLetterKind kind = DeadLetterKind::kMapping;
  /// What went wrong (`walrelay.error.reason`), as the log line says it.
  std::string_view reason;
  /// What it came from (`walrelay.source`): `schema.table`, `message:<prefix>` or the topic the
  /// refused record was for.
  std::string_view source;
  /// The change's LSN, or the snapshot's consistent point (`walrelay.lsn`, as `X/X`).
  Lsn lsn;
  /// The event's id (header `id`), empty when the change has none (a change that could not be
  /// mapped into an event): then no `id` header.
  std::string_view event_id;
  /// The refused record's key (nullopt: a null key).
  std::optional<std::string_view> key;
  /// The original bytes (a change's wal2json line, a row's column texts as a JSON object, a refused
  /// record's value); nullopt: none.
  std::optional<std::string_view> body;
};

/// The one dead-letter path of every source (the stream, the initial and the incremental
/// snapshots): builds the record (topic errors.dead_letter_topic; key and value the original's;
/// headers `walrelay.error.kind`, `walrelay.error.reason`, `walrelay.source`, `walrelay.lsn`, and
/// `id` when the event has one, in that order) and publishes it through the Publisher with the
/// source's unit, so that it counts in that unit like the record it replaces. A dead letter whose
/// body is itself over message.max.bytes is published again without its body (the headers still
/// say what and why). Logs one warning per dead letter.
///
/// Owned by the connector beside the Publisher; every call on the io_context thread.
class DeadLetterWriter {
 public:
  /// `topic`: errors.dead_letter_topic (non-empty). `publisher` must outlive this.
  DeadLetterWriter(Publisher& publisher, std::string topic)
      : publisher_(publisher), topic_(std::move(topic)) {}

  struct Result {
    /// kQueued: in flight (`bytes`: its key + value). kQueueFull: no room now; the caller
    /// publishes it again when there is, or gives up. Anything else: it could not be published
    /// (`error` says why).
    PublishStatus status = PublishStatus::kQueued;
    std::size_t bytes = 0;
    std::string error;  ///< librdkafka's text of the refusal, when not queued
    [[nodiscard]] bool queued() const { return status == PublishStatus::kQueued; }
  };

  /// Publishes `dead_letter` for `source`'s `unit` (as Publisher::publish).
  Result publish(RecordSource source, std::uint64_t unit, const DeadLetter& dead_letter);

  [[nodiscard]] const std::string& topic() const { return topic_; }

 private:
  Publisher& publisher_;
  std::string topic_;
  std::string lsn_;  // the header values the record points into, reused
};

}  // namespace walrelay::sink
