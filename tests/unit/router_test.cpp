#include <gtest/gtest.h>

#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/router/event_router.hpp"

using walrelay::Lsn;
using walrelay::Record;
using walrelay::config::OutboxConfig;
using walrelay::config::TableConfig;
using walrelay::decoder::Wal2JsonDecoder;
using walrelay::router::EventRouter;
using walrelay::router::TableRole;
using walrelay::router::TxnInfo;

namespace {

TableConfig table(std::string schema, std::string name) {
  TableConfig t;
  t.name = schema + "." + name;
  t.schema_pattern = std::move(schema);
  t.table_pattern = std::move(name);
  return t;
}

EventRouter make_router() {
  auto outbox = table("public", "event_outbox");
  outbox.outbox = OutboxConfig{"event_id", "subscription_id", "event_type", "payload",
                               "outbox.event.{aggregate_type}"};
  return EventRouter({"billing", "billing", "app", "0.1.0"},
                     {table("public", "invoices"), outbox, table("audit", "*")});
}

const TxnInfo kTxn{1031, *Lsn::parse("0/26B3D938"), 1796005277104, 3};

struct Routed {
  std::vector<std::string> topics, keys, values, ids;
  std::vector<bool> null_key, null_value;
};

Routed route(EventRouter& r, const std::string& line) {
  static Wal2JsonDecoder d;
  auto c = d.decode(line);
  EXPECT_TRUE(c) << (c ? "" : c.error().reason);
  Routed out;
  if (!c) return out;
  auto recs = r.route(**c, kTxn);
  EXPECT_TRUE(recs) << (recs ? "" : recs.error().reason);
  if (!recs) return out;
  for (const Record& rec : *recs) {
    out.topics.emplace_back(rec.topic);
    out.null_key.push_back(!rec.key);
    out.keys.emplace_back(rec.key.value_or(""));
    out.null_value.push_back(!rec.value);
    out.values.emplace_back(rec.value.value_or(""));
    for (const auto& h : rec.headers) {
      if (h.name == "id") out.ids.emplace_back(h.value);
    }
  }
  return out;
}

}  // namespace

TEST(Router, InsertBecomesCreateEventKeyedByPrimaryKeyInColumnOrder) {
  auto r = make_router();
  auto out = route(
      r,
      R"({"action":"I","xid":1031,"lsn":"0/26B3D838","schema":"public","table":"invoices","columns":[{"name":"b","typeoid":23,"value":2},{"name":"amount","typeoid":1700,"value":12345678901234567890.123456789},{"name":"a","typeoid":25,"value":"x"}],"pk":[{"name":"a","typeoid":25},{"name":"b","typeoid":23}]})");
  ASSERT_EQ(out.topics.size(), 1u);
  EXPECT_EQ(out.topics[0], "billing.public.invoices");
  // Column order (b before a), as Debezium builds the key, not the pk list's order.
  EXPECT_EQ(out.keys[0], R"({"b":2,"a":"x"})");
  const std::string& v = out.values[0];
  EXPECT_EQ(
      v.rfind(
          R"({"before":null,"after":{"b":2,"amount":12345678901234567890.123456789,"a":"x"},"source":{)",
          0),
      0u)
      << v;
  EXPECT_NE(
      v.find(
          R"("connector":"postgresql","name":"billing","ts_ms":1796005277104,"snapshot":"false","db":"app","schema":"public","table":"invoices","txId":1031,"lsn":649320504,"xmin":null},"op":"c","ts_ms":)"),
      std::string::npos)
      << v;
  EXPECT_EQ(out.ids[0], "0/26B3D938:3");
}

TEST(Router, UpdateAndDeleteCarryIdentityAsBefore) {
  auto r = make_router();
  auto u = route(
      r,
      R"({"action":"U","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"id","typeoid":23,"value":7},{"name":"n","typeoid":25,"value":"new"}],"identity":[{"name":"id","typeoid":23,"value":7}],"pk":[{"name":"id","typeoid":23}]})");
  ASSERT_EQ(u.values.size(), 1u);
  EXPECT_EQ(u.keys[0], R"({"id":7})");
  EXPECT_EQ(u.values[0].rfind(R"({"before":{"id":7},"after":{"id":7,"n":"new"},)", 0), 0u);
  EXPECT_NE(u.values[0].find(R"("op":"u")"), std::string::npos);

  auto d = route(
      r,
      R"({"action":"D","xid":5,"lsn":"0/10","schema":"public","table":"invoices","identity":[{"name":"id","typeoid":23,"value":7}],"pk":[{"name":"id","typeoid":23}]})");
  ASSERT_EQ(d.values.size(), 1u);
  EXPECT_EQ(d.keys[0], R"({"id":7})");
  EXPECT_EQ(d.values[0].rfind(R"({"before":{"id":7},"after":null,)", 0), 0u);
  EXPECT_NE(d.values[0].find(R"("op":"d")"), std::string::npos);
}

TEST(Router, TableWithoutPrimaryKeyGetsNullKey) {
  auto r = make_router();
  auto out = route(
      r,
      R"({"action":"I","xid":5,"lsn":"0/10","schema":"audit","table":"log","columns":[{"name":"msg","typeoid":25,"value":"hi"}]})");
  ASSERT_EQ(out.topics.size(), 1u);
  EXPECT_EQ(out.topics[0], "billing.audit.log");
  EXPECT_TRUE(out.null_key[0]);
}

TEST(Router, UnconfiguredTablesAndTruncateProduceNothing) {
  auto r = make_router();
  EXPECT_TRUE(
      route(
          r,
          R"({"action":"I","xid":5,"lsn":"0/10","schema":"public","table":"other","columns":[{"name":"id","typeoid":23,"value":1}]})")
          .topics.empty());
  EXPECT_TRUE(
      route(r, R"({"action":"T","xid":5,"lsn":"0/10","schema":"public","table":"invoices"})")
          .topics.empty());
  EXPECT_EQ(r.role_of("public", "other"), TableRole::kIgnored);
  EXPECT_EQ(r.role_of("audit", "anything"), TableRole::kRowChange);
  EXPECT_EQ(r.role_of("public", "event_outbox"), TableRole::kOutbox);
}

TEST(Router, TopicNamesOnlyUseCharactersKafkaAllows) {
  auto r = make_router();
  EXPECT_EQ(r.row_topic("my schema", "Tä\"ble"), "billing.my_schema.T___ble");
}

constexpr const char* kOutboxInsert =
    R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"outbox_id","typeoid":20,"value":1},{"name":"event_id","typeoid":2950,"value":"4d649ef9-aa45-4515-b3e2-da097296fe99"},{"name":"subscription_id","typeoid":2950,"value":"11111111-1111-1111-1111-111111111111"},{"name":"event_type","typeoid":25,"value":"InvoicePaid"},{"name":"payload","typeoid":3802,"value":"{\"a\": 1.50, \"s\": \"q\\\"x\"}"}],"pk":[{"name":"outbox_id","typeoid":20}]})";

TEST(Router, OutboxInsertBecomesOneDomainEvent) {
  auto r = make_router();
  auto out = route(r, kOutboxInsert);
  ASSERT_EQ(out.topics.size(), 1u);
  EXPECT_EQ(out.topics[0], "outbox.event.InvoicePaid");
  EXPECT_EQ(out.keys[0], "11111111-1111-1111-1111-111111111111");
  // The jsonb payload arrives as JSON, not as a JSON string holding JSON.
  EXPECT_EQ(out.values[0], R"({"a": 1.50, "s": "q\"x"})");
  EXPECT_EQ(out.ids[0], "4d649ef9-aa45-4515-b3e2-da097296fe99");
}

TEST(Router, OutboxUpdateAndDeleteProduceNothing) {
  auto r = make_router();
  EXPECT_TRUE(
      route(
          r,
          R"({"action":"U","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"outbox_id","typeoid":20,"value":1}],"identity":[{"name":"outbox_id","typeoid":20,"value":1}],"pk":[{"name":"outbox_id","typeoid":20}]})")
          .topics.empty());
  EXPECT_TRUE(
      route(
          r,
          R"({"action":"D","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","identity":[{"name":"outbox_id","typeoid":20,"value":1}],"pk":[{"name":"outbox_id","typeoid":20}]})")
          .topics.empty());
}

TEST(Router, OutboxRowThatCannotBeMappedIsAnError) {
  auto r = make_router();
  Wal2JsonDecoder d;
  auto c = d.decode(
      R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"event_id","typeoid":2950,"value":"4d649ef9-aa45-4515-b3e2-da097296fe99"},{"name":"subscription_id","typeoid":2950,"value":null},{"name":"event_type","typeoid":25,"value":"X"},{"name":"payload","typeoid":3802,"value":"{}"}]})");
  ASSERT_TRUE(c);
  auto recs = r.route(**c, kTxn);
  ASSERT_FALSE(recs);
  EXPECT_NE(recs.error().reason.find("subscription_id"), std::string::npos);

  auto bad_topic = d.decode(
      R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"event_id","typeoid":25,"value":"e1"},{"name":"subscription_id","typeoid":25,"value":"s"},{"name":"event_type","typeoid":25,"value":"Invoice Paid/é"},{"name":"payload","typeoid":3802,"value":"{}"}]})");
  ASSERT_TRUE(bad_topic);
  auto recs2 = r.route(**bad_topic, kTxn);
  ASSERT_FALSE(recs2);
  EXPECT_NE(recs2.error().reason.find("Invoice Paid"), std::string::npos);
}

TEST(CommitTimestamp, ParsesIsoWithOffsets) {
  using walrelay::router::parse_commit_timestamp_ms;
  // 2026-11-30T00:14:37.104367Z
  EXPECT_EQ(parse_commit_timestamp_ms("2026-11-30 00:14:37.104367+00"), 1795997677104);
  EXPECT_EQ(parse_commit_timestamp_ms("2026-11-29 19:14:37.104367-05"), 1795997677104);
  EXPECT_EQ(parse_commit_timestamp_ms("2026-11-30 05:44:37.1+05:30"), 1795997677100);
  EXPECT_EQ(parse_commit_timestamp_ms("1970-01-01 00:00:00+00"), 0);
  EXPECT_FALSE(parse_commit_timestamp_ms("yesterday"));
  EXPECT_FALSE(parse_commit_timestamp_ms(""));
}
