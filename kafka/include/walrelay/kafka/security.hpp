#pragma once

#include <librdkafka/rdkafka.h>

#include <map>
#include <string>

#include "walrelay/kafka/error.hpp"

namespace walrelay::kafka {

/// What a broker connection error says about walrelay's Kafka security settings
/// (`kafka.properties`: security.protocol, sasl.*, ssl.*).
enum class SecurityFailure {
  kNone,            ///< not a security failure (librdkafka retries it)
  kAuthentication,  ///< SASL: the broker refused the credentials, or the mechanism
  kTls,             ///< the TLS handshake failed (certificate verification, client certificate)
};

/// Classifies an error librdkafka reported for a broker connection (error_cb, rdkafka.h
/// rd_kafka_conf_set_error_cb) by its code:
///   - kAuthentication: RD_KAFKA_RESP_ERR__AUTHENTICATION (librdkafka's code for a failed SASL
///     handshake or authentication, whatever the broker answered),
///     RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED, RD_KAFKA_RESP_ERR_UNSUPPORTED_SASL_MECHANISM;
///   - kTls: RD_KAFKA_RESP_ERR__SSL, librdkafka's code for a TLS handshake that failed (the
///     broker's certificate does not verify against ssl.ca.location, its name does not match,
///     the broker refused walrelay's certificate). A connection closed during the handshake is
///     ERR__TRANSPORT (librdkafka src/rdkafka_ssl.c), retried like any outage.
/// Both are configuration errors that retrying cannot fix: Kafka's own clients treat them alike
/// (org.apache.kafka.common.errors.SaslAuthenticationException and SslAuthenticationException
/// are AuthenticationExceptions, never retried).
SecurityFailure security_failure(rd_kafka_resp_err_t err);
/// The same on a typed error's code. This is the connection layer's classification.
inline SecurityFailure security_failure(const Error& error) {
  return security_failure(error.code);
}

/// The error line for a security failure (`reason`: librdkafka's text, secrets already
/// redacted): what failed, librdkafka's reason, and what to check in `properties` (the
/// configured kafka.properties). For a SCRAM mechanism with a librdkafka older than 2.6.1 it adds
/// that Apache Kafka 4.0 and later brokers refuse that librdkafka's SCRAM proof even with the
/// right password (librdkafka CHANGELOG.md, v2.6.1). Starts with "Kafka refused walrelay's
/// credentials" (kAuthentication) or "the TLS handshake with Kafka failed" (kTls).
std::string security_failure_message(SecurityFailure kind, const std::string& reason,
                                     const std::map<std::string, std::string>& properties);

}  // namespace walrelay::kafka
