// `walrelay inbox` on real PostgreSQL and Kafka (docs/inbox.md): events produced to a topic with
// librdkafka, the walrelay binary consuming them, and what a user checks by hand afterwards: the
// effect of a handler (a counter table), the ledger's decisions, the quarantine and deferred
// tables, `walrelay inbox status --json`.

#include "inbox_support.hpp"

namespace walrelay::itest {
namespace {

TEST_F(InboxTest, TheSameEventPublishedTwiceAppliesTheEffectOnce) {
  const std::string payload = R"({"invoice":1001,"amount":"12.50"})";
  produce(env_.kafka_bootstrap, topic_,
          {event("e-1", "inv-1001", payload, {{"payload_digest", sha256_hex(payload)}}),
           event("e-1", "inv-1001", payload, {{"payload_digest", sha256_hex(payload)}})});
  WalrelayProcess proc(inbox_yaml("  handlers:\n" + counting_handler(topic_)), "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count(ledger_sql("coalesce(sum(duplicates), 0)"), 1)) << proc.logs();
  EXPECT_EQ(pg_->value("SELECT string_agg(event_id || '=' || n, ',') FROM " + table("effects")),
            "e-1=1");
  EXPECT_EQ(
      pg_->value(ledger_sql("string_agg(event_id || ' ' || decision || ' ' || duplicates, ',')")),
      "e-1 APPLIED 1");
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
}

TEST_F(InboxTest, PaymentFailedAdvancesDunningExactlyOnceAcrossRedeliveries) {
  pg_->exec("CREATE TABLE " + table("accounts") +
            " (id text PRIMARY KEY, dunning_level int NOT NULL)");
  pg_->exec("INSERT INTO " + table("accounts") + " VALUES ('acc-7', 0)");
  pg_->exec("CREATE FUNCTION " + table("advance_dunning") +
            "(p jsonb) RETURNS void LANGUAGE sql AS $$ UPDATE " + table("accounts") +
            " SET dunning_level = dunning_level + 1 WHERE id = p->>'account' $$");
  const std::string failed = R"({"account":"acc-7","invoice":1001})";
  const std::string succeeded = R"({"account":"acc-7","invoice":1002})";
  produce(env_.kafka_bootstrap, topic_,
          {event("pay-1", "acc-7", failed, {{"eventType", "payment.failed"}}),
           event("pay-2", "acc-7", succeeded, {{"eventType", "payment.succeeded"}})});
  const std::string yaml = inbox_yaml("  handlers:\n    - topic: " + topic_ +
                                      "\n      event_type: payment.failed\n      sql: \"select " +
                                      table("advance_dunning") + "($1::jsonb)\"\n");
  WalrelayProcess proc(yaml, "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count(ledger_sql("count(*)"), 2)) << proc.logs();
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
  EXPECT_EQ(pg_->value("SELECT dunning_level FROM " + table("accounts")), "1");

  // Redeliveries: the producer sends pay-1 again, and the consumer's position is forgotten so
  // that the restarted inbox reads the whole topic once more.
  produce(env_.kafka_bootstrap, topic_,
          {event("pay-1", "acc-7", failed, {{"eventType", "payment.failed"}})});
  pg_->exec("DELETE FROM " + inbox_schema_ + ".offsets");
  start_inbox(proc);
  ASSERT_TRUE(wait_count(ledger_sql("coalesce(sum(duplicates), 0)"), 3)) << proc.logs();
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
  EXPECT_EQ(pg_->value("SELECT dunning_level FROM " + table("accounts")), "1");
  EXPECT_EQ(
      pg_->value(ledger_sql("string_agg(event_id || ' ' || decision, ',' ORDER BY event_id)")),
      "pay-1 APPLIED,pay-2 APPLIED");
  EXPECT_EQ(pg_->value("SELECT next_offset FROM " + inbox_schema_ + ".offsets"), "3");
}

TEST_F(InboxTest, SameIdSameDigestIsDuplicateOtherDigestIsQuarantinedAndThePartitionGoesOn) {
  const std::string a = R"({"n":1})";
  const std::string b = R"({"n":2})";
  produce(env_.kafka_bootstrap, topic_,
          {event("e-1", "k", a), event("e-1", "k", a), event("e-1", "k", b),
           event("e-2", "k", R"({"n":3})")});
  WalrelayProcess proc(inbox_yaml(""), "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count("SELECT count(*) FROM " + inbox_schema_ + ".events", 2)) << proc.logs();
  ASSERT_TRUE(wait_count("SELECT count(*) FROM " + inbox_schema_ + ".quarantine", 1));
  // Without handlers the APPLIED events land in the events table.
  EXPECT_EQ(pg_->value("SELECT string_agg(event_id || ' ' || payload::text || ' ' || decision, ',' "
                       "ORDER BY event_id) FROM " +
                       inbox_schema_ + ".events"),
            R"(e-1 {"n": 1} APPLIED,e-2 {"n": 3} APPLIED)");
  EXPECT_EQ(pg_->value(ledger_sql("string_agg(event_id || ' ' || decision || ' ' || duplicates || "
                                  "' ' || conflicts || ' ' || digest, ',' ORDER BY event_id)")),
            "e-1 APPLIED 1 1 " + sha256_hex(a) + ",e-2 APPLIED 0 0 " + sha256_hex(R"({"n":3})"));
  const auto q = pg_->query(
      "SELECT event_id, kafka_offset, digest, reason, convert_from(payload, "
      "'UTF8') FROM " +
      inbox_schema_ + ".quarantine");
  ASSERT_EQ(q.size(), 1U);
  EXPECT_EQ(q[0][0], "e-1");
  EXPECT_EQ(q[0][1], "2");
  EXPECT_EQ(q[0][2], sha256_hex(b));
  EXPECT_NE(q[0][3]->find("conflict"), std::string::npos) << *q[0][3];
  EXPECT_EQ(q[0][4], b);

  // `status --json` counts: 2 applied, 1 duplicate, 1 quarantined.
  WalrelayProcess status(inbox_yaml(""), "status");
  status.start({"inbox", "status", "--config", status.config_path().string(), "--json"});
  EXPECT_EQ(status.wait_exit(), 0) << status.logs();
  std::string out = status.stdout_text();
  out = out.substr(out.find('{'));  // after the harness's heading line
  EXPECT_EQ(json_at(out, "/decisions"),
            R"({"APPLIED":2,"DUPLICATE":1,"DEFERRED":0,"QUARANTINED":1})")
      << out;
  EXPECT_EQ(json_at(out, "/quarantined/0/event_id"), "\"e-1\"") << out;
  EXPECT_EQ(json_at(out, "/offsets/0/next_offset"), "4") << out;
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
}

// A row-change topic (docs/events.md's envelope, no payload_digest header): a restarted connector
// replays a change with the same `id` but a new ts_ms and source; its row values decide.
TEST_F(InboxTest, ARowChangeReplayedWithAnotherTsMsIsADuplicateAndOtherRowValuesAConflict) {
  const auto change = [](const std::string& after, long ts_ms, const std::string& lsn) {
    return R"({"before":null,"after":)" + after +
           R"(,"source":{"version":"0.1.0","connector":"postgresql","name":"billing","ts_ms":)" +
           std::to_string(ts_ms - 3) + R"(,"db":"billing","schema":"public","table":"invoice",)" +
           R"("txId":771,"lsn":)" + lsn + R"(},"transaction":null,"op":"c","ts_ms":)" +
           std::to_string(ts_ms) + R"(,"ts_us":)" + std::to_string(ts_ms) + R"(000,"ts_ns":)" +
           std::to_string(ts_ms) + "000000}";
  };
  const std::string row = R"({"id":1001,"total":12.50,"note":null})";
  const std::string first = change(row, 1765000000000, "23911448");
  const std::string replay = change(row, 1765000042042, "23911448");
  const std::string edited =
      change(R"({"id":1001,"total":12.51,"note":null})", 1765000000000, "23911448");
  produce(env_.kafka_bootstrap, topic_,
          {event("0/16CDA18:0", R"({"id":1001})", first),
           event("0/16CDA18:0", R"({"id":1001})", replay),
           event("0/16CDA18:0", R"({"id":1001})", edited)});
  WalrelayProcess proc(inbox_yaml("  handlers:\n" + counting_handler(topic_)), "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count("SELECT count(*) FROM " + inbox_schema_ + ".quarantine", 1))
      << proc.logs();
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
  // printf '%s' '{"op":"c","before":null,"after":{"id":1001,"total":12.50,"note":null}}' |
  // sha256sum: the row values' digest, the same for the replay.
  EXPECT_EQ(
      pg_->value(ledger_sql("event_id || ' ' || decision || ' ' || duplicates || ' ' || "
                            "conflicts || ' ' || digest")),
      "0/16CDA18:0 APPLIED 1 1 " + sha256_hex(R"({"op":"c","before":null,"after":)" + row + "}"));
  EXPECT_EQ(pg_->value("SELECT string_agg(event_id || '=' || n, ',') FROM " + table("effects")),
            "0/16CDA18:0=1");
  const auto q = pg_->query("SELECT kafka_offset, reason FROM " + inbox_schema_ + ".quarantine");
  ASSERT_EQ(q.size(), 1U);
  EXPECT_EQ(q[0][0], "2");
  EXPECT_NE(q[0][1]->find("conflict"), std::string::npos) << *q[0][1];
}

// A batch decided at once passes its events to PostgreSQL as arrays: quotes, backslashes,
// non-ASCII text and a null key arrive as they were sent.
TEST_F(InboxTest, ABatchDecidedAtOnceKeepsEveryCharacterOfIdsKeysAndPayloads) {
  const std::string odd = R"({"s":"quote \" backslash \\ brace } comma , é €"})";
  TestEvent no_key = event("id \"2\" \\ ,{}", "", R"({"n":2})");
  no_key.key.reset();
  produce(env_.kafka_bootstrap, topic_, {event("id-1", "key \"1\" \\ é", odd), no_key});
  WalrelayProcess proc(inbox_yaml(""), "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count("SELECT count(*) FROM " + inbox_schema_ + ".events", 2)) << proc.logs();
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
  const auto rows = pg_->query("SELECT event_id, aggregate, payload->>'s', digest FROM " +
                               inbox_schema_ + ".events ORDER BY kafka_offset");
  ASSERT_EQ(rows.size(), 2U);
  EXPECT_EQ(rows[0][0], "id-1");
  EXPECT_EQ(rows[0][1], "key \"1\" \\ é");
  EXPECT_EQ(rows[0][2], "quote \" backslash \\ brace } comma , é €");
  EXPECT_EQ(rows[0][3], sha256_hex(odd));
  EXPECT_EQ(rows[1][0], "id \"2\" \\ ,{}");
  EXPECT_FALSE(rows[1][1].has_value());
  EXPECT_EQ(pg_->value(ledger_sql("string_agg(decision, ',')")), "APPLIED,APPLIED");
}

TEST_F(InboxTest, APayloadDigestHeaderThatDoesNotMatchTheValueIsQuarantined) {
  const std::string v = R"({"n":1})";
  produce(env_.kafka_bootstrap, topic_,
          {event("e-1", "k", v, {{"payload_digest", sha256_hex(R"({"n":0})")}}),
           event("e-2", "k", v, {{"payload_digest", sha256_hex(v)}})});
  WalrelayProcess proc(inbox_yaml(""), "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count(ledger_sql("count(*)"), 2)) << proc.logs();
  EXPECT_EQ(
      pg_->value(ledger_sql("string_agg(event_id || ' ' || decision, ',' ORDER BY event_id)")),
      "e-1 QUARANTINED,e-2 APPLIED");
  EXPECT_NE(
      pg_->value("SELECT reason FROM " + inbox_schema_ + ".quarantine").find("does not match"),
      std::string::npos);
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
}

// Without handlers the effect is a row of the events table (payload jsonb): a value that is not
// JSON is undecodable there, and its reason says so rather than blaming a handler.
TEST_F(InboxTest, AValueThatIsNotJsonWithoutHandlersIsQuarantinedAsUndecodable) {
  produce(env_.kafka_bootstrap, topic_, {event("j-1", "k", "not json"), event("j-2", "k", "{}")});
  WalrelayProcess proc(inbox_yaml(""), "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count(ledger_sql("count(*)"), 2)) << proc.logs();
  EXPECT_EQ(
      pg_->value(ledger_sql("string_agg(event_id || ' ' || decision, ',' ORDER BY event_id)")),
      "j-1 QUARANTINED,j-2 APPLIED");
  EXPECT_TRUE(pg_->value("SELECT reason FROM " + inbox_schema_ + ".quarantine")
                  .starts_with("undecodable (events table): "))
      << pg_->value("SELECT reason FROM " + inbox_schema_ + ".quarantine");
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
}

TEST_F(InboxTest, Version3Before2IsDeferredThenBothAppliedInOrder) {
  const std::string yaml =
      inbox_yaml("  version: header:version\n  handlers:\n" + counting_handler(topic_));
  produce(env_.kafka_bootstrap, topic_,
          {event("a-1", "inv-1", R"({"v":1})", {{"version", "1"}}),
           event("a-3", "inv-1", R"({"v":3})", {{"version", "3"}}),
           event("b-1", "inv-2", R"({"v":1})", {{"version", "1"}})});
  WalrelayProcess proc(yaml, "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count(ledger_sql("count(*)"), 3)) << proc.logs();
  EXPECT_EQ(
      pg_->value(ledger_sql("string_agg(event_id || ' ' || decision, ',' ORDER BY event_id)")),
      "a-1 APPLIED,a-3 DEFERRED,b-1 APPLIED");
  EXPECT_EQ(pg_->value("SELECT event_id || ' ' || version || ' ' || expected_version FROM " +
                       inbox_schema_ + ".deferred"),
            "a-3 3 2");
  // Version 2 closes the gap: 2 and then 3 are applied, in that order, in its transaction.
  produce(env_.kafka_bootstrap, topic_,
          {event("a-2", "inv-1", R"({"v":2})", {{"version", "2"}}),
           event("a-1", "inv-1", R"({"v":1})", {{"version", "1"}})});
  ASSERT_TRUE(wait_count(ledger_sql("count(*) FILTER (WHERE decision = 'APPLIED')"), 4))
      << proc.logs();
  ASSERT_TRUE(wait_count(ledger_sql("coalesce(sum(duplicates), 0)"), 1)) << proc.logs();
  EXPECT_EQ(pg_->value("SELECT string_agg(event_id || '=' || n, ',' ORDER BY seq) FROM " +
                       table("effects")),
            "a-1=1,b-1=1,a-2=1,a-3=1");
  EXPECT_EQ(count("SELECT count(*) FROM " + inbox_schema_ + ".deferred"), 0);
  EXPECT_EQ(
      pg_->value("SELECT string_agg(aggregate || '=' || last_version, ',' ORDER BY aggregate) "
                 "FROM " +
                 inbox_schema_ + ".versions"),
      "inv-1=3,inv-2=1");
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
}

TEST_F(InboxTest, AHandlerThatRaisesForOneEventQuarantinesOnlyThatEvent) {
  pg_->exec("CREATE FUNCTION " + table("apply") +
            "(id text, p jsonb) RETURNS void LANGUAGE plpgsql AS $$ "
            "BEGIN IF (p->>'poison')::boolean THEN RAISE EXCEPTION 'refused %', id; END IF; "
            "INSERT INTO " +
            table("effects") + " (event_id, n) VALUES (id, 1); END $$");
  const std::string yaml =
      inbox_yaml("  handlers:\n    - topic: " + topic_ + "\n      sql: \"select " + table("apply") +
                 "($2, $1::jsonb)\"\n");
  produce(env_.kafka_bootstrap, topic_,
          {event("h-1", "k", R"({"poison":false})"), event("h-2", "k", R"({"poison":true})"),
           event("h-3", "k", R"({"poison":false})")});
  WalrelayProcess proc(yaml, "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count(ledger_sql("count(*)"), 3)) << proc.logs();
  EXPECT_EQ(
      pg_->value("SELECT string_agg(event_id, ',' ORDER BY event_id) FROM " + table("effects")),
      "h-1,h-3");
  EXPECT_EQ(
      pg_->value(ledger_sql("string_agg(event_id || ' ' || decision, ',' ORDER BY event_id)")),
      "h-1 APPLIED,h-2 QUARANTINED,h-3 APPLIED");
  const auto q =
      pg_->query("SELECT event_id, sqlstate, reason FROM " + inbox_schema_ + ".quarantine");
  ASSERT_EQ(q.size(), 1U);
  EXPECT_EQ(q[0][0], "h-2");
  EXPECT_EQ(q[0][1], "P0001");
  EXPECT_NE(q[0][2]->find("refused h-2"), std::string::npos) << *q[0][2];
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
}

TEST_F(InboxTest, TwoInboxesInOneGroupWithRebalancesMidStreamApplyEachIdOnce) {
  // The test broker auto-creates topics with 3 partitions (tests/services/start.sh).
  constexpr int kRounds = 3;
  constexpr int kPerRound = 1000;
  const auto round = [&](int r) {
    std::vector<TestEvent> events;
    for (int i = r * kPerRound; i < (r + 1) * kPerRound; ++i) {
      TestEvent e = event("r-" + std::to_string(i), "a-" + std::to_string(i % 7),
                          "{\"n\":" + std::to_string(i) + "}");
      e.partition = i % 3;
      events.push_back(std::move(e));
    }
    produce(env_.kafka_bootstrap, topic_, events);
  };
  const std::string yaml =
      inbox_yaml("  handlers:\n" + counting_handler(topic_), "{max_events: 50, max_wait: 5ms}");
  const std::string applied = "SELECT count(*) FROM " + table("effects");
  round(0);
  WalrelayProcess a(yaml, "inbox-a");
  WalrelayProcess b(yaml, "inbox-b");
  start_inbox(a);
  ASSERT_TRUE(wait_count(applied, 300, 60s)) << a.logs();
  // B joins: the group takes partitions from A while A decides.
  start_inbox(b);
  round(1);
  ASSERT_TRUE(b.wait_for_log("assigned, from", 60s)) << b.logs();
  ASSERT_TRUE(wait_count(applied, 1500, 60s)) << a.logs() << b.logs();
  // B leaves: its partitions go back to A, which seeks to what B stored.
  EXPECT_EQ(b.stop(SIGTERM), 0) << b.logs();
  round(2);
  ASSERT_TRUE(wait_count(applied, kRounds * kPerRound, 60s)) << a.logs() << b.logs();
  ASSERT_TRUE(wait_count("SELECT coalesce(sum(next_offset), 0) FROM " + inbox_schema_ + ".offsets",
                         kRounds * kPerRound, 60s))
      << a.logs();
  EXPECT_EQ(a.stop(SIGTERM), 0) << a.logs();
  EXPECT_EQ(count(applied), kRounds * kPerRound);
  EXPECT_EQ(count("SELECT count(*) FROM " + table("effects") + " WHERE n <> 1"), 0);
  EXPECT_EQ(count(ledger_sql("count(*) FILTER (WHERE decision = 'APPLIED')")), kRounds * kPerRound);
  EXPECT_EQ(count("SELECT count(DISTINCT kafka_partition) FROM " + inbox_schema_ + ".offsets"), 3);
}

TEST_F(InboxTest, MetricsCountDecisionsPerTopicAndReadyFollowsTheAssignment) {
  produce(env_.kafka_bootstrap, topic_,
          {event("m-1", "k", R"({"n":1})"), event("m-1", "k", R"({"n":1})"),
           event("m-1", "k", R"({"n":2})"), event("m-2", "k", R"({"n":3})")});
  WalrelayProcess proc(inbox_yaml(""), "inbox");
  start_inbox(proc);
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  ASSERT_TRUE(wait_count(ledger_sql("count(*)"), 2)) << proc.logs();
  ASSERT_TRUE(wait_until([&] { return http_get(*port, "/ready").status == 200; }))
      << http_get(*port, "/ready").body << proc.logs();
  EXPECT_EQ(http_get(*port, "/live").status, 200);
  std::string body;
  const std::string t = "{topic=\"" + topic_ + "\",decision=";
  ASSERT_TRUE(wait_until([&] {
    body = http_get(*port, "/metrics").body;
    return body.find("walrelay_inbox_decisions_total" + t + "\"QUARANTINED\"} 1") !=
           std::string::npos;
  })) << body;
  EXPECT_NE(body.find("walrelay_inbox_decisions_total" + t + "\"APPLIED\"} 2"), std::string::npos)
      << body;
  EXPECT_NE(body.find("walrelay_inbox_decisions_total" + t + "\"DUPLICATE\"} 1"), std::string::npos)
      << body;
  EXPECT_NE(body.find("walrelay_inbox_assigned_partitions "), std::string::npos) << body;
  EXPECT_NE(body.find("walrelay_inbox_ready 1"), std::string::npos) << body;
  // The effects (m-1 and m-2 into the events table) were timed in the histogram's buckets.
  EXPECT_NE(body.find("# TYPE walrelay_inbox_handler_seconds histogram"), std::string::npos)
      << body;
  EXPECT_NE(body.find("walrelay_inbox_handler_seconds_bucket{le=\"0.001\"} "), std::string::npos)
      << body;
  EXPECT_NE(body.find("walrelay_inbox_handler_seconds_bucket{le=\"+Inf\"} "), std::string::npos)
      << body;
  EXPECT_EQ(body.find("walrelay_inbox_handler_seconds_count 0\n"), std::string::npos) << body;
  // All four records decided and committed: the assigned partition's lag is 0.
  const std::string lag = "walrelay_inbox_consumer_lag{topic=\"" + topic_ + "\",partition=\"0\"} ";
  ASSERT_TRUE(wait_until([&] {
    body = http_get(*port, "/metrics").body;
    return body.find(lag + "0\n") != std::string::npos;
  })) << body;
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
}

// A slow handler (0.4 s an event, one event a batch): /metrics shows the records not committed
// yet as the partition's lag while it works, and 0 once all are.
TEST_F(InboxTest, ConsumerLagShowsWhatIsNotCommittedYetThenZero) {
  produce(env_.kafka_bootstrap, topic_,
          {event("s-1", "k", "{}"), event("s-2", "k", "{}"), event("s-3", "k", "{}"),
           event("s-4", "k", "{}")});
  WalrelayProcess proc(
      inbox_yaml("  handlers:\n    - topic: " + topic_ + "\n      sql: \"select pg_sleep(0.4)\"\n",
                 "{max_events: 1, max_wait: 1ms}"),
      "inbox");
  start_inbox(proc);
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  const std::string lag = "walrelay_inbox_consumer_lag{topic=\"" + topic_ + "\",partition=\"0\"} ";
  std::string body;
  long seen = -1;
  ASSERT_TRUE(wait_until([&] {
    body = http_get(*port, "/metrics").body;
    const auto at = body.find(lag);
    if (at == std::string::npos) return false;
    seen = std::stol(body.substr(at + lag.size()));
    return seen > 0;
  })) << body;
  EXPECT_LE(seen, 4) << body;
  ASSERT_TRUE(wait_until([&] {
    body = http_get(*port, "/metrics").body;
    return body.find(lag + "0\n") != std::string::npos;
  })) << body;
  EXPECT_EQ(count(ledger_sql("count(*)")), 4);
  EXPECT_NE(body.find("walrelay_inbox_handler_seconds_bucket{le=\"0.25\"} 0\n"), std::string::npos)
      << body;
  EXPECT_NE(body.find("walrelay_inbox_handler_seconds_count 4\n"), std::string::npos) << body;
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
}

TEST_F(InboxTest, AHandlerThatCannotRunStopsTheInboxWithoutQuarantining) {
  produce(env_.kafka_bootstrap, topic_, {event("x-1", "k", R"({"n":1})")});
  WalrelayProcess proc(inbox_yaml("  handlers:\n    - topic: " + topic_ +
                                  "\n      sql: \"select no_such_function($1)\"\n"),
                       "inbox");
  start_inbox(proc);
  EXPECT_EQ(proc.wait_exit(), 1) << proc.logs();
  EXPECT_NE(proc.stderr_text().find("retrying cannot help"), std::string::npos) << proc.logs();
  // Nothing was decided: the event is read again once the handler is fixed.
  EXPECT_EQ(count(ledger_sql("count(*)")), 0);
  EXPECT_EQ(count("SELECT count(*) FROM " + inbox_schema_ + ".quarantine"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM " + inbox_schema_ + ".offsets"), 0);
}

TEST_F(InboxTest, ATombstoneIsSkippedAndItsOffsetAdvances) {
  TestEvent tombstone{"k", std::nullopt, {{"id", "t-1"}}};
  produce(env_.kafka_bootstrap, topic_, {tombstone, event("t-2", "k", R"({"n":2})")});
  WalrelayProcess proc(inbox_yaml(""), "inbox");
  start_inbox(proc);
  ASSERT_TRUE(
      wait_count("SELECT coalesce(sum(next_offset), 0) FROM " + inbox_schema_ + ".offsets", 2))
      << proc.logs();
  EXPECT_EQ(pg_->value(ledger_sql("string_agg(event_id || ' ' || decision, ',')")), "t-2 APPLIED");
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
}

TEST_F(InboxTest, RedriveAfterAHandlerFixAppliesTheQuarantinedEventThenItsDeferredOnes) {
  const auto define = [&](bool refuse) {
    pg_->exec("CREATE OR REPLACE FUNCTION " + table("apply") +
              "(id text, p jsonb) RETURNS void LANGUAGE plpgsql AS $$ BEGIN IF " +
              (refuse ? std::string("(p->>'poison')::boolean") : std::string("false")) +
              " THEN RAISE EXCEPTION 'refused %', id; END IF; INSERT INTO " + table("effects") +
              " (event_id, n) VALUES (id, 1); END $$");
  };
  define(true);
  const std::string yaml =
      inbox_yaml("  version: header:version\n  handlers:\n    - topic: " + topic_ +
                 "\n      sql: \"select " + table("apply") + "($2, $1::jsonb)\"\n");
  produce(env_.kafka_bootstrap, topic_,
          {event("h-1", "inv-1", R"({"poison":false})", {{"version", "1"}}),
           event("h-2", "inv-1", R"({"poison":true})", {{"version", "2"}}),
           event("h-3", "inv-1", R"({"poison":false})", {{"version", "3"}})});
  WalrelayProcess proc(yaml, "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count(ledger_sql("count(*)"), 3)) << proc.logs();
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
  // The quarantined version 2 holds version 3 of its aggregate.
  EXPECT_EQ(
      pg_->value(ledger_sql("string_agg(event_id || ' ' || decision, ',' ORDER BY event_id)")),
      "h-1 APPLIED,h-2 QUARANTINED,h-3 DEFERRED");

  define(false);  // the handler is fixed
  WalrelayProcess redrive(yaml, "redrive");
  redrive.start({"inbox", "redrive", "--config", redrive.config_path().string(), "--event-id",
                 "h-2", "--actor", "ops@example"});
  EXPECT_EQ(redrive.wait_exit(), 0) << redrive.logs();
  EXPECT_NE(redrive.stdout_text().find("h-2: APPLIED (and 1 deferred after it)"), std::string::npos)
      << redrive.logs();
  EXPECT_EQ(pg_->value("SELECT string_agg(event_id, ',' ORDER BY seq) FROM " + table("effects")),
            "h-1,h-2,h-3");
  EXPECT_EQ(
      pg_->value(ledger_sql("string_agg(event_id || ' ' || decision, ',' ORDER BY event_id)")),
      "h-1 APPLIED,h-2 APPLIED,h-3 APPLIED");
  EXPECT_EQ(count("SELECT count(*) FROM " + inbox_schema_ + ".quarantine"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM " + inbox_schema_ + ".deferred"), 0);
  const auto audit =
      pg_->query("SELECT actor, action, event_id, detail FROM " + inbox_schema_ + ".audit");
  ASSERT_EQ(audit.size(), 1U);
  EXPECT_EQ(audit[0][0], "ops@example");
  EXPECT_EQ(audit[0][1], "redrive");
  EXPECT_EQ(audit[0][2], "h-2");
  EXPECT_TRUE(audit[0][3]->starts_with("was QUARANTINED: handler: P0001")) << *audit[0][3];

  // An id the inbox holds nothing of: refused, nothing recorded.
  WalrelayProcess unknown(yaml, "redrive-unknown");
  unknown.start(
      {"inbox", "redrive", "--config", unknown.config_path().string(), "--event-id", "nope"});
  EXPECT_EQ(unknown.wait_exit(), 1) << unknown.logs();
  EXPECT_NE(unknown.stderr_text().find("nope: no quarantined or deferred event"), std::string::npos)
      << unknown.logs();
  EXPECT_EQ(count("SELECT count(*) FROM " + inbox_schema_ + ".audit"), 1);
}

TEST_F(InboxTest, RedriveRefusesAConflict) {
  produce(env_.kafka_bootstrap, topic_,
          {event("c-1", "k", R"({"n":1})"), event("c-1", "k", R"({"n":2})")});
  WalrelayProcess proc(inbox_yaml(""), "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count("SELECT count(*) FROM " + inbox_schema_ + ".quarantine", 1))
      << proc.logs();
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();
  WalrelayProcess redrive(inbox_yaml(""), "redrive");
  redrive.start(
      {"inbox", "redrive", "--config", redrive.config_path().string(), "--event-id", "c-1"});
  EXPECT_EQ(redrive.wait_exit(), 1) << redrive.logs();
  EXPECT_NE(redrive.stderr_text().find("a conflict"), std::string::npos) << redrive.logs();
  EXPECT_EQ(count("SELECT count(*) FROM " + inbox_schema_ + ".quarantine"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM " + inbox_schema_ + ".audit"), 0);
}

// Redrive decides a stored record with the arrival's own decode step: a payload that does not
// match its payload_digest header stays QUARANTINED (its effect never runs), and an id with two
// quarantined records of other contents is refused, not settled by taking the latest.
TEST_F(InboxTest, RedriveDecidesAsArrivalDoesAndRefusesTwoRecordsOfOneId) {
  const std::string yaml = inbox_yaml("  handlers:\n" + counting_handler(topic_));
  produce(env_.kafka_bootstrap, topic_,
          {event("m-1", "k", R"({"n":1})", {{"payload_digest", sha256_hex(R"({"n":0})")}}),
           event("t-1", "k", R"({"n":1})", {{"payload_digest", sha256_hex(R"({"n":0})")}}),
           event("t-1", "k", R"({"n":2})", {{"payload_digest", sha256_hex(R"({"n":9})")}})});
  WalrelayProcess proc(yaml, "inbox");
  start_inbox(proc);
  ASSERT_TRUE(wait_count("SELECT count(*) FROM " + inbox_schema_ + ".quarantine", 3))
      << proc.logs();
  EXPECT_EQ(proc.stop(SIGTERM), 0) << proc.logs();

  WalrelayProcess again(yaml, "redrive-m");
  again.start({"inbox", "redrive", "--config", again.config_path().string(), "--event-id", "m-1"});
  EXPECT_EQ(again.wait_exit(), 0) << again.logs();
  EXPECT_NE(again.stdout_text().find("m-1: QUARANTINED again"), std::string::npos) << again.logs();
  EXPECT_EQ(pg_->value(ledger_sql("decision") + " WHERE event_id = 'm-1'"), "QUARANTINED");
  EXPECT_EQ(count("SELECT count(*) FROM " + inbox_schema_ + ".quarantine WHERE event_id = 'm-1'"),
            1);
  EXPECT_EQ(count("SELECT count(*) FROM " + table("effects")), 0);

  WalrelayProcess two(yaml, "redrive-t");
  two.start({"inbox", "redrive", "--config", two.config_path().string(), "--event-id", "t-1"});
  EXPECT_EQ(two.wait_exit(), 1) << two.logs();
  EXPECT_NE(two.stderr_text().find("quarantined records of other contents"), std::string::npos)
      << two.logs();
  EXPECT_EQ(count("SELECT count(*) FROM " + inbox_schema_ + ".quarantine WHERE event_id = 't-1'"),
            2);
  EXPECT_EQ(count("SELECT count(*) FROM " + inbox_schema_ + ".audit WHERE event_id = 't-1'"), 0);
}

TEST_F(InboxTest, ABadConfigurationExits2NamingTheKey) {
  WalrelayProcess proc(inbox_yaml("  version: sometimes\n"), "inbox");
  start_inbox(proc);
  EXPECT_EQ(proc.wait_exit(), 2);
  EXPECT_NE(proc.stderr_text().find("inbox.version"), std::string::npos) << proc.logs();
}

}  // namespace
}  // namespace walrelay::itest
