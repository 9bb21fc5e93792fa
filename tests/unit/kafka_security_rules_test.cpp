// kafka/security.hpp: which librdkafka codes are security failures (exit 7), and the error
// line walrelay prints for them.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "walrelay/kafka/security.hpp"

namespace walrelay::kafka {
namespace {

TEST(KafkaSecurityRules, ClassifiesByLibrdkafkaCode) {
  EXPECT_EQ(security_failure(RD_KAFKA_RESP_ERR__AUTHENTICATION), SecurityFailure::kAuthentication);
  EXPECT_EQ(security_failure(RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED),
            SecurityFailure::kAuthentication);
  EXPECT_EQ(security_failure(RD_KAFKA_RESP_ERR_UNSUPPORTED_SASL_MECHANISM),
            SecurityFailure::kAuthentication);
  EXPECT_EQ(security_failure(RD_KAFKA_RESP_ERR__SSL), SecurityFailure::kTls);
  // Outages stay retried: a broker down, a connection closed during the TLS handshake.
  for (const auto err : {RD_KAFKA_RESP_ERR_NO_ERROR, RD_KAFKA_RESP_ERR__TRANSPORT,
                         RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__TIMED_OUT,
                         RD_KAFKA_RESP_ERR__RESOLVE, RD_KAFKA_RESP_ERR__FATAL}) {
    EXPECT_EQ(security_failure(err), SecurityFailure::kNone) << rd_kafka_err2name(err);
  }
}

TEST(KafkaSecurityRules, MessageSaysWhatFailedAndWhatToCheck) {
  const std::map<std::string, std::string> plain = {{"sasl.mechanisms", "PLAIN"}};
  const std::string auth =
      security_failure_message(SecurityFailure::kAuthentication, "_AUTHENTICATION: x", plain);
  EXPECT_TRUE(auth.starts_with("Kafka refused walrelay's credentials: _AUTHENTICATION: x. "))
      << auth;
  EXPECT_NE(auth.find("Retrying cannot fix this"), std::string::npos) << auth;
  EXPECT_EQ(auth.find("2.6.1"), std::string::npos) << auth;

  const std::string tls = security_failure_message(SecurityFailure::kTls, "_SSL: y", plain);
  EXPECT_TRUE(tls.starts_with("the TLS handshake with Kafka failed: _SSL: y. ")) << tls;
  EXPECT_NE(tls.find("ssl.ca.location"), std::string::npos) << tls;
}

TEST(KafkaSecurityRules, ScramHintOnlyBeforeLibrdkafka261) {
  // sasl.mechanism is librdkafka's alias of sasl.mechanisms; the name is compared ignoring case.
  for (const auto& props :
       {std::map<std::string, std::string>{{"sasl.mechanisms", "SCRAM-SHA-512"}},
        std::map<std::string, std::string>{{"sasl.mechanism", "scram-sha-256"}}}) {
    const std::string msg = security_failure_message(SecurityFailure::kAuthentication, "r", props);
    const bool hint = msg.find("fixed in librdkafka 2.6.1") != std::string::npos;
    EXPECT_EQ(hint, rd_kafka_version() < 0x020601ff) << msg;
  }
}

}  // namespace
}  // namespace walrelay::kafka
