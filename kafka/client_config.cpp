#include "client_config.hpp"

#include <spdlog/spdlog.h>

namespace walrelay::kafka::detail {

rd_kafka_conf_t* client_conf(const config::KafkaConfig& cfg,
                             const std::map<std::string, std::string>& extra,
                             const std::string* log_name, Error& error) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char errstr[512];
  std::map<std::string, std::string> props = {{"bootstrap.servers", cfg.bootstrap_servers}};
  for (const auto& [k, v] : cfg.properties) {
    for (const char* shared : {"security.", "sasl.", "ssl.", "socket.", "broker.", "client.dns",
                               "api.version", "metadata.", "client.id"}) {
      if (k.starts_with(shared)) props[k] = v;
    }
  }
  for (const auto& [k, v] : extra) props[k] = v;
  for (const auto& [k, v] : props) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
      error =
          Error::from_code(RD_KAFKA_RESP_ERR__INVALID_ARG, "kafka.properties." + k + ": " + errstr);
      rd_kafka_conf_destroy(conf);
      return nullptr;
    }
  }
  rd_kafka_conf_set_opaque(conf, const_cast<std::string*>(log_name));
  rd_kafka_conf_set_log_cb(
      conf, [](const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
        if (level > 3) return;
        const auto* name = static_cast<const std::string*>(rd_kafka_opaque(rk));
        spdlog::warn("librdkafka ({}) {}: {}", name != nullptr ? *name : std::string(), fac, buf);
      });
  return conf;
}

}  // namespace walrelay::kafka::detail
