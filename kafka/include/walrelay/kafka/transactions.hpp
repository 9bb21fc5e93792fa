#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "walrelay/config/config.hpp"
#include "walrelay/kafka/error.hpp"
#include "walrelay/kafka/producer.hpp"

namespace walrelay::kafka {

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
/// original cause is read with rd_kafka_fatal_error(rk) so a fenced producer is told apart
/// (`rk` may be nullptr: the error's own code is used then).
TxnResult classify_txn_error(rd_kafka_t* rk, rd_kafka_error_t* error);
/// The same rule on a typed error (its flags; a fatal one's `code` already the original).
/// Precedence: fatal (kFenced when is_fencing_error, else kFatal), then txn_requires_abort
/// (kAbort), then retriable (kRetry), then a fencing code (kFenced); anything else (e.g.
/// ERR__STATE: a call out of order) leaves the transaction's state unknown: kAbort.
TxnResult classify_txn_error(const Error& error);

/// The transactional layer's classification: the error codes that mean "a newer producer with
/// this transactional.id exists" (KIP-98 zombie fencing): librdkafka's ERR__FENCED, the
/// broker's PRODUCER_FENCED and INVALID_PRODUCER_EPOCH.
bool is_fencing_error(rd_kafka_resp_err_t code);
/// The same on a typed error's code (a producer's fatal error carries the original one).
inline bool is_fencing_error(const Error& error) {
  return is_fencing_error(error.code);
}

/// The transactional API of one Producer created with `transactional.id` set (see
/// `transactional_properties`). Every call blocks the calling thread up to its timeout (ms; they
/// are librdkafka's blocking calls); `init`, `commit` and `abort` are resumable, so an event loop
/// calls them in short slices (SlicedCall, sliced_call.hpp). All calls on the producer's executor
/// thread, like the producer.
/// While blocked in `commit`, librdkafka flushes the outstanding messages and serves their
/// delivery reports on this thread (through the producer's delivery handler).
class Transactions {
 public:
  explicit Transactions(Producer& producer) : producer_(producer) {}

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
  Producer& producer_;
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

}  // namespace walrelay::kafka
