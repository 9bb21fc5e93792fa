#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "walrelay/config/config.hpp"
#include "walrelay/kafka/error.hpp"

namespace walrelay::kafka {

/// Logical offsets (rdkafka.h RD_KAFKA_OFFSET_*), for `PartitionOffset::offset`.
inline constexpr std::int64_t kOffsetBeginning = RD_KAFKA_OFFSET_BEGINNING;
inline constexpr std::int64_t kOffsetEnd = RD_KAFKA_OFFSET_END;
inline constexpr std::int64_t kOffsetStored = RD_KAFKA_OFFSET_STORED;  ///< the group's commit

/// One partition and an offset: where to start (assign, seek: an absolute offset or a logical
/// one above) or what to commit (the offset of the next record to read, Kafka's convention).
struct PartitionOffset {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t offset = kOffsetBeginning;
  bool operator==(const PartitionOffset&) const = default;
};

/// A partition's offsets as the partition leader reports them (ListOffsets): `low` is the first
/// offset still in the log, `high` the offset the next record will get (the high watermark; the
/// partition is empty when low == high). With read_committed, the last records below `high` may
/// be ones of an open or aborted transaction, or control records, that a consumer never sees.
struct Watermarks {
  std::int64_t low = 0;
  std::int64_t high = 0;
};

/// A topic as the cluster's metadata describes it.
struct TopicDescription {
  /// The topic-level error: NO_ERROR, UNKNOWN_TOPIC_OR_PART (no such topic),
  /// TOPIC_AUTHORIZATION_FAILED, LEADER_NOT_AVAILABLE (being created), ...
  Error error;
  std::vector<std::int32_t> partitions;  ///< partition ids, as the metadata lists them
  [[nodiscard]] bool exists() const {
    return error.code != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART && !partitions.empty();
  }
};

/// One consumed record, or a consumer event (end of partition, an error). Owns librdkafka's
/// message (destroyed with it); the views it returns are valid as long as it lives. Move-only.
class Message {
 public:
  explicit Message(rd_kafka_message_t* message) : m_(message) {}

  /// NO_ERROR for a record; otherwise the event: ERR__PARTITION_EOF (end of a partition, with
  /// enable.partition.eof, see `end_of_partition`) or an error (the consumer goes on after a
  /// non-fatal one: librdkafka retries itself).
  [[nodiscard]] Error error() const;
  [[nodiscard]] bool is_record() const { return m_->err == RD_KAFKA_RESP_ERR_NO_ERROR; }
  [[nodiscard]] bool end_of_partition() const {
    return m_->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
  }
  [[nodiscard]] std::string_view topic() const;
  [[nodiscard]] std::int32_t partition() const { return m_->partition; }
  /// The record's offset; for end_of_partition, the offset the next record will get.
  [[nodiscard]] std::int64_t offset() const { return m_->offset; }
  /// nullopt: a null key (or value: a tombstone).
  [[nodiscard]] std::optional<std::string_view> key() const;
  [[nodiscard]] std::optional<std::string_view> value() const;
  /// The record's timestamp (ms since the epoch, CreateTime or LogAppendTime), -1 if none.
  [[nodiscard]] std::int64_t timestamp_ms() const;
  /// The last header named `name`; nullopt if none (an empty view for a null header value).
  [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const;
  [[nodiscard]] rd_kafka_message_t* get() const { return m_.get(); }

 private:
  struct Deleter {
    void operator()(rd_kafka_message_t* m) const { rd_kafka_message_destroy(m); }
  };
  std::unique_ptr<rd_kafka_message_t, Deleter> m_;
};

/// What a group's rebalance did to this consumer's partitions (ConsumerOptions::on_rebalance).
enum class Rebalance : std::uint8_t {
  kAssigned,  ///< these partitions are now this consumer's (assigned, paused)
  kRevoked,   ///< these partitions are no longer this consumer's (about to be unassigned)
};

/// How a consumer reads (librdkafka CONFIGURATION.md, consumer properties).
struct ConsumerOptions {
  /// group.id: needed by librdkafka for rd_kafka_consumer_poll even with `assign` (without one it
  /// answers ERR__UNKNOWN_GROUP), and by `commit` and `subscribe` (which joins the group).
  std::string group_id;
  /// isolation.level=read_committed (the default): records of open or aborted transactions are
  /// never returned, and a partition's end is its last stable offset (KIP-98). False:
  /// read_uncommitted.
  bool read_committed = true;
  /// enable.partition.eof: `poll` returns an end_of_partition event each time a partition's end
  /// is reached.
  bool partition_eof = false;
  /// Named in librdkafka's error log lines: "librdkafka (<log_name>) <facility>: <text>".
  std::string log_name = "consumer";
  /// More consumer properties (e.g. fetch.wait.max.ms); these win over the above. Besides them
  /// the consumer takes bootstrap.servers and the connection and security settings of
  /// kafka.properties (security.*, sasl.*, ssl.*, socket.*, broker.*, client.dns*,
  /// api.version*, metadata.*, client.id*). Always set: enable.auto.commit=false,
  /// allow.auto.create.topics=false, unless given here.
  std::map<std::string, std::string> properties;
  /// With `subscribe`: called from inside `poll` (rd_kafka_conf_set_rebalance_cb) when the group
  /// assigns or revokes partitions (their `offset` is meaningless). Assigned partitions are
  /// assigned *paused* (rd_kafka_pause_partitions), so that nothing is fetched from them until the
  /// owner has found where to start (e.g. from offsets it stores itself), `seek`s there and
  /// `resume`s them; revoked ones are reported before they are unassigned. Both the eager and
  /// the cooperative protocol (KIP-429, rd_kafka_incremental_assign) are followed. Empty: the
  /// default (librdkafka assigns itself, from the group's committed offsets).
  std::function<void(Rebalance, const std::vector<PartitionOffset>&)> on_rebalance;
};

/// A librdkafka KafkaConsumer (rd_kafka_new(RD_KAFKA_CONSUMER)) with walrelay's connection
/// settings: records from assigned partitions (`assign`: no group is joined) or from the
/// partitions a group assigns (`subscribe`), read_committed by default. Every call blocks at
/// most its timeout (ms); `poll` with a short one serves an event loop. Offsets are committed
/// only by `commit` (enable.auto.commit=false). Move-only; destroying it leaves the group
/// (rd_kafka_consumer_close) and frees the handle. Not thread-safe: all calls on one thread.
class Consumer {
 public:
  /// Creates the consumer (no network I/O yet). An error: a property librdkafka refuses
  /// (ERR__INVALID_ARG, message "kafka.properties.<name>: <reason>") or the consumer cannot be
  /// created (message "cannot create a Kafka consumer: <reason>").
  static std::expected<Consumer, Error> create(const config::KafkaConfig& cfg,
                                               const ConsumerOptions& options);

  /// Joins the group and consumes `topics` (rd_kafka_subscribe); partitions are assigned on the
  /// next polls. Starts from the group's committed offsets, else auto.offset.reset.
  std::expected<void, Error> subscribe(const std::vector<std::string>& topics);
  /// Consumes exactly `partitions` from their offsets (absolute or logical), replacing any
  /// assignment (rd_kafka_assign). No group is joined.
  std::expected<void, Error> assign(const std::vector<PartitionOffset>& partitions);
  /// Stops consuming every assigned partition.
  std::expected<void, Error> unassign();
  /// Moves assigned partitions to `offsets` (rd_kafka_seek_partitions), waiting up to `timeout`
  /// so that no record fetched from the old position is returned after it; a per-partition
  /// failure is the error (e.g. ERR__STATE for a partition that is not assigned).
  std::expected<void, Error> seek(const std::vector<PartitionOffset>& offsets,
                                  std::chrono::milliseconds timeout);

  /// Stops / restarts fetching from assigned `partitions` (rd_kafka_pause_partitions,
  /// rd_kafka_resume_partitions; their `offset` is ignored): records already fetched from a paused
  /// partition may still be returned. A per-partition failure is the error.
  std::expected<void, Error> pause(const std::vector<PartitionOffset>& partitions);
  std::expected<void, Error> resume(const std::vector<PartitionOffset>& partitions);

  /// The next record or event, waiting up to `timeout` (0: just look); nullopt when none came.
  std::optional<Message> poll(std::chrono::milliseconds timeout);

  /// The partition's offsets from its leader (rd_kafka_query_watermark_offsets), within
  /// `timeout`. ERR__TIMED_OUT / ERR__TRANSPORT: no answer yet.
  std::expected<Watermarks, Error> watermarks(const std::string& topic, std::int32_t partition,
                                              std::chrono::milliseconds timeout);
  /// For each of `partitions` of `topic`, the earliest offset whose record's timestamp is at or
  /// after `timestamp_ms` (ms since the epoch), or the partition's end when there is none
  /// (rd_kafka_offsets_for_times, KIP-79), within `timeout`. The result assigns or seeks.
  std::expected<std::vector<PartitionOffset>, Error> offsets_for_time(
      const std::string& topic, const std::vector<std::int32_t>& partitions,
      std::int64_t timestamp_ms, std::chrono::milliseconds timeout);
  /// The topic's metadata (rd_kafka_metadata for this topic, without creating it), within
  /// `timeout`. An error only when the request got no answer (ERR__TIMED_OUT, ERR__TRANSPORT)
  /// or failed; a missing topic is a description with UNKNOWN_TOPIC_OR_PART.
  std::expected<TopicDescription, Error> describe_topic(const std::string& topic,
                                                        std::chrono::milliseconds timeout);

  /// Commits `offsets` (each the offset of the next record to read) for the group, waiting up to
  /// `timeout` for the coordinator's answer (rd_kafka_commit_queue). ERR__TIMED_OUT: no answer
  /// yet (the commit may still complete); a per-partition failure is the error.
  std::expected<void, Error> commit(const std::vector<PartitionOffset>& offsets,
                                    std::chrono::milliseconds timeout);
  /// Commits `offsets` for the group without waiting (rd_kafka_commit with async=1): the
  /// coordinator's answer is not reported (no offset_commit_cb is set). For a commit that is only
  /// advisory (a lag monitor's view), not a position anything depends on. An error: the request
  /// could not be queued (e.g. ERR__NO_OFFSET for an empty list).
  std::expected<void, Error> commit_async(const std::vector<PartitionOffset>& offsets);
  /// The group's committed offsets of `partitions` (their `offset` is ignored), from its
  /// coordinator (rd_kafka_committed) within `timeout`; RD_KAFKA_OFFSET_INVALID (-1001) for a
  /// partition the group has committed nothing for.
  std::expected<std::vector<PartitionOffset>, Error> committed(
      const std::vector<PartitionOffset>& partitions, std::chrono::milliseconds timeout);

  /// Leaves the group, stops consuming (rd_kafka_consumer_close; blocks while a group's
  /// rebalance callback runs). The destructor calls it too.
  void close();

  /// The librdkafka handle, owned here.
  [[nodiscard]] rd_kafka_t* handle() const;

  Consumer(Consumer&&) noexcept;
  Consumer& operator=(Consumer&&) noexcept;
  ~Consumer();

 private:
  struct State;
  explicit Consumer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace walrelay::kafka
