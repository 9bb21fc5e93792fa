#include "reconcile_support.hpp"

#include <librdkafka/rdkafka.h>
#include <simdjson.h>

#include <algorithm>
#include <stdexcept>

namespace walrelay::itest {

ReconcileRun run_reconcile(const std::string& config_yaml, const std::vector<std::string>& args,
                           std::chrono::milliseconds timeout) {
  WalrelayProcess proc(config_yaml, "reconcile");
  std::vector<std::string> argv = {"reconcile", "--config", proc.config_path().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  proc.start(argv);
  ReconcileRun run;
  run.exit_code = proc.wait_exit(timeout);
  run.out = proc.stdout_text();
  run.err = proc.stderr_text();
  return run;
}

void produce_record(const std::string& bootstrap, const std::string& topic, const std::string& key,
                    const std::string& value,
                    const std::vector<std::pair<std::string, std::string>>& headers) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), err, sizeof err) !=
      RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(err);
  }
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr) throw std::runtime_error(err);
  rd_kafka_headers_t* hdrs = rd_kafka_headers_new(headers.size());
  for (const auto& [name, v] : headers) {
    rd_kafka_header_add(hdrs, name.data(), static_cast<ssize_t>(name.size()), v.data(),
                        static_cast<ssize_t>(v.size()));
  }
  const auto rc = rd_kafka_producev(
      rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(key.data(), key.size()),
      RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
  if (rc != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_headers_destroy(hdrs);
    rd_kafka_destroy(rk);
    throw std::runtime_error(std::string("produce: ") + rd_kafka_err2str(rc));
  }
  const auto flushed = rd_kafka_flush(rk, 30'000);
  rd_kafka_destroy(rk);
  if (flushed != RD_KAFKA_RESP_ERR_NO_ERROR) {
    throw std::runtime_error(std::string("flush: ") + rd_kafka_err2str(flushed));
  }
}

std::vector<std::string> json_breaks(const std::string& stdout_text) {
  // stdout holds the harness's "===== harness: start ..." line before the report.
  const auto at = stdout_text.find("\n{");
  const std::string json = at == std::string::npos ? stdout_text : stdout_text.substr(at + 1);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) {
    throw std::runtime_error("not JSON: " + json);
  }
  std::vector<std::string> out;
  for (auto table : doc["tables"].get_array()) {
    for (auto b : table["breaks"].get_array()) {
      out.push_back(std::string(std::string_view(b["class"])) + ":" +
                    std::string(std::string_view(b["id"])));
    }
  }
  std::ranges::sort(out);
  return out;
}

}  // namespace walrelay::itest
