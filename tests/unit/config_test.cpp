// The configuration loader (config/config.cpp): the whole file, required and unknown keys, types,
// top-level and source/kafka keys.

#include "walrelay/config/config.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "config_test_support.hpp"

namespace walrelay::config {
namespace {

using namespace std::chrono_literals;
using namespace walrelay::config::test;

TEST(ConfigLoad, ExampleLoadsWithValuesAndDefaults) {
  const Config config = load_ok(R"(name: billing
source:
  conninfo: "host=127.0.0.1 port=5432 dbname=app user=walrelay"
  slot: walrelay_billing
  create_slot: true
kafka:
  bootstrap_servers: "127.0.0.1:9092"
  properties: { compression.type: lz4 }
topics:
  prefix: billing
tables:
  - name: public.invoices
  - name: public.event_outbox
    outbox:
      event_id: event_id
      aggregate_id: subscription_id
      aggregate_type: event_type
      payload: payload
      topic: "outbox.event.{aggregate_type}"
)");
  EXPECT_EQ(config.name, "billing");
  EXPECT_EQ(config.source.conninfo, "host=127.0.0.1 port=5432 dbname=app user=walrelay");
  EXPECT_EQ(config.source.slot, "walrelay_billing");
  EXPECT_TRUE(config.source.create_slot);
  EXPECT_EQ(config.source.status_interval, 10s);
  EXPECT_EQ(config.kafka.bootstrap_servers, "127.0.0.1:9092");
  EXPECT_EQ(config.kafka.properties,
            (std::map<std::string, std::string>{{"compression.type", "lz4"}}));
  EXPECT_EQ(config.kafka.max_in_flight_events, 40'000u);
  EXPECT_EQ(config.kafka.max_in_flight_bytes, 32u * 1024 * 1024);
  EXPECT_EQ(config.kafka.flush_timeout, 30s);
  EXPECT_EQ(config.topics.prefix, "billing");
  EXPECT_EQ(config.log.level, "info");
  EXPECT_EQ(config.log.progress_interval, 5s);
  ASSERT_EQ(config.tables.size(), 2u);
  EXPECT_EQ(config.tables[0].name, "public.invoices");
  EXPECT_EQ(config.tables[0].schema_pattern, "public");
  EXPECT_EQ(config.tables[0].table_pattern, "invoices");
  EXPECT_FALSE(config.tables[0].outbox.has_value());
  EXPECT_EQ(config.tables[1].schema_pattern, "public");
  EXPECT_EQ(config.tables[1].table_pattern, "event_outbox");
  ASSERT_TRUE(config.tables[1].outbox.has_value());
  EXPECT_EQ(config.tables[1].outbox->event_id, "event_id");
  EXPECT_EQ(config.tables[1].outbox->aggregate_id, "subscription_id");
  EXPECT_EQ(config.tables[1].outbox->aggregate_type, "event_type");
  EXPECT_EQ(config.tables[1].outbox->payload, "payload");
  EXPECT_EQ(config.tables[1].outbox->topic, "outbox.event.{aggregate_type}");
}

TEST(ConfigLoad, EveryOptionalKeyIsRead) {
  const Config config = load_ok(with(R"(  slot: my_slot
  create_slot: no
  status_interval: 3600s
)",
                                     R"(kafka:
  bootstrap_servers: "k1:9092,k2:9092"
  max_in_flight_events: 500
  max_in_flight_bytes: 512KiB
  flush_timeout: 1m
log:
  level: debug
  progress_interval: 250
)"));
  EXPECT_EQ(config.source.slot, "my_slot");
  EXPECT_FALSE(config.source.create_slot);
  EXPECT_EQ(config.source.status_interval, 1h);
  EXPECT_EQ(config.kafka.bootstrap_servers, "k1:9092,k2:9092");
  EXPECT_EQ(config.kafka.max_in_flight_events, 500u);
  EXPECT_EQ(config.kafka.max_in_flight_bytes, 512u * 1024);
  EXPECT_EQ(config.kafka.flush_timeout, 60s);
  EXPECT_EQ(config.log.level, "debug");
  EXPECT_EQ(config.log.progress_interval, 250ms);
}

TEST(ConfigLoad, SlotAndPrefixDefaultFromName) {
  const Config config = load_ok(R"(name: My-App.v2
source: { conninfo: host=db, create_slot: off, status_interval: 2s }
tables: [ { name: public.t } ]
)");
  EXPECT_EQ(config.source.slot, "walrelay_my_app_v2");
  EXPECT_EQ(config.topics.prefix, "My-App.v2");
  EXPECT_EQ(config.kafka.bootstrap_servers, "127.0.0.1:9092");
  EXPECT_FALSE(config.source.create_slot);
  EXPECT_EQ(config.source.status_interval, 2s);
  EXPECT_EQ(default_slot_name("Billing EU"), "walrelay_billing_eu");
}

TEST(ConfigLoad, DefaultSlotLongerThanPostgresLimitIsAnError) {
  const std::string name(60, 'a');  // walrelay_ + 60 = 69 > 63
  const LoadResult result = load("name: " + name + R"(
source: { conninfo: host=db }
tables: [ { name: public.t } ]
)");
  EXPECT_EQ(keys_of(result), std::vector<std::string>{"source.slot"}) << dump(result.errors);
  EXPECT_FALSE(result.config.has_value());
}

TEST(ConfigLoad, ReportsEveryErrorAtOnce) {
  const LoadResult result = load(R"(name: "bad name!"
source:
  conninfo: ""
  slot: Bad-Slot
  create_slot: maybe
  status_interval: 2h
kafka:
  max_in_flight_events: abc
  max_in_flight_bytes: 0
  flush_timeout: 10 parsecs
  properties:
    linger.ms: 5
    sasl.password: [hunter2]
topics:
  prefix: "bad/prefix"
tables:
  - name: noschema
  - name: public.outbox
    outbox:
      payload: ""
      topic: "events.{aggregate}"
  - just_a_string
log:
  level: verbose
  progress_interval: -1
)");
  EXPECT_FALSE(result.config.has_value());
  const std::vector<std::string> expected{
      "name",
      "source.conninfo",
      "source.slot",
      "source.create_slot",
      "source.status_interval",
      "kafka.max_in_flight_events",
      "kafka.max_in_flight_bytes",
      "kafka.flush_timeout",
      "kafka.properties.sasl.password",
      "topics.prefix",
      "tables[0].name",
      "tables[1].outbox.payload",
      "tables[1].outbox.topic",
      "tables[2]",
      "log.level",
      "log.progress_interval",
  };
  EXPECT_EQ(keys_of(result), expected) << dump(result.errors);
  EXPECT_EQ(reason_for(result, "kafka.max_in_flight_events"),
            "expected a positive integer, got \"abc\"");
  EXPECT_EQ(reason_for(result, "source.create_slot"), "expected true or false, got \"maybe\"");
  EXPECT_NE(reason_for(result, "tables[0].name").find("expected schema.table"), std::string::npos);
  EXPECT_NE(reason_for(result, "tables[1].outbox.topic").find("unknown placeholder {aggregate}"),
            std::string::npos);
  EXPECT_NE(reason_for(result, "source.status_interval").find("at most 1h"), std::string::npos);
  EXPECT_NE(reason_for(result, "tables[2]").find("expected a map"), std::string::npos);
  // A secret given with the wrong type is not echoed back.
  EXPECT_EQ(reason_for(result, "kafka.properties.sasl.password").find("hunter2"),
            std::string::npos);
}

TEST(ConfigLoad, MissingRequiredKeys) {
  EXPECT_EQ(keys_of(load("")), (std::vector<std::string>{"name", "source.conninfo", "tables"}));
  EXPECT_EQ(keys_of(load("# only a comment\n")),
            (std::vector<std::string>{"name", "source.conninfo", "tables"}));

  const LoadResult no_conninfo = load("name: a\nsource: {}\ntables: [{name: s.t}]\n");
  EXPECT_EQ(keys_of(no_conninfo), std::vector<std::string>{"source.conninfo"});
  EXPECT_EQ(no_conninfo.errors.at(0).reason, "required key is missing");

  const LoadResult empty_tables = load("name: a\nsource: {conninfo: x}\ntables: []\n");
  EXPECT_EQ(keys_of(empty_tables), std::vector<std::string>{"tables"});
  EXPECT_EQ(empty_tables.errors.at(0).reason, "at least one table or message outbox is required");

  const LoadResult nameless = load("name: a\nsource: {conninfo: x}\ntables: [{outbox: {}}]\n");
  EXPECT_EQ(keys_of(nameless), std::vector<std::string>{"tables[0].name"});

  EXPECT_EQ(keys_of(load("name: ''\nsource: {conninfo: x}\ntables: [{name: s.t}]\n")),
            std::vector<std::string>{"name"});
  EXPECT_EQ(keys_of(load(std::string(kMinimal) + "kafka: {bootstrap_servers: ''}\n")),
            std::vector<std::string>{"kafka.bootstrap_servers"});
}

TEST(ConfigLoad, UnknownKeysAtEveryLevelWithHints) {
  const LoadResult result = load(R"(name: app
kafak: {}
source:
  conninfo: host=db
  slto: x
kafka:
  frobnicate: 1
tables:
  - name: public.t
    outbox:
      paylod: body
)");
  EXPECT_EQ(keys_of(result), (std::vector<std::string>{"kafak", "source.slto", "kafka.frobnicate",
                                                       "tables[0].outbox.paylod"}))
      << dump(result.errors);
  EXPECT_EQ(reason_for(result, "kafak"), "unknown key (did you mean \"kafka\"?)");
  EXPECT_EQ(reason_for(result, "source.slto"), "unknown key (did you mean \"slot\"?)");
  EXPECT_EQ(reason_for(result, "kafka.frobnicate"), "unknown key");
  EXPECT_EQ(reason_for(result, "tables[0].outbox.paylod"),
            "unknown key (did you mean \"payload\"?)");
}

TEST(ConfigLoad, DuplicateKeysAreErrors) {
  const LoadResult result = load(std::string(kMinimal) + "name: other\n");
  EXPECT_EQ(keys_of(result), std::vector<std::string>{"name"});
  EXPECT_EQ(result.errors.at(0).reason, "duplicate key");
}

TEST(ConfigLoad, TypeErrorsNameTheKeyAndWhatWasFound) {
  const LoadResult result = load(R"(name: [a, b]
source: "abc"
kafka:
  properties: [a]
  max_in_flight_events: {a: 1}
  flush_timeout:
tables: {a: b}
log: 3
)");
  EXPECT_EQ(reason_for(result, "name"), "expected a string, got a list");
  EXPECT_EQ(reason_for(result, "source"), "expected a map, got \"abc\"");
  EXPECT_EQ(reason_for(result, "kafka.properties"),
            "expected a map of librdkafka properties, got a list");
  EXPECT_EQ(reason_for(result, "kafka.max_in_flight_events"),
            "expected a positive integer, got a map");
  EXPECT_EQ(reason_for(result, "kafka.flush_timeout"), "expected a duration, got an empty value");
  EXPECT_EQ(reason_for(result, "tables"), "expected a list of tables, got a map");
  EXPECT_EQ(reason_for(result, "log"), "expected a map, got \"3\"");
  EXPECT_EQ(result.errors.size(), 7u) << dump(result.errors);

  EXPECT_EQ(reason_for(load("- a\n- b\n"), ""), "expected a map at the top level, got a list");
}

TEST(ConfigLoad, IntegersMustBePositive) {
  for (const char* bad : {"0", "-1", "+1", "1.5", "1e3", "abc", "99999999999999999999999"}) {
    const LoadResult result =
        load(std::string(kMinimal) + "kafka: {max_in_flight_events: '" + bad + "'}\n");
    EXPECT_EQ(keys_of(result), std::vector<std::string>{"kafka.max_in_flight_events"}) << bad;
  }
}

TEST(ConfigLoad, BooleanSpellings) {
  for (const char* yes : {"true", "True", "yes", "on", "ON"}) {
    EXPECT_TRUE(load_ok(with("  create_slot: " + std::string(yes) + "\n")).source.create_slot)
        << yes;
  }
  for (const char* no : {"false", "FALSE", "no", "off"}) {
    EXPECT_FALSE(load_ok(with("  create_slot: " + std::string(no) + "\n")).source.create_slot)
        << no;
  }
  for (const char* bad : {"1", "y", "maybe", "'truee'"}) {
    EXPECT_EQ(keys_of(load(with("  create_slot: " + std::string(bad) + "\n"))),
              std::vector<std::string>{"source.create_slot"})
        << bad;
  }
}

TEST(ConfigLoad, ExplicitSlotFollowsPostgresRules) {
  EXPECT_EQ(load_ok(with("  slot: s_1\n")).source.slot, "s_1");
  EXPECT_EQ(load_ok(with("  slot: " + std::string(63, 'x') + "\n")).source.slot.size(), 63u);
  for (const std::string& bad :
       {std::string(64, 'x'), std::string("Upper"), std::string("has-dash"), std::string("''")}) {
    const LoadResult result = load(with("  slot: " + bad + "\n"));
    EXPECT_EQ(keys_of(result), std::vector<std::string>{"source.slot"}) << bad;
  }
}

TEST(ConfigLoad, StatusIntervalIsBounded) {
  EXPECT_EQ(load_ok(with("  status_interval: 1h\n")).source.status_interval, 1h);
  EXPECT_EQ(keys_of(load(with("  status_interval: 3601s\n"))),
            std::vector<std::string>{"source.status_interval"});
  EXPECT_EQ(keys_of(load(with("  status_interval: 0\n"))),
            std::vector<std::string>{"source.status_interval"});
}

TEST(ConfigLoad, DeliveryModeAndExactlyOnceSettings) {
  const Config defaults = load_ok(kMinimal);
  EXPECT_EQ(walrelay::config::to_string(defaults.delivery), "at_least_once");
  EXPECT_EQ(defaults.exactly_once.commit_interval, 100ms);
  EXPECT_EQ(defaults.exactly_once.max_transaction_events, 10'000u);

  const Config eos =
      load_ok(std::string(kMinimal) +
              "delivery: exactly_once\n"
              "exactly_once: {commit_interval: 250ms, max_transaction_events: 500}\n");
  EXPECT_EQ(walrelay::config::to_string(eos.delivery), "exactly_once");
  EXPECT_EQ(eos.exactly_once.commit_interval, 250ms);
  EXPECT_EQ(eos.exactly_once.max_transaction_events, 500u);

  const LoadResult bad = load(std::string(kMinimal) + "delivery: exactly-once\n");
  EXPECT_EQ(keys_of(bad), std::vector<std::string>{"delivery"});
  EXPECT_NE(reason_for(bad, "delivery").find("exactly_once"), std::string::npos)
      << reason_for(bad, "delivery");
  EXPECT_EQ(keys_of(load(std::string(kMinimal) + "exactly_once: {commit_interval: 2m}\n")),
            std::vector<std::string>{"exactly_once.commit_interval"});
  EXPECT_EQ(keys_of(load(std::string(kMinimal) + "exactly_once: {max_transaction_events: 0}\n")),
            std::vector<std::string>{"exactly_once.max_transaction_events"});
  EXPECT_EQ(keys_of(load(std::string(kMinimal) + "exactly_once: {commit_intervall: 1s}\n")),
            std::vector<std::string>{"exactly_once.commit_intervall"});
}

TEST(ConfigLoad, TopicPrefixMustBeTopicCharacters) {
  EXPECT_EQ(load_ok(with("", "topics: {prefix: a.B_c-1}\n")).topics.prefix, "a.B_c-1");
  for (const char* bad : {"'a b'", "'a/b'", "''", "'x{y}'"}) {
    EXPECT_EQ(keys_of(load(with("", "topics: {prefix: " + std::string(bad) + "}\n"))),
              std::vector<std::string>{"topics.prefix"})
        << bad;
  }
}

TEST(ConfigLoad, LogLevels) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    EXPECT_EQ(load_ok(with("", "log: {level: " + std::string(level) + "}\n")).log.level, level);
  }
  const LoadResult result = load(with("", "log: {level: warning}\n"));
  EXPECT_EQ(reason_for(result, "log.level"),
            "expected one of trace, debug, info, warn, error, critical, off, got \"warning\"");
}

TEST(ConfigLoad, KafkaPropertiesBecomeText) {
  const Config config = load_ok(with("", R"(kafka:
  properties:
    linger.ms: 5
    enable.idempotence: yes
    socket.nagle.disable: off
    client.id: "yes"
    acks: all
    batch.size: 1.5
    sasl.password: ${KAFKA_PASSWORD}
)"),
                                env_of({{"KAFKA_PASSWORD", "s3cr$t"}}));
  const std::map<std::string, std::string> expected{
      {"linger.ms", "5"},
      {"enable.idempotence", "true"},
      {"socket.nagle.disable", "false"},
      {"client.id", "yes"},
      {"acks", "all"},
      {"batch.size", "1.5"},
      {"sasl.password", "s3cr$t"},
  };
  EXPECT_EQ(config.kafka.properties, expected);
}

TEST(ConfigLoad, KafkaPropertyShapeErrors) {
  const LoadResult result = load(with("", R"(kafka:
  properties:
    bootstrap.servers: x:9092
    linger.ms:
    ssl.ca.location: {a: b}
)"));
  EXPECT_EQ(keys_of(result), (std::vector<std::string>{"kafka.properties.bootstrap.servers",
                                                       "kafka.properties.linger.ms",
                                                       "kafka.properties.ssl.ca.location"}))
      << dump(result.errors);
  EXPECT_EQ(reason_for(result, "kafka.properties.bootstrap.servers"),
            "set kafka.bootstrap_servers instead");
}

TEST(ConfigLoad, SizesForMaxInFlightBytes) {
  EXPECT_EQ(load_ok(with("", "kafka: {max_in_flight_bytes: 65536}\n")).kafka.max_in_flight_bytes,
            65536u);
  EXPECT_EQ(load_ok(with("", "kafka: {max_in_flight_bytes: 1GiB}\n")).kafka.max_in_flight_bytes,
            1024u * 1024 * 1024);
  EXPECT_EQ(load_ok(with("", "kafka: {max_in_flight_bytes: 10MB}\n")).kafka.max_in_flight_bytes,
            10'000'000u);
  const LoadResult bad = load(with("", "kafka: {max_in_flight_bytes: 64MiBs}\n"));
  EXPECT_EQ(keys_of(bad), std::vector<std::string>{"kafka.max_in_flight_bytes"});
  EXPECT_NE(bad.errors.at(0).reason.find("got \"64MiBs\""), std::string::npos);
}

TEST(ConfigLoad, QuotedTableNamesWithDots) {
  const Config config = load_ok(R"(name: app
source: {conninfo: host=db}
tables:
  - name: '"my.schema"."Weird ""T"""'
  - name: Public.MyTable
  - name: 'sales.*'
  - name: '"*"."a.b"'
)");
  ASSERT_EQ(config.tables.size(), 4u);
  EXPECT_EQ(config.tables[0].name, R"("my.schema"."Weird ""T""")");
  EXPECT_EQ(config.tables[0].schema_pattern, "my.schema");
  EXPECT_EQ(config.tables[0].table_pattern, "Weird \"T\"");
  EXPECT_EQ(config.tables[1].schema_pattern, "Public");
  EXPECT_EQ(config.tables[1].table_pattern, "MyTable");
  EXPECT_EQ(config.tables[2].schema_pattern, "sales");
  EXPECT_EQ(config.tables[2].table_pattern, "*");
  EXPECT_EQ(config.tables[3].schema_pattern, "*");
  EXPECT_EQ(config.tables[3].table_pattern, "a.b");
}

TEST(ConfigLoad, OutboxDefaultsAndTopicTemplates) {
  const Config config =
      load_ok("name: app\nsource: {conninfo: x}\ntables: [{name: s.t, outbox: {}}]\n");
  ASSERT_TRUE(config.tables.at(0).outbox.has_value());
  EXPECT_EQ(config.tables[0].outbox->event_id, "id");
  EXPECT_EQ(config.tables[0].outbox->topic, "outbox.event.{aggregate_type}");

  EXPECT_EQ(
      keys_of(load("name: app\nsource: {conninfo: x}\ntables:\n  - name: s.t\n    outbox:\n")),
      std::vector<std::string>{"tables[0].outbox"});

  for (const char* good : {"{aggregate_type}", "a.{aggregate_type}.b", "fixed_topic"}) {
    const std::string yaml =
        "name: app\nsource: {conninfo: x}\ntables: [{name: s.t, outbox: "
        "{topic: '" +
        std::string(good) + "'}}]\n";
    EXPECT_EQ(load_ok(yaml).tables.at(0).outbox->topic, good);
  }
  for (const char* bad : {"{aggregate_type", "a}b", "a b", "{foo}", "{}", "a/{aggregate_type}"}) {
    const std::string yaml =
        "name: app\nsource: {conninfo: x}\ntables: [{name: s.t, outbox: "
        "{topic: '" +
        std::string(bad) + "'}}]\n";
    EXPECT_EQ(keys_of(load(yaml)), std::vector<std::string>{"tables[0].outbox.topic"}) << bad;
  }
}

/// kMinimal's name and source, then `rest` (which supplies tables, messages, ... itself).

}  // namespace
}  // namespace walrelay::config
