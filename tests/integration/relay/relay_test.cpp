// The polling outbox relay (source.mode poll, docs/relay.md) against real PostgreSQL and Kafka:
// the seed article's three assertions (atomicity, a crash between Kafka's acknowledgement and
// the COMMIT, a poison row), rows the builder refuses, a row whose transaction commits late, and
// the same records as the WAL mode.

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "relay_support.hpp"

namespace walrelay::itest {
namespace {

// The seed article's first assertion: a rolled-back business transaction leaves no outbox row,
// so the relay has nothing to publish; the committed one next to it is published.
TEST_F(RelayTest, RolledBackTransactionLeavesNoRowAndNoEvent) {
  create_outbox("event_outbox");
  pg_->exec("CREATE TABLE " + table("invoices") + " (id int PRIMARY KEY, status text)");
  pg_->exec("INSERT INTO " + table("invoices") + " VALUES (1, 'open'), (2, 'open')");
  WalrelayProcess relay(poll_yaml({{table("event_outbox"), outbox_lines()}}), "relay");
  relay.start();
  const std::string insert_sql =
      "INSERT INTO " + table("event_outbox") + " (subscription_id, event_type, payload) VALUES ";
  pg_->rollback({"UPDATE " + table("invoices") + " SET status = 'paid' WHERE id = 1",
                 insert_sql + "('sub-1', 'invoice_paid', '{\"invoice\": 1}')"});
  pg_->commit({"UPDATE " + table("invoices") + " SET status = 'paid' WHERE id = 2",
               insert_sql + "('sub-2', 'invoice_paid', '{\"invoice\": 2}')"});
  ASSERT_TRUE(wait_until([&] { return count_status("event_outbox", "sent") == 1; }))
      << relay.logs();
  EXPECT_EQ(pg_->value("SELECT count(*) FROM " + table("event_outbox")), "1");
  const auto records = kafka_->read_all({topic_for("invoice_paid")});
  ASSERT_EQ(records.size(), 1u) << describe(records);
  EXPECT_EQ(records[0].key, "sub-2");
  EXPECT_EQ(records[0].value, "{\"invoice\": 2}");
  EXPECT_EQ(records[0].header("id"), pg_->value("SELECT event_id FROM " + table("event_outbox")));
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
}

// The seed article's second assertion, made deterministic by the relay's test seam: the relay
// exits after Kafka acknowledged the designated event and before its claim transaction commits.
// The rows stay pending; the next run publishes them again with the same ids; a consumer that
// deduplicates by `id` applies each once.
TEST_F(RelayTest, CrashAfterAckBeforeCommitPublishesTheEventAgainWithTheSameId) {
  create_outbox("event_outbox");
  const std::string first = insert("event_outbox", "sub-1", "payment_failed", "'{\"n\": 1}'");
  const std::string designated = insert("event_outbox", "sub-2", "payment_failed", "'{\"n\": 2}'");
  const std::string third = insert("event_outbox", "sub-1", "payment_failed", "'{\"n\": 3}'");
  const std::string yaml = poll_yaml({{table("event_outbox"), outbox_lines()}});
  {
    WalrelayProcess crashing(yaml, "relay-crash");
    ::setenv("WALRELAY_RELAY_TEST_CRASH_AFTER_ACK", designated.c_str(), 1);
    crashing.start();
    ::unsetenv("WALRELAY_RELAY_TEST_CRASH_AFTER_ACK");
    EXPECT_EQ(crashing.wait_exit(), 86) << crashing.logs();
  }
  EXPECT_EQ(count_status("event_outbox", "pending"), 3);
  auto records = kafka_->read_all({topic_for("payment_failed")});
  ASSERT_EQ(records.size(), 3u) << describe(records);
  WalrelayProcess relay(yaml, "relay");
  relay.start();
  ASSERT_TRUE(wait_drained("event_outbox")) << relay.logs();
  EXPECT_EQ(status_of("event_outbox", designated), "sent");
  records = kafka_->read_all({topic_for("payment_failed")});
  std::map<std::string, std::vector<KafkaRecord>> by_id;
  for (const KafkaRecord& r : records) by_id[r.header("id")].push_back(r);
  ASSERT_EQ(by_id.size(), 3u) << describe(records);  // the effect, deduplicated by id: once each
  ASSERT_EQ(by_id[designated].size(), 2u) << describe(records);
  EXPECT_EQ(by_id[designated][0].value, by_id[designated][1].value);
  EXPECT_EQ(by_id[designated][0].key, by_id[designated][1].key);
  EXPECT_EQ(by_id[first].size(), 2u);
  EXPECT_EQ(by_id[third].size(), 2u);
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
}

// The seed article's third assertion: a row Kafka keeps refusing ends `failed` after
// max_attempts, with the reason, instead of staying at the head; other keys flow meanwhile, and
// the failed row's later rows of its key wait behind it (failed_blocks_key: true). Kafka refuses
// it for real: its topic accepts no record timestamp older than an hour
// (message.timestamp.before.max.ms, KIP-937) and the row's timestamp column says 2000, so the
// broker answers INVALID_TIMESTAMP at each try.
TEST_F(RelayTest, RowFailingMaxAttemptsTimesEndsFailedAndOtherKeysFlow) {
  create_outbox("event_outbox");
  create_topic(env_.kafka_bootstrap, topic_for("poison"), 1,
               {{"message.timestamp.before.max.ms", "3600000"}});
  WalrelayProcess relay(poll_yaml({{table("event_outbox"), outbox_lines()}}, "  max_attempts: 3\n"),
                        "relay");
  relay.start();
  const std::string poison =
      pg_->value("INSERT INTO " + table("event_outbox") +
                 " (subscription_id, event_type, payload, created_at) VALUES ('sub-p', 'poison', "
                 "'{\"n\": 1}', '2000-01-01 00:00:00+00') RETURNING event_id");
  const std::string behind = insert("event_outbox", "sub-p", "healthy", "'{\"n\": 2}'");
  std::vector<std::string> healthy;
  // A steady trickle of other keys, so that every try of the poison row has a batch in which
  // Kafka acknowledged something (without one, a failure cannot be told from an outage).
  const bool failed = wait_until(
      [&] {
        healthy.push_back(insert("event_outbox", "sub-" + std::to_string(healthy.size()), "healthy",
                                 "'{\"n\": 0}'"));
        return status_of("event_outbox", poison) == "failed";
      },
      90s, 300ms);
  ASSERT_TRUE(failed) << "status " << status_of("event_outbox", poison) << ", attempts "
                      << pg_->value("SELECT attempts FROM " + table("event_outbox") +
                                    " WHERE event_id = " + sql_literal(poison))
                      << "\n"
                      << relay.logs();
  EXPECT_EQ(pg_->value("SELECT attempts FROM " + table("event_outbox") +
                       " WHERE event_id = " + sql_literal(poison)),
            "3");
  EXPECT_NE(pg_->value("SELECT last_error FROM " + table("event_outbox") +
                       " WHERE event_id = " + sql_literal(poison)),
            "");
  ASSERT_TRUE(wait_until([&] {
    return std::stol(pg_->value("SELECT count(*) FROM " + table("event_outbox") +
                                " WHERE status = 'pending' AND subscription_id <> 'sub-p'")) == 0;
  })) << relay.logs();
  EXPECT_EQ(status_of("event_outbox", behind), "pending");  // blocked by the failed row
  const auto records = kafka_->read_all({topic_for("healthy")});
  std::set<std::string> ids;
  for (const KafkaRecord& r : records) ids.insert(r.header("id"));
  for (const std::string& id : healthy) EXPECT_TRUE(ids.contains(id)) << id;
  // `behind` may have been published once, in flight beside the poison row's first try (not
  // marked sent: it is published again once the failed row is dealt with); never with the
  // retries, where the failing row is published alone on its key.
  EXPECT_LE(std::count_if(records.begin(), records.end(),
                          [&](const KafkaRecord& r) { return r.header("id") == behind; }),
            1);
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
}

// Rows the record builder refuses are `failed` at once with the reason and never published,
// never blocking other keys: a payload that is not JSON, a NULL aggregate id, an empty one.
TEST_F(RelayTest, UnpublishableRowsAreFailedAtOnceWithTheReason) {
  create_outbox("event_outbox", "text");
  const std::string not_json = insert("event_outbox", "sub-1", "order", "'not json'");
  const std::string null_key = insert("event_outbox", "NULL", "order", "'{}'");
  const std::string empty_key = insert("event_outbox", "", "order", "'{}'");
  const std::string fine = insert("event_outbox", "sub-2", "order", "'{\"ok\": true}'");
  WalrelayProcess relay(poll_yaml({{table("event_outbox"), outbox_lines()}}), "relay");
  relay.start();
  ASSERT_TRUE(wait_drained("event_outbox")) << relay.logs();
  for (const std::string& id : {not_json, null_key, empty_key}) {
    EXPECT_EQ(status_of("event_outbox", id), "failed") << id;
    EXPECT_EQ(pg_->value("SELECT attempts FROM " + table("event_outbox") +
                         " WHERE event_id = " + sql_literal(id)),
              "0");
  }
  auto reason = [&](const std::string& id) {
    return pg_->value("SELECT last_error FROM " + table("event_outbox") +
                      " WHERE event_id = " + sql_literal(id));
  };
  EXPECT_NE(reason(not_json).find("is not JSON"), std::string::npos) << reason(not_json);
  EXPECT_NE(reason(null_key).find("missing or NULL"), std::string::npos) << reason(null_key);
  EXPECT_NE(reason(empty_key).find("empty string"), std::string::npos) << reason(empty_key);
  EXPECT_EQ(status_of("event_outbox", fine), "sent");
  const auto records = kafka_->read_all({topic_for("order")});
  ASSERT_EQ(records.size(), 1u) << describe(records);
  EXPECT_EQ(records[0].header("id"), fine);
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
}

// A poller that tracks a high-water id loses a row whose transaction commits after a later row
// was seen; the relay reads every pending row at each claim, so the late row is published.
TEST_F(RelayTest, RowCommittedAfterALaterRowWasPublishedIsStillPublished) {
  create_outbox("event_outbox");
  WalrelayProcess relay(poll_yaml({{table("event_outbox"), outbox_lines()}}), "relay");
  relay.start();
  Pg late(env_.pg_conninfo);
  late.exec("BEGIN");
  const std::string early_seq =
      late.value("INSERT INTO " + table("event_outbox") +
                 " (subscription_id, event_type, payload) VALUES ('sub-late', 'evt', '{\"n\": 1}') "
                 "RETURNING seq");
  const std::string later = insert("event_outbox", "sub-other", "evt", "'{\"n\": 2}'");
  ASSERT_TRUE(wait_until([&] { return status_of("event_outbox", later) == "sent"; }))
      << relay.logs();
  late.exec("COMMIT");
  ASSERT_TRUE(wait_drained("event_outbox")) << relay.logs();
  EXPECT_LT(std::stol(early_seq), std::stol(pg_->value("SELECT seq FROM " + table("event_outbox") +
                                                       " WHERE event_id = " + sql_literal(later))));
  const auto records = kafka_->read_at_least({topic_for("evt")}, 2);
  ASSERT_EQ(records.size(), 2u) << describe(records);
  std::set<std::string> keys;
  for (const KafkaRecord& r : records) keys.insert(r.key.value_or(""));
  EXPECT_TRUE(keys.contains("sub-late"));
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
}

// Consumers cannot tell a polled event from one read from the WAL: the logical connector and
// the relay run on the same outbox table and publish to the same topic; every event arrives
// twice, the two records identical in topic, partition, key, value, headers (in order) and
// timestamp.
TEST_F(RelayTest, LogicalAndPollModePublishByteIdenticalRecords) {
  pg_->exec("CREATE TABLE " + table("event_outbox") +
            " (event_id uuid PRIMARY KEY, subscription_id text NOT NULL, event_type text NOT NULL, "
            "payload jsonb, amount numeric(12,2), seen boolean, at timestamptz, "
            "status text NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0, "
            "created_at timestamptz NOT NULL DEFAULT now(), sent_at timestamptz)");
  std::vector<std::string> lines = {
      "event_id: event_id",
      "aggregate_id: subscription_id",
      "aggregate_type: event_type",
      "payload: payload",
      "event_type: event_type",
      "timestamp: created_at",
      "payload_digest: true",
      "topic: \"" + name_ + ".{aggregate_type}\"",
      "additional: {amount: header, seen: \"header:seen_flag\", at: header}"};
  WalrelayProcess logical(make_config({{table("event_outbox"), lines}}).to_yaml(), "logical");
  start_streaming(logical, name_);
  WalrelayProcess relay(poll_yaml({{table("event_outbox"), lines}}), "relay");
  relay.start();
  pg_->exec(
      "INSERT INTO " + table("event_outbox") +
      " (event_id, subscription_id, event_type, payload, amount, seen, at) VALUES "
      "('6f1c1f5e-0000-4000-8000-000000000001', 'sub-1', 'invoice_paid', "
      "'{\"amount_cents\": 1999, \"currency\": \"EUR\", \"note\": \"caf\\u00e9 \\\"x\\\"\"}', "
      "19.90, true, '2026-12-02 10:00:00.123456+01'), "
      "('6f1c1f5e-0000-4000-8000-000000000002', 'sub-2', 'invoice_paid', "
      "'[1, 2.50, {\"a\": null}]', NULL, false, NULL), "
      "('6f1c1f5e-0000-4000-8000-000000000003', 'sub-1', 'payment_failed', "
      "'\"just a string\"', -0.5, NULL, '1999-01-01 00:00:00+00')");
  const std::vector<std::string> topics = {topic_for("invoice_paid"), topic_for("payment_failed")};
  const auto records = kafka_->read_at_least(topics, 6, 60s);
  ASSERT_TRUE(wait_drained("event_outbox")) << relay.logs();
  std::map<std::string, std::vector<KafkaRecord>> by_id;
  for (const KafkaRecord& r : records) by_id[r.header("id")].push_back(r);
  ASSERT_EQ(by_id.size(), 3u) << describe(records);
  for (auto& [id, pair] : by_id) {
    ASSERT_EQ(pair.size(), 2u) << id << "\n" << describe(records);
    EXPECT_EQ(pair[0].topic, pair[1].topic) << id;
    EXPECT_EQ(pair[0].partition, pair[1].partition) << id;
    EXPECT_EQ(pair[0].key, pair[1].key) << id;
    EXPECT_EQ(pair[0].value, pair[1].value) << id;
    EXPECT_EQ(pair[0].header_list, pair[1].header_list) << id;
    EXPECT_EQ(pair[0].timestamp_ms, pair[1].timestamp_ms) << id;
  }
  const KafkaRecord& first = by_id["6f1c1f5e-0000-4000-8000-000000000001"][0];
  EXPECT_EQ(first.header("amount"), "19.90");
  EXPECT_EQ(first.header("seen_flag"), "true");
  EXPECT_EQ(first.header("eventType"), "invoice_paid");
  EXPECT_EQ(
      first.timestamp_ms,
      std::stoll(pg_->value("SELECT floor(extract(epoch FROM created_at) * 1000)::bigint FROM " +
                            table("event_outbox") + " LIMIT 1")));
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
  logical.kill();
}

// What poll mode refuses before it claims anything (exit 2, naming the key): a column the table
// lacks, a row-change table.
TEST_F(RelayTest, MissingColumnAndRowChangeTableAreRefusedNamingTheKey) {
  create_outbox("event_outbox");
  std::vector<std::string> lines = outbox_lines();
  lines.emplace_back("  sent_at: published_at");
  WalrelayProcess missing(poll_yaml({{table("event_outbox"), lines}}), "relay-missing");
  missing.start();
  EXPECT_EQ(missing.wait_exit(), 2) << missing.logs();
  EXPECT_NE(missing.stderr_text().find("tables[0].outbox.poll.sent_at: " + table("event_outbox") +
                                       " has no column \"published_at\""),
            std::string::npos)
      << missing.logs();
  pg_->exec("CREATE TABLE " + table("invoices") + " (id int PRIMARY KEY)");
  WalrelayProcess row_table(
      poll_yaml({{table("event_outbox"), outbox_lines()}, {table("invoices")}}), "relay-rows");
  row_table.start({"check", "--config", row_table.config_path().string()});
  EXPECT_EQ(row_table.wait_exit(), 2) << row_table.logs();
  EXPECT_NE(row_table.stderr_text().find("tables[1]: row-change tables need the WAL"),
            std::string::npos)
      << row_table.logs();
}

// A status column that cannot hold a configured status (a CHECK constraint, a varchar too short)
// and an order_by column that may be NULL are refused before anything is claimed (exit 2, naming
// the key): the first would fail every batch that records a failure, the second would break the
// key's order.
TEST_F(RelayTest, AStatusTheColumnCannotHoldAndANullableOrderByAreRefused) {
  create_outbox("event_outbox");
  pg_->exec("ALTER TABLE " + table("event_outbox") +
            " ADD CONSTRAINT only_two CHECK (status IN ('pending', 'sent'))");
  WalrelayProcess checked(poll_yaml({{table("event_outbox"), outbox_lines()}}), "relay-check");
  checked.start();
  EXPECT_EQ(checked.wait_exit(), 2) << checked.logs();
  EXPECT_NE(checked.stderr_text().find("tables[0].outbox.poll.statuses.failed: column \"status\" "
                                       "of " +
                                       table("event_outbox") + " (text) cannot hold 'failed'"),
            std::string::npos)
      << checked.logs();
  EXPECT_EQ(checked.stderr_text().find("statuses.pending"), std::string::npos) << checked.logs();

  pg_->exec("ALTER TABLE " + table("event_outbox") + " DROP CONSTRAINT only_two");
  pg_->exec("ALTER TABLE " + table("event_outbox") +
            " ALTER COLUMN status TYPE varchar(4), ALTER COLUMN status SET DEFAULT 'sent'");
  WalrelayProcess short_column(poll_yaml({{table("event_outbox"), outbox_lines()}}), "relay-short");
  short_column.start({"check", "--config", short_column.config_path().string()});
  EXPECT_EQ(short_column.wait_exit(), 2) << short_column.logs();
  EXPECT_NE(short_column.logs().find("outbox.poll.statuses.pending: column \"status\""),
            std::string::npos)
      << short_column.logs();
  EXPECT_NE(short_column.logs().find("outbox.poll.statuses.failed: column \"status\""),
            std::string::npos)
      << short_column.logs();

  pg_->exec("ALTER TABLE " + table("event_outbox") +
            " ALTER COLUMN status TYPE text, ADD COLUMN position bigint");
  std::vector<std::string> lines = outbox_lines();
  for (auto& line : lines) {
    if (line == "  order_by: seq") line = "  order_by: position";
  }
  WalrelayProcess nullable(poll_yaml({{table("event_outbox"), lines}}), "relay-nullable");
  nullable.start();
  EXPECT_EQ(nullable.wait_exit(), 2) << nullable.logs();
  EXPECT_NE(nullable.stderr_text().find("tables[0].outbox.poll.order_by: column \"position\" of " +
                                        table("event_outbox") + " may be NULL"),
            std::string::npos)
      << nullable.logs();
}

// An ordinary role (no REPLICATION) drains the outbox once it may SELECT and UPDATE it; without
// UPDATE, `check` and `run` refuse it naming the GRANT.
TEST_F(RelayTest, AnOrdinaryRoleWithoutUpdateIsRefusedNamingTheGrant) {
  create_outbox("event_outbox");
  const std::string role = name_ + "_relay";
  const ScopedRole scoped_role(*pg_, role);
  pg_->exec("ALTER ROLE " + sql_ident(role) + " NOREPLICATION");
  pg_->exec("GRANT USAGE ON SCHEMA " + schema_ + " TO " + sql_ident(role));
  pg_->exec("GRANT SELECT ON " + table("event_outbox") + " TO " + sql_ident(role));
  conninfo_suffix_ = " user=" + role;
  const std::string yaml = poll_yaml({{table("event_outbox"), outbox_lines()}});
  WalrelayProcess check(yaml, "check");
  check.start({"check", "--config", check.config_path().string()});
  EXPECT_EQ(check.wait_exit(), 2) << check.logs();
  EXPECT_NE(check.stdout_text().find("GRANT SELECT, UPDATE ON \"" + schema_ +
                                     "\".\"event_outbox\" TO <role>"),
            std::string::npos)
      << check.logs();
  pg_->exec("GRANT UPDATE ON " + table("event_outbox") + " TO " + sql_ident(role));
  // Granted: check passes and prints the set-up SQL (partial indexes, the notify trigger).
  WalrelayProcess granted(yaml, "check-granted");
  granted.start({"check", "--config", granted.config_path().string()});
  EXPECT_EQ(granted.wait_exit(), 0) << granted.logs();
  EXPECT_NE(granted.stdout_text().find("WHERE \"status\" = 'pending';"), std::string::npos)
      << granted.logs();
  EXPECT_NE(granted.stdout_text().find("PERFORM pg_notify('" + channel_ + "', '')"),
            std::string::npos)
      << granted.logs();
  const std::string id = insert("event_outbox", "sub-1", "evt", "'{}'");
  WalrelayProcess relay(yaml, "relay");
  relay.start();
  ASSERT_TRUE(wait_drained("event_outbox")) << relay.logs();
  EXPECT_EQ(status_of("event_outbox", id), "sent");
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
}

}  // namespace
}  // namespace walrelay::itest
