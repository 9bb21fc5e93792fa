#pragma once

// Support for reconcile's integration tests (reconcile_test.cpp): an outbox table walrelay
// streams, `walrelay reconcile` run as a child process, and records produced by hand into a
// topic (the breaks a test makes).

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "harness.hpp"

namespace walrelay::itest {

/// What one `walrelay reconcile` run printed and returned.
struct ReconcileRun {
  int exit_code = WalrelayProcess::kNotRunning;
  std::string out;  ///< stdout: the summary or the JSON
  std::string err;  ///< stderr: the log
};

/// Runs `walrelay reconcile --config <config_yaml's file> <args>` to its end (at most `timeout`).
ReconcileRun run_reconcile(const std::string& config_yaml, const std::vector<std::string>& args,
                           std::chrono::milliseconds timeout = std::chrono::seconds(120));

/// Produces one record (key, value, headers in order) into `topic` and waits for its delivery;
/// throws std::runtime_error if it is not delivered within 30 s.
void produce_record(const std::string& bootstrap, const std::string& topic, const std::string& key,
                    const std::string& value,
                    const std::vector<std::pair<std::string, std::string>>& headers);

/// An outbox table walrelay streams to `<name>.outbox.Order` (timestamp column `created_at`), its
/// configuration (`yaml_`: heartbeat 1 s, reconcile.in_flight_limit 30 s) and helpers to deliver
/// events through the walrelay binary.
class ReconcileTest : public IntegrationTest {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    if (HasFatalFailure()) return;
    outbox_ = table("outbox");
    topic_ = name_ + ".outbox.Order";
    pg_->exec("CREATE TABLE " + outbox_ +
              " (event_id text PRIMARY KEY, aggregate_id text NOT NULL, aggregate_type text NOT "
              "NULL, payload jsonb, created_at timestamptz NOT NULL DEFAULT now())");
    yaml_ = yaml_with({});
  }

  /// The configuration of the outbox table, with `outbox_lines` added under its `outbox:`.
  std::string yaml_with(const std::vector<std::string>& outbox_lines) {
    std::vector<std::string> lines = {"event_id: event_id",
                                      "aggregate_id: aggregate_id",
                                      "aggregate_type: aggregate_type",
                                      "payload: payload",
                                      "timestamp: created_at",
                                      "topic: \"" + name_ + ".outbox.{aggregate_type}\""};
    lines.insert(lines.end(), outbox_lines.begin(), outbox_lines.end());
    auto c = make_config({{outbox_, lines}});
    c.extra_yaml = "heartbeat:\n  interval: 1s\nreconcile:\n  in_flight_limit: 30s\n";
    state_dir_ = c.state_dir;
    return c.to_yaml();
  }

  /// Inserts events `e-<from>` .. `e-<to - 1>` in one statement.
  void insert_events(Pg& pg, int from, int to) {
    pg.exec("INSERT INTO " + outbox_ +
            " (event_id, aggregate_id, aggregate_type, payload) SELECT 'e-' || i, 'a-' || (i % "
            "17), 'Order', jsonb_build_object('n', i, 'amount', (i * 1.25)::numeric(12,2)) FROM "
            "generate_series(" +
            std::to_string(from) + ", " + std::to_string(to - 1) + ") i");
  }

  /// Starts walrelay, inserts `n` events and waits until they are all in the topic.
  void deliver(WalrelayProcess& proc, int n) {
    start_streaming(proc, name_);
    for (int i = 0; i < n; i += 500) insert_events(*pg_, i, std::min(n, i + 500));
    const auto seen = kafka_->read_at_least({topic_}, static_cast<std::size_t>(n));
    ASSERT_GE(seen.size(), static_cast<std::size_t>(n));
  }

  std::string outbox_;
  std::string topic_;
  std::string yaml_;
  std::string
      state_dir_;  ///< source.state_dir: the break-age file is `<state_dir>/<name>.reconcile`
};

/// The breaks of a `--json` report (`out`: a run's stdout) as "class:id" strings, sorted; throws
/// if it does not parse.
std::vector<std::string> json_breaks(const std::string& out);

}  // namespace walrelay::itest
