// Relation kinds and replica identities while the catalog moves (issue 25 items 1-4): a relation
// walrelay does not capture never publishes, whenever it appeared; a table is keyed by the
// identity a change was written under (not by the whole row, not by when walrelay last read the
// catalog), in a live stream and from a backlog decoded after the DDL.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "harness.hpp"

namespace walrelay::itest {
namespace {

class CatalogIdentityTest : public IntegrationTest {
 protected:
  // A configuration for `tables` with a short catalog check and `extra` top-level YAML.
  std::string yaml_for(std::vector<TableEntry> tables, const std::string& extra = "") {
    auto cfg = make_config(std::move(tables));
    cfg.extra_yaml = extra;
    std::string yaml = cfg.to_yaml();
    const auto at = yaml.find("source:\n");
    yaml.insert(at + 8, "  catalog_check_interval: 300ms\n");
    return yaml;
  }
  // Creates the slot (walrelay streams, then stops), so that what follows is a backlog.
  void make_slot(const std::string& yaml) {
    WalrelayProcess first(yaml, "walrelay (slot)");
    start_streaming(first, name_);
    ASSERT_TRUE(stop_gracefully(first, name_));
  }
  // "op key" of each record (tombstones: "- key"), sorted (keys land on several partitions).
  static std::vector<std::string> ops_and_keys(const std::vector<KafkaRecord>& records) {
    std::vector<std::string> out;
    for (const auto& r : records) {
      const std::string op = r.value ? json_string_at(*r.value, "/op") : "-";
      out.push_back(op + " " + r.key.value_or("null"));
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static std::vector<std::string> sorted(std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  }
  // Waits for a marker row of `marker` (id int PRIMARY KEY) to be published: everything written
  // before it was decoded.
  void wait_for_marker(const std::string& marker, std::size_t count) {
    ASSERT_GE(kafka_->read_at_least({topic(marker)}, count, 30s).size(), count);
  }
};

// Item 1: a materialized view matched by a glob is skipped also for its changes: one present at
// start-up refreshed CONCURRENTLY, one created while streaming, and both from a backlog. A view
// created while streaming has no changes; a new leaf of a partitioned table still publishes.
TEST_F(CatalogIdentityTest, MaterializedViewsNeverPublishWheneverTheyAppeared) {
  pg_->exec("CREATE TABLE " + table("sales") + " (id int PRIMARY KEY, region text, amount int)");
  pg_->exec("INSERT INTO " + table("sales") + " VALUES (1, 'north', 10), (2, 'south', 20)");
  pg_->exec("CREATE MATERIALIZED VIEW " + table("by_region") + " AS SELECT region, sum(amount) " +
            "AS total FROM " + table("sales") + " GROUP BY region");
  pg_->exec("CREATE UNIQUE INDEX ON " + table("by_region") + " (region)");
  pg_->exec("CREATE TABLE " + table("marker") + " (id int PRIMARY KEY)");
  pg_->exec("CREATE TABLE " + table("parted") + " (id int, v text) PARTITION BY RANGE (id)");
  const std::string yaml = yaml_for({{table("*")}});
  {
    WalrelayProcess proc(yaml);
    start_streaming(proc, name_);
    pg_->exec("INSERT INTO " + table("sales") + " VALUES (3, 'north', 5), (4, 'east', 7)");
    pg_->exec("REFRESH MATERIALIZED VIEW CONCURRENTLY " + table("by_region"));
    pg_->exec("CREATE MATERIALIZED VIEW " + table("live_mv") + " AS SELECT id, region FROM " +
              table("sales"));
    pg_->exec("CREATE VIEW " + table("live_view") + " AS SELECT id FROM " + table("sales"));
    pg_->exec("CREATE TABLE " + table("parted_1") + " PARTITION OF " + table("parted") +
              " FOR VALUES FROM (0) TO (100)");
    pg_->exec("INSERT INTO " + table("parted") + " VALUES (1, 'leaf')");
    pg_->exec("INSERT INTO " + table("marker") + " VALUES (1)");
    wait_for_marker("marker", 1);
    EXPECT_EQ(kafka_->read_at_least({topic("parted")}, 1, 30s).size(), 1u)
        << "a new leaf of a partitioned table publishes to its root's topic";
    EXPECT_TRUE(proc.wait_for_log("skipping " + table("live_mv") + " (a materialized view)", 5s))
        << proc.logs();
    ASSERT_TRUE(stop_gracefully(proc, name_));
  }
  // A backlog: walrelay stopped while a view is created, another refreshed, rows change.
  pg_->exec("INSERT INTO " + table("sales") + " VALUES (5, 'west', 1)");
  pg_->exec("REFRESH MATERIALIZED VIEW CONCURRENTLY " + table("by_region"));
  pg_->exec("CREATE MATERIALIZED VIEW " + table("backlog_mv") + " AS SELECT id FROM " +
            table("sales"));
  pg_->exec("INSERT INTO " + table("marker") + " VALUES (2)");
  {
    WalrelayProcess proc(yaml, "walrelay (backlog)");
    start_streaming(proc, name_);
    wait_for_marker("marker", 2);
    ASSERT_TRUE(stop_gracefully(proc, name_));
  }
  for (const char* mv : {"by_region", "live_mv", "backlog_mv", "live_view"}) {
    const auto records = kafka_->read_all({topic(mv)});
    EXPECT_TRUE(records.empty()) << mv << " published: " << describe(records);
  }
  EXPECT_EQ(kafka_->read_all({topic("sales")}).size(), 3u);  // rows 3, 4 and 5
}

// Item 2: REPLICA IDENTITY USING INDEX set while streaming on a table without a primary key keys
// its events by the index from the first change after the switch (an INSERT included), and each
// later identity keys as it should: FULL and DEFAULT give null keys, USING INDEX again the index.
// (An INSERT carries no identity: it is keyed by the catalog as walrelay reads it after the DDL,
// so each step waits until walrelay has decoded the one before.)
TEST_F(CatalogIdentityTest, IdentityUsingIndexSetWhileStreamingKeysByTheIndexAtOnce) {
  const std::string t = table("nopk");
  pg_->exec("CREATE TABLE " + t + " (a int NOT NULL, b int NOT NULL, v text)");
  pg_->exec("CREATE UNIQUE INDEX " + name_ + "_nopk_a ON " + t + " (a)");
  WalrelayProcess proc(yaml_for({{t}}));
  start_streaming(proc, name_);
  const auto step = [&](const std::vector<std::string>& sql, std::size_t total) {
    for (const auto& q : sql) pg_->exec(q);
    ASSERT_GE(kafka_->read_at_least({topic("nopk")}, total, 30s).size(), total);
  };
  const std::string index =
      "ALTER TABLE " + t + " REPLICA IDENTITY USING INDEX " + name_ + "_nopk_a";
  step({"INSERT INTO " + t + " VALUES (0, 0, 'before')"}, 1);  // DEFAULT without a key: null
  step({index, "INSERT INTO " + t + " VALUES (1, 1, 'x')",
        "UPDATE " + t + " SET v = 'y' WHERE a = 1", "DELETE FROM " + t + " WHERE a = 1"},
       5);
  step({"ALTER TABLE " + t + " REPLICA IDENTITY FULL", "INSERT INTO " + t + " VALUES (2, 2, 'x')",
        "UPDATE " + t + " SET v = 'y' WHERE a = 2"},
       7);
  step({"ALTER TABLE " + t + " REPLICA IDENTITY DEFAULT",
        "INSERT INTO " + t + " VALUES (3, 3, 'x')"},
       8);
  step({index, "INSERT INTO " + t + " VALUES (4, 4, 'x')", "DELETE FROM " + t + " WHERE a = 4"},
       11);
  const auto records = kafka_->read_at_least({topic("nopk")}, 11, 30s);
  const std::vector<std::string> expected = {
      "c null", "c {\"a\":1}", "u {\"a\":1}", "d {\"a\":1}", "- {\"a\":1}", "c null",
      "u null", "c null",      "c {\"a\":4}", "d {\"a\":4}", "- {\"a\":4}"};
  EXPECT_EQ(ops_and_keys(records), sorted(expected)) << describe(records);
  // The start-up warning (wal2json drops its updates) is corrected by the catalog check.
  EXPECT_TRUE(proc.wait_for_log("UPDATE and DELETE of " + t + " are captured again", 10s))
      << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

// Item 2 from a backlog: the UPDATE and DELETE written under the index are keyed by it, also when
// the catalog says DEFAULT again by the time walrelay decodes them.
TEST_F(CatalogIdentityTest, IdentityUsingIndexOfABacklogKeysUpdatesAndDeletesAsWritten) {
  const std::string t = table("nopk");
  pg_->exec("CREATE TABLE " + t + " (a int NOT NULL, b int NOT NULL, v text)");
  pg_->exec("CREATE UNIQUE INDEX " + name_ + "_nopk_a ON " + t + " (a)");
  const std::string yaml = yaml_for({{t}});
  make_slot(yaml);
  pg_->exec("ALTER TABLE " + t + " REPLICA IDENTITY USING INDEX " + name_ + "_nopk_a");
  pg_->exec("INSERT INTO " + t + " VALUES (1, 1, 'x')");
  pg_->exec("UPDATE " + t + " SET v = 'y' WHERE a = 1");
  pg_->exec("DELETE FROM " + t + " WHERE a = 1");
  pg_->exec("ALTER TABLE " + t + " REPLICA IDENTITY FULL");
  pg_->exec("INSERT INTO " + t + " VALUES (2, 2, 'x')");
  pg_->exec("DELETE FROM " + t + " WHERE a = 2");
  pg_->exec("ALTER TABLE " + t + " REPLICA IDENTITY DEFAULT");
  WalrelayProcess proc(yaml, "walrelay (backlog)");
  start_streaming(proc, name_);
  const auto records = kafka_->read_at_least({topic("nopk")}, 7, 30s);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  // The INSERTs carry no identity: keyed by the catalog as decoded (DEFAULT now: null).
  const std::vector<std::string> expected = {"c null", "u {\"a\":1}", "d {\"a\":1}", "- {\"a\":1}",
                                             "c null", "d null",      "- null"};
  EXPECT_EQ(ops_and_keys(records), sorted(expected)) << describe(records);
}

// Item 3 (wal2json's rename_column): an identity column renamed while streaming. Row 2's create,
// update and delete get one key, the identity as written ({"a":2,"f":false}), never the whole row.
TEST_F(CatalogIdentityTest, RenamedIdentityColumnNeverKeysByTheWholeRow) {
  const std::string t = table("ri");
  WalrelayProcess proc(yaml_for({{table("*")}}));
  start_streaming(proc, name_);
  pg_->exec("CREATE TABLE " + t + " (a int NOT NULL, d boolean NOT NULL, v text)");
  pg_->exec("CREATE UNIQUE INDEX " + name_ + "_ri_idx ON " + t + " (a, d)");
  pg_->exec("ALTER TABLE " + t + " REPLICA IDENTITY USING INDEX " + name_ + "_ri_idx");
  pg_->exec("INSERT INTO " + t + " VALUES (1, true, 'x')");
  ASSERT_EQ(kafka_->read_at_least({topic("ri")}, 1, 30s).size(), 1u);
  pg_->exec("ALTER TABLE " + t + " RENAME COLUMN d TO f");
  pg_->exec("INSERT INTO " + t + " VALUES (2, false, 'y')");
  pg_->exec("UPDATE " + t + " SET v = 'z' WHERE a = 2");
  pg_->exec("DELETE FROM " + t + " WHERE a = 2");
  const auto records = kafka_->read_at_least({topic("ri")}, 5, 30s);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  const std::vector<std::string> expected = {"c {\"a\":1,\"d\":true}", "c {\"a\":2,\"f\":false}",
                                             "u {\"a\":2,\"f\":false}", "d {\"a\":2,\"f\":false}",
                                             "- {\"a\":2,\"f\":false}"};
  EXPECT_EQ(ops_and_keys(records), sorted(expected)) << describe(records);
}

// Item 3 from a backlog: the INSERT written before the rename carries `d`, which the catalog's
// identity (a, f) does not name: it cannot be decided, so it is a mapping error (dead-lettered
// here), not a whole-row key; the changes written after the rename are keyed by the identity.
TEST_F(CatalogIdentityTest, RenamedIdentityColumnOfABacklogIsAMappingErrorWhereUndecidable) {
  const std::string t = table("ri");
  pg_->exec("CREATE TABLE " + t + " (a int NOT NULL, d boolean NOT NULL, v text)");
  pg_->exec("CREATE UNIQUE INDEX " + name_ + "_ri_idx ON " + t + " (a, d)");
  pg_->exec("ALTER TABLE " + t + " REPLICA IDENTITY USING INDEX " + name_ + "_ri_idx");
  const std::string dlq = name_ + ".dlq";
  const std::string yaml =
      yaml_for({{t}}, "errors:\n  policy: dead_letter\n  dead_letter_topic: \"" + dlq + "\"\n");
  make_slot(yaml);
  pg_->exec("INSERT INTO " + t + " VALUES (1, true, 'x')");
  pg_->exec("ALTER TABLE " + t + " RENAME COLUMN d TO f");
  pg_->exec("INSERT INTO " + t + " VALUES (2, false, 'y')");
  pg_->exec("UPDATE " + t + " SET v = 'z' WHERE a = 2");
  pg_->exec("DELETE FROM " + t + " WHERE a = 2");
  WalrelayProcess proc(yaml, "walrelay (backlog)");
  start_streaming(proc, name_);
  const auto records = kafka_->read_at_least({topic("ri")}, 4, 30s);
  const auto dead = kafka_->read_at_least({dlq}, 1, 30s);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  const std::vector<std::string> expected = {"c {\"a\":2,\"f\":false}", "u {\"a\":2,\"f\":false}",
                                             "d {\"a\":2,\"f\":false}", "- {\"a\":2,\"f\":false}"};
  EXPECT_EQ(ops_and_keys(records), sorted(expected)) << describe(records);
  ASSERT_EQ(dead.size(), 1u) << describe(dead);
  EXPECT_NE(dead[0].value.value_or("").find("\"d\""), std::string::npos) << describe(dead);
}

// Item 4: a table with a primary key whose identity index was dropped is warned about (wal2json
// drops its UPDATEs and DELETEs), not refused with "USING INDEX on ()" and key_columns: [].
TEST_F(CatalogIdentityTest, DroppedIdentityIndexOfATableWithAPrimaryKeyIsWarnedNotRefused) {
  const std::string t = table("pkri");
  pg_->exec("CREATE TABLE " + t + " (id int PRIMARY KEY, ext int NOT NULL)");
  pg_->exec("CREATE UNIQUE INDEX " + name_ + "_pkri_ext ON " + t + " (ext)");
  pg_->exec("ALTER TABLE " + t + " REPLICA IDENTITY USING INDEX " + name_ + "_pkri_ext");
  pg_->exec("DROP INDEX " + schema_ + "." + name_ + "_pkri_ext");
  const std::string yaml = yaml_for({{t}});
  WalrelayProcess check(yaml, "walrelay check");
  check.start({"check", "--config", check.config_path().string()});
  EXPECT_EQ(check.wait_exit(60s), 0) << check.logs();
  const std::string out = check.stdout_text() + check.stderr_text();
  EXPECT_EQ(out.find("USING INDEX on ()"), std::string::npos) << out;
  EXPECT_NE(out.find("USING INDEX of an index that was dropped"), std::string::npos) << out;
  WalrelayProcess proc(yaml);
  start_streaming(proc, name_);
  pg_->exec("INSERT INTO " + t + " VALUES (1, 1)");
  const auto records = kafka_->read_at_least({topic("pkri")}, 1, 30s);
  ASSERT_EQ(ops_and_keys(records), std::vector<std::string>{"c {\"id\":1}"});
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

// Item 4, a backlog: the catalog is USING INDEX (ext) at start, but a DELETE in the backlog was
// written under DEFAULT and carries only the primary key. With key_columns: [ext] as advised, it
// is keyed by what it carries, under a warning that says it was written before the switch.
TEST_F(CatalogIdentityTest, BacklogDeleteWrittenBeforeTheSwitchToUsingIndexNamesTheRightCause) {
  const std::string t = table("sw");
  pg_->exec("CREATE TABLE " + t + " (id int PRIMARY KEY, ext int NOT NULL, v text)");
  pg_->exec("CREATE UNIQUE INDEX " + name_ + "_sw_ext ON " + t + " (ext)");
  pg_->exec("INSERT INTO " + t + " VALUES (1, 10, 'a'), (2, 20, 'b')");
  std::string yaml = yaml_for({{t}});
  make_slot(yaml);
  pg_->exec("DELETE FROM " + t + " WHERE id = 1");  // identity: the primary key
  pg_->exec("ALTER TABLE " + t + " REPLICA IDENTITY USING INDEX " + name_ + "_sw_ext");
  pg_->exec("DELETE FROM " + t + " WHERE id = 2");  // identity: the index
  // The refusal's advice says what it does to a backlog.
  {
    WalrelayProcess refused(yaml, "walrelay (refused)");
    refused.start();
    EXPECT_EQ(refused.wait_exit(60s), 2) << refused.logs();
    EXPECT_NE(refused.stderr_text().find("written before the switch"), std::string::npos)
        << refused.logs();
  }
  const std::string entry = "  - name: \"" + t + "\"\n";
  yaml.insert(yaml.find(entry) + entry.size(), "    key_columns: [ext]\n");
  WalrelayProcess proc(yaml, "walrelay (key_columns)");
  start_streaming(proc, name_);
  const auto records = kafka_->read_at_least({topic("sw")}, 4, 30s);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  const std::vector<std::string> expected = {"d {\"id\":1}", "- {\"id\":1}", "d {\"ext\":20}",
                                             "- {\"ext\":20}"};
  EXPECT_EQ(ops_and_keys(records), sorted(expected)) << describe(records);
  const std::string log = proc.stderr_text();
  EXPECT_NE(log.find("written under REPLICA IDENTITY DEFAULT"), std::string::npos) << log;
  EXPECT_EQ(log.find("its REPLICA IDENTITY is an index other than the primary key"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace walrelay::itest
