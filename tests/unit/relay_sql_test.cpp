// The relay's SQL (relay/outbox_table.hpp): the parameters each statement takes, the identifiers
// quoted, the locking clause and the head-of-key rule present.

#include <gtest/gtest.h>

#include "walrelay/relay/outbox_table.hpp"

namespace walrelay::relay {
namespace {

struct Fixture {
  config::OutboxConfig outbox;
  config::OutboxPollConfig poll;
  OutboxTable table;
  Fixture() {
    outbox.event_id = "event_id";
    outbox.aggregate_id = "subscription_id";
    poll.order_by = "seq";
    table.schema = "public";
    table.table = "Event \"Outbox\"";
    table.outbox = &outbox;
    table.poll = &poll;
    table.columns = {{"event_id", 2950}, {"subscription_id", 25}};
  }
};

TEST(RelaySql, ClaimLocksWithSkipLockedAndKeepsTheHeadOfKeyRule) {
  Fixture f;
  const std::string sql = claim_sql(f.table, 200, true);
  EXPECT_NE(sql.find("FROM \"public\".\"Event \"\"Outbox\"\"\" o"), std::string::npos) << sql;
  EXPECT_NE(sql.find("LIMIT 200 FOR UPDATE OF o SKIP LOCKED"), std::string::npos) << sql;
  EXPECT_NE(sql.find("ORDER BY o.\"seq\", o.\"event_id\""), std::string::npos) << sql;
  EXPECT_NE(sql.find("IN ($1, $2)"), std::string::npos) << sql;  // failed rows block
  EXPECT_NE(sql.find("NOT EXISTS (SELECT 1 FROM c c2"), std::string::npos) << sql;
  // Without failed_blocks_key the statement takes only the pending status.
  const std::string open = claim_sql(f.table, 10, false);
  EXPECT_EQ(open.find("$2"), std::string::npos) << open;
}

TEST(RelaySql, MarkStatementsTakeTheirParameters) {
  Fixture f;
  EXPECT_EQ(mark_sent_sql(f.table),
            "UPDATE \"public\".\"Event \"\"Outbox\"\"\" SET \"status\" = $1, \"sent_at\" = now() "
            "WHERE ctid = ANY($2::tid[])");
  EXPECT_EQ(mark_failure_sql(f.table).find("$4"), std::string::npos);
  f.poll.last_error = "why";
  EXPECT_NE(mark_failure_sql(f.table).find("\"why\" = $4"), std::string::npos);
  EXPECT_EQ(tid_array({"(0,1)", "(3,12)"}), "{\"(0,1)\",\"(3,12)\"}");
}

// claim: lease: the claim takes pending, retry_wait and expired claims, keeps the head-of-key rule
// over every unsent status, and sets claimed + owner + lease in the same statement.
TEST(RelaySql, LeaseClaimSetsOwnerAndLeaseAndKeepsTheHeadOfKeyRule) {
  Fixture f;
  f.poll.owner = "claimed_by";
  f.poll.lease_until = "lease_until";
  f.poll.claimed = "claimed";
  f.poll.retry_wait = "retry_wait";
  const std::string sql = lease_claim_sql(f.table, 50, true);
  EXPECT_NE(sql.find("WHERE (o.\"status\" IN ($1, $2) OR (o.\"status\" = $3 AND "
                     "o.\"lease_until\" < now()))"),
            std::string::npos)
      << sql;
  EXPECT_NE(sql.find("LIMIT 50 FOR UPDATE OF o SKIP LOCKED)"), std::string::npos) << sql;
  EXPECT_NE(sql.find("q.\"status\" IN ($1, $2, $3, $6)"), std::string::npos) << sql;
  EXPECT_NE(sql.find("f.\"status\" = $6"), std::string::npos) << sql;
  EXPECT_NE(sql.find("SET \"status\" = $3, \"claimed_by\" = $4, \"lease_until\" = now() + "
                     "make_interval(secs => $5::bigint / 1000.0) FROM h"),
            std::string::npos)
      << sql;
  const std::string open = lease_claim_sql(f.table, 50, false);
  EXPECT_EQ(open.find("$6"), std::string::npos) << open;
  EXPECT_NE(open.find("q.\"status\" IN ($1, $2, $3)"), std::string::npos) << open;
}

// Every mark under a lease is guarded by the owner token and the claimed status: a stale owner
// changes nothing of a row another instance took over.
TEST(RelaySql, LeaseMarksTouchOnlyRowsTheTokenStillHolds) {
  Fixture f;
  f.poll.owner = "claimed_by";
  f.poll.lease_until = "lease_until";
  f.poll.claimed = "claimed";
  f.poll.retry_wait = "retry_wait";
  EXPECT_EQ(lease_mark_sent_sql(f.table),
            "UPDATE \"public\".\"Event \"\"Outbox\"\"\" SET \"status\" = $1, \"sent_at\" = now(), "
            "\"claimed_by\" = NULL, \"lease_until\" = NULL WHERE ctid = ANY($2::tid[]) AND "
            "\"claimed_by\" = $3 AND \"status\" = $4 RETURNING 1");
  EXPECT_EQ(
      lease_release_sql(f.table),
      "UPDATE \"public\".\"Event \"\"Outbox\"\"\" SET \"status\" = $1, \"claimed_by\" = NULL, "
      "\"lease_until\" = NULL WHERE ctid = ANY($2::tid[]) AND \"claimed_by\" = $3 AND "
      "\"status\" = $4 RETURNING 1");
  const std::string failure = lease_mark_failure_sql(f.table);
  EXPECT_NE(failure.find("WHERE ctid = $3::tid AND \"claimed_by\" = $4 AND \"status\" = $5"),
            std::string::npos)
      << failure;
  EXPECT_EQ(failure.find("$6"), std::string::npos) << failure;
  f.poll.last_error = "why";
  EXPECT_NE(lease_mark_failure_sql(f.table).find("\"why\" = $6"), std::string::npos);
  // The backlog counts retry_wait as waiting and claimed rows apart.
  const std::string backlog = backlog_sql(f.table);
  EXPECT_NE(backlog.find("count(*) FILTER (WHERE o.\"status\" IN ($1, $3))"), std::string::npos)
      << backlog;
  EXPECT_NE(backlog.find("count(*) FILTER (WHERE o.\"status\" = $4)"), std::string::npos)
      << backlog;
  EXPECT_EQ(backlog_params(f.table).size(), 4u);
}

// The retention job deletes a bounded number of sent rows and checks status and age again on the
// row it deletes; the retry changes only status, attempts and last_error.
TEST(RelaySql, RetentionAndRetryTouchOnlyWhatTheySay) {
  Fixture f;
  const std::string del = retention_sql(f.table, 1000);
  EXPECT_NE(del.find("LIMIT 1000)"), std::string::npos) << del;
  EXPECT_NE(del.find(") AND o.\"status\" = $1 AND o.\"sent_at\" < now() - "
                     "make_interval(secs => $2::bigint / 1000.0) RETURNING 1"),
            std::string::npos)
      << del;
  EXPECT_EQ(retry_sql(f.table),
            "UPDATE \"public\".\"Event \"\"Outbox\"\"\" SET \"status\" = $1, \"attempts\" = 0 "
            "WHERE ctid = ANY($2::tid[])");
  f.poll.last_error = "why";
  EXPECT_NE(retry_sql(f.table).find(", \"why\" = NULL WHERE"), std::string::npos);
  EXPECT_EQ(lock_failed_sql(f.table, false).find("$2"), std::string::npos);
  EXPECT_NE(lock_failed_sql(f.table, true).find("::text = ANY($2::text[])"), std::string::npos);
  // Without a time column the backlog has no ages.
  EXPECT_NE(backlog_sql(f.table).find("NULL::bigint"), std::string::npos);
  f.table.age_column = "created_at";
  EXPECT_NE(backlog_sql(f.table).find("min(o.\"created_at\") FILTER (WHERE o.\"status\" = $1)"),
            std::string::npos)
      << backlog_sql(f.table);
  EXPECT_EQ(text_array({"a", "b\"c", "d\\e"}), "{\"a\",\"b\\\"c\",\"d\\\\e\"}");
}

}  // namespace
}  // namespace walrelay::relay
