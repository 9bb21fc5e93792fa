// kafka::Error (kafka/error.hpp) and the classification functions of each layer: the typed error
// made from librdkafka's error object or a plain code, and the transactional rule
// (classify_txn_error, librdkafka INTRODUCTION.md "Transactional Producer" / "Error handling")
// applied to its flags. No broker: the fatal error is fabricated with rd_kafka_test_fatal_error
// on a producer handle that has no bootstrap servers.

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <string>

#include "walrelay/kafka/error.hpp"
#include "walrelay/kafka/producer.hpp"
#include "walrelay/kafka/security.hpp"
#include "walrelay/kafka/transactions.hpp"

namespace walrelay::kafka {
namespace {

Error flagged(rd_kafka_resp_err_t code, bool fatal, bool retriable, bool abort) {
  Error e = Error::from_code(code, "text");
  e.fatal = fatal;
  e.retriable = retriable;
  e.txn_requires_abort = abort;
  return e;
}

TEST(KafkaError, FromAnErrorObjectKeepsItsCodeTextAndFlags) {
  rd_kafka_error_t* raw = rd_kafka_error_new(RD_KAFKA_RESP_ERR__TIMED_OUT, "waited %d ms", 100);
  const Error e = Error::from(raw);
  rd_kafka_error_destroy(raw);
  EXPECT_EQ(e.code, RD_KAFKA_RESP_ERR__TIMED_OUT);
  EXPECT_EQ(e.message, "waited 100 ms");
  // rd_kafka_error_new sets no flag: only librdkafka's own calls do.
  EXPECT_FALSE(e.fatal);
  EXPECT_FALSE(e.retriable);
  EXPECT_FALSE(e.txn_requires_abort);
  EXPECT_FALSE(e.ok());
  EXPECT_STREQ(e.name(), "_TIMED_OUT");
  EXPECT_EQ(e.describe(), "_TIMED_OUT: waited 100 ms");
  EXPECT_TRUE(Error::from(nullptr).ok());
}

TEST(KafkaError, FromAPlainCodeUsesTheDocumentedClassification) {
  const Error fatal = Error::from_code(RD_KAFKA_RESP_ERR__FATAL);
  EXPECT_TRUE(fatal.fatal);
  EXPECT_FALSE(fatal.retriable);
  EXPECT_EQ(fatal.message, rd_kafka_err2str(RD_KAFKA_RESP_ERR__FATAL));

  for (const rd_kafka_resp_err_t code :
       {RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__TIMED_OUT,
        RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__QUEUE_FULL,
        RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
        RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS}) {
    const Error e = Error::from_code(code);
    EXPECT_TRUE(e.retriable) << e.name();
    EXPECT_FALSE(e.fatal) << e.name();
    EXPECT_FALSE(e.txn_requires_abort) << e.name();
  }
  for (const rd_kafka_resp_err_t code :
       {RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
        RD_KAFKA_RESP_ERR_PRODUCER_FENCED, RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH,
        RD_KAFKA_RESP_ERR__AUTHENTICATION, RD_KAFKA_RESP_ERR__STATE, RD_KAFKA_RESP_ERR_UNKNOWN}) {
    EXPECT_FALSE(Error::from_code(code).retriable) << rd_kafka_err2name(code);
  }
  // A caller's text replaces rd_kafka_err2str's.
  EXPECT_EQ(Error::from_code(RD_KAFKA_RESP_ERR__AUTHENTICATION, "SASL handshake failed").describe(),
            "_AUTHENTICATION: SASL handshake failed");
}

TEST(KafkaError, FatalOfReadsTheOriginalErrorBehindAFatalOne) {
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  ASSERT_EQ(rd_kafka_conf_set(conf, "enable.idempotence", "true", errstr, sizeof errstr),
            RD_KAFKA_CONF_OK);
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  ASSERT_NE(rk, nullptr) << errstr;
  EXPECT_TRUE(Error::fatal_of(rk).ok());
  ASSERT_EQ(rd_kafka_test_fatal_error(rk, RD_KAFKA_RESP_ERR_PRODUCER_FENCED, "a newer one"),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  const Error e = Error::fatal_of(rk);
  EXPECT_EQ(e.code, RD_KAFKA_RESP_ERR_PRODUCER_FENCED);
  EXPECT_TRUE(e.fatal);
  EXPECT_NE(e.message.find("a newer one"), std::string::npos) << e.message;
  EXPECT_TRUE(e.describe().starts_with("PRODUCER_FENCED: ")) << e.describe();
  EXPECT_TRUE(is_fencing_error(e));
  rd_kafka_destroy(rk);
}

TEST(KafkaError, EachLayerClassifiesByCode) {
  // Transactions: fencing (KIP-98).
  EXPECT_TRUE(is_fencing_error(RD_KAFKA_RESP_ERR__FENCED));
  EXPECT_TRUE(is_fencing_error(RD_KAFKA_RESP_ERR_PRODUCER_FENCED));
  EXPECT_TRUE(is_fencing_error(RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH));
  EXPECT_FALSE(is_fencing_error(RD_KAFKA_RESP_ERR_NOT_COORDINATOR));
  EXPECT_FALSE(is_fencing_error(Error::from_code(RD_KAFKA_RESP_ERR__FATAL, "PRODUCER_FENCED")))
      << "classified by the code, never by the text";
  // Connection: credentials and TLS (security.hpp; its rules in kafka_security_rules_test).
  EXPECT_EQ(security_failure(Error::from_code(RD_KAFKA_RESP_ERR__AUTHENTICATION)),
            SecurityFailure::kAuthentication);
  EXPECT_EQ(security_failure(Error::from_code(RD_KAFKA_RESP_ERR__TRANSPORT, "_AUTHENTICATION")),
            SecurityFailure::kNone);
  // Producer: whatever reaches a delivery report is final (message.timeout.ms=0).
  EXPECT_FALSE(is_permanent_failure(RD_KAFKA_RESP_ERR_NO_ERROR));
  EXPECT_TRUE(is_permanent_failure(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE));
  DeliveryReport r;
  r.err = RD_KAFKA_RESP_ERR__MSG_TIMED_OUT;
  EXPECT_EQ(r.error().code, RD_KAFKA_RESP_ERR__MSG_TIMED_OUT);
  EXPECT_TRUE(r.error().retriable);
}

TEST(KafkaError, TransactionalRuleFollowsTheFlagsInLibrdkafkasOrder) {
  EXPECT_TRUE(classify_txn_error(Error{}).ok());
  // fatal first: fenced or not.
  EXPECT_EQ(classify_txn_error(flagged(RD_KAFKA_RESP_ERR_PRODUCER_FENCED, true, true, true)).action,
            TxnAction::kFenced);
  EXPECT_EQ(classify_txn_error(flagged(RD_KAFKA_RESP_ERR__FENCED, true, false, false)).action,
            TxnAction::kFenced);
  EXPECT_EQ(
      classify_txn_error(flagged(RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, true, false, true))
          .action,
      TxnAction::kFatal);
  // then abortable, then retriable.
  EXPECT_EQ(classify_txn_error(flagged(RD_KAFKA_RESP_ERR__TIMED_OUT, false, true, true)).action,
            TxnAction::kAbort);
  EXPECT_EQ(classify_txn_error(flagged(RD_KAFKA_RESP_ERR__TIMED_OUT, false, true, false)).action,
            TxnAction::kRetry);
  // Unflagged: a fencing code is still fencing; anything else leaves the state unknown (abort).
  EXPECT_EQ(
      classify_txn_error(flagged(RD_KAFKA_RESP_ERR_PRODUCER_FENCED, false, false, false)).action,
      TxnAction::kFenced);
  EXPECT_EQ(classify_txn_error(flagged(RD_KAFKA_RESP_ERR__STATE, false, false, false)).action,
            TxnAction::kAbort);
  const TxnResult r = classify_txn_error(flagged(RD_KAFKA_RESP_ERR__TIMED_OUT, false, true, false));
  EXPECT_EQ(r.code, RD_KAFKA_RESP_ERR__TIMED_OUT);
  EXPECT_EQ(r.message, "text");
  // The error object form destroys the object; without a handle its own code is kept.
  EXPECT_EQ(classify_txn_error(nullptr, rd_kafka_error_new(RD_KAFKA_RESP_ERR__FENCED, "f")).action,
            TxnAction::kFenced);
}

}  // namespace
}  // namespace walrelay::kafka
