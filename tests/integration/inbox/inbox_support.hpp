#pragma once

// Helpers of the inbox's integration tests (inbox_test.cpp, inbox_fault_test.cpp): test events
// produced with librdkafka, their expected digests (OpenSSL: what sha256sum prints), and a fixture
// with an inbox schema, topic and group of the test's own.

#include <librdkafka/rdkafka.h>
#include <openssl/evp.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness.hpp"

namespace walrelay::itest {

/// One record to produce.
struct TestEvent {
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::string>> headers;
  std::int32_t partition = 0;
};

inline TestEvent event(const std::string& id, const std::string& key, const std::string& value,
                       std::vector<std::pair<std::string, std::string>> more = {}) {
  TestEvent e{key, value, {{"id", id}}};
  for (auto& h : more) e.headers.push_back(std::move(h));
  return e;
}

/// `printf '%s' VALUE | sha256sum`: what the payload_digest header holds.
inline std::string sha256_hex(const std::string& value) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(value.data(), value.size(), md, &len, EVP_sha256(), nullptr);
  std::string out;
  char buf[3];
  for (unsigned int i = 0; i < len; ++i) {
    const unsigned char c = md[i];
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

/// Produces `events` to their partition of `topic` in order (acks=all, idempotent), waiting for
/// every delivery. Creates the topic when the broker auto-creates it (tests/services/start.sh
/// does).
inline void produce(const std::string& bootstrap, const std::string& topic,
                    const std::vector<TestEvent>& events) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  const std::pair<const char*, std::string> settings[] = {
      {"bootstrap.servers", bootstrap}, {"enable.idempotence", "true"}, {"linger.ms", "5"}};
  for (const auto& [k, v] : settings) {
    ASSERT_EQ(rd_kafka_conf_set(conf, k, v.c_str(), err, sizeof err), RD_KAFKA_CONF_OK) << err;
  }
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  ASSERT_NE(rk, nullptr) << err;
  for (const TestEvent& e : events) {
    rd_kafka_headers_t* headers = rd_kafka_headers_new(e.headers.size());
    for (const auto& [name, value] : e.headers) {
      rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                          static_cast<ssize_t>(value.size()));
    }
    // The macros cast their arguments without parentheses: plain variables only.
    const void* key = e.key ? e.key->data() : nullptr;
    const std::size_t key_len = e.key ? e.key->size() : 0;
    void* value = e.value ? const_cast<char*>(e.value->data()) : nullptr;
    const std::size_t value_len = e.value ? e.value->size() : 0;
    rd_kafka_resp_err_t r = rd_kafka_producev(
        rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(e.partition),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, key_len),
        RD_KAFKA_V_VALUE(value, value_len), RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_END);
    if (r != RD_KAFKA_RESP_ERR_NO_ERROR) rd_kafka_headers_destroy(headers);
    ASSERT_EQ(r, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(r);
    rd_kafka_poll(rk, 0);
  }
  EXPECT_EQ(rd_kafka_flush(rk, 30'000), RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(rd_kafka_outq_len(rk), 0);
  rd_kafka_destroy(rk);
}

class InboxTest : public IntegrationTest {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    if (HasFatalFailure()) return;
    inbox_schema_ = name_ + "_inbox";
    topic_ = name_ + ".outbox.event.payment";
    group_ = name_ + "-inbox";
    // The effect counter: how many times each event's effect ran.
    pg_->exec("CREATE TABLE " + table("effects") +
              " (event_id text PRIMARY KEY, n int NOT NULL, seq bigserial)");
  }
  void TearDown() override {
    try {
      pg_->exec("DROP SCHEMA IF EXISTS " + inbox_schema_ + " CASCADE");
    } catch (const std::exception&) {
    }
    IntegrationTest::TearDown();
  }

  /// A handler that counts each event's effect in `effects`.
  [[nodiscard]] std::string counting_handler(const std::string& topic) const {
    return "    - topic: " + topic + "\n      sql: \"insert into " + table("effects") +
           " (event_id, n) values ($2, 1) on conflict (event_id) do update set n = " +
           table("effects") + ".n + 1\"\n";
  }

  /// The inbox configuration; `more` is added under `inbox:` (two-space indented lines).
  [[nodiscard]] std::string inbox_yaml(
      const std::string& more,
      const std::string& batch = "{max_events: 100, max_wait: 10ms}") const {
    return "kafka:\n  bootstrap_servers: \"" + env_.kafka_bootstrap +
           "\"\nlog:\n  level: info\n  progress_interval: 1s\nmetrics:\n  listen: "
           "\"127.0.0.1:0\"\ninbox:\n  conninfo: \"" +
           env_.pg_conninfo + "\"\n  group_id: " + group_ + "\n  topics: [" + topic_ +
           "]\n  schema: " + inbox_schema_ + "\n  batch: " + batch + "\n" + more;
  }

  void start_inbox(WalrelayProcess& proc) {
    proc.start({"inbox", "--config", proc.config_path().string()});
  }

  std::string ledger_sql(const std::string& what) const {
    return "SELECT " + what + " FROM " + inbox_schema_ + ".ledger";
  }

  long count(const std::string& sql) { return std::stol(pg_->value(sql)); }

  /// Waits until `sql` (one number) reaches `n`.
  bool wait_count(const std::string& sql, long n, std::chrono::milliseconds t = kDefaultTimeout) {
    return wait_until(
        [&] {
          try {
            return count(sql) >= n;
          } catch (const PgError&) {
            return false;  // the schema is not there yet
          }
        },
        t);
  }

  std::string inbox_schema_;
  std::string topic_;
  std::string group_;
};

}  // namespace walrelay::itest
