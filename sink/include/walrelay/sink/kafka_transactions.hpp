#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "walrelay/config/config.hpp"
#include "walrelay/core/lsn.hpp"
#include "walrelay/core/snapshot_progress.hpp"
#include "walrelay/sink/kafka_producer.hpp"

namespace walrelay::sink {

// ----------------------------------------------------------------------- transactional calls

/// What a transactional call's outcome asks of the caller. The rule is librdkafka's
/// (INTRODUCTION.md "Transactional Producer", "Error handling"; rdkafka.h
/// rd_kafka_error_is_retriable, rd_kafka_error_txn_requires_abort, rd_kafka_error_is_fatal).
enum class TxnAction : std::uint8_t {
  kNone,    ///< the call succeeded
  kRetry,   ///< retriable (e.g. timed out, coordinator loading): call the same function again
  kAbort,   ///< the transaction cannot commit: abort it, then publish its records again
  kFenced,  ///< fatal, fenced: another producer with the same transactional.id took over
            ///< (KIP-98 zombie fencing; ERR__FENCED / PRODUCER_FENCED / INVALID_PRODUCER_EPOCH)
  kFatal,   ///< fatal for another reason: this producer instance is unusable
};

/// Outcome of one transactional call.
struct TxnResult {
  TxnAction action = TxnAction::kNone;
  rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;  ///< the error's code (fatal: original)
  std::string message;                                    ///< librdkafka's text, for logs
  [[nodiscard]] bool ok() const { return action == TxnAction::kNone; }
};

/// Classifies `error` as above and destroys it. nullptr is success. For a fatal error the
/// original cause is read with rd_kafka_fatal_error(rk) so a fenced producer is told apart.
TxnResult classify_txn_error(rd_kafka_t* rk, rd_kafka_error_t* error);

/// True for the error codes that mean "a newer producer with this transactional.id exists".
bool is_fencing_error(rd_kafka_resp_err_t code);

/// The transactional API of one KafkaProducer created with `transactional.id` set (see
/// `transactional_properties`). Every call blocks the calling thread up to its timeout (ms; they
/// are librdkafka's blocking calls); `init`, `commit` and `abort` are resumable, so an event loop
/// calls them in short slices (SlicedCall, sliced_call.hpp). All calls on the producer's executor
/// thread, like the producer.
/// While blocked in `commit`, librdkafka flushes the outstanding messages and serves their
/// delivery reports on this thread (through the producer's delivery handler).
class KafkaTransactions {
 public:
  explicit KafkaTransactions(KafkaProducer& producer) : producer_(producer) {}

  /// rd_kafka_init_transactions: registers the transactional.id with its coordinator, bumps the
  /// producer epoch (which fences any older producer with the same id) and aborts a transaction
  /// that an older instance left open. Once per producer (until it succeeded), before `begin`.
  /// Resumable: on a timeout (kRetry, ERR__TIMED_OUT) it goes on in the background and the next
  /// call picks it up. kFatal/kFenced: the producer is unusable (a new one must take over).
  TxnResult init(std::chrono::milliseconds timeout);
  /// rd_kafka_begin_transaction (local, does not block). Records produced after it belong to the
  /// transaction until `commit` or `abort`.
  TxnResult begin();
  /// rd_kafka_commit_transaction: flushes, then commits. kRetry: call `commit` again. Resumable
  /// (librdkafka >= 1.9): on a timeout (kRetry, ERR__TIMED_OUT) the commit goes on in the
  /// background and the next call picks it up, so a caller that must not block long calls it with
  /// a short timeout, repeatedly, producing nothing in between.
  TxnResult commit(std::chrono::milliseconds timeout);
  /// rd_kafka_abort_transaction: purges what is still queued (their delivery reports carry
  /// ERR__PURGE_QUEUE, served on this thread before it returns) and aborts; read_committed
  /// consumers never see the records. Resumable like `commit`: on a timeout (kRetry,
  /// ERR__TIMED_OUT) the next call picks it up. kFenced: another producer took over.
  TxnResult abort(std::chrono::milliseconds timeout);

  [[nodiscard]] bool initialized() const { return initialized_; }
  [[nodiscard]] bool open() const { return open_; }

 private:
  KafkaProducer& producer_;
  bool initialized_ = false;
  bool open_ = false;
};

/// `cfg` with what a transactional producer needs, unless `kafka.properties` sets it:
/// `transactional.id` = `id`, `transaction.timeout.ms` = 60000 and `message.timeout.ms` = 60000
/// (librdkafka requires message.timeout.ms <= transaction.timeout.ms, so the at-least-once
/// default of 0 = never cannot be kept: a message that times out fails its transaction, which is
/// aborted and published again).
config::KafkaConfig transactional_properties(const config::KafkaConfig& cfg, const std::string& id);

/// The transactional.id of a connector: `walrelay-<name>`. The same for every instance of the
/// connector (restarts, hot standby), so a new instance fences the one before it.
std::string transactional_id_for(std::string_view connector_name);

// --------------------------------------------------------------------------------- position

/// Where a connector's output stands in Kafka: the value of its record in the positions topic,
/// written in the same Kafka transaction as the records it covers.
struct StreamPosition {
  std::string system_id;       ///< PostgreSQL system identifier (IDENTIFY_SYSTEM)
  std::uint32_t timeline = 0;  ///< timeline at the time of writing
  /// End of the commit record (wal2json `nextlsn`) of the newest PostgreSQL transaction whose
  /// records are (in part, see `index`) in Kafka.
  Lsn lsn;
  /// -1: that whole transaction is in Kafka. n >= 0: only its first n records are (a transaction
  /// larger than exactly_once.max_transaction_events, split across Kafka transactions).
  std::int64_t index = -1;
  /// The initial snapshot's progress as of this Kafka transaction, while one runs: every snapshot
  /// row (`op` `r`) handed to the producer before the commit is in it, so each table's `last_key`
  /// is the key of its last row in Kafka (inside a chunk if the commit came there). nullopt: no
  /// initial snapshot ran when it was written (or an older walrelay wrote it).
  std::optional<snapshot::SnapshotProgress> snapshot;
  /// The incremental snapshots' progress (every table queued for one, done ones included) as of
  /// this Kafka transaction: an incremental chunk's rows and the progress past it are in the same
  /// Kafka transaction (a chunk is never split across two). nullopt: none was running.
  std::optional<snapshot::SnapshotProgress> incremental;

  bool operator==(const StreamPosition&) const = default;
};

/// The position record's value, a JSON object:
///
///     {"system_id":"7312345678901234567","timeline":1,"lsn":"0/16B3748","index":-1,
///      "snapshot":{"slot":"walrelay_app","lsn":"0/16B3000","xid":741,"resumed":false,
///                  "tables":[{"schema":"public","table":"orders","done":false,"rows":16384,
///                             "chunks":2,"last_key":["16384"]}]},
///      "incremental":{"slot":"walrelay_app","lsn":"0/0","xid":0,"resumed":false,"tables":[]}}
///
/// `snapshot` and `incremental` (StreamPosition's fields of the same names) are left out when
/// nullopt; a table's `last_key` (texts, null for SQL NULL) when it has none. Size: one entry per
/// table of the snapshot, each with one key.
std::string encode_position(const StreamPosition& position);
/// Parses a position record's value: encode_position's output, and the older form without
/// `snapshot` and `incremental` (both nullopt then). Unknown members are ignored. nullopt for
/// anything else: not JSON, a required member (system_id, timeline, lsn, index) missing or of the
/// wrong type, an LSN that does not parse, index < -1, or a malformed snapshot section.
std::optional<StreamPosition> decode_position(std::string_view value);

/// `<prefix>.walrelay.positions`.
std::string positions_topic(std::string_view prefix);

/// Creating the positions topic without blocking for long: `start` sends the CreateTopics
/// request, `poll` waits a bounded time for its answer (an event loop polls it on a timer).
/// Move-only; destroying it abandons a request still in flight. All calls on one thread.
class PositionsTopicCreation {
 public:
  /// Sends the request to create `topic` as a compacted topic (cleanup.policy=compact,
  /// 1 partition, the broker's default replication factor: KIP-464), with `timeout` (ms) as the
  /// request's timeout; returns at once. An error is the reason: a connection or security setting
  /// of kafka.properties that librdkafka refuses, or the admin client cannot be created.
  static std::expected<PositionsTopicCreation, std::string> start(
      const config::KafkaConfig& cfg, const std::string& topic, std::chrono::milliseconds timeout);
  /// Waits up to `wait` (ms, 0 = just look) for Kafka's answer. nullopt: none yet, call again.
  /// Otherwise the outcome: success (created, or it exists already) or the reason (e.g. "not
  /// allowed": the operator may create it beforehand; "no answer from Kafka within the timeout"
  /// once `timeout` + 1 s have passed since `start`). Once it returned an outcome, call it no more.
  std::optional<std::expected<void, std::string>> poll(std::chrono::milliseconds wait);

  PositionsTopicCreation(PositionsTopicCreation&&) noexcept;
  PositionsTopicCreation& operator=(PositionsTopicCreation&&) noexcept;
  ~PositionsTopicCreation();

 private:
  struct State;
  explicit PositionsTopicCreation(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Reading the last position of a connector without blocking for long: `start` creates an
/// isolation.level=read_committed consumer (assign only, no group is joined, nothing committed),
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

/// Creates `topic` as PositionsTopicCreation does, blocking up to `timeout` (ms) + 1 s. Returns
/// the reason on failure (including "not allowed": the operator may create it beforehand).
std::expected<void, std::string> ensure_positions_topic(const config::KafkaConfig& cfg,
                                                        const std::string& topic,
                                                        std::chrono::milliseconds timeout);

/// Reads `topic` from the beginning to its end with an isolation.level=read_committed consumer
/// (PositionReader) and returns the last position stored under `key`; nullopt when there is none
/// (or the topic does not exist). Blocks up to `timeout` (ms); an error is the reason. Read it
/// after `KafkaTransactions::init`, which aborts any transaction a killed instance left open
/// (until then the last stable offset cannot pass it).
std::expected<std::optional<StreamPosition>, std::string> read_position(
    const config::KafkaConfig& cfg, const std::string& topic, const std::string& key,
    std::chrono::milliseconds timeout);

}  // namespace walrelay::sink
