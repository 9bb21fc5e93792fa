#include "relay_support.hpp"

#include <librdkafka/rdkafka.h>

#include <stdexcept>

namespace walrelay::itest {

void RelayTest::SetUp() {
  IntegrationTest::SetUp();
  channel_ = name_ + "_wake";
}

void RelayTest::create_outbox(const std::string& name, const std::string& payload_type) {
  const std::string t = table(name);
  pg_->exec("CREATE TABLE " + t +
            " (seq bigserial, event_id uuid PRIMARY KEY DEFAULT gen_random_uuid(), "
            "subscription_id text, event_type text NOT NULL, payload " +
            payload_type +
            ", status text NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0, "
            "created_at timestamptz NOT NULL DEFAULT clock_timestamp(), sent_at timestamptz, "
            "last_error text)");
  // What `walrelay check` prints for this table (docs/relay.md "Set-up").
  pg_->exec("CREATE INDEX ON " + t + " (seq, event_id) WHERE status = 'pending'");
  pg_->exec("CREATE INDEX ON " + t + " (subscription_id, seq) WHERE status <> 'sent'");
  pg_->exec("CREATE FUNCTION " + schema_ + "." + name +
            "_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify(" +
            sql_literal(channel_) + ", ''); RETURN NULL; END $$");
  pg_->exec("CREATE TRIGGER " + name + "_notify AFTER INSERT ON " + t +
            " FOR EACH STATEMENT EXECUTE FUNCTION " + schema_ + "." + name + "_notify()");
}

std::vector<std::string> RelayTest::outbox_lines(bool poll_columns) const {
  std::vector<std::string> lines = {"event_id: event_id",
                                    "aggregate_id: subscription_id",
                                    "aggregate_type: event_type",
                                    "payload: payload",
                                    "event_type: event_type",
                                    "timestamp: created_at",
                                    "topic: \"" + name_ + ".{aggregate_type}\""};
  if (poll_columns) {
    lines.emplace_back("poll:");
    lines.emplace_back("  order_by: seq");
    lines.emplace_back("  last_error: last_error");
  }
  return lines;
}

std::string RelayTest::poll_yaml(const std::vector<TableEntry>& tables,
                                 const std::string& relay_lines) const {
  WalrelayConfig cfg = make_config(tables);
  cfg.conninfo += conninfo_suffix_;
  cfg.metrics_listen = metrics_listen_;
  cfg.extra_yaml = "relay:\n  poll_interval: 100ms\n  notify_channel: \"" + channel_ +
                   "\"\n  backoff: {min: 100ms, max: 1s}\n" + relay_lines;
  if (relay_lines.find("ack_timeout") == std::string::npos) cfg.extra_yaml += "  ack_timeout: 5s\n";
  std::string yaml = cfg.to_yaml();
  const std::string source = "source:\n";
  yaml.insert(yaml.find(source) + source.size(), "  mode: poll\n");
  return yaml;
}

std::string RelayTest::insert(const std::string& table_name, const std::string& key,
                              const std::string& type, const std::string& payload_sql) {
  return pg_->value("INSERT INTO " + table(table_name) +
                    " (subscription_id, event_type, payload) VALUES (" +
                    (key == "NULL" ? key : sql_literal(key)) + ", " + sql_literal(type) + ", " +
                    payload_sql + ") RETURNING event_id");
}

std::string RelayTest::status_of(const std::string& table_name, const std::string& event_id) {
  return pg_->value("SELECT status FROM " + table(table_name) +
                    " WHERE event_id = " + sql_literal(event_id));
}

long RelayTest::count_status(const std::string& table_name, const std::string& status) {
  return std::stol(pg_->value("SELECT count(*) FROM " + table(table_name) +
                              " WHERE status = " + sql_literal(status)));
}

bool RelayTest::wait_drained(const std::string& table_name, std::chrono::milliseconds timeout) {
  return wait_until([&] { return count_status(table_name, "pending") == 0; }, timeout, 100ms);
}

void create_topic(const std::string& bootstrap, const std::string& topic, int partitions,
                  const std::vector<std::pair<std::string, std::string>>& configs) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), err, sizeof err);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr) throw std::runtime_error(err);
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic.c_str(), partitions, 1, err, sizeof err);
  for (const auto& [k, v] : configs) rd_kafka_NewTopic_set_config(nt, k.c_str(), v.c_str());
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, &nt, 1, nullptr, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000);
  std::string failure;
  if (ev == nullptr) {
    failure = "no answer to CreateTopics";
  } else {
    size_t n = 0;
    const rd_kafka_topic_result_t** results =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      failure = rd_kafka_event_error_string(ev);
    } else if (n == 1 && rd_kafka_topic_result_error(results[0]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      failure = rd_kafka_topic_result_error_string(results[0]);
    }
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_queue_destroy(q);
  rd_kafka_NewTopic_destroy(nt);
  rd_kafka_destroy(rk);
  if (!failure.empty()) throw std::runtime_error("create topic " + topic + ": " + failure);
}

}  // namespace walrelay::itest
