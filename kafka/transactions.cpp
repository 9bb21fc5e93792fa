#include "walrelay/kafka/transactions.hpp"

namespace walrelay::kafka {

bool is_fencing_error(rd_kafka_resp_err_t code) {
  return code == RD_KAFKA_RESP_ERR__FENCED || code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
         code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

TxnResult classify_txn_error(const Error& error) {
  TxnResult r;
  if (error.ok()) return r;
  r.code = error.code;
  r.message = error.message;
  if (error.fatal) {
    r.action = is_fencing_error(error) ? TxnAction::kFenced : TxnAction::kFatal;
  } else if (error.txn_requires_abort) {
    r.action = TxnAction::kAbort;
  } else if (error.retriable) {
    r.action = TxnAction::kRetry;
  } else if (is_fencing_error(error)) {
    r.action = TxnAction::kFenced;
  } else {
    // Neither retriable nor abortable nor fatal (e.g. ERR__STATE: a call out of order): the
    // transaction's state is unknown, so it is treated like an abortable one.
    r.action = TxnAction::kAbort;
  }
  return r;
}

TxnResult classify_txn_error(rd_kafka_t* rk, rd_kafka_error_t* error) {
  if (error == nullptr) return {};
  Error e = Error::from(error);
  rd_kafka_error_destroy(error);
  if (e.fatal && rk != nullptr) {
    // The error object of a call that failed because of a fatal error carries ERR__FATAL (or the
    // call's own code); the cause is the handle's fatal error.
    if (Error orig = Error::fatal_of(rk); !orig.ok()) {
      e.code = orig.code;
      e.message = orig.describe();
    }
  }
  return classify_txn_error(e);
}

TxnResult Transactions::init(std::chrono::milliseconds timeout) {
  TxnResult r = classify_txn_error(
      producer_.handle(),
      rd_kafka_init_transactions(producer_.handle(), static_cast<int>(timeout.count())));
  if (r.ok()) initialized_ = true;
  return r;
}

TxnResult Transactions::begin() {
  TxnResult r =
      classify_txn_error(producer_.handle(), rd_kafka_begin_transaction(producer_.handle()));
  if (r.ok()) open_ = true;
  return r;
}

TxnResult Transactions::commit(std::chrono::milliseconds timeout) {
  TxnResult r = classify_txn_error(
      producer_.handle(),
      rd_kafka_commit_transaction(producer_.handle(), static_cast<int>(timeout.count())));
  producer_.poll();  // delivery reports that arrived after librdkafka's own flush
  if (r.ok()) open_ = false;
  return r;
}

TxnResult Transactions::abort(std::chrono::milliseconds timeout) {
  TxnResult r = classify_txn_error(
      producer_.handle(),
      rd_kafka_abort_transaction(producer_.handle(), static_cast<int>(timeout.count())));
  producer_.poll();  // the purged messages' delivery reports
  if (r.ok()) open_ = false;
  return r;
}

config::KafkaConfig transactional_properties(const config::KafkaConfig& cfg,
                                             const std::string& id) {
  config::KafkaConfig out = cfg;
  out.properties.try_emplace("transactional.id", id);
  out.properties.try_emplace("transaction.timeout.ms", "60000");
  if (auto it = cfg.properties.find("message.timeout.ms"); it == cfg.properties.end()) {
    out.properties["message.timeout.ms"] = out.properties["transaction.timeout.ms"];
  }
  return out;
}

std::string transactional_id_for(std::string_view connector_name) {
  return "walrelay-" + std::string(connector_name);
}

}  // namespace walrelay::kafka
