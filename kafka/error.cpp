#include "walrelay/kafka/error.hpp"

namespace walrelay::kafka {

Error Error::from(const rd_kafka_error_t* error) {
  Error e;
  if (error == nullptr) return e;
  e.code = rd_kafka_error_code(error);
  e.message = rd_kafka_error_string(error);
  e.fatal = rd_kafka_error_is_fatal(error) != 0;
  e.retriable = rd_kafka_error_is_retriable(error) != 0;
  e.txn_requires_abort = rd_kafka_error_txn_requires_abort(error) != 0;
  return e;
}

Error Error::from_code(rd_kafka_resp_err_t code, std::string message) {
  Error e;
  e.code = code;
  e.message = message.empty() ? std::string(rd_kafka_err2str(code)) : std::move(message);
  e.fatal = code == RD_KAFKA_RESP_ERR__FATAL;
  e.retriable = is_retriable_code(code);
  return e;
}

Error Error::fatal_of(rd_kafka_t* rk) {
  Error e;
  char buf[512];
  buf[0] = '\0';
  e.code = rd_kafka_fatal_error(rk, buf, sizeof buf);
  if (e.code == RD_KAFKA_RESP_ERR_NO_ERROR) return e;
  e.message = buf;
  e.fatal = true;
  return e;
}

std::string Error::describe() const {
  return std::string(name()) + ": " + message;
}

bool is_retriable_code(rd_kafka_resp_err_t code) {
  switch (code) {
    // librdkafka's local transient errors (rdkafka.h).
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
    case RD_KAFKA_RESP_ERR__WAIT_COORD:
    // The broker codes the Kafka protocol guide marks "Retriable: True".
    case RD_KAFKA_RESP_ERR_INVALID_MSG:  // CORRUPT_MESSAGE
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_REPLICA_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case RD_KAFKA_RESP_ERR_NOT_CONTROLLER:
    case RD_KAFKA_RESP_ERR_CONCURRENT_TRANSACTIONS:
    case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
    case RD_KAFKA_RESP_ERR_FETCH_SESSION_ID_NOT_FOUND:
    case RD_KAFKA_RESP_ERR_INVALID_FETCH_SESSION_EPOCH:
    case RD_KAFKA_RESP_ERR_LISTENER_NOT_FOUND:
    case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_PREFERRED_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_ELIGIBLE_LEADERS_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_UNSTABLE_OFFSET_COMMIT:
    case RD_KAFKA_RESP_ERR_THROTTLING_QUOTA_EXCEEDED:
      return true;
    default:
      return false;
  }
}

}  // namespace walrelay::kafka
