#include "walrelay/router/outbox_record.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/router/event_router.hpp"

using walrelay::Record;
using walrelay::config::OutboxConfig;
using walrelay::decoder::Column;
using walrelay::router::OutboxRecordBuilder;
using walrelay::router::RecordBuffer;
using walrelay::router::TypeRegistry;

namespace {

OutboxConfig billing_outbox() {
  OutboxConfig o;
  o.event_id = "event_id";
  o.aggregate_id = "subscription_id";
  o.aggregate_type = "event_type";
  o.payload = "payload";
  return o;
}

// One field of a row in the decoder's representation: `value` a wal2json JSON token (`null` for
// SQL NULL), `type_oid` the column's pg_type OID.
Column field(std::string_view name, std::uint32_t type_oid, std::string_view value) {
  Column c;
  c.name = name;
  c.type_oid = type_oid;
  c.value = value;
  return c;
}

constexpr std::uint32_t kText = 25;
constexpr std::uint32_t kUuid = 2950;
constexpr std::uint32_t kJsonb = 3802;
constexpr std::uint32_t kBytea = 17;
constexpr std::uint32_t kTimestamptz = 1184;

std::vector<Column> invoice_paid_row() {
  return {field("outbox_id", 20, "1"),
          field("event_id", kUuid, R"("4d649ef9-aa45-4515-b3e2-da097296fe99")"),
          field("subscription_id", kUuid, R"("11111111-1111-1111-1111-111111111111")"),
          field("event_type", kText, R"("InvoicePaid")"),
          field("payload", kJsonb, R"("{\"a\": 1.50, \"s\": \"q\\\"x\"}")"),
          field("tenant", kText, R"("acme")"),
          field("created_at", kTimestamptz, R"("2024-03-10 06:30:00.12+00")")};
}

const auto kWhere = [] { return std::string("outbox table public.event_outbox"); };

struct Built {
  std::string topic;
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::string>> headers;  // in order
  std::int64_t timestamp_ms = 0;
};

Built copy(const Record& r) {
  Built b;
  b.topic = r.topic;
  if (r.key) b.key = std::string(*r.key);
  if (r.value) b.value = std::string(*r.value);
  for (const auto& h : r.headers) b.headers.emplace_back(h.name, h.value);
  b.timestamp_ms = r.timestamp_ms;
  return b;
}

using Headers = std::vector<std::pair<std::string, std::string>>;

TEST(OutboxRecord, RowBecomesTheDomainEventsRecord) {
  TypeRegistry types;
  OutboxRecordBuilder builder(types);
  const OutboxConfig ob = billing_outbox();
  const auto row = invoice_paid_row();
  RecordBuffer out;
  ASSERT_TRUE(builder.build(ob, row, 1795997677104, kWhere, out));
  const Built b = copy(out.record());
  EXPECT_EQ(b.topic, "outbox.event.InvoicePaid");
  EXPECT_EQ(b.key, "11111111-1111-1111-1111-111111111111");
  // A jsonb payload is the document itself, not a JSON string holding it.
  EXPECT_EQ(b.value, R"({"a": 1.50, "s": "q\"x"})");
  EXPECT_EQ(b.headers, (Headers{{"id", "4d649ef9-aa45-4515-b3e2-da097296fe99"}}));
  EXPECT_EQ(b.timestamp_ms, 1795997677104);  // the fallback: no timestamp column configured
  EXPECT_EQ(out.id, "4d649ef9-aa45-4515-b3e2-da097296fe99");
}

TEST(OutboxRecord, OptionsGiveHeadersInOrderTimestampAndTopic) {
  TypeRegistry types;
  OutboxRecordBuilder builder(types);
  OutboxConfig ob = billing_outbox();
  ob.event_type = "event_type";
  ob.timestamp = "created_at";
  ob.additional = {{"tenant", "tenant"}, {"outbox_id", "outboxId"}, {"absent", "absent"}};
  ob.payload_digest = true;
  ob.topic = "billing.{aggregate_type}.events";
  const auto row = invoice_paid_row();
  RecordBuffer out;
  ASSERT_TRUE(builder.build(ob, row, 0, kWhere, out));
  const Built b = copy(out.record());
  EXPECT_EQ(b.topic, "billing.InvoicePaid.events");
  // id, eventType, the additional headers in configuration order (a column the row lacks gives
  // none), payload_digest (printf '%s' '{"a": 1.50, "s": "q\"x"}' | sha256sum).
  EXPECT_EQ(b.headers,
            (Headers{{"id", "4d649ef9-aa45-4515-b3e2-da097296fe99"},
                     {"eventType", "InvoicePaid"},
                     {"tenant", "acme"},
                     {"outboxId", "1"},
                     {"payload_digest",
                      "0dbd6cd6a1a4cdc67eca5241dc6212383641cfe03cd979fcaf7984b73748da30"}}));
  EXPECT_EQ(b.timestamp_ms, 1710052200120);  // 2024-03-10T06:30:00.12Z
}

TEST(OutboxRecord, SameBytesAsTheEventRouterForTheSameRow) {
  // The WAL mode's record of an outbox INSERT and the builder's record of the same row's fields.
  OutboxConfig ob = billing_outbox();
  ob.event_type = "event_type";
  ob.additional = {{"tenant", "tenant"}};
  ob.payload_digest = true;
  walrelay::config::TableConfig t;
  t.name = "public.event_outbox";
  t.schema_pattern = "public";
  t.table_pattern = "event_outbox";
  t.outbox = ob;
  walrelay::config::Config cfg;
  cfg.name = "billing";
  cfg.topics.prefix = "billing";
  cfg.tables = {t};
  TypeRegistry types;
  walrelay::router::RouterSettings s{"billing", "billing", "app", "0.1.0", cfg.events};
  walrelay::router::EventRouter router(s, cfg, nullptr, types);
  router.begin(9, walrelay::Lsn{0x10}, std::chrono::microseconds{1795997677104367});
  walrelay::decoder::Wal2JsonDecoder decoder;
  auto change = decoder.decode(
      R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"outbox_id","typeoid":20,"value":1},{"name":"event_id","typeoid":2950,"value":"4d649ef9-aa45-4515-b3e2-da097296fe99"},{"name":"subscription_id","typeoid":2950,"value":"11111111-1111-1111-1111-111111111111"},{"name":"event_type","typeoid":25,"value":"InvoicePaid"},{"name":"payload","typeoid":3802,"value":"{\"a\": 1.50, \"s\": \"q\\\"x\"}"},{"name":"tenant","typeoid":25,"value":"acme"}],"pk":[{"name":"outbox_id","typeoid":20}]})");
  ASSERT_TRUE(change);
  auto routed = router.route(**change);
  ASSERT_TRUE(routed);
  ASSERT_EQ(routed->size(), 1u);
  const Built from_router = copy((*routed)[0]);

  OutboxRecordBuilder builder(types);
  RecordBuffer out;
  ASSERT_TRUE(builder.build(ob, (*change)->columns, 1795997677104, kWhere, out));
  const Built from_builder = copy(out.record());
  EXPECT_EQ(from_builder.topic, from_router.topic);
  EXPECT_EQ(from_builder.key, from_router.key);
  EXPECT_EQ(from_builder.value, from_router.value);
  EXPECT_EQ(from_builder.headers, from_router.headers);
  EXPECT_EQ(from_builder.timestamp_ms, from_router.timestamp_ms);
}

TEST(OutboxRecord, LocateNamesAMissingOrNullColumn) {
  const OutboxConfig ob = billing_outbox();
  auto row = invoice_paid_row();
  EXPECT_TRUE(OutboxRecordBuilder::locate(ob, row, kWhere));
  row[1].value = "null";  // event_id
  auto e = OutboxRecordBuilder::locate(ob, row, kWhere);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().reason,
            "outbox table public.event_outbox: event id 'event_id' is missing or NULL");
  row = invoice_paid_row();
  row[2].value = "null";  // subscription_id
  e = OutboxRecordBuilder::locate(ob, row, kWhere);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().reason,
            "outbox table public.event_outbox: aggregate id 'subscription_id' is missing or NULL");
  row = invoice_paid_row();
  row.erase(row.begin() + 3);  // event_type, the aggregate type
  e = OutboxRecordBuilder::locate(ob, row, kWhere);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().reason,
            "outbox table public.event_outbox: aggregate type 'event_type' is missing or NULL");
  row = invoice_paid_row();
  row.erase(row.begin() + 4);  // payload
  e = OutboxRecordBuilder::locate(ob, row, kWhere);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().reason,
            "outbox table public.event_outbox: payload column 'payload' is missing");
}

TEST(OutboxRecord, EmptyAggregateIdIsAnErrorUnlessAllowed) {
  TypeRegistry types;
  OutboxRecordBuilder builder(types);
  OutboxConfig ob = billing_outbox();
  auto row = invoice_paid_row();
  row[2].value = R"("")";
  RecordBuffer out;
  auto r = builder.build(ob, row, 0, kWhere, out);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().reason.find("'subscription_id' is the empty string"), std::string::npos)
      << r.error().reason;
  ob.allow_empty_aggregate_id = true;
  ASSERT_TRUE(builder.build(ob, row, 0, kWhere, out));
  EXPECT_EQ(out.record().key, "");
}

TEST(OutboxRecord, TopicMustBeAKafkaTopicName) {
  TypeRegistry types;
  OutboxRecordBuilder builder(types);
  const OutboxConfig ob = billing_outbox();
  auto row = invoice_paid_row();
  row[3].value = R"("Invoice Paid")";
  RecordBuffer out;
  auto r = builder.build(ob, row, 0, kWhere, out);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().reason,
            "outbox table public.event_outbox: aggregate type gives topic 'outbox.event.Invoice "
            "Paid', which has characters Kafka does not allow");
  row[3].value = R"("")";
  r = builder.build(ob, row, 0, kWhere, out);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().reason,
            "outbox table public.event_outbox: aggregate type 'event_type' is empty");
}

TEST(OutboxRecord, NullPayloadIsATombstoneOnlyWhenConfigured) {
  TypeRegistry types;
  OutboxRecordBuilder builder(types);
  OutboxConfig ob = billing_outbox();
  ob.payload_digest = true;
  auto row = invoice_paid_row();
  row[4].value = "null";
  RecordBuffer out;
  auto r = builder.build(ob, row, 0, kWhere, out);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().reason.find("is NULL (set tombstone_on_empty_payload"), std::string::npos);
  ob.tombstone_on_empty_payload = true;
  ASSERT_TRUE(builder.build(ob, row, 0, kWhere, out));
  const Built b = copy(out.record());
  EXPECT_FALSE(b.value);
  EXPECT_EQ(b.key, "11111111-1111-1111-1111-111111111111");
  // No digest of a value that is not there.
  EXPECT_EQ(b.headers, (Headers{{"id", "4d649ef9-aa45-4515-b3e2-da097296fe99"}}));
}

TEST(OutboxRecord, TextPayloadMustHoldJsonAndByteaIsItsBytes) {
  TypeRegistry types;
  OutboxRecordBuilder builder(types);
  OutboxConfig ob = billing_outbox();
  ob.payload_digest = true;
  auto row = invoice_paid_row();
  row[4] = field("payload", kText, R"("not json")");
  RecordBuffer out;
  auto r = builder.build(ob, row, 0, kWhere, out);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().reason, "outbox table public.event_outbox: payload 'payload' is not JSON");
  row[4] = field("payload", kText, R"("[1, 2e400, 123456789012345678901234567890]")");
  ASSERT_TRUE(builder.build(ob, row, 0, kWhere, out));
  EXPECT_EQ(out.record().value, "[1, 2e400, 123456789012345678901234567890]");
  // bytea: wal2json's hex digits (with or without `\x`) become the bytes.
  row[4] = field("payload", kBytea, R"("\\x0102ff")");
  ASSERT_TRUE(builder.build(ob, row, 0, kWhere, out));
  EXPECT_EQ(out.record().value, std::string_view("\x01\x02\xff"));
  // printf '\x01\x02\xff' | sha256sum
  EXPECT_EQ(
      copy(out.record()).headers.back(),
      (std::pair<std::string, std::string>{
          "payload_digest", "0526d0e18ea19dfaad9d79166bec1e18d6221ef6b1830385fe9bf67022ed5f96"}));
  row[4] = field("payload", kBytea, R"("0102f")");
  r = builder.build(ob, row, 0, kWhere, out);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().reason, "outbox table public.event_outbox: malformed bytea payload");
}

TEST(OutboxRecord, BufferIsReusedAndCleared) {
  TypeRegistry types;
  OutboxRecordBuilder builder(types);
  OutboxConfig ob = billing_outbox();
  ob.event_type = "event_type";
  const auto row = invoice_paid_row();
  RecordBuffer out;
  ASSERT_TRUE(builder.build(ob, row, 0, kWhere, out));
  ASSERT_TRUE(builder.build(ob, row, 0, kWhere, out));
  EXPECT_EQ(copy(out.record()).headers.size(), 2u);  // not four
  EXPECT_EQ(out.record().topic, "outbox.event.InvoicePaid");
  out.clear();
  EXPECT_TRUE(out.topic.empty());
  EXPECT_TRUE(out.header_names.empty());
  EXPECT_TRUE(out.has_value);
}

TEST(OutboxRecord, MessageFieldsBuildTheSameRecordAsARow) {
  std::string buffer;
  std::vector<Column> fields;
  auto parsed = walrelay::router::outbox_message_fields(
      R"({"event_id": "4d649ef9-aa45-4515-b3e2-da097296fe99", "subscription_id": "11111111-1111-1111-1111-111111111111", "event_type": "InvoicePaid", "payload": {"a": 1.50, "s": "q\"x"}})",
      buffer, fields);
  ASSERT_TRUE(parsed) << parsed.error();
  ASSERT_EQ(fields.size(), 4u);
  EXPECT_EQ(fields[3].name, "payload");
  EXPECT_EQ(fields[3].value, R"({"a": 1.50, "s": "q\"x"})");
  TypeRegistry types;
  OutboxRecordBuilder builder(types);
  const OutboxConfig ob = billing_outbox();
  RecordBuffer from_message;
  ASSERT_TRUE(builder.build(ob, fields, 7, kWhere, from_message));
  const Built m = copy(from_message.record());
  RecordBuffer from_row;
  ASSERT_TRUE(builder.build(ob, invoice_paid_row(), 7, kWhere, from_row));
  const Built r = copy(from_row.record());
  EXPECT_EQ(m.topic, r.topic);
  EXPECT_EQ(m.key, r.key);
  EXPECT_EQ(m.value, r.value);
  EXPECT_EQ(m.headers, r.headers);
  EXPECT_EQ(m.timestamp_ms, r.timestamp_ms);

  auto bad = walrelay::router::outbox_message_fields("[1]", buffer, fields);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "content is not a JSON object");
  bad = walrelay::router::outbox_message_fields(R"({"a" 1})", buffer, fields);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "content is not valid JSON");
}

}  // namespace
