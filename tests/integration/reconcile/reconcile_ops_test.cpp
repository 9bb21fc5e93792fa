// `walrelay reconcile --schedule` and `--repair` on real PostgreSQL and Kafka (docs/reconcile.md
// "Schedule", "Repair"): a phantom made by hand is reported at every run with the same
// first-seen time and a growing age, also by a later run of another process, and /metrics shows
// it; a row whose event never reached Kafka is re-emitted as the connector's record and the next
// run is clean, while phantoms and conflicts are only reported; SIGTERM ends a scheduled run
// under way with exit 0.

#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "reconcile_support.hpp"

namespace walrelay::itest {
namespace {

using namespace std::chrono_literals;

/// One break of a `--json` report line.
struct JsonBreak {
  std::int64_t first_seen_ms = -1;
  std::int64_t age_s = -1;
};

/// The reports (one JSON object a line) a run printed, in order.
std::vector<std::string> json_reports(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.front() == '{') lines.push_back(line);
  }
  return lines;
}

/// The break with `id` in report `json`; first_seen_ms -1 when absent.
JsonBreak find_break(const std::string& json, const std::string& id) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) throw std::runtime_error("not JSON");
  JsonBreak out;
  for (auto table : doc["tables"].get_array()) {
    for (auto b : table["breaks"].get_array()) {
      if (std::string_view(b["id"]) != id) continue;
      out.first_seen_ms = std::int64_t(b["first_seen_ms"]);
      out.age_s = std::int64_t(b["age_s"]);
    }
  }
  return out;
}

/// The value of the sample `name{labels}` in a /metrics body, or -1.
double metric_value(const std::string& body, const std::string& series) {
  const auto at = body.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(body.substr(at + series.size() + 2));
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(ReconcileTest, ScheduleKeepsBreakAgesAndServesThemOnMetrics) {
  WalrelayProcess proc(yaml_);
  ASSERT_NO_FATAL_FAILURE(deliver(proc, 50));
  produce_record(env_.kafka_bootstrap, topic_, "a-1", R"({"n": -1})", {{"id", "ghost-s"}});

  WalrelayProcess sched(yaml_, "reconcile-schedule");
  sched.start(
      {"reconcile", "--config", sched.config_path().string(), "--schedule", "2s", "--json"});
  const auto port = metrics_port(sched);
  ASSERT_TRUE(port) << sched.logs();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (count_of(sched.stderr_text(), "reconcile: run done") < 2 &&
         std::chrono::steady_clock::now() < deadline && sched.running()) {
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_GE(count_of(sched.stderr_text(), "reconcile: run done"), 2u) << sched.logs();
  EXPECT_NE(sched.stderr_text().find("1 breaks (missing 0, phantom 1, conflict 0, in_flight 0)"),
            std::string::npos)
      << sched.logs();

  // The same first-seen time at both runs, and an age that grew by the period.
  const auto reports = json_reports(sched.stdout_text());
  ASSERT_GE(reports.size(), 2u) << sched.logs();
  const auto first = find_break(reports[0], "ghost-s");
  const auto second = find_break(reports[1], "ghost-s");
  ASSERT_GT(first.first_seen_ms, 0) << reports[0];
  EXPECT_EQ(second.first_seen_ms, first.first_seen_ms) << reports[1];
  EXPECT_GT(second.age_s, first.age_s) << reports[0] << "\n" << reports[1];

  const auto m = http_get(*port, "/metrics");
  ASSERT_EQ(m.status, 200);
  const std::string labels = "{table=\"" + outbox_ + "\",class=\"";
  EXPECT_EQ(metric_value(m.body, "walrelay_reconcile_open_breaks" + labels + "phantom\"}"), 1)
      << m.body;
  EXPECT_EQ(metric_value(m.body, "walrelay_reconcile_open_breaks" + labels + "missing\"}"), 0)
      << m.body;
  EXPECT_GE(
      metric_value(m.body, "walrelay_reconcile_oldest_break_age_seconds" + labels + "phantom\"}"),
      static_cast<double>(second.age_s))
      << m.body;
  EXPECT_GE(metric_value(m.body, "walrelay_reconcile_runs_total{result=\"breaks\"}"), 2) << m.body;
  EXPECT_GT(metric_value(m.body, "walrelay_reconcile_last_run_timestamp_seconds"), 1e9) << m.body;
  EXPECT_GT(metric_value(m.body, "walrelay_reconcile_last_run_duration_seconds"), 0) << m.body;
  EXPECT_EQ(http_get(*port, "/ready").status, 200);
  EXPECT_EQ(sched.stop(SIGTERM), 0) << sched.logs();

  // Kept across processes: the break-age file, and a later one-shot run reads it.
  std::ifstream state(state_dir_ + "/" + name_ + ".reconcile");
  const std::string kept((std::istreambuf_iterator<char>(state)), std::istreambuf_iterator<char>());
  EXPECT_NE(kept.find("\tphantom\tghost-s\n"), std::string::npos) << kept;
  const auto once = run_reconcile(yaml_, {"--json"});
  EXPECT_EQ(once.exit_code, 1) << once.err;
  EXPECT_EQ(find_break(json_reports(once.out).at(0), "ghost-s").first_seen_ms, first.first_seen_ms)
      << once.out;
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

TEST_F(ReconcileTest, SigtermStopsAScheduledRunUnderWayWithExitZero) {
  // A slot no connector streams never passes the snapshot: the first run waits for it (up to
  // reconcile.in_flight_limit, 30 s) when the signal comes.
  pg_->exec("SELECT pg_create_logical_replication_slot(" + sql_literal(name_) + ", 'wal2json')");
  insert_events(*pg_, 0, 10);
  WalrelayProcess sched(yaml_, "reconcile-schedule");
  sched.start({"reconcile", "--config", sched.config_path().string(), "--schedule", "1h"});
  const auto port = metrics_port(sched);
  ASSERT_TRUE(port) << sched.logs();
  const auto ready = http_get(*port, "/ready");
  EXPECT_EQ(ready.status, 503) << ready.body;  // no run has ended yet
  ASSERT_TRUE(sched.wait_for_log("reconcile: one run every 3600000 ms", 10s)) << sched.logs();
  std::this_thread::sleep_for(500ms);
  const auto signalled = std::chrono::steady_clock::now();
  EXPECT_EQ(sched.stop(SIGTERM, 20s), 0) << sched.logs();
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, 5s) << sched.logs();
  EXPECT_NE(sched.stderr_text().find("stopped after 0 run(s)"), std::string::npos) << sched.logs();
}

TEST_F(ReconcileTest, RepairReEmitsMissingEventsAndTheNextRunIsClean) {
  yaml_ = yaml_with({"payload_digest: true"});
  WalrelayProcess proc(yaml_);
  ASSERT_NO_FATAL_FAILURE(deliver(proc, 100));
  // Two rows whose events never reached Kafka: the slot moved past them without walrelay.
  ASSERT_TRUE(stop_gracefully(proc, name_));
  pg_->exec("INSERT INTO " + outbox_ +
            " (event_id, aggregate_id, aggregate_type, payload, created_at) VALUES ('lost-1', "
            "'a-1', 'Order', '{\"n\": 1, \"lost\": true}', '2026-01-02 03:04:05.678+00'), "
            "('lost-2', 'a-2', 'Order', '{\"n\": 2}', now())");
  pg_->exec("SELECT pg_replication_slot_advance(" + sql_literal(name_) + ", pg_current_wal_lsn())");
  start_streaming(proc, name_);

  const auto before = run_reconcile(yaml_, {"--json"});
  EXPECT_EQ(before.exit_code, 1) << before.out << before.err;
  EXPECT_EQ(json_breaks(before.out), (std::vector<std::string>{"missing:lost-1", "missing:lost-2"}))
      << before.out;

  const auto repair = run_reconcile(yaml_, {"--repair", "--json"});
  EXPECT_EQ(repair.exit_code, 0) << repair.out << repair.err;
  EXPECT_NE(repair.out.find(R"("repaired":["lost-1","lost-2"],"repair_failed":[])"),
            std::string::npos)
      << repair.out;

  // The connector's record for such a row: key, value, headers (id, payload_digest), timestamp.
  const auto records = kafka_->read_all({topic_});
  const KafkaRecord* lost = nullptr;
  const KafkaRecord* streamed = nullptr;
  for (const auto& r : records) {
    if (r.header("id") == "lost-1") lost = &r;
    if (r.header("id") == "e-1") streamed = &r;
  }
  ASSERT_NE(lost, nullptr) << describe(records);
  ASSERT_NE(streamed, nullptr);
  EXPECT_EQ(lost->key, std::optional<std::string>("a-1"));
  EXPECT_EQ(lost->value, std::optional<std::string>(R"({"n": 1, "lost": true})"));
  ASSERT_EQ(lost->header_list.size(), streamed->header_list.size()) << lost->describe();
  for (std::size_t i = 0; i < lost->header_list.size(); ++i) {
    EXPECT_EQ(lost->header_list[i].first, streamed->header_list[i].first);
  }
  EXPECT_EQ(lost->header("payload_digest").size(), 64u) << lost->describe();
  EXPECT_EQ(lost->timestamp_ms, 1767323045678) << lost->describe();

  const auto after = run_reconcile(yaml_, {"--json"});
  EXPECT_EQ(after.exit_code, 0) << after.out << after.err;
  EXPECT_TRUE(json_breaks(after.out).empty()) << after.out;

  // Phantoms and conflicts are reported, never "fixed": --repair publishes nothing for them.
  produce_record(env_.kafka_bootstrap, topic_, "a-1", R"({"n": -1})", {{"id", "ghost-r"}});
  produce_record(env_.kafka_bootstrap, topic_, "a-5", R"({"n": 5, "amount": 999.99})",
                 {{"id", "e-5"}});
  const auto count = kafka_->read_all({topic_}).size();
  const auto refused = run_reconcile(yaml_, {"--repair", "--json"});
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  EXPECT_EQ(json_breaks(refused.out), (std::vector<std::string>{"conflict:e-5", "phantom:ghost-r"}))
      << refused.out;
  EXPECT_NE(refused.out.find(R"("repaired":[],"repair_failed":[])"), std::string::npos)
      << refused.out;
  EXPECT_EQ(kafka_->read_all({topic_}).size(), count);
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

TEST_F(ReconcileTest, ScheduleAndRepairOptionsAreChecked) {
  const auto zero = run_reconcile(yaml_, {"--schedule", "0s"});
  EXPECT_EQ(zero.exit_code, 2) << zero.err;
  EXPECT_NE(zero.err.find("--schedule"), std::string::npos) << zero.err;
  const auto both = run_reconcile(yaml_, {"--schedule", "1h", "--repair"});
  EXPECT_EQ(both.exit_code, 2) << both.err;
  EXPECT_NE(both.err.find("--repair"), std::string::npos) << both.err;
}

}  // namespace
}  // namespace walrelay::itest
