// Issue 10, "Event loop hygiene": a catalog lookup (a table seen for the first time) is a query on
// walrelay's catalog connection. While it waits on the server, the event loop must keep serving
// delivery reports and standby status updates: the changes before it are acknowledged and
// confirmed, the changes after it wait for it (their order is kept), and nothing is confirmed
// past it. The same holds for a snapshot signal naming a table walrelay never looked up: the
// signal's checks need the table's shape.
//
// The lookup is made slow deterministically: another session holds an ACCESS EXCLUSIVE lock on
// pg_catalog.pg_namespace (the lookup's first query joins it), and the test checks in
// pg_stat_activity that walrelay's catalog session is waiting on that lock before it asserts.
// No timed assertion: only progress (confirmed_flush_lsn, records in Kafka) under generous bounds.

#include <gtest/gtest.h>

#include <string>

#include "harness.hpp"

namespace walrelay::itest {
namespace {

class CatalogLookupTest : public IntegrationTest {
 protected:
  static constexpr std::size_t kRows = 40;
  // What needs the lookup of `fresh`: kFirstSight, an INSERT into it, a table that appears after
  // start-up; kRefresh, an INSERT into it, a table known at start-up with a column added since
  // (its shape is read again); kSignal, an incremental snapshot signal naming it, a table of kRows
  // rows that got its name after start-up (filled as `staging`, renamed), none of whose changes
  // was streamed.
  enum class Need { kFirstSight, kRefresh, kSignal };
  void blocked_lookup_does_not_hold_up_earlier_changes(Need need);
};

void CatalogLookupTest::blocked_lookup_does_not_hold_up_earlier_changes(Need need) {
  const bool refresh = need == Need::kRefresh;
  pg_->exec("CREATE TABLE " + table("known") + " (id int PRIMARY KEY, v text)");
  if (refresh) pg_->exec("CREATE TABLE " + table("fresh") + " (id int PRIMARY KEY)");
  if (need == Need::kSignal) {
    pg_->exec("CREATE TABLE " + table("staging") + " (id int PRIMARY KEY)");
    pg_->exec("INSERT INTO " + table("staging") + " SELECT generate_series(1, " +
              std::to_string(kRows) + ")");
  }
  auto cfg = make_config({{table("*")}});
  cfg.status_interval = "200ms";
  // No heartbeat: nothing else should be in the stream after the blocked change.
  cfg.extra_yaml = "heartbeat:\n  enabled: false\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  pg_->exec("INSERT INTO " + table("known") + " VALUES (0, 'warm-up')");
  ASSERT_EQ(kafka_->read_at_least({topic("known")}, 1).size(), 1u) << proc.logs();

  if (refresh) {
    pg_->exec("ALTER TABLE " + table("fresh") + " ADD COLUMN extra int");
  } else if (need == Need::kSignal) {
    pg_->exec("ALTER TABLE " + table("staging") + " RENAME TO fresh");
  } else {
    pg_->exec("CREATE TABLE " + table("fresh") + " (id int PRIMARY KEY)");
  }
  Pg writer(env_.pg_conninfo);
  writer.exec("SELECT count(*) FROM " + table("known") + ", " + table("fresh"));  // warm caches
  // Every session the test uses while the lock is held has resolved its names before (a name
  // lookup that misses the session's cache reads pg_namespace and would wait too).
  const std::string waiting_lookups =
      waiting_sessions_sql("walrelay-catalog-" + name_, "wait_event_type = 'Lock'");
  Pg observer(env_.pg_conninfo);
  ASSERT_EQ(observer.value(waiting_lookups), "0");
  warm_up_slot_queries(*pg_, name_);
  Pg locker(env_.pg_conninfo);  // a superuser in the test database (pg_namespace is per database)
  hold_exclusive_lock(locker, "pg_catalog.pg_namespace");

  const std::string before = writer.value("SELECT pg_current_wal_insert_lsn()::text");
  writer.exec("INSERT INTO " + table("known") +
              " SELECT g, 'earlier' FROM generate_series(1, 20) g");
  // Other tests' WAL may follow, and be confirmed as idle WAL: the bound is where `fresh` starts.
  const std::string before_fresh = writer.value("SELECT pg_current_wal_insert_lsn()::text");
  if (need == Need::kSignal) {
    writer.exec("SELECT pg_logical_emit_message(true, 'walrelay-signal', " +
                sql_literal("{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" +
                            table("fresh") + "\"],\"type\":\"incremental\"}}") +
                ")");
  } else {
    writer.exec("INSERT INTO " + table("fresh") + (refresh ? " VALUES (1, 7)" : " VALUES (1)"));
  }
  writer.exec("INSERT INTO " + table("known") + " VALUES (100, 'later')");

  // walrelay's catalog session waits on the lock: the lookup is in progress.
  ASSERT_TRUE(wait_for_waiting_session(observer, waiting_lookups, 30s))
      << "the catalog lookup never waited on the lock\n"
      << proc.logs();

  // While it waits, the earlier transaction is delivered and confirmed to the server.
  auto known = kafka_->read_at_least({topic("known")}, 21, 30s);
  EXPECT_EQ(known.size(), 21u) << describe(known) << proc.logs();
  std::string confirmed;
  EXPECT_TRUE(wait_confirmed_past(*pg_, name_, before, confirmed, 30s))
      << "confirmed_flush_lsn " << confirmed << " did not move past " << before
      << " while the lookup was blocked\n"
      << proc.logs();
  // Nothing past the change that waits for its lookup: the later change is not published, and
  // the slot is not confirmed past the transaction of `fresh`.
  EXPECT_FALSE(lsn_after(*pg_, confirmed, before_fresh)) << confirmed << " vs " << before_fresh;
  // Still waiting (the assertions above ran while the lock was held).
  EXPECT_EQ(observer.value(waiting_lookups), "1");
  EXPECT_EQ(kafka_->read_all({topic("fresh")}).size(), 0u);
  // The wait is visible: walrelay_catalog_lookup_waiting 1, and no backpressure.
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  const std::string metrics = http_get(*port, "/metrics").body;
  EXPECT_NE(metrics.find("\nwalrelay_catalog_lookup_waiting 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nwalrelay_backpressure_paused 0\n"), std::string::npos) << metrics;

  locker.exec("COMMIT");
  // The lookup completes: `fresh` and then the later change arrive, in order.
  if (need == Need::kSignal) {
    // The signal is applied: every row of `fresh`, as a read.
    ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("fresh") + " done", 60s))
        << proc.logs();
    auto fresh = kafka_->read_at_least({topic("fresh")}, kRows, 30s);
    ASSERT_EQ(fresh.size(), kRows) << describe(fresh);
    for (const auto& r : fresh) EXPECT_EQ(json_string_at(*r.value, "/op"), "r") << describe(fresh);
  } else {
    auto fresh = kafka_->read_at_least({topic("fresh")}, 1, 30s);
    ASSERT_EQ(fresh.size(), 1u) << proc.logs();
    EXPECT_EQ(json_at(*fresh[0].value, "/after/id"), "1");
    if (refresh) {
      EXPECT_EQ(json_at(*fresh[0].value, "/after/extra"), "7");
    }
  }
  known = kafka_->read_at_least({topic("known")}, 22, 30s);
  ASSERT_EQ(known.size(), 22u) << describe(known);
  bool later = false;
  for (const auto& r : known) later = later || json_at(*r.value, "/after/id") == "100";
  EXPECT_TRUE(later) << describe(known);
  // And the slot is confirmed past it all.
  const std::string end = writer.value("SELECT pg_current_wal_insert_lsn()::text");
  EXPECT_TRUE(wait_until(
      [&] {
        auto s = slot_state(*pg_, name_);
        return s && s->confirmed_flush_lsn && !lsn_after(*pg_, end, *s->confirmed_flush_lsn);
      },
      30s))
      << proc.logs();
  EXPECT_NE(http_get(*port, "/metrics").body.find("\nwalrelay_catalog_lookup_waiting 0\n"),
            std::string::npos);
  ASSERT_TRUE(stop_gracefully(proc, name_));
}

TEST_F(CatalogLookupTest, ABlockedFirstLookupDoesNotHoldUpAcknowledgementsOfEarlierChanges) {
  blocked_lookup_does_not_hold_up_earlier_changes(Need::kFirstSight);
}

TEST_F(CatalogLookupTest, ABlockedShapeRefreshDoesNotHoldUpAcknowledgementsOfEarlierChanges) {
  blocked_lookup_does_not_hold_up_earlier_changes(Need::kRefresh);
}

// The table got its name after walrelay started: the signal's checks (incremental snapshots read
// only tables with a key) wait for its lookup instead of querying on the event loop.
TEST_F(CatalogLookupTest,
       ASignalForATableNeverLookedUpDoesNotHoldUpAcknowledgementsOfEarlierChanges) {
  blocked_lookup_does_not_hold_up_earlier_changes(Need::kSignal);
}

}  // namespace
}  // namespace walrelay::itest
