// `walrelay reconcile` with `source.mode: poll` (docs/reconcile.md "Poll mode") on real PostgreSQL
// and Kafka, against what the polling relay (docs/relay.md) delivered: in flight is the row's
// status, not a slot. A clean run after the relay drained the table; a young pending row is in
// flight (no break); an old pending row is an in_flight break, a failed row is `failed` with its
// attempts and last_error, a row marked sent by hand without its record is `missing`, and
// `--repair` re-emits it. `--inbox` (docs/reconcile.md "Inbox") against `walrelay inbox`
// consuming the relay's topic: clean once it applied everything, then an event published again
// under its id with another payload is reported as quarantined.

#include "../relay/relay_support.hpp"
#include "reconcile_support.hpp"

namespace walrelay::itest {
namespace {

class ReconcilePollTest : public RelayTest {
 protected:
  void SetUp() override {
    RelayTest::SetUp();
    if (HasFatalFailure()) return;
    create_outbox("event_outbox");
    yaml_ = poll_yaml({{table("event_outbox"), outbox_lines()}}) +
            "reconcile:\n  in_flight_limit: 30s\n";
  }

  /// Inserts `n` events of two keys and lets the relay publish them all.
  void relay_events(int n) {
    WalrelayProcess relay(yaml_, "relay");
    relay.start();
    for (int i = 0; i < n; ++i) {
      insert("event_outbox", "sub-" + std::to_string(i % 2), "order_placed",
             "'{\"n\": " + std::to_string(i) + "}'");
    }
    ASSERT_TRUE(wait_drained("event_outbox")) << relay.logs();
    ASSERT_EQ(count_status("event_outbox", "sent"), n);
    EXPECT_EQ(relay.stop(), 0) << relay.logs();
  }

  std::string yaml_;
};

TEST_F(ReconcilePollTest, CleanAfterTheRelayDeliveredAndAYoungPendingRowIsInFlight) {
  ASSERT_NO_FATAL_FAILURE(relay_events(20));
  const auto clean = run_reconcile(yaml_, {"--json"});
  EXPECT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  EXPECT_TRUE(json_breaks(clean.out).empty()) << clean.out;
  EXPECT_NE(clean.out.find("\"source_rows\":20,\"kafka_records\":20,"), std::string::npos)
      << clean.out;
  EXPECT_NE(clean.out.find("\"mode\":\"poll\",\"in_flight_rows\":0"), std::string::npos)
      << clean.out;
  // The relay is stopped: a new row stays pending, younger than in_flight_limit.
  insert("event_outbox", "sub-0", "order_placed", "'{\"n\": 100}'");
  const auto pending = run_reconcile(yaml_, {"--json"});
  EXPECT_EQ(pending.exit_code, 0) << pending.out << pending.err;
  EXPECT_TRUE(json_breaks(pending.out).empty()) << pending.out;
  EXPECT_NE(pending.out.find("\"in_flight_rows\":1"), std::string::npos) << pending.out;
}

TEST_F(ReconcilePollTest, FailedOldPendingAndSentWithoutRecordEachWithItsClass) {
  ASSERT_NO_FATAL_FAILURE(relay_events(10));
  const std::string t = table("event_outbox");
  const std::string failed = insert("event_outbox", "sub-7", "order_placed", "'{\"n\": 7}'");
  pg_->exec("UPDATE " + t +
            " SET status = 'failed', attempts = 8, last_error = 'MSG_SIZE_TOO_LARGE' WHERE "
            "event_id = " +
            sql_literal(failed));
  const std::string old = insert("event_outbox", "sub-8", "order_placed", "'{\"n\": 8}'");
  pg_->exec("UPDATE " + t +
            " SET created_at = now() - interval '1 hour' WHERE event_id = " + sql_literal(old));
  const std::string lost = insert("event_outbox", "sub-9", "order_placed", "'{\"n\": 9}'");
  pg_->exec("UPDATE " + t +
            " SET status = 'sent', sent_at = now() WHERE event_id = " + sql_literal(lost));

  const auto run = run_reconcile(yaml_, {"--json"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_EQ(json_breaks(run.out),
            (std::vector<std::string>{"failed:" + failed, "in_flight:" + old, "missing:" + lost}))
      << run.out;
  EXPECT_NE(run.out.find("attempts 8, last_error: MSG_SIZE_TOO_LARGE"), std::string::npos)
      << run.out;
  const auto summary = run_reconcile(yaml_, {});
  EXPECT_EQ(summary.exit_code, 1);
  EXPECT_NE(summary.out.find("failed"), std::string::npos) << summary.out;

  // --repair re-emits the missing sent row only; the failed and old pending rows remain.
  const auto repair = run_reconcile(yaml_, {"--repair", "--json"});
  EXPECT_EQ(repair.exit_code, 1) << repair.out << repair.err;
  EXPECT_NE(repair.out.find("\"repaired\":[\"" + lost + "\"]"), std::string::npos) << repair.out;
  const auto after = run_reconcile(yaml_, {"--json"});
  EXPECT_EQ(json_breaks(after.out),
            (std::vector<std::string>{"failed:" + failed, "in_flight:" + old}))
      << after.out;
}

TEST_F(ReconcilePollTest, InboxCleanWhenAppliedThenAQuarantinedEventByItsId) {
  const std::string schema = name_ + "_inbox";
  const std::string topic = topic_for("order_placed");
  const std::string yaml = yaml_ + "inbox:\n  conninfo: \"" + env_.pg_conninfo +
                           "\"\n  group_id: " + name_ + "-inbox\n  topics: [" + topic +
                           "]\n  schema: " + schema +
                           "\n  batch: {max_events: 100, max_wait: 10ms}\n";
  ASSERT_NO_FATAL_FAILURE(relay_events(10));
  const std::string ledger_count = "SELECT count(*) FROM " + schema + ".ledger";
  const std::string quarantine_count = "SELECT count(*) FROM " + schema + ".quarantine";
  auto reaches = [&](const std::string& sql, long n) {
    return wait_until([&] {
      try {
        return std::stol(pg_->value(sql)) >= n;
      } catch (const PgError&) {
        return false;  // the inbox has not made its schema yet
      }
    });
  };
  WalrelayProcess inbox(yaml, "inbox");
  inbox.start({"inbox", "--config", inbox.config_path().string()});
  ASSERT_TRUE(reaches(ledger_count, 10)) << inbox.logs();
  const auto clean = run_reconcile(yaml, {"--inbox", "--json"});
  EXPECT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  EXPECT_TRUE(json_breaks(clean.out).empty()) << clean.out;
  EXPECT_NE(clean.out.find("\"inbox_in_flight\":0"), std::string::npos) << clean.out;

  // The same id again with another payload: the inbox quarantines it (a conflict).
  const auto records = kafka_->read_all({topic});
  ASSERT_FALSE(records.empty());
  const std::string id = records.front().header("id");
  produce_record(env_.kafka_bootstrap, topic, *records.front().key, R"({"n": -1})", {{"id", id}});
  ASSERT_TRUE(reaches(quarantine_count, 1)) << inbox.logs();
  const auto run = run_reconcile(yaml, {"--inbox", "--json"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_EQ(json_breaks(run.out), (std::vector<std::string>{"conflict:" + id, "quarantined:" + id}))
      << run.out;
  EXPECT_EQ(inbox.stop(), 0) << inbox.logs();

  // By hand in the ledger: an event it forgot (below the stored position: not_in_inbox) and one
  // it decided that was never published (phantom_in_inbox).
  const std::string forgotten = records.back().header("id");
  ASSERT_NE(forgotten, id);
  pg_->exec("DELETE FROM " + schema + ".ledger WHERE event_id = " + sql_literal(forgotten));
  pg_->exec("INSERT INTO " + schema +
            ".ledger (tenant, event_id, digest, topic, kafka_partition, kafka_offset, decision) "
            "VALUES ('', 'ghost-1', 'x', " +
            sql_literal(topic) + ", 0, 0, 'APPLIED')");
  const auto hand = run_reconcile(yaml, {"--inbox", "--json"});
  EXPECT_EQ(hand.exit_code, 1) << hand.out << hand.err;
  EXPECT_EQ(json_breaks(hand.out),
            (std::vector<std::string>{"conflict:" + id, "not_in_inbox:" + forgotten,
                                      "phantom_in_inbox:ghost-1", "quarantined:" + id}))
      << hand.out;
  pg_->exec("DROP SCHEMA " + schema + " CASCADE");
}

TEST_F(ReconcilePollTest, InboxOptionNeedsTheInboxSection) {
  const auto run = run_reconcile(yaml_, {"--inbox"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("inbox.conninfo"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace walrelay::itest
