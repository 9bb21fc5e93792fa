#pragma once

#include <librdkafka/rdkafka.h>

#include <string>

namespace walrelay::kafka {

/// One librdkafka error, typed where it enters walrelay: the rd_kafka_resp_err_t code, the text
/// and librdkafka's three flags (rdkafka.h rd_kafka_error_is_fatal, rd_kafka_error_is_retriable,
/// rd_kafka_error_txn_requires_abort; librdkafka INTRODUCTION.md "Error handling"). Callers
/// classify by the code and the flags (is_fencing_error, is_permanent_failure, security_failure),
/// never by the text, which is for logs only. A plain value; copyable, any thread.
struct Error {
  rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::string message;  ///< librdkafka's text (secrets redacted where the source says so)
  /// The client instance is unusable (librdkafka raised ERR__FATAL; `code` is then the original
  /// error that rd_kafka_fatal_error returns, e.g. PRODUCER_FENCED).
  bool fatal = false;
  bool retriable = false;           ///< calling the same function again may succeed
  bool txn_requires_abort = false;  ///< the open transaction can only be aborted

  /// From librdkafka's error object (not destroyed here): its code, string and flags. nullptr is
  /// success (code NO_ERROR).
  static Error from(const rd_kafka_error_t* error);
  /// From a plain code (a delivery report, rd_kafka_producev, a metadata or admin request, a
  /// consumer message): `message` (rd_kafka_err2str(code) when empty), `fatal` for ERR__FATAL,
  /// `retriable` as is_retriable_code says; never `txn_requires_abort` (only librdkafka's error
  /// object of a transactional call says that).
  static Error from_code(rd_kafka_resp_err_t code, std::string message = {});
  /// The error behind a fatal error of `rk` (rd_kafka_fatal_error): its original code and text,
  /// `fatal` set. Code NO_ERROR when `rk` has not raised a fatal error.
  static Error fatal_of(rd_kafka_t* rk);

  [[nodiscard]] bool ok() const { return code == RD_KAFKA_RESP_ERR_NO_ERROR; }
  /// rd_kafka_err2name(code), e.g. "PRODUCER_FENCED" or "_AUTHENTICATION" (local codes begin
  /// with an underscore).
  [[nodiscard]] const char* name() const { return rd_kafka_err2name(code); }
  /// "<name>: <message>", the form walrelay's log lines quote (e.g.
  /// "PRODUCER_FENCED: Producer fenced by newer instance: ...").
  [[nodiscard]] std::string describe() const;
};

/// Whether a plain error code is worth retrying: the broker codes the Kafka protocol guide marks
/// retriable ("Error Codes", https://kafka.apache.org/protocol#protocol_error_codes: e.g.
/// LEADER_NOT_AVAILABLE, NOT_COORDINATOR, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS) and librdkafka's
/// local transient codes (rdkafka.h: ERR__TRANSPORT, ERR__TIMED_OUT, ERR__TIMED_OUT_QUEUE,
/// ERR__MSG_TIMED_OUT, ERR__ALL_BROKERS_DOWN, ERR__QUEUE_FULL, ERR__WAIT_COORD).
bool is_retriable_code(rd_kafka_resp_err_t code);

}  // namespace walrelay::kafka
