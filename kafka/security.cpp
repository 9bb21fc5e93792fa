#include "walrelay/kafka/security.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace walrelay::kafka {

SecurityFailure security_failure(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_SASL_MECHANISM:
      return SecurityFailure::kAuthentication;
    case RD_KAFKA_RESP_ERR__SSL:
      return SecurityFailure::kTls;
    default:
      return SecurityFailure::kNone;
  }
}

namespace {

// librdkafka's first version whose SCRAM client-final-message carries the nonce once (RFC 5802
// section 7; librdkafka CHANGELOG.md, v2.6.1), as rd_kafka_version() encodes it: 0xMMmmrrxx.
constexpr int kScramFixedVersion = 0x020601ff;

bool uses_scram(const std::map<std::string, std::string>& properties) {
  // sasl.mechanism is librdkafka's alias of sasl.mechanisms (CONFIGURATION.md).
  for (const char* name : {"sasl.mechanisms", "sasl.mechanism"}) {
    const auto it = properties.find(name);
    if (it == properties.end()) continue;
    std::string upper = it->second;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    if (std::string_view(upper).starts_with("SCRAM-")) return true;
  }
  return false;
}

}  // namespace

std::string security_failure_message(SecurityFailure kind, const std::string& reason,
                                     const std::map<std::string, std::string>& properties) {
  if (kind == SecurityFailure::kTls) {
    return "the TLS handshake with Kafka failed: " + reason +
           ". Retrying cannot fix this: check ssl.ca.location (the CA that signed the brokers' "
           "certificates), the broker address against the names in its certificate, and the "
           "other ssl.* settings under kafka.properties";
  }
  std::string msg = "Kafka refused walrelay's credentials: " + reason +
                    ". Retrying cannot fix this: check the sasl.* and ssl.* settings under "
                    "kafka.properties";
  if (uses_scram(properties) && rd_kafka_version() < kScramFixedVersion) {
    msg += std::string(". Note: this walrelay uses librdkafka ") + rd_kafka_version_str() +
           ", whose SCRAM authentication Apache Kafka 4.0 and later brokers refuse even with the "
           "right password (fixed in librdkafka 2.6.1, see its CHANGELOG.md); against such a "
           "broker use sasl.mechanisms PLAIN over SASL_SSL, or a walrelay built with librdkafka "
           "2.6.1 or later";
  }
  return msg;
}

}  // namespace walrelay::kafka
