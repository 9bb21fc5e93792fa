#pragma once

// Private to walrelay_kafka: one topic's metadata, for the consumer and the admin client.

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <expected>
#include <string>

#include "walrelay/kafka/consumer.hpp"
#include "walrelay/kafka/error.hpp"

namespace walrelay::kafka::detail {

/// rd_kafka_metadata for `topic` only (without creating it), blocking up to `timeout` (>= 1 ms).
std::expected<TopicDescription, Error> describe_topic(rd_kafka_t* rk, const std::string& topic,
                                                      std::chrono::milliseconds timeout);

}  // namespace walrelay::kafka::detail
