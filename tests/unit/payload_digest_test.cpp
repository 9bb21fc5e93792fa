#include "walrelay/router/payload_digest.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/router/event_router.hpp"

using walrelay::router::append_payload_digest;
using walrelay::router::payload_digest;
using walrelay::router::record_digest;
using walrelay::router::row_change_digest;

namespace {

// Vectors computed with coreutils: printf '%s' '<value>' | sha256sum.
TEST(PayloadDigest, IsTheLowerCaseHexSha256OfTheValueBytes) {
  EXPECT_EQ(payload_digest(R"({"a":1})"),
            "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862");
  // The empty value (an empty text payload) has the digest of no bytes.
  EXPECT_EQ(payload_digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(PayloadDigest, HashesEveryByteAsItIsWithoutNormalising) {
  // A bytea payload's raw bytes, NUL included (printf 'a\0b' | sha256sum).
  EXPECT_EQ(payload_digest(std::string_view("a\0b", 3)),
            "59b271ae1bbcb1d31d41929817f4b16fb439eb4f31520b5ad1d5ce98920a7138");
  EXPECT_EQ(payload_digest("\x01\x02\xff"),
            "0526d0e18ea19dfaad9d79166bec1e18d6221ef6b1830385fe9bf67022ed5f96");
  // Whitespace and number spelling count: the document's bytes, not its meaning.
  EXPECT_NE(payload_digest(R"({"a": 1})"), payload_digest(R"({"a":1})"));
}

TEST(PayloadDigest, AppendsToWhatIsThere) {
  std::string out = "x:";
  append_payload_digest(out, R"({"a":1})");
  EXPECT_EQ(out, "x:015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862");
  EXPECT_EQ(payload_digest("anything").size(), 64u);
}

// The header the router writes today, for a jsonb payload (its document text is the value).
TEST(PayloadDigest, IsTheHeaderTheRouterWrites) {
  walrelay::config::OutboxConfig ob;
  ob.event_id = "event_id";
  ob.aggregate_id = "subscription_id";
  ob.aggregate_type = "event_type";
  ob.payload = "payload";
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
  walrelay::router::TypeRegistry types;
  walrelay::router::RouterSettings s{"billing", "billing", "app", "0.1.0", cfg.events};
  walrelay::router::EventRouter router(s, cfg, nullptr, types);
  router.begin(9, walrelay::Lsn{0x10}, std::chrono::microseconds{0});
  walrelay::decoder::Wal2JsonDecoder decoder;
  auto change = decoder.decode(
      R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"event_id","typeoid":25,"value":"e1"},{"name":"subscription_id","typeoid":25,"value":"s1"},{"name":"event_type","typeoid":25,"value":"InvoicePaid"},{"name":"payload","typeoid":3802,"value":"{\"a\": 1.50, \"s\": \"q\\\"x\"}"}]})");
  ASSERT_TRUE(change);
  auto records = router.route(**change);
  ASSERT_TRUE(records);
  ASSERT_EQ(records->size(), 1u);
  const walrelay::Record& r = (*records)[0];
  std::map<std::string, std::string> headers;
  for (const auto& h : r.headers) headers[std::string(h.name)] = std::string(h.value);
  ASSERT_TRUE(r.value);
  EXPECT_EQ(*r.value, R"({"a": 1.50, "s": "q\"x"})");
  // printf '%s' '{"a": 1.50, "s": "q\"x"}' | sha256sum
  EXPECT_EQ(headers["payload_digest"],
            "0dbd6cd6a1a4cdc67eca5241dc6212383641cfe03cd979fcaf7984b73748da30");
  EXPECT_EQ(headers["payload_digest"], payload_digest(*r.value));
}

// A row change as walrelay publishes it (docs/events.md), with its processing time and source.
std::string envelope(std::string_view before, std::string_view after, std::string_view op,
                     std::int64_t ts_ms, std::string_view lsn) {
  std::string v = "{\"before\":" + std::string(before) + ",\"after\":" + std::string(after) +
                  R"(,"source":{"version":"0.1.0","connector":"postgresql","name":"billing",)" +
                  R"("ts_ms":)" + std::to_string(ts_ms - 5) + R"(,"lsn":)" + std::string(lsn) +
                  R"(},"transaction":null,"op":")" + std::string(op) + R"(","ts_ms":)" +
                  std::to_string(ts_ms) + R"(,"ts_us":)" + std::to_string(ts_ms * 1000) +
                  R"(,"ts_ns":)" + std::to_string(ts_ms * 1000000) + "}";
  return v;
}

TEST(RowChangeDigest, IsTheSha256OfTheCanonicalOpBeforeAfterText) {
  // printf '%s' '{"op":"c","before":null,"after":{"id":1}}' | sha256sum
  EXPECT_EQ(row_change_digest(envelope("null", R"({"id":1})", "c", 1700000000000, "100")),
            "c2d713f398e4aac52e9c189a3e249c292b65502718feb80d2157d75d06d4d4fe");
  // Whitespace outside strings does not count; inside a string it does.
  EXPECT_EQ(row_change_digest(R"({ "op" : "c", "before" : null, "after" : { "id" : 1 },
                                  "source": {} })"),
            "c2d713f398e4aac52e9c189a3e249c292b65502718feb80d2157d75d06d4d4fe");
  EXPECT_NE(row_change_digest(envelope("null", R"({"s":"a b"})", "c", 1, "1")),
            row_change_digest(envelope("null", R"({"s":"ab"})", "c", 1, "1")));
}

TEST(RowChangeDigest, TheSameChangeWithAnotherTsMsAndSourceHasTheSameDigest) {
  const std::string first = envelope(R"({"id":7,"total":"12.50"})", R"({"id":7,"total":"13.00"})",
                                     "u", 1700000000000, "100");
  const std::string replay = envelope(R"({"id":7,"total":"12.50"})", R"({"id":7,"total":"13.00"})",
                                      "u", 1700000099999, "200");
  ASSERT_NE(first, replay);
  ASSERT_TRUE(row_change_digest(first));
  EXPECT_EQ(row_change_digest(first), row_change_digest(replay));
  EXPECT_EQ(record_digest(first), record_digest(replay));
  // The whole value's SHA-256 (an outbox payload's digest) differs, as it did before.
  EXPECT_NE(payload_digest(first), payload_digest(replay));
  // A transaction block is not a row value either.
  std::string with_tx = first;
  with_tx.replace(with_tx.find(R"("transaction":null)"), 18,
                  R"("transaction":{"id":"9:100","total_order":1,"data_collection_order":1})");
  EXPECT_EQ(row_change_digest(with_tx), row_change_digest(first));
}

TEST(RowChangeDigest, AnotherRowValueOrOpHasAnotherDigest) {
  const auto base = row_change_digest(envelope("null", R"({"id":7,"n":1})", "c", 1, "1"));
  EXPECT_NE(row_change_digest(envelope("null", R"({"id":7,"n":2})", "c", 1, "1")), base);
  EXPECT_NE(row_change_digest(envelope("null", R"({"id":7,"n":1})", "r", 1, "1")), base);
  EXPECT_NE(row_change_digest(envelope(R"({"id":7,"n":1})", "null", "d", 1, "1")),
            row_change_digest(envelope("null", R"({"id":7,"n":1})", "d", 1, "1")));
}

TEST(RowChangeDigest, NumbersAreHashedAsWrittenNeverThroughADouble) {
  // Equal as doubles, different as decimals: different digests.
  EXPECT_NE(row_change_digest(envelope("null", R"({"n":12345678901234567890})", "c", 1, "1")),
            row_change_digest(envelope("null", R"({"n":12345678901234567891})", "c", 1, "1")));
  EXPECT_NE(row_change_digest(envelope("null", R"({"n":1.50})", "c", 1, "1")),
            row_change_digest(envelope("null", R"({"n":1.5})", "c", 1, "1")));
}

TEST(RowChangeDigest, AJsonNullAndAMissingFieldDiffer) {
  EXPECT_NE(row_change_digest(envelope("null", R"({"id":1,"note":null})", "c", 1, "1")),
            row_change_digest(envelope("null", R"({"id":1})", "c", 1, "1")));
  // A missing `before` member is not `"before":null`.
  const std::string without_before = R"({"after":{"id":1},"source":{"lsn":1},"op":"c","ts_ms":5})";
  EXPECT_NE(row_change_digest(without_before),
            row_change_digest(envelope("null", R"({"id":1})", "c", 1, "1")));
  // printf '%s' '{"op":"c","after":{"id":1}}' | sha256sum
  EXPECT_EQ(row_change_digest(without_before),
            "42dc540a7e8f1c75d4edcd3a732ffb7c16cdc0cbb8981e489e905f990b03adca");
}

TEST(RowChangeDigest, AValueThatIsNoEnvelopeHasNoneAndRecordDigestIsItsSha256) {
  for (const std::string& v :
       {std::string(R"({"invoice":1001})"), std::string(R"({"op":"c","after":{"id":1}})"),
        std::string(R"({"op":1,"source":{},"after":null})"),
        std::string(R"({"op":"c","source":"pg","after":null})"),
        std::string(R"({"op":"c","source":{},"after":[1]})"),
        std::string(R"({"op":"c","op":"d","source":{},"after":null})"),
        std::string(R"({"op":"c","source":{},"after":null} trailing)"), std::string("not json"),
        std::string("[1]"), std::string("")}) {
    EXPECT_FALSE(row_change_digest(v)) << v;
    EXPECT_EQ(record_digest(v), payload_digest(v)) << v;
  }
}

// The connector's own records: the same INSERT routed by two routers (a restart) with another
// commit time, so another `source` and top-level ts_ms: the same row_change_digest.
TEST(RowChangeDigest, TheRoutersReplayOfAChangeHasTheSameDigest) {
  walrelay::config::TableConfig t;
  t.name = "public.invoices";
  t.schema_pattern = "public";
  t.table_pattern = "invoices";
  walrelay::config::Config cfg;
  cfg.name = "billing";
  cfg.topics.prefix = "billing";
  cfg.tables = {t};
  walrelay::router::TypeRegistry types;
  walrelay::router::RouterSettings s{"billing", "billing", "app", "0.1.0", cfg.events};
  const auto value_at = [&](std::int64_t commit_us) {
    walrelay::router::EventRouter router(s, cfg, nullptr, types);
    router.begin(9, walrelay::Lsn{0x10}, std::chrono::microseconds{commit_us});
    walrelay::decoder::Wal2JsonDecoder decoder;
    auto change = decoder.decode(
        R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"id","typeoid":23,"value":7},{"name":"amount","typeoid":1700,"value":12345678901234567890.10},{"name":"note","typeoid":25,"value":null}],"pk":[{"name":"id","typeoid":23}]})");
    EXPECT_TRUE(change);
    auto records = router.route(**change);
    EXPECT_TRUE(records);
    EXPECT_EQ(records->size(), 1u);
    return std::string(*(*records)[0].value);
  };
  const std::string first = value_at(1765000000000000);
  const std::string replay = value_at(1765000042000000);
  ASSERT_NE(first, replay);
  ASSERT_TRUE(row_change_digest(first)) << first;
  EXPECT_EQ(row_change_digest(first), row_change_digest(replay));
  EXPECT_NE(payload_digest(first), payload_digest(replay));
}

}  // namespace
