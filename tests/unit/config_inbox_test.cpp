// The `inbox:` section (config/inbox.hpp): defaults, every spelling of a field's source, and the
// key each bad value is reported at.
#include <gtest/gtest.h>

#include "config_test_support.hpp"
#include "walrelay/config/inbox_load.hpp"

namespace walrelay::config::test {
namespace {

constexpr const char* kInboxMinimal = R"(inbox:
  conninfo: host=db dbname=billing_consumer
  group_id: billing-inbox
  topics: [outbox.event.invoice]
)";

LoadResult load_inbox(const std::string& yaml) {
  return load_inbox_config_text(yaml, "inbox.yaml", env_of({}));
}

TEST(ConfigInbox, MinimalHasTheDocumentedDefaults) {
  const auto r = load_inbox(kInboxMinimal);
  ASSERT_TRUE(r.config) << dump(r.errors);
  const InboxConfig& in = r.config->inbox;
  EXPECT_TRUE(in.present);
  EXPECT_EQ(in.conninfo, "host=db dbname=billing_consumer");
  EXPECT_EQ(in.group_id, "billing-inbox");
  EXPECT_EQ(in.topics, std::vector<std::string>{"outbox.event.invoice"});
  EXPECT_EQ(in.tenant.source, InboxFieldSource::kNone);
  EXPECT_EQ(to_string(in.event_id), "header:id");
  EXPECT_EQ(to_string(in.digest), "header:payload_digest");
  EXPECT_EQ(in.aggregate.source, InboxFieldSource::kKey);
  EXPECT_EQ(in.version.source, InboxFieldSource::kNone);
  EXPECT_EQ(in.schema, "walrelay");
  EXPECT_TRUE(in.handlers.empty());
  EXPECT_EQ(in.batch_max_events, 500U);
  EXPECT_EQ(in.batch_max_wait, 20ms);
  EXPECT_EQ(in.retention, std::chrono::hours(24 * 30));
  EXPECT_EQ(in.defer_timeout, 1h);
}

// clang-format off
TEST(ConfigInbox, TheIssuesExampleLoads) {
  const auto r = load_inbox(R"yaml(inbox:
  conninfo: "host=db dbname=billing_consumer user=inbox"
  group_id: billing-inbox
  topics: [outbox.event.invoice, outbox.event.payment, "^outbox\\.event\\..*"]
  tenant: "header:tenant"
  event_id: header:id
  digest: header:payload_digest
  aggregate: key
  version: json:/aggregate/version
  schema: walrelay_inbox
  handlers:
    - topic: outbox.event.payment
      event_type: payment.failed
      sql: "select billing.advance_dunning($1::jsonb)"
    - topic: outbox.event.invoice
      sql: "insert into t values ($2)"
  batch: { max_events: 1000, max_wait: 50ms }
  retention: 7d
  defer_timeout: 2h
)yaml");
  ASSERT_TRUE(r.config) << dump(r.errors);
  const InboxConfig& in = r.config->inbox;
  EXPECT_EQ(in.topics.size(), 3U);
  EXPECT_EQ(in.topics[2], "^outbox\\.event\\..*");
  EXPECT_EQ(in.tenant, (InboxField{InboxFieldSource::kHeader, "tenant"}));
  EXPECT_EQ(in.version, (InboxField{InboxFieldSource::kJson, "/aggregate/version"}));
  EXPECT_EQ(in.schema, "walrelay_inbox");
  ASSERT_EQ(in.handlers.size(), 2U);
  EXPECT_EQ(in.handlers[0].event_type, "payment.failed");
  EXPECT_EQ(in.handlers[0].sql, "select billing.advance_dunning($1::jsonb)");
  EXPECT_EQ(in.handlers[1].event_type, "");
  EXPECT_EQ(in.batch_max_events, 1000U);
  EXPECT_EQ(in.batch_max_wait, 50ms);
  EXPECT_EQ(in.retention, std::chrono::hours(24 * 7));
  EXPECT_EQ(in.defer_timeout, 2h);
}

// clang-format on
TEST(ConfigInbox, FieldSourcesAcceptTheirSpellings) {
  const auto r = load_inbox(std::string(kInboxMinimal) + R"(  tenant: key
  event_id: key
  digest: value
  aggregate: header:aggregate_id
  version: header:version
)");
  ASSERT_TRUE(r.config) << dump(r.errors);
  const InboxConfig& in = r.config->inbox;
  EXPECT_EQ(in.tenant.source, InboxFieldSource::kKey);
  EXPECT_EQ(in.event_id.source, InboxFieldSource::kKey);
  EXPECT_EQ(in.digest.source, InboxFieldSource::kValue);
  EXPECT_EQ(in.aggregate, (InboxField{InboxFieldSource::kHeader, "aggregate_id"}));
  EXPECT_EQ(in.version, (InboxField{InboxFieldSource::kHeader, "version"}));
}

TEST(ConfigInbox, AnInboxFileNeedsNoSourceButTheInboxSection) {
  const auto r = load_inbox("kafka:\n  bootstrap_servers: k:9092\n");
  ASSERT_FALSE(r.config);
  EXPECT_EQ(keys_of(r), std::vector<std::string>{"inbox.conninfo"}) << dump(r.errors);
}

TEST(ConfigInbox, RequiredKeysAreNamed) {
  const auto r = load_inbox("inbox:\n  schema: walrelay\n");
  ASSERT_FALSE(r.config);
  EXPECT_EQ(keys_of(r),
            (std::vector<std::string>{"inbox.conninfo", "inbox.group_id", "inbox.topics"}))
      << dump(r.errors);
}

TEST(ConfigInbox, TheConnectorsFileMayCarryAnInboxSection) {
  const auto r = load(std::string(kMinimal) + kInboxMinimal);
  ASSERT_TRUE(r.config) << dump(r.errors);
  EXPECT_TRUE(r.config->inbox.present);
  const auto without = load(kMinimal);
  ASSERT_TRUE(without.config);
  EXPECT_FALSE(without.config->inbox.present);
}

struct BadValue {
  const char* line;  // appended to the minimal inbox section
  const char* key;
  const char* reason_part;
};

TEST(ConfigInbox, BadValuesNameTheirKey) {
  const BadValue cases[] = {
      {"  tenant: json:/t\n", "inbox.tenant", "expected \"\", header:NAME or key"},
      {"  tenant: \"header:\"\n", "inbox.tenant", "needs a header name"},
      {"  event_id: \"\"\n", "inbox.event_id", "expected header:NAME or key"},
      {"  digest: key\n", "inbox.digest", "expected header:NAME or value"},
      {"  aggregate: value\n", "inbox.aggregate", "expected key, header:NAME or json:/pointer"},
      {"  version: json:version\n", "inbox.version", "JSON pointer starting with /"},
      {"  version: sometimes\n", "inbox.version", "got \"sometimes\""},
      {"  schema: Billing\n", "inbox.schema", "plain lower-case identifier"},
      {"  schema: \"a;drop\"\n", "inbox.schema", "plain lower-case identifier"},
      {"  batch: {max_events: 0}\n", "inbox.batch.max_events", "positive integer"},
      {"  batch: {max_events: 100001}\n", "inbox.batch.max_events", "at most 100000"},
      {"  batch: {max_wait: soon}\n", "inbox.batch.max_wait", "duration"},
      {"  batch: {size: 3}\n", "inbox.batch.size", "unknown key"},
      {"  retention: 0d\n", "inbox.retention", "positive number of days"},
      {"  retention: 10m\n", "inbox.retention", "at least defer_timeout"},
      {"  defer_timeout: forever\n", "inbox.defer_timeout", "duration"},
      {"  handlers: {topic: x}\n", "inbox.handlers", "expected a list"},
      {"  handlers: [{topic: outbox.event.invoice}]\n", "inbox.handlers[0].sql", "missing"},
      {"  handlers: [{sql: select 1}]\n", "inbox.handlers[0].topic", "missing"},
      {"  handlers: [{topic: other, sql: select 1}]\n", "inbox.handlers[0].topic",
       "not one of inbox.topics"},
      {"  handlers: [{topic: outbox.event.invoice, sql: select 1, when: x}]\n",
       "inbox.handlers[0].when", "unknown key"},
      {"  grup_id: x\n", "inbox.grup_id", "unknown key"},
  };
  for (const BadValue& c : cases) {
    const auto r = load_inbox(std::string(kInboxMinimal) + c.line);
    ASSERT_FALSE(r.config) << c.line;
    EXPECT_NE(reason_for(r, c.key).find(c.reason_part), std::string::npos) << c.line << "got:\n"
                                                                           << dump(r.errors);
  }
}

TEST(ConfigInbox, BadTopicsNameTheirItem) {
  auto r = load_inbox("inbox:\n  conninfo: x\n  group_id: g\n  topics: []\n");
  EXPECT_NE(reason_for(r, "inbox.topics").find("non-empty list"), std::string::npos)
      << dump(r.errors);
  r = load_inbox("inbox:\n  conninfo: x\n  group_id: g\n  topics: [a, \"b c\", a, \"^(\"]\n");
  EXPECT_NE(reason_for(r, "inbox.topics[1]").find("not a Kafka topic name"), std::string::npos)
      << dump(r.errors);
  EXPECT_NE(reason_for(r, "inbox.topics[2]").find("duplicate"), std::string::npos);
  EXPECT_NE(reason_for(r, "inbox.topics[3]").find("invalid regular expression"), std::string::npos);
}

TEST(ConfigInbox, EnvironmentReferencesAreExpanded) {
  const auto r =
      load_inbox_config_text("inbox:\n  conninfo: ${DSN}\n  group_id: g\n  topics: [t]\n", "x",
                             env_of({{"DSN", "host=h"}}));
  ASSERT_TRUE(r.config) << dump(r.errors);
  EXPECT_EQ(r.config->inbox.conninfo, "host=h");
}

// The demo's inbox (examples/demo-inbox.yaml, docs/inbox.md's worked example) loads.
TEST(ConfigInbox, TheShippedDemoInboxLoads) {
  std::ifstream in(std::string(WALRELAY_SOURCE_DIR) + "/examples/demo-inbox.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  const auto r = load_inbox_config_text(
      text, "demo-inbox.yaml",
      env_of({{"DEMO_PG_CONNINFO", "host=db"}, {"DEMO_KAFKA_BOOTSTRAP", "k:9092"}}));
  ASSERT_TRUE(r.config) << dump(r.errors);
  EXPECT_EQ(r.config->inbox.topics, std::vector<std::string>{"^outbox\\.event\\..*"});
  EXPECT_EQ(r.config->inbox.schema, "walrelay_inbox");
}

}  // namespace
}  // namespace walrelay::config::test
