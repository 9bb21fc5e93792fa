#include "walrelay/router/payload_digest.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/router/event_router.hpp"

using walrelay::router::append_payload_digest;
using walrelay::router::payload_digest;

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

}  // namespace
