// A session's set-up runs off the event loop where it can wait on the server: creating the slot
// (CREATE_REPLICATION_SLOT waits until every transaction running when it started has ended,
// PostgreSQL docs "Logical Decoding" 49.2.5, Exported Snapshots / snapbuild.c) and the broker
// probe before it. Meanwhile /live and /metrics answer, and SIGTERM ends walrelay at once: the
// slot creation is cancelled and nothing is left behind on the server.
//
// The wait is made deterministic with a transaction that holds an xid while walrelay starts; the
// test checks in pg_stat_activity that walrelay's walsender waits before it asserts.

#include <gtest/gtest.h>

#include <string>

#include "harness.hpp"

namespace walrelay::itest {
namespace {

using namespace std::chrono_literals;

class SessionSetupTest : public IntegrationTest {};

TEST_F(SessionSetupTest, ASlotCreationWaitingOnATransactionLeavesLiveMetricsAndSigtermServed) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
  Pg holder(env_.pg_conninfo);
  holder.exec("BEGIN");
  (void)holder.value("SELECT txid_current()::text");  // an xid the slot's snapshot must wait for

  auto cfg = make_config({{table("t")}});
  WalrelayProcess proc(cfg.to_yaml());
  proc.start();
  Pg observer(env_.pg_conninfo);
  // The replication connection's application_name is walrelay-<name>; it waits on the holder's
  // transactionid lock (wait_event_type Lock).
  const std::string waiting = waiting_sessions_sql("walrelay-" + name_, "wait_event_type = 'Lock'");
  ASSERT_TRUE(wait_for_waiting_session(observer, waiting, 30s))
      << "walrelay's slot creation never waited on the open transaction\n"
      << proc.logs();

  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  const HttpResult live = http_get(*port, "/live");
  EXPECT_EQ(live.status, 200) << live.body << proc.logs();
  const HttpResult metrics = http_get(*port, "/metrics");
  EXPECT_EQ(metrics.status, 200) << proc.logs();
  EXPECT_NE(metrics.body.find("walrelay_up"), std::string::npos) << metrics.body;
  // Not streaming yet: not ready.
  EXPECT_EQ(http_get(*port, "/ready").status, 503) << proc.logs();
  EXPECT_EQ(observer.value(waiting), "1") << "the slot creation ended before the assertions";

  // SIGTERM while the creation still waits (the holder's transaction is open): exit 0, promptly.
  EXPECT_EQ(proc.stop(SIGTERM, 15s), 0) << proc.logs();
  EXPECT_FALSE(slot_state(*pg_, name_).has_value()) << "a cancelled creation left slot " << name_;
  holder.exec("ROLLBACK");
}

}  // namespace
}  // namespace walrelay::itest
