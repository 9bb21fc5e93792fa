// `walrelay inbox` while the shared PostgreSQL restarts (tests/services/pg-restart.sh): the batch
// in progress is rolled back and decided again once the server is back; nothing is quarantined,
// nothing lost, nothing applied twice. Restarts the shared server: RUN_SERIAL.

#include "inbox_support.hpp"

namespace walrelay::itest {
namespace {

TEST_F(InboxTest, PostgresRestartMidStreamQuarantinesNothingAndLosesNothing) {
  constexpr int kPerRound = 1500;
  const auto round = [&](int r) {
    std::vector<TestEvent> events;
    for (int i = r * kPerRound; i < (r + 1) * kPerRound; ++i) {
      TestEvent e = event("p-" + std::to_string(i), "a-" + std::to_string(i % 11),
                          "{\"n\":" + std::to_string(i) + "}");
      e.partition = i % 3;
      events.push_back(std::move(e));
    }
    produce(env_.kafka_bootstrap, topic_, events);
  };
  // A handler that takes a little time, so that the restart falls inside the stream.
  pg_->exec("CREATE FUNCTION " + table("slow_count") +
            "(id text) RETURNS void LANGUAGE sql AS $$ SELECT pg_sleep(0.001); INSERT INTO " +
            table("effects") +
            " (event_id, n) VALUES (id, 1) ON CONFLICT (event_id) DO UPDATE SET n = " +
            table("effects") + ".n + 1 $$");
  const std::string yaml =
      inbox_yaml("  handlers:\n    - topic: " + topic_ + "\n      sql: \"select " +
                     table("slow_count") + "($2)\"\n",
                 "{max_events: 50, max_wait: 5ms}");
  const std::string applied = "SELECT count(*) FROM " + table("effects");
  round(0);
  WalrelayProcess proc(yaml, "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count(applied, 300, 60s)) << proc.logs();
  ASSERT_EQ(run_service_script("pg-restart.sh"), 0) << "pg-restart.sh failed";
  pg_ = std::make_unique<Pg>(env_.pg_conninfo);
  round(1);
  ASSERT_TRUE(wait_count(applied, 2 * kPerRound, 90s)) << proc.logs();
  ASSERT_TRUE(wait_count("SELECT coalesce(sum(next_offset), 0) FROM " + inbox_schema_ + ".offsets",
                         2 * kPerRound, 60s))
      << proc.logs();
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
  EXPECT_TRUE(proc.running() == false);
  EXPECT_EQ(count(applied), 2 * kPerRound);
  EXPECT_EQ(count("SELECT count(*) FROM " + table("effects") + " WHERE n <> 1"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM " + inbox_schema_ + ".quarantine"), 0);
  // The restart was seen: a batch was rolled back (or the next one found the server gone).
  EXPECT_NE(proc.stderr_text().find("deciding it again"), std::string::npos) << proc.logs();
}

}  // namespace
}  // namespace walrelay::itest
