// The polling relay's operations (docs/relay.md "Retention", "Status", "Retry", "Metrics and
// health") against real PostgreSQL and Kafka: the retention job deletes only old sent rows,
// `walrelay outbox status` shows the backlog and the poison rows, `walrelay outbox retry` puts
// failed rows back with an audit row, and /metrics and /ready tell what a user checks by hand.

#include <regex>

#include "relay_support.hpp"

namespace walrelay::itest {
namespace {

class RelayOpsTest : public RelayTest {
 protected:
  /// A finished `walrelay outbox` command: its process (output) and exit code.
  struct Ran {
    std::unique_ptr<WalrelayProcess> proc;
    int code = WalrelayProcess::kNotRunning;
    [[nodiscard]] std::string out() const { return proc->stdout_text(); }
    [[nodiscard]] std::string err() const { return proc->stderr_text(); }
    [[nodiscard]] std::string logs() const { return proc->logs(); }
  };

  /// Runs `walrelay outbox <args[0]> --config <yaml> <args[1..]>` to its end.
  Ran outbox(const std::string& yaml, const std::vector<std::string>& args) {
    Ran ran{std::make_unique<WalrelayProcess>(yaml, "outbox-" + args.at(0))};
    std::vector<std::string> argv = {"outbox", args.at(0), "--config",
                                     ran.proc->config_path().string()};
    argv.insert(argv.end(), args.begin() + 1, args.end());
    ran.proc->start(argv);
    ran.code = ran.proc->wait_exit(30s);
    return ran;
  }

  /// Inserts a row with the given status, key, type and SQL expressions for created_at and
  /// sent_at; returns its event id.
  std::string row(const std::string& status, const std::string& key, const std::string& type,
                  const std::string& created_at = "clock_timestamp()",
                  const std::string& sent_at = "NULL", const std::string& extra_cols = "",
                  const std::string& extra_vals = "") {
    return pg_->value("INSERT INTO " + table("event_outbox") +
                      " (subscription_id, event_type, payload, status, created_at, sent_at" +
                      extra_cols + ") VALUES (" + sql_literal(key) + ", " + sql_literal(type) +
                      ", '{\"n\": 1}', " + sql_literal(status) + ", " + created_at + ", " +
                      sent_at + extra_vals + ") RETURNING event_id");
  }

  /// One sample of the exposition, e.g. `walrelay_relay_failed_rows{table="…",…}`; nullopt when
  /// absent.
  static std::optional<double> metric_value(const std::string& body, const std::string& series) {
    const std::size_t at = body.find("\n" + series + " ");
    if (at == std::string::npos) return std::nullopt;
    return std::stod(body.substr(at + series.size() + 2));
  }

  [[nodiscard]] std::string series(const std::string& name, const std::string& type) const {
    return name + "{table=\"" + table("event_outbox") + "\",aggregate_type=\"" + type + "\"}";
  }
};

// relay.retention deletes the sent rows whose sent_at is older than it, in statements of at most
// 1,000 rows, and nothing else: not a pending or failed row (even one with an old sent_at), not a
// recent sent row.
TEST_F(RelayOpsTest, RetentionDeletesOnlyOldSentRows) {
  create_outbox("event_outbox");
  const std::string t = table("event_outbox");
  pg_->exec("INSERT INTO " + t +
            " (subscription_id, event_type, payload, status, created_at, sent_at) SELECT 'old-' "
            "|| g, 'done', '{}', 'sent', now() - interval '10 days', now() - interval '9 days' "
            "FROM generate_series(1, 2500) g");
  const std::string recent =
      row("sent", "recent", "done", "now() - interval '2 days'", "now() - interval '12 hours'");
  const std::string failed =
      row("failed", "k-1", "stuck", "now() - interval '10 days'", "now() - interval '9 days'");
  // Behind the failed row of its key: stays pending while the relay runs.
  const std::string pending =
      row("pending", "k-1", "stuck", "now() - interval '9 days'", "now() - interval '9 days'");
  metrics_listen_ = "127.0.0.1:0";
  WalrelayProcess relay(poll_yaml({{t, outbox_lines()}}, "  retention: 1d\n"), "relay");
  relay.start();
  const auto port = metrics_port(relay);
  ASSERT_TRUE(port) << relay.logs();
  ASSERT_TRUE(wait_until(
      [&] {
        return pg_->value("SELECT count(*) FROM " + t + " WHERE subscription_id LIKE 'old-%'") ==
               "0";
      },
      20s, 200ms))
      << relay.logs();
  EXPECT_EQ(status_of("event_outbox", recent), "sent");
  EXPECT_EQ(status_of("event_outbox", failed), "failed");
  EXPECT_EQ(status_of("event_outbox", pending), "pending");
  EXPECT_EQ(pg_->value("SELECT count(*) FROM " + t), "3");
  // Three statements (1,000 + 1,000 + 500 rows), counted.
  EXPECT_TRUE(wait_until([&] {
    return metric_value(http_get(*port, "/metrics").body,
                        "walrelay_relay_retention_deleted_rows_total") == 2500.0;
  })) << http_get(*port, "/metrics").body;
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
}

// `walrelay outbox status`: the backlog and the oldest pending age per aggregate type, and the
// failed rows with their attempts and last_error; --json for machines. Refusals exit 2.
TEST_F(RelayOpsTest, StatusShowsBacklogAndFailedRows) {
  create_outbox("event_outbox");
  const std::string t = table("event_outbox");
  row("pending", "a-1", "InvoiceCreated", "now() - interval '300 seconds'");
  row("pending", "a-2", "InvoiceCreated");
  row("pending", "b-1", "InvoicePaid", "now() - interval '60 seconds'");
  row("sent", "c-1", "InvoicePaid", "now() - interval '1 day'", "now()");
  const std::string poison =
      row("failed", "d-1", "InvoicePaid", "now() - interval '1 hour'", "NULL",
          ", attempts, last_error", ", 8, 'Kafka refused the record: Broker: Invalid timestamp'");
  const std::string yaml = poll_yaml({{t, outbox_lines()}});

  auto json = outbox(yaml, {"status", "--json"});
  ASSERT_EQ(json.code, 0) << json.logs();
  const std::string all_out = json.out();  // after the harness's heading line
  ASSERT_NE(all_out.find('{'), std::string::npos) << json.logs();
  const std::string doc = all_out.substr(all_out.find('{'));
  EXPECT_EQ(json_string_at(doc, "/tables/0/table"), t) << doc;
  EXPECT_EQ(json_at(doc, "/tables/0/pending"), "3") << doc;
  EXPECT_EQ(json_at(doc, "/tables/0/failed"), "1") << doc;
  EXPECT_GE(std::stol(json_at(doc, "/tables/0/oldest_pending_s")), 300) << doc;
  EXPECT_LT(std::stol(json_at(doc, "/tables/0/oldest_pending_s")), 400) << doc;
  EXPECT_EQ(json_string_at(doc, "/tables/0/by_type/0/aggregate_type"), "InvoiceCreated") << doc;
  EXPECT_EQ(json_at(doc, "/tables/0/by_type/0/pending"), "2") << doc;
  EXPECT_EQ(json_at(doc, "/tables/0/by_type/0/failed"), "0") << doc;
  EXPECT_EQ(json_string_at(doc, "/tables/0/by_type/1/aggregate_type"), "InvoicePaid") << doc;
  EXPECT_EQ(json_at(doc, "/tables/0/by_type/1/pending"), "1") << doc;
  EXPECT_EQ(json_at(doc, "/tables/0/by_type/1/failed"), "1") << doc;
  const long paid_age = std::stol(json_at(doc, "/tables/0/by_type/1/oldest_pending_s"));
  EXPECT_GE(paid_age, 60) << doc;
  EXPECT_LT(paid_age, 160) << doc;
  EXPECT_EQ(json_string_at(doc, "/tables/0/failed_rows/0/event_id"), poison) << doc;
  EXPECT_EQ(json_at(doc, "/tables/0/failed_rows/0/attempts"), "8") << doc;
  EXPECT_EQ(json_string_at(doc, "/tables/0/failed_rows/0/last_error"),
            "Kafka refused the record: Broker: Invalid timestamp")
      << doc;
  EXPECT_EQ(json_string_at(doc, "/tables/0/failed_rows/0/aggregate_id"), "d-1") << doc;

  auto text = outbox(yaml, {"status"});
  ASSERT_EQ(text.code, 0) << text.logs();
  const std::string out = text.out();
  EXPECT_NE(out.find(t + " (tables[0]): 3 pending, oldest 3"), std::string::npos) << out;
  EXPECT_NE(out.find("; 1 failed"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(InvoiceCreated +2 +3\d\d +0)"))) << out;
  EXPECT_NE(out.find("id " + poison + " type InvoicePaid key d-1, attempts 8"), std::string::npos)
      << out;

  // A column the table lacks: exit 2 naming the key.
  std::vector<std::string> bad_lines = outbox_lines();
  bad_lines.back() = "  last_error: why_failed";
  auto bad = outbox(poll_yaml({{t, bad_lines}}), {"status"});
  EXPECT_EQ(bad.code, 2) << bad.logs();
  EXPECT_NE(bad.err().find("tables[0].outbox.poll.last_error"), std::string::npos) << bad.logs();
  // A bad key of the file: exit 2 naming it.
  auto bad_key = outbox(poll_yaml({{t, outbox_lines()}}, "  schema: Not-Plain\n"), {"status"});
  EXPECT_EQ(bad_key.code, 2) << bad_key.logs();
  EXPECT_NE(bad_key.err().find("relay.schema"), std::string::npos) << bad_key.logs();
  // A logical-mode configuration is refused with the reason.
  WalrelayConfig logical = make_config({{t, outbox_lines(false)}});
  logical.metrics_listen = "";
  auto refused = outbox(logical.to_yaml(), {"status"});
  EXPECT_EQ(refused.code, 2) << refused.logs();
  EXPECT_NE(refused.err().find("source.mode logical"), std::string::npos) << refused.logs();
}

// `walrelay outbox retry`: failed rows back to pending (attempts 0, last_error cleared) with an
// audit row each, the event's own columns untouched; an id that is not failed is reported and
// left as it is; then the relay publishes the rows put back.
TEST_F(RelayOpsTest, RetryPutsFailedRowsBackWithAnAuditRow) {
  create_outbox("event_outbox");
  const std::string t = table("event_outbox");
  const std::string f1 = row("failed", "k-1", "retried", "now() - interval '1 hour'", "NULL",
                             ", attempts, last_error", ", 8, 'boom'");
  const std::string f2 = row("failed", "k-2", "retried", "now() - interval '1 hour'", "NULL",
                             ", attempts, last_error", ", 3, 'bang'");
  const std::string behind = row("pending", "k-1", "retried");
  const std::string yaml = poll_yaml({{t, outbox_lines()}}, "  schema: " + schema_ + "\n");
  const std::string columns =
      "SELECT event_id, subscription_id, event_type, payload::text, seq, "
      "created_at FROM " +
      t + " WHERE event_id = ";
  const auto before = pg_->query(columns + sql_literal(f1));

  auto retry = outbox(yaml, {"retry", "--event-id", f1, "--event-id", behind, "--event-id",
                             "00000000-0000-0000-0000-000000000000", "--actor", "ops@example"});
  EXPECT_EQ(retry.code, 1) << retry.logs();  // two ids were not failed
  EXPECT_NE(retry.out().find(f1 + ": pending again"), std::string::npos) << retry.logs();
  EXPECT_NE(retry.err().find(behind + ": not changed: its status is pending"), std::string::npos)
      << retry.logs();
  EXPECT_NE(retry.err().find("00000000-0000-0000-0000-000000000000: not changed: no row"),
            std::string::npos)
      << retry.logs();
  EXPECT_NE(retry.err().find("audit: outbox retry by ops@example: 1 failed row(s) of " + t),
            std::string::npos)
      << retry.logs();
  const auto after = pg_->query("SELECT status, attempts, last_error IS NULL FROM " + t +
                                " WHERE event_id = " + sql_literal(f1));
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0][0], "pending");
  EXPECT_EQ(after[0][1], "0");
  EXPECT_EQ(after[0][2], "t");
  EXPECT_EQ(pg_->query(columns + sql_literal(f1)), before);  // the event itself is unchanged
  EXPECT_EQ(status_of("event_outbox", f2), "failed");
  EXPECT_EQ(status_of("event_outbox", behind), "pending");
  auto audit = pg_->query("SELECT actor, action, event_id, detail, at <= now() FROM " + schema_ +
                          ".audit ORDER BY id");
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0][0], "ops@example");
  EXPECT_EQ(audit[0][1], "outbox retry");
  EXPECT_EQ(audit[0][2], f1);
  const std::string detail = audit[0][3].value_or("");
  EXPECT_NE(detail.find("attempts 8, last_error boom"), std::string::npos) << detail;
  EXPECT_EQ(audit[0][4], "t");

  // --failed: every failed row, the actor defaulting to the OS user.
  auto all = outbox(yaml, {"retry", "--failed"});
  EXPECT_EQ(all.code, 0) << all.logs();
  EXPECT_EQ(count_status("event_outbox", "failed"), 0);
  audit = pg_->query("SELECT actor, event_id FROM " + schema_ + ".audit ORDER BY id");
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[1][1], f2);
  EXPECT_NE(audit[1][0], "");
  // Neither flag: refused by the command line.
  auto neither = outbox(yaml, {"retry"});
  EXPECT_EQ(neither.code, 2) << neither.logs();

  // The relay publishes the rows put back, the key's later row after its head.
  WalrelayProcess relay(yaml, "relay");
  relay.start();
  ASSERT_TRUE(wait_drained("event_outbox")) << relay.logs();
  const auto records = kafka_->read_all({topic_for("retried")});
  std::vector<std::string> k1;
  for (const KafkaRecord& r : records) {
    if (r.key == "k-1") k1.push_back(r.header("id"));
  }
  EXPECT_EQ(k1, (std::vector<std::string>{f1, behind})) << describe(records);
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
}

// /metrics and /ready on metrics.listen: the backlog per aggregate type, failed rows, ticks,
// batches and records; /ready answers 503 while the relay backs off (Kafka refuses the only row
// of every batch) and 200 again once it no longer does.
TEST_F(RelayOpsTest, MetricsAndReadyTellTheBacklogAndTheBackOff) {
  create_outbox("event_outbox");
  const std::string t = table("event_outbox");
  // Kafka refuses this topic's records older than an hour (message.timestamp.before.max.ms,
  // KIP-937): a batch of only that row is acknowledged by nobody, so the relay backs off.
  create_topic(env_.kafka_bootstrap, topic_for("poison"), 1,
               {{"message.timestamp.before.max.ms", "3600000"}});
  row("failed", "k-1", "held", "now() - interval '1 hour'");
  row("pending", "k-1", "held", "now() - interval '90 seconds'");  // behind the failed row
  insert("event_outbox", "k-2", "flowing", "'{\"n\": 2}'");
  metrics_listen_ = "127.0.0.1:0";
  WalrelayProcess relay(poll_yaml({{t, outbox_lines()}}), "relay");
  relay.start();
  const auto port = metrics_port(relay);
  ASSERT_TRUE(port) << relay.logs();
  std::string body;
  ASSERT_TRUE(wait_until(
      [&] {
        body = http_get(*port, "/metrics").body;
        return metric_value(body, series("walrelay_relay_failed_rows", "held")) == 1.0 &&
               metric_value(body, "walrelay_relay_records_published_total") == 1.0;
      },
      15s, 200ms))
      << body;
  EXPECT_EQ(metric_value(body, series("walrelay_relay_pending_rows", "held")), 1.0) << body;
  const auto age = metric_value(body, series("walrelay_relay_oldest_pending_seconds", "held"));
  ASSERT_TRUE(age) << body;
  EXPECT_GE(*age, 90.0) << body;
  EXPECT_LT(*age, 200.0) << body;
  EXPECT_GE(metric_value(body, "walrelay_relay_ticks_total").value_or(0), 1.0) << body;
  EXPECT_EQ(metric_value(body, "walrelay_relay_claimed_batches_total"), 1.0) << body;
  EXPECT_EQ(metric_value(body, "walrelay_relay_rows_sent_total"), 1.0) << body;
  EXPECT_EQ(metric_value(body, "walrelay_relay_backing_off"), 0.0) << body;
  EXPECT_EQ(http_get(*port, "/ready").status, 200);
  EXPECT_EQ(http_get(*port, "/live").status, 200);

  const std::string poison =
      row("pending", "k-3", "poison", "'2000-01-01 00:00:00+00'");  // alone in its batches
  pg_->exec("NOTIFY " + channel_);
  ASSERT_TRUE(wait_until([&] { return http_get(*port, "/ready").status == 503; }, 15s, 100ms))
      << relay.logs();
  const HttpResult not_ready = http_get(*port, "/ready");
  EXPECT_NE(not_ready.body.find("backing off"), std::string::npos) << not_ready.body;
  body = http_get(*port, "/metrics").body;
  EXPECT_EQ(metric_value(body, "walrelay_relay_backing_off"), 1.0) << body;
  EXPECT_GE(metric_value(body, "walrelay_relay_rollbacks_total").value_or(0), 1.0) << body;
  EXPECT_EQ(metric_value(body, "walrelay_relay_ready"), 0.0) << body;
  // The operator sets the row aside: the next tick claims nothing and the relay is ready again.
  pg_->exec("UPDATE " + t + " SET status = 'failed' WHERE event_id = " + sql_literal(poison));
  ASSERT_TRUE(wait_until([&] { return http_get(*port, "/ready").status == 200; }, 15s, 100ms))
      << relay.logs();
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
}

}  // namespace
}  // namespace walrelay::itest
