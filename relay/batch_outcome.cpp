#include "walrelay/relay/batch_outcome.hpp"

#include <set>
#include <string_view>

#include "walrelay/kafka/error.hpp"

namespace walrelay::relay {

RowState classify_delivery(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
      return RowState::kAcked;
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
    case RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
      return RowState::kRefusedForGood;
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__PURGE_QUEUE:
    case RD_KAFKA_RESP_ERR__PURGE_INFLIGHT:
      return RowState::kTransient;
    default:
      return kafka::is_retriable_code(err) ? RowState::kTransient : RowState::kOther;
  }
}

BatchDecision decide(std::span<const RowOutcome> rows, std::size_t max_attempts,
                     bool failed_blocks_key) {
  BatchDecision d;
  bool acked = false;
  bool kafka_failure = false;
  for (const RowOutcome& r : rows) {
    acked = acked || r.state == RowState::kAcked;
    kafka_failure = kafka_failure || r.state == RowState::kWaiting ||
                    r.state == RowState::kTransient || r.state == RowState::kOther;
  }
  if (!acked && kafka_failure) {
    d.rollback = true;
    return d;
  }
  std::set<std::string_view> stopped;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const RowOutcome& r = rows[i];
    if (r.state == RowState::kBuildFailed) {
      // Never published, so marking it cannot reorder anything: failed even behind a stop.
      d.failures.push_back({i, false, true, r.reason});
      if (failed_blocks_key) stopped.insert(r.key);
      continue;
    }
    if (stopped.contains(r.key)) continue;  // stays pending: published again after the stop
    switch (r.state) {
      case RowState::kAcked:
        d.sent.push_back(i);
        break;
      case RowState::kRefusedForGood:
        d.failures.push_back({i, true, true, r.reason});
        if (failed_blocks_key) stopped.insert(r.key);
        break;
      case RowState::kNotPublished:
        stopped.insert(r.key);
        break;
      default: {  // kWaiting, kTransient, kOther
        const bool failed = static_cast<std::size_t>(r.attempts) + 1 >= max_attempts;
        d.failures.push_back({i, true, failed, r.reason});
        if (!failed || failed_blocks_key) stopped.insert(r.key);
        break;
      }
    }
  }
  return d;
}

}  // namespace walrelay::relay
