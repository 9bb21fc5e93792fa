// The inbox's rules that need no services: a handler's placeholder count, the SQLSTATE
// classification of a failed statement (PostgreSQL docs Appendix A), the schema's DDL.
#include <gtest/gtest.h>

#include "walrelay/inbox/event.hpp"
#include "walrelay/inbox/failure.hpp"
#include "walrelay/inbox/schema.hpp"

namespace walrelay::inbox {
namespace {

using detail::classify;
using detail::Failure;

TEST(InboxRules, PlaceholderCountIsTheHighestDollarNumberOutsideLiterals) {
  EXPECT_EQ(placeholder_count("select billing.advance_dunning($1::jsonb)"), 1);
  EXPECT_EQ(placeholder_count("insert into t (id, n) values ($2, 1)"), 2);
  EXPECT_EQ(placeholder_count("select $4::jsonb, $1"), 4);
  EXPECT_EQ(placeholder_count("select 1"), 0);
  EXPECT_EQ(placeholder_count("select '$3', \"$2\""), 0);
  EXPECT_EQ(placeholder_count("select 1 -- $3\n, $1"), 1);
  EXPECT_EQ(placeholder_count("select /* $4 */ $2"), 2);
  EXPECT_EQ(placeholder_count("select a$1 from t"), 0);  // `a$1` is an identifier
  EXPECT_EQ(placeholder_count("select $12"), 12);
}

// The stored form of a record's headers (Event::headers_json) reads back to the same headers, and
// decoding a stored record again gives what its arrival gave: redrive's decode step.
TEST(InboxRules, AStoredRecordDecodesAgainAsItArrived) {
  const config::InboxConfig cfg;
  Event raw;
  raw.topic = "outbox.event.payment";
  raw.partition = 2;
  raw.offset = 41;
  raw.key = "inv-7";
  raw.value = R"({"n":1})";
  const Headers headers = {{"id", "e-1"},
                           {"payload_digest", std::string(64, '0')},
                           {"eventType", "PaymentFailed"},
                           {"traceparent", std::nullopt},
                           {"note", "quote \" and é"}};
  const Event first = decode_event(raw, headers, cfg);
  EXPECT_EQ(first.id, "e-1");
  EXPECT_EQ(first.aggregate, "inv-7");
  EXPECT_EQ(first.event_type, "PaymentFailed");
  EXPECT_NE(first.problem.find("does not match"), std::string::npos) << first.problem;

  const auto stored = headers_from_json(first.headers_json);
  ASSERT_TRUE(stored.has_value()) << first.headers_json;
  EXPECT_EQ(*stored, headers);
  const Event again = decode_event(raw, *stored, cfg);
  EXPECT_EQ(again.id, first.id);
  EXPECT_EQ(again.digest, first.digest);
  EXPECT_EQ(again.problem, first.problem);
  EXPECT_EQ(again.headers_json, first.headers_json);

  EXPECT_FALSE(headers_from_json("[]").has_value());
  EXPECT_FALSE(headers_from_json(R"({"id":1})").has_value());
  EXPECT_FALSE(headers_from_json("not json").has_value());
}

pg::Error server_error(std::string sqlstate) {
  pg::Error e;
  e.kind = pg::classify_sqlstate(sqlstate);
  e.sqlstate = std::move(sqlstate);
  return e;
}

TEST(InboxRules, DataConstraintAndRaisedErrorsQuarantineTheEvent) {
  for (const char* code :
       {"22P02", "22021", "22003", "23505", "23502", "P0001", "P0004", "54000"}) {
    EXPECT_EQ(classify(server_error(code)), Failure::kEvent) << code;
  }
}

TEST(InboxRules, SerializationDeadlockAndLostConnectionsRetryTheBatch) {
  for (const char* code : {"40001", "40P01", "08006", "57P01", "53300"}) {
    EXPECT_EQ(classify(server_error(code)), Failure::kRetry) << code;
  }
  EXPECT_EQ(classify(pg::client_error("server closed the connection unexpectedly")),
            Failure::kRetry);
}

TEST(InboxRules, OtherStatementErrorsStopTheInbox) {
  for (const char* code : {"42883", "42601", "42P01", "42501", "0A000"}) {
    EXPECT_EQ(classify(server_error(code)), Failure::kFatal) << code;
  }
}

TEST(InboxRules, TheSchemaIsCreatedIdempotentlyInOneTransaction) {
  const std::string sql = schema_sql("billing_inbox");
  EXPECT_TRUE(sql.starts_with("BEGIN;\n")) << sql;
  EXPECT_TRUE(sql.ends_with("COMMIT;\n")) << sql;
  EXPECT_NE(sql.find("pg_advisory_xact_lock"), std::string::npos);
  for (const char* t :
       {"ledger", "offsets", "versions", "deferred", "quarantine", "events", "audit"}) {
    EXPECT_NE(sql.find(std::string("CREATE TABLE IF NOT EXISTS billing_inbox.") + t + " ("),
              std::string::npos)
        << t;
  }
  EXPECT_EQ(sql.find("CREATE TABLE billing_inbox"), std::string::npos);
}

}  // namespace
}  // namespace walrelay::inbox
