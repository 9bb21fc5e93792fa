// `walrelay reconcile` on real PostgreSQL and Kafka, against what the walrelay binary delivered
// from an outbox table: a clean run (also while a writer keeps inserting), and breaks made by
// hand, each reported with its class and id (docs/reconcile.md).

#include <atomic>
#include <thread>

#include "reconcile_support.hpp"

namespace walrelay::itest {
namespace {

TEST_F(ReconcileTest, CleanAfterDeliveryExitsZero) {
  WalrelayProcess proc(yaml_);
  ASSERT_NO_FATAL_FAILURE(deliver(proc, 2000));
  const auto run = run_reconcile(yaml_, {"--json"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("\"source_rows\":2000,\"kafka_records\":2000,\"expanded_buckets\":0"),
            std::string::npos)
      << run.out;
  EXPECT_TRUE(json_breaks(run.out).empty()) << run.out;
  const auto summary = run_reconcile(yaml_, {"--table", outbox_});
  EXPECT_EQ(summary.exit_code, 0) << summary.out << summary.err;
  EXPECT_NE(summary.out.find("no breaks"), std::string::npos) << summary.out;
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

TEST_F(ReconcileTest, CleanWhileAWriterKeepsInserting) {
  WalrelayProcess proc(yaml_);
  ASSERT_NO_FATAL_FAILURE(deliver(proc, 1000));
  std::atomic<bool> stop{false};
  std::atomic<int> written{0};
  std::thread writer([&] {
    Pg pg(env_.pg_conninfo);
    for (int i = 1000; !stop; i += 20) {
      insert_events(pg, i, i + 20);
      written += 20;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const auto run = run_reconcile(yaml_, {"--json"});
  stop = true;
  writer.join();
  EXPECT_GT(written.load(), 0);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_TRUE(json_breaks(run.out).empty()) << run.out;
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

TEST_F(ReconcileTest, BreaksMadeByHandEachWithItsClassAndId) {
  WalrelayProcess proc(yaml_);
  ASSERT_NO_FATAL_FAILURE(deliver(proc, 300));
  // A duplicate (counted, not a break) and a conflict: copies of delivered records, one with
  // its bytes, one with another payload under the same id.
  const auto records = kafka_->read_all({topic_});
  const KafkaRecord* dup = nullptr;
  for (const auto& r : records) {
    if (r.header("id") == "e-6") dup = &r;
  }
  ASSERT_NE(dup, nullptr) << describe(records);
  produce_record(env_.kafka_bootstrap, topic_, *dup->key, *dup->value, {{"id", "e-6"}});
  produce_record(env_.kafka_bootstrap, topic_, "a-5", R"({"n": 5, "amount": 999.99})",
                 {{"id", "e-5"}});
  // A phantom: an id the table never held.
  produce_record(env_.kafka_bootstrap, topic_, "a-1", R"({"n": -1})", {{"id", "ghost-1"}});
  // Missing: a row whose event never reached Kafka (the slot moved past it without walrelay).
  ASSERT_TRUE(stop_gracefully(proc, name_));
  pg_->exec("INSERT INTO " + outbox_ +
            " (event_id, aggregate_id, aggregate_type, payload) VALUES ('lost-1', 'a-1', "
            "'Order', '{\"n\": 0}')");
  pg_->exec("SELECT pg_replication_slot_advance(" + sql_literal(name_) + ", pg_current_wal_lsn())");
  start_streaming(proc, name_);

  const auto run = run_reconcile(yaml_, {"--json"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_EQ(json_breaks(run.out),
            (std::vector<std::string>{"conflict:e-5", "missing:lost-1", "phantom:ghost-1"}))
      << run.out;
  EXPECT_NE(run.out.find("\"duplicates\":1,\"duplicate_ids\":[\"e-6\"]"), std::string::npos)
      << run.out;
  const auto summary = run_reconcile(yaml_, {});
  EXPECT_EQ(summary.exit_code, 1);
  EXPECT_NE(summary.out.find("missing"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("lost-1"), std::string::npos) << summary.out;
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

TEST_F(ReconcileTest, ADuplicateAloneIsNotABreak) {
  WalrelayProcess proc(yaml_);
  ASSERT_NO_FATAL_FAILURE(deliver(proc, 50));
  const auto records = kafka_->read_all({topic_});
  ASSERT_FALSE(records.empty());
  const auto& r = records.front();
  produce_record(env_.kafka_bootstrap, topic_, *r.key, *r.value, {{"id", r.header("id")}});
  const auto run = run_reconcile(yaml_, {"--json"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("\"duplicates\":1,"), std::string::npos) << run.out;
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

TEST_F(ReconcileTest, BadOptionsExitTwoNamingTheKey) {
  // --since needs the outbox's timestamp column: a table without one is refused by its key.
  auto c = make_config({{outbox_,
                         {"event_id: event_id", "aggregate_id: aggregate_id",
                          "aggregate_type: aggregate_type", "payload: payload"}}});
  pg_->exec("SELECT pg_create_logical_replication_slot(" + sql_literal(name_) + ", 'wal2json')");
  const auto since = run_reconcile(c.to_yaml(), {"--since", "1h"});
  EXPECT_EQ(since.exit_code, 2) << since.err;
  EXPECT_NE(since.err.find("tables[0].outbox.timestamp"), std::string::npos) << since.err;
  const auto table_opt = run_reconcile(yaml_, {"--table", "public.no_such_table"});
  EXPECT_EQ(table_opt.exit_code, 2) << table_opt.err;
  EXPECT_NE(table_opt.err.find("--table public.no_such_table"), std::string::npos) << table_opt.err;
  auto bad = c;
  bad.extra_yaml = "reconcile:\n  buckets: 0\n";
  const auto buckets = run_reconcile(bad.to_yaml(), {});
  EXPECT_EQ(buckets.exit_code, 2) << buckets.err;
  EXPECT_NE(buckets.err.find("reconcile.buckets"), std::string::npos) << buckets.err;
}

}  // namespace
}  // namespace walrelay::itest
