// The polling relay's operations (docs/relay.md "Retention", "Metrics and health") against real
// PostgreSQL and Kafka: the retention job deletes only old sent rows, and /metrics and /ready
// tell what a user checks by hand.

#include "relay_support.hpp"

namespace walrelay::itest {
namespace {

class RelayOpsTest : public RelayTest {
 protected:
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
