// A broker outage under the polling relay (docs/relay.md "Failures"): Kafka acknowledges nothing,
// so every tick is a whole-batch failure: rolled back and backed off, no attempt counted, no row
// failed; delivery resumes by itself when the broker returns. Stops the shared Kafka
// (KafkaOutage), so the suite runs alone (SERIAL).

#include <cstdlib>
#include <iostream>
#include <set>
#include <thread>

#include "relay_support.hpp"

namespace walrelay::itest {
namespace {

TEST_F(RelayTest, BrokerOutageFailsNoRowAndCountsNoAttempt) {
  const char* env_secs = std::getenv("WALRELAY_OUTAGE_SECONDS");
  const int outage = env_secs != nullptr ? std::atoi(env_secs) : 15;
  create_outbox("event_outbox");
  WalrelayProcess relay(poll_yaml({{table("event_outbox"), outbox_lines()}},
                                  "  max_attempts: 1\n  ack_timeout: 2s\n"),
                        "relay");
  relay.start();
  const std::string before = insert("event_outbox", "sub-0", "evt", "'{\"n\": 0}'");
  ASSERT_TRUE(wait_until([&] { return status_of("event_outbox", before) == "sent"; }))
      << relay.logs();
  KafkaOutage kafka_outage;  // whatever happens, the broker runs again at the end
  ASSERT_EQ(kafka_outage.stop(), 0);
  // max_attempts 1: a single counted attempt would fail a row.
  std::vector<std::string> ids;
  for (int i = 0; i < outage; ++i) {
    ids.push_back(insert("event_outbox", "sub-" + std::to_string(i % 3), "evt",
                         "'{\"n\": " + std::to_string(i + 1) + "}'"));
    std::this_thread::sleep_for(1s);
  }
  EXPECT_EQ(count_status("event_outbox", "failed"), 0);
  EXPECT_EQ(pg_->value("SELECT max(attempts) FROM " + table("event_outbox")), "0");
  EXPECT_TRUE(relay.running()) << relay.logs();
  ASSERT_EQ(kafka_outage.start(), 0);
  ASSERT_TRUE(wait_drained("event_outbox", 90s)) << relay.logs();
  EXPECT_EQ(count_status("event_outbox", "failed"), 0);
  EXPECT_EQ(pg_->value("SELECT max(attempts) FROM " + table("event_outbox")), "0");
  const auto records = kafka_->read_at_least({topic_for("evt")}, ids.size() + 1, 60s);
  std::set<std::string> seen;
  for (const KafkaRecord& r : records) seen.insert(r.header("id"));
  for (const std::string& id : ids) EXPECT_TRUE(seen.contains(id)) << id;
  std::cout << "[relay outage] " << count_occurrences(relay.stderr_text(), "rolled back")
            << " ticks rolled back during " << outage << " s" << std::endl;
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
}

}  // namespace
}  // namespace walrelay::itest
