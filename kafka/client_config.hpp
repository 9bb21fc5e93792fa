#pragma once

// Private to walrelay_kafka: the configuration a consumer or an admin client starts from.

#include <librdkafka/rdkafka.h>

#include <map>
#include <memory>
#include <string>

#include "walrelay/config/config.hpp"
#include "walrelay/kafka/error.hpp"

namespace walrelay::kafka::detail {

/// A librdkafka configuration with bootstrap.servers, the connection and security settings of
/// kafka.properties that a consumer or admin client needs too (the producer-only ones would only
/// make librdkafka warn), then `extra` (which wins). librdkafka's log lines of level error or
/// worse are logged as warnings "librdkafka (<*log_name>) <facility>: <text>": `log_name` must
/// outlive the client (it is the handle's opaque). nullptr with `error` set (ERR__INVALID_ARG,
/// "kafka.properties.<name>: <reason>") when librdkafka refuses a property.
rd_kafka_conf_t* client_conf(const config::KafkaConfig& cfg,
                             const std::map<std::string, std::string>& extra,
                             const std::string* log_name, Error& error);

struct RkDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using RkPtr = std::unique_ptr<rd_kafka_t, RkDeleter>;

}  // namespace walrelay::kafka::detail
