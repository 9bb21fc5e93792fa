#pragma once

// What the relay writes back for one claimed batch, from what became of each row (docs/relay.md
// "Failures"). Pure: no I/O, unit-tested (tests/unit/relay_batch_test.cpp).

#include <librdkafka/rdkafka.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace walrelay::relay {

/// What became of one claimed row.
enum class RowState : std::uint8_t {
  kBuildFailed,     ///< never published: the outbox record builder refused it (reason given)
  kNotPublished,    ///< never published: an earlier row of its key failed in this batch, or the
                    ///< producer's queue was full
  kWaiting,         ///< published, no delivery report (yet): the ack timeout passed
  kAcked,           ///< Kafka acknowledged it
  kRefusedForGood,  ///< Kafka refused it for good (too large, invalid topic or record)
  kTransient,       ///< failed for a reason retrying may cure (timed out, broker unavailable)
  kOther,           ///< any other failure of this record
};

/// How a delivery report's error is treated: kAcked, kRefusedForGood (MSG_SIZE_TOO_LARGE,
/// RECORD_LIST_TOO_LARGE, INVALID_RECORD, TOPIC_EXCEPTION, INVALID_MSG_SIZE, ERR__INVALID_ARG:
/// the Kafka protocol guide's non-retriable record errors), kTransient
/// (kafka::is_retriable_code, ERR__MSG_TIMED_OUT, ERR__PURGE_*), else kOther.
RowState classify_delivery(rd_kafka_resp_err_t err);

struct RowOutcome {
  std::string key;  ///< the aggregate id's text (rows of one key are in claim order)
  RowState state = RowState::kNotPublished;
  std::int64_t attempts = 0;  ///< the row's attempts column when claimed
  std::string reason;         ///< for kBuildFailed and Kafka failures
};

/// One row to update after a failure.
struct RowFailure {
  std::size_t row = 0;  ///< index in the batch
  bool count_attempt = false;
  bool failed = false;  ///< status becomes failed (else it stays pending)
  std::string reason;
};

struct BatchDecision {
  /// Whole-batch failure: nothing was acknowledged and some record failed for a reason that is
  /// Kafka's, not the row's (timed out, unavailable, or any failure when nothing got through: a
  /// failure can only be told from an outage by another row's success). Roll back, back off the
  /// whole tick, count no attempt.
  bool rollback = false;
  std::vector<std::size_t> sent;     ///< rows to mark sent
  std::vector<RowFailure> failures;  ///< rows to update otherwise
};

/// The rules (docs/relay.md "Failures"): per key, rows are marked sent only up to the key's first
/// row that is not; a row the builder refused is failed at once (never published); a record Kafka
/// refused for good is failed at once; another failure counts an attempt and is failed at
/// `max_attempts`. A failed row stops its key for the rest of the batch only when
/// `failed_blocks_key`; a row that stays pending always does (its later rows are published again
/// after it).
BatchDecision decide(std::span<const RowOutcome> rows, std::size_t max_attempts,
                     bool failed_blocks_key);

}  // namespace walrelay::relay
