// Relations whose changes logical decoding does not deliver completely, and catalogs that change
// under a running walrelay (issue "Hostile databases" items 1, 2 and 6): skipped or refused at
// start-up, and reported by the periodic catalog check while streaming.

#include <gtest/gtest.h>

#include <string>

#include "harness.hpp"

namespace walrelay::itest {
namespace {

class CatalogDriftTest : public IntegrationTest {};

TEST_F(CatalogDriftTest, RelationsThatAreNotFullyDecodedAreSkippedOrRefused) {
  pg_->exec("CREATE TABLE " + table("orders") + " (id int PRIMARY KEY, v text)");
  pg_->exec("CREATE VIEW " + table("orders_view") + " AS SELECT * FROM " + table("orders"));
  pg_->exec("CREATE MATERIALIZED VIEW " + table("orders_mv") + " AS SELECT * FROM " +
            table("orders"));
  pg_->exec("CREATE UNLOGGED TABLE " + table("scratch") + " (id int PRIMARY KEY)");
  // A glob: the others are skipped with a line each, the table streams.
  WalrelayProcess globbed(make_config({{table("*")}}).to_yaml());
  start_streaming(globbed, name_);
  pg_->exec("INSERT INTO " + table("orders") + " VALUES (1, 'a')");
  ASSERT_EQ(kafka_->read_at_least({topic("orders")}, 1).size(), 1u);
  ASSERT_TRUE(stop_gracefully(globbed, name_));
  const std::string log = globbed.stderr_text();
  EXPECT_NE(log.find("skipping " + table("orders_view") + " (a view)"), std::string::npos) << log;
  EXPECT_NE(log.find("skipping " + table("orders_mv") + " (a materialized view)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("skipping " + table("scratch") + " (an unlogged table)"), std::string::npos)
      << log;
  // Named explicitly: refused (exit 2), naming the relation and what it is.
  WalrelayProcess named(make_config({{table("orders_mv")}}).to_yaml(), "walrelay (named)");
  named.start();
  EXPECT_EQ(named.wait_exit(), 2) << named.logs();
  EXPECT_NE(named.stderr_text().find(table("orders_mv") + ", a materialized view"),
            std::string::npos)
      << named.logs();
}

TEST_F(CatalogDriftTest, TheCatalogCheckReportsTablesThatStopBeingCaptured) {
  pg_->exec("CREATE TABLE " + table("ledger") + " (id int PRIMARY KEY, v text)");
  pg_->exec("CREATE TABLE " + table("notes") + " (id int PRIMARY KEY, v text)");
  const std::string other = name_ + "_moved";
  pg_->exec("CREATE SCHEMA " + other);
  pg_->exec("CREATE TABLE " + other + ".kept (id int PRIMARY KEY)");
  auto cfg = make_config({{table("*")}, {other + ".*"}});
  cfg.extra_yaml = "";
  std::string yaml = cfg.to_yaml();
  // source.catalog_check_interval: a short interval for the test.
  const auto at = yaml.find("source:\n");
  ASSERT_NE(at, std::string::npos);
  yaml.insert(at + 8, "  catalog_check_interval: 300ms\n");
  WalrelayProcess proc(yaml);
  start_streaming(proc, name_);
  pg_->exec("ALTER TABLE " + table("ledger") + " SET UNLOGGED");
  pg_->exec("ALTER TABLE " + table("notes") + " REPLICA IDENTITY NOTHING");
  pg_->exec("ALTER SCHEMA " + other + " RENAME TO " + other + "x");
  EXPECT_TRUE(
      proc.wait_for_log("captured table " + table("ledger") + " is now an unlogged table", 10s))
      << proc.logs();
  EXPECT_TRUE(proc.wait_for_log("UPDATE and DELETE of " + table("notes") +
                                    " are no longer captured (REPLICA IDENTITY NOTHING)",
                                10s))
      << proc.logs();
  EXPECT_TRUE(proc.wait_for_log("tables entry '" + other + ".*' matches no table any more", 10s))
      << proc.logs();
  EXPECT_TRUE(proc.wait_for_log("catalog alarms", 10s)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  pg_->exec("DROP SCHEMA " + other + "x CASCADE");
}

// Issue 9 item 7: an idle open transaction pins the slot's restart_lsn; the progress line shows
// the retained WAL (from restart_lsn) apart from the confirm lag, and the holder is named once.
TEST_F(CatalogDriftTest, RetainedWalIsReportedAndItsHolderNamed) {
  pg_->exec("CREATE TABLE " + table("captured") + " (id int PRIMARY KEY)");
  pg_->exec("CREATE TABLE " + table("bulk") + " (id int, filler text)");
  WalrelayProcess proc(make_config({{table("captured")}}).to_yaml());
  start_streaming(proc, name_);
  Pg holder(env_.pg_conninfo);
  holder.exec("BEGIN");
  holder.exec("INSERT INTO " + table("bulk") + " VALUES (0, 'holds an xid')");
  const std::string pid = holder.value("SELECT pg_backend_pid()::text");
  // ~30 MB of WAL in other transactions: the confirmed position moves on, restart_lsn cannot.
  for (int i = 0; i < 4; ++i) {
    pg_->exec("INSERT INTO " + table("bulk") +
              " SELECT g, repeat('x', 100) FROM generate_series(1, 50000) g");
  }
  pg_->exec("INSERT INTO " + table("captured") + " VALUES (1)");
  ASSERT_EQ(kafka_->read_at_least({topic("captured")}, 1).size(), 1u);
  EXPECT_TRUE(proc.wait_for_log("the oldest open transaction, pid " + pid, 30s)) << proc.logs();
  EXPECT_TRUE(proc.wait_for_log("retained WAL", 10s)) << proc.logs();
  holder.exec("ROLLBACK");
  ASSERT_TRUE(stop_gracefully(proc, name_));
  // Named once, and without its query text.
  const std::string log = proc.stderr_text();
  EXPECT_EQ(log.find("the oldest open transaction, pid " + pid),
            log.rfind("the oldest open transaction, pid " + pid));
  EXPECT_EQ(log.find("holds an xid"), std::string::npos) << "the holder's query text was logged";
}

}  // namespace
}  // namespace walrelay::itest
