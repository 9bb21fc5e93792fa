#include "walrelay/config/config.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace walrelay::config {
namespace {

using namespace std::chrono_literals;

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

LoadResult load(const std::string& yaml, const EnvLookup& env = env_of({})) {
  return load_config_text(yaml, "test.yaml", env);
}

std::string dump(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& e : errors) out += "  " + e.key + ": " + e.reason + "\n";
  return out;
}

std::vector<std::string> keys_of(const LoadResult& result) {
  std::vector<std::string> keys;
  for (const ConfigError& e : result.errors) keys.push_back(e.key);
  return keys;
}

/// The reason reported for `key`, or "" when there is no error for it.
std::string reason_for(const LoadResult& result, const std::string& key) {
  for (const ConfigError& e : result.errors) {
    if (e.key == key) return e.reason;
  }
  return "";
}

/// A valid configuration that tests extend with more top-level sections.
constexpr const char* kMinimal = R"(name: app
source:
  conninfo: host=db
tables:
  - name: public.t
)";

/// kMinimal with extra lines inside `source:` (indented by two) and extra top-level sections.
std::string with(const std::string& source_lines, const std::string& sections = "") {
  return "name: app\nsource:\n  conninfo: host=db\n" + source_lines +
         "tables:\n  - name: public.t\n" + sections;
}

Config load_ok(const std::string& yaml, const EnvLookup& env = env_of({})) {
  LoadResult result = load(yaml, env);
  EXPECT_TRUE(result.errors.empty()) << dump(result.errors);
  EXPECT_TRUE(result.config.has_value());
  return result.config.value_or(Config{});
}

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
std::string head(const std::string& rest) {
  return "name: app\nsource: {conninfo: host=db}\n" + rest;
}

TEST(ConfigEvents, DefaultsWhenAbsent) {
  const Config config = load_ok(kMinimal);
  const EventsConfig& events = config.events;
  EXPECT_EQ(walrelay::config::to_string(events.value_format), "native");
  EXPECT_FALSE(events.json_as_document);
  EXPECT_TRUE(events.tombstones_on_delete);
  EXPECT_TRUE(events.operations.create);
  EXPECT_TRUE(events.operations.update);
  EXPECT_TRUE(events.operations.del);
  EXPECT_FALSE(events.operations.truncate);
  EXPECT_EQ(events.toast_placeholder, "__debezium_unavailable_value");
  EXPECT_EQ(events.mask_salt, "");
  EXPECT_EQ(walrelay::config::to_string(events.partitions), "root");
  EXPECT_FALSE(events.transaction_metadata);
  const TableConfig& table = config.tables.at(0);
  EXPECT_FALSE(table.topic.has_value());
  EXPECT_TRUE(table.key_columns.empty());
  EXPECT_TRUE(table.exclude_columns.empty());
  EXPECT_TRUE(table.mask_columns.empty());
  EXPECT_FALSE(table.operations.has_value());
  EXPECT_FALSE(table.tombstones_on_delete.has_value());
  EXPECT_TRUE(config.exclude.empty());
  EXPECT_TRUE(config.messages.empty());
  // An empty map keeps every default too.
  EXPECT_EQ(load_ok(with("", "events: {}\n")).events.toast_placeholder,
            "__debezium_unavailable_value");
}

TEST(ConfigEvents, EveryKeyIsRead) {
  const Config config = load_ok(with("", R"(events:
  value_format: debezium
  json_as_document: false
  tombstones_on_delete: false
  operations: [c, t]
  toast_placeholder: ""
  mask_salt: ${SALT}
  partitions: leaf
  transaction_metadata: yes
)"),
                                env_of({{"SALT", "pepper"}}));
  const EventsConfig& events = config.events;
  EXPECT_EQ(walrelay::config::to_string(events.value_format), "debezium");
  EXPECT_FALSE(events.json_as_document);
  EXPECT_FALSE(events.tombstones_on_delete);
  EXPECT_TRUE(events.operations.create);
  EXPECT_FALSE(events.operations.update);
  EXPECT_FALSE(events.operations.del);
  EXPECT_TRUE(events.operations.truncate);
  EXPECT_EQ(events.toast_placeholder, "");
  EXPECT_EQ(events.mask_salt, "pepper");
  EXPECT_EQ(walrelay::config::to_string(events.partitions), "leaf");
  EXPECT_TRUE(events.transaction_metadata);

  const Config native = load_ok(
      with("", "events: {value_format: native, json_as_document: true, partitions: root}\n"));
  EXPECT_EQ(walrelay::config::to_string(native.events.value_format), "native");
  EXPECT_TRUE(native.events.json_as_document);
  EXPECT_EQ(walrelay::config::to_string(native.events.partitions), "root");
}

TEST(ConfigEvents, ValueErrors) {
  const LoadResult result = load(with("", R"(events:
  value_format: avro
  json_as_document: maybe
  tombstone_on_delete: true
  toast_placeholder: [x]
  mask_salt: {a: b}
  partitions: Root
  transaction_metadata: 1
)"));
  EXPECT_EQ(keys_of(result),
            (std::vector<std::string>{"events.value_format", "events.json_as_document",
                                      "events.tombstone_on_delete", "events.toast_placeholder",
                                      "events.mask_salt", "events.partitions",
                                      "events.transaction_metadata"}))
      << dump(result.errors);
  EXPECT_EQ(reason_for(result, "events.value_format"), "expected native or debezium, got \"avro\"");
  EXPECT_EQ(reason_for(result, "events.partitions"), "expected root or leaf, got \"Root\"");
  EXPECT_EQ(reason_for(result, "events.tombstone_on_delete"),
            "unknown key (did you mean \"tombstones_on_delete\"?)");
  EXPECT_EQ(reason_for(result, "events.toast_placeholder"), "expected a string, got a list");

  EXPECT_EQ(reason_for(load(with("", "events: [a]\n")), "events"), "expected a map, got a list");
}

TEST(ConfigMetrics, ListenAndMaxLag) {
  const auto defaults = load_ok(with("", ""));
  EXPECT_EQ(defaults.metrics.listen, "127.0.0.1:9187");
  EXPECT_EQ(defaults.metrics.max_lag, std::chrono::seconds(60));
  const auto set = load_ok(with("", "metrics: {listen: \"0.0.0.0:9999\", max_lag: 5s}\n"));
  EXPECT_EQ(set.metrics.listen, "0.0.0.0:9999");
  EXPECT_EQ(set.metrics.max_lag, std::chrono::seconds(5));
  EXPECT_EQ(load_ok(with("", "metrics: {listen: \"\"}\n")).metrics.listen, "");
  EXPECT_EQ(keys_of(load(with("", "metrics: {listen: nine}\n"))),
            std::vector<std::string>{"metrics.listen"});
  EXPECT_EQ(keys_of(load(with("", "metrics: {max_lag: soon}\n"))),
            std::vector<std::string>{"metrics.max_lag"});
  EXPECT_EQ(keys_of(load(with("", "metrics: {port: 1}\n"))),
            std::vector<std::string>{"metrics.port"});
}

TEST(ConfigEvents, DecimalHandlingIsDebeziumOnly) {
  EXPECT_EQ(walrelay::config::to_string(
                load_ok(with("", "events: {value_format: debezium, decimal_handling: string}\n"))
                    .events.decimal_handling),
            "string");
  EXPECT_EQ(walrelay::config::to_string(
                load_ok(with("", "events: {value_format: debezium}\n")).events.decimal_handling),
            "precise");
  const LoadResult native = load(with("", "events: {decimal_handling: double}\n"));
  EXPECT_EQ(keys_of(native), std::vector<std::string>{"events.decimal_handling"});
  EXPECT_NE(reason_for(native, "events.decimal_handling").find("value_format: debezium"),
            std::string::npos);
  EXPECT_EQ(keys_of(load(with("", "events: {value_format: debezium, decimal_handling: exact}\n"))),
            std::vector<std::string>{"events.decimal_handling"});
}

TEST(ConfigEvents, JsonAsDocumentIsNativeOnly) {
  for (const char* yaml : {"events: {value_format: debezium, json_as_document: true}\n",
                           "events: {json_as_document: true, value_format: debezium}\n"}) {
    const LoadResult result = load(with("", yaml));
    EXPECT_EQ(keys_of(result), std::vector<std::string>{"events.json_as_document"})
        << yaml << dump(result.errors);
    EXPECT_NE(reason_for(result, "events.json_as_document").find("value_format is debezium"),
              std::string::npos);
  }
  EXPECT_FALSE(load_ok(with("", "events: {value_format: debezium, json_as_document: false}\n"))
                   .events.json_as_document);
  // A wrong value_format is reported once, without the cross-key error.
  EXPECT_EQ(keys_of(load(with("", "events: {value_format: x, json_as_document: true}\n"))),
            std::vector<std::string>{"events.value_format"});
}

TEST(ConfigEvents, OperationsAsListOrString) {
  const auto ops = [](const std::string& value) {
    return load_ok(with("", "events:\n  operations: " + value + "\n")).events.operations;
  };
  const auto check = [](const Operations& o, bool c, bool u, bool d, bool t) {
    EXPECT_EQ(o.create, c);
    EXPECT_EQ(o.update, u);
    EXPECT_EQ(o.del, d);
    EXPECT_EQ(o.truncate, t);
  };
  check(ops("[c, u, d]"), true, true, true, false);
  check(ops("[c, u, d, t]"), true, true, true, true);
  check(ops("c,u,d,t"), true, true, true, true);
  check(ops("\"c, d\""), true, false, true, false);
  check(ops("u"), false, true, false, false);
  check(ops("[t]"), false, false, false, true);
  check(ops("\"${OPS:-c,u}\""), true, true, false, false);
}

TEST(ConfigEvents, OperationErrors) {
  const std::map<std::string, std::vector<std::string>> cases{
      {"[]", {"events.operations"}},
      {"''", {"events.operations"}},
      {"' '", {"events.operations"}},
      {"", {"events.operations"}},
      {"{c: 1}", {"events.operations"}},
      {"[c, x]", {"events.operations[1]"}},
      {"[c, c]", {"events.operations[1]"}},
      {"[c, [u]]", {"events.operations[1]"}},
      {"[C]", {"events.operations[0]"}},
      {"[create]", {"events.operations[0]"}},
      {"[x, '']", {"events.operations[0]", "events.operations[1]"}},
      {"c,,u", {"events.operations"}},
      {"c,x,y", {"events.operations", "events.operations"}},
      {"u,u", {"events.operations"}},
      {"'c,u,'", {"events.operations"}},
  };
  for (const auto& [value, keys] : cases) {
    const LoadResult result = load(with("", "events:\n  operations: " + value + "\n"));
    EXPECT_EQ(keys_of(result), keys) << value << "\n" << dump(result.errors);
  }
  const LoadResult empty = load(with("", "events: {operations: []}\n"));
  EXPECT_NE(reason_for(empty, "events.operations").find("at least one operation"),
            std::string::npos);
  const LoadResult unknown = load(with("", "events: {operations: [c, x]}\n"));
  EXPECT_NE(reason_for(unknown, "events.operations[1]").find("unknown operation \"x\""),
            std::string::npos);
  const LoadResult duplicate = load(with("", "events: {operations: [c, c]}\n"));
  EXPECT_EQ(reason_for(duplicate, "events.operations[1]"), "duplicate operation \"c\"");
  const LoadResult in_text = load(with("", "events: {operations: 'c,x'}\n"));
  EXPECT_NE(reason_for(in_text, "events.operations").find("unknown operation \"x\""),
            std::string::npos);
}

TEST(ConfigTables, RowChangeKeysAreRead) {
  const Config config = load_ok(head(R"(events: {mask_salt: s}
tables:
  - name: public.orders
    topic: "{prefix}.{schema}.{table}"
    key_columns: [tenant_id, id]
    exclude_columns: [blob]
    mask_columns: [email, phone]
    operations: "c,u"
    tombstones_on_delete: false
  - name: public.audit
    topic: audit-log_v1
    operations: [d]
    tombstones_on_delete: on
    key_columns: []
)"));
  ASSERT_EQ(config.tables.size(), 2u);
  const TableConfig& orders = config.tables[0];
  EXPECT_EQ(orders.topic, "{prefix}.{schema}.{table}");
  EXPECT_EQ(orders.key_columns, (std::vector<std::string>{"tenant_id", "id"}));
  EXPECT_EQ(orders.exclude_columns, std::vector<std::string>{"blob"});
  EXPECT_EQ(orders.mask_columns, (std::vector<std::string>{"email", "phone"}));
  ASSERT_TRUE(orders.operations.has_value());
  EXPECT_TRUE(orders.operations->create);
  EXPECT_TRUE(orders.operations->update);
  EXPECT_FALSE(orders.operations->del);
  EXPECT_FALSE(orders.operations->truncate);
  EXPECT_EQ(orders.tombstones_on_delete, std::optional<bool>(false));
  const TableConfig& audit = config.tables[1];
  EXPECT_EQ(audit.topic, "audit-log_v1");
  ASSERT_TRUE(audit.operations.has_value());
  EXPECT_FALSE(audit.operations->create);
  EXPECT_TRUE(audit.operations->del);
  EXPECT_EQ(audit.tombstones_on_delete, std::optional<bool>(true));
  EXPECT_TRUE(audit.key_columns.empty());
  EXPECT_TRUE(audit.mask_columns.empty());
}

TEST(ConfigTables, TopicTemplates) {
  const auto topic_yaml = [](const std::string& topic) {
    return head("tables: [{name: s.t, topic: '" + topic + "'}]\n");
  };
  for (const char* good : {"{prefix}.{schema}.{table}", "{table}", "cdc-{schema}_{table}",
                           "fixed.topic", "{table}.{table}"}) {
    EXPECT_EQ(load_ok(topic_yaml(good)).tables.at(0).topic, good);
  }
  for (const char* bad : {"", "{aggregate_type}", "{prefix", "a}b", "{}", "{Table}",
                          "{prefix}/{table}", "a b.{table}", "{prefix}.{schema}:{table}"}) {
    const LoadResult result = load(topic_yaml(bad));
    EXPECT_EQ(keys_of(result), std::vector<std::string>{"tables[0].topic"})
        << bad << dump(result.errors);
  }
  EXPECT_EQ(reason_for(load(topic_yaml("{prefix}.{tbl}")), "tables[0].topic"),
            "unknown placeholder {tbl} in \"{prefix}.{tbl}\" (placeholders are {prefix}, "
            "{schema} and {table})");
  EXPECT_NE(
      reason_for(load(topic_yaml("a/{table}")), "tables[0].topic").find("invalid character '/'"),
      std::string::npos);
}

TEST(ConfigTables, ColumnListErrors) {
  const LoadResult result = load(head(R"(events: {mask_salt: s}
tables:
  - name: s.t
    key_columns: id
    exclude_columns: [a, "", a, [b]]
    mask_columns: [x, x]
  - name: s.u
    key_columns:
)"));
  EXPECT_EQ(keys_of(result), (std::vector<std::string>{
                                 "tables[0].key_columns", "tables[0].exclude_columns[1]",
                                 "tables[0].exclude_columns[2]", "tables[0].exclude_columns[3]",
                                 "tables[0].mask_columns[1]", "tables[1].key_columns"}))
      << dump(result.errors);
  EXPECT_EQ(reason_for(result, "tables[0].key_columns"),
            "expected a list of column names, got \"id\"");
  EXPECT_EQ(reason_for(result, "tables[0].exclude_columns[1]"), "must not be empty");
  EXPECT_EQ(reason_for(result, "tables[0].exclude_columns[2]"), "duplicate column \"a\"");
  EXPECT_EQ(reason_for(result, "tables[0].mask_columns[1]"), "duplicate column \"x\"");
  EXPECT_EQ(reason_for(result, "tables[1].key_columns"),
            "expected a list of column names, got an empty value");
}

TEST(ConfigTables, ExcludedAndMaskedColumnIsAnError) {
  const LoadResult result = load(head(R"(events: {mask_salt: s}
tables:
  - name: s.t
    mask_columns: [ssn, email]
    exclude_columns: [email, blob]
)"));
  EXPECT_EQ(keys_of(result), std::vector<std::string>{"tables[0].mask_columns"})
      << dump(result.errors);
  EXPECT_NE(
      reason_for(result, "tables[0].mask_columns").find("\"email\" is also in exclude_columns"),
      std::string::npos);
}

TEST(ConfigTables, MaskColumnsNeedASalt) {
  const std::string tables = "tables:\n  - name: s.t\n  - name: s.u\n    mask_columns: [email]\n";
  const LoadResult missing = load(head(tables));
  EXPECT_EQ(keys_of(missing), std::vector<std::string>{"events.mask_salt"}) << dump(missing.errors);
  EXPECT_EQ(reason_for(missing, "events.mask_salt"), "required when a table masks columns");
  EXPECT_EQ(keys_of(load(head("events: {mask_salt: ''}\n" + tables))),
            std::vector<std::string>{"events.mask_salt"});
  EXPECT_EQ(keys_of(load(head("events: {mask_salt: '${NO_SALT:-}'}\n" + tables))),
            std::vector<std::string>{"events.mask_salt"});
  // An unset variable is reported once, as such.
  const LoadResult unset = load(head("events: {mask_salt: '${SALT}'}\n" + tables));
  EXPECT_EQ(keys_of(unset), std::vector<std::string>{"events.mask_salt"});
  EXPECT_NE(reason_for(unset, "events.mask_salt").find("SALT is not set"), std::string::npos);

  EXPECT_EQ(load_ok(head("events: {mask_salt: '${SALT}'}\n" + tables), env_of({{"SALT", "x"}}))
                .tables.at(1)
                .mask_columns,
            std::vector<std::string>{"email"});
  // No masked column, no salt needed.
  load_ok(head("tables: [{name: s.t, mask_columns: []}]\n"));
}

TEST(ConfigTables, EntryShadowedByEarlierGlobIsRefusedNamingBoth) {
  // Issue 25 item 6: the outbox entry after public.* never applied (published as row changes).
  const LoadResult result = load(head(R"(tables:
  - name: public.*
  - name: public.event_outbox
    outbox: {}
)"));
  EXPECT_EQ(keys_of(result), std::vector<std::string>{"tables[1].name"}) << dump(result.errors);
  EXPECT_EQ(reason_for(result, "tables[1].name"),
            "entry \"public.event_outbox\" is never used: the earlier entry \"public.*\" "
            "(tables[0]) matches every table it names, and the first matching entry wins. Move "
            "\"public.event_outbox\" before \"public.*\", or remove it");
  // The named entry first is the way to give one table of a glob its own settings.
  const Config ok = load_ok(head(R"(tables:
  - name: public.event_outbox
    outbox: {}
  - name: public.*
)"));
  EXPECT_EQ(ok.tables.size(), 2u);
}

TEST(ConfigTables, OnlyEntriesDeadForEveryNameTheyMatchAreRefused) {
  // `names`: the entries' names, comma-separated (none holds a comma).
  const auto dead = [](const std::string& names) {
    std::string entries;
    for (std::size_t at = 0; at <= names.size();) {
      const auto end = std::min(names.find(", ", at), names.size());
      entries += "  - name: '" + names.substr(at, end - at) + "'\n";
      at = end + 2;
    }
    return keys_of(load(head("tables:\n" + entries)));
  };
  using Keys = std::vector<std::string>;
  // Dead: every name the later entry can match, the earlier one matches.
  EXPECT_EQ(dead("public.orders, public.orders"), Keys{"tables[1].name"});
  EXPECT_EQ(dead("*.*, app.t"), Keys{"tables[1].name"});
  EXPECT_EQ(dead("public.ord*, public.orders_2024"), Keys{"tables[1].name"});
  EXPECT_EQ(dead("public.*, public.ord*"), Keys{"tables[1].name"});
  EXPECT_EQ(dead("*.orders, app.x, sales.orders"), Keys{"tables[2].name"});
  EXPECT_EQ(dead("\"my.schema\".*, \"my.schema\".t"), Keys{"tables[1].name"});
  // Alive: the later entry names some table the earlier ones do not.
  EXPECT_EQ(dead("public.orders, public.*"), Keys{});
  EXPECT_EQ(dead("public.*, *.orders"), Keys{});
  EXPECT_EQ(dead("public.ord*, public.*ers"), Keys{});
  EXPECT_EQ(dead("public.ab*, public.a*x, public.b*"), Keys{});
  EXPECT_EQ(dead("app.t, apps.t, \"app\".u"), Keys{});
}

TEST(ConfigTables, OutboxTablesRejectRowChangeKeys) {
  const LoadResult result = load(head(R"(tables:
  - name: s.outbox
    topic: x
    key_columns: [a]
    exclude_columns: [b]
    outbox: {}
    mask_columns: [c]
    operations: [c]
    tombstones_on_delete: true
    topik: y
)"));
  EXPECT_EQ(keys_of(result),
            (std::vector<std::string>{"tables[0].topic", "tables[0].key_columns",
                                      "tables[0].exclude_columns", "tables[0].mask_columns",
                                      "tables[0].operations", "tables[0].tombstones_on_delete",
                                      "tables[0].topik"}))
      << dump(result.errors);
  for (const char* key :
       {"tables[0].key_columns", "tables[0].exclude_columns", "tables[0].mask_columns",
        "tables[0].operations", "tables[0].tombstones_on_delete"}) {
    EXPECT_EQ(reason_for(result, key), "not used for outbox tables") << key;
  }
  EXPECT_TRUE(reason_for(result, "tables[0].topic").starts_with("not used for outbox tables"));
  EXPECT_EQ(reason_for(result, "tables[0].topik"), "unknown key (did you mean \"topic\"?)");
}

TEST(ConfigOutbox, NewKeysAndDefaults) {
  const Config defaults = load_ok(head("tables: [{name: s.t, outbox: {}}]\n"));
  const OutboxConfig& d = defaults.tables.at(0).outbox.value();
  EXPECT_FALSE(d.event_type.has_value());
  EXPECT_FALSE(d.timestamp.has_value());
  EXPECT_TRUE(d.additional.empty());
  EXPECT_FALSE(d.payload_digest);
  EXPECT_FALSE(d.tombstone_on_empty_payload);

  const Config config = load_ok(head(R"(tables:
  - name: s.outbox
    outbox:
      event_type: type
      timestamp: created_at
      additional:
        trace: "header:traceparent"
        tenant_id: header
        region: header:x-region
      payload_digest: true
      tombstone_on_empty_payload: yes
)"));
  const OutboxConfig& o = config.tables.at(0).outbox.value();
  EXPECT_EQ(o.event_type, "type");
  EXPECT_EQ(o.timestamp, "created_at");
  ASSERT_EQ(o.additional.size(), 3u);  // file order, not sorted
  EXPECT_EQ(o.additional[0].column, "trace");
  EXPECT_EQ(o.additional[0].header, "traceparent");
  EXPECT_EQ(o.additional[1].column, "tenant_id");
  EXPECT_EQ(o.additional[1].header, "tenant_id");
  EXPECT_EQ(o.additional[2].column, "region");
  EXPECT_EQ(o.additional[2].header, "x-region");
  EXPECT_TRUE(o.payload_digest);
  EXPECT_TRUE(o.tombstone_on_empty_payload);
  EXPECT_EQ(o.topic, "outbox.event.{aggregate_type}");
}

TEST(ConfigOutbox, NewKeyErrors) {
  const LoadResult result = load(head(R"(tables:
  - name: s.outbox
    outbox:
      event_type: ""
      timestamp: [a]
      additional:
        a: envelope
        b: "partition"
        c: "header:"
        d: [header]
        e: header:shared
        f: header:shared
        g: header
        g: header
        h: header:id
        type: header:eventType
        z: "headers"
      payload_digest: sure
      tombstone_on_empty_payload:
      topic: "{table}"
)"));
  const std::string a = "tables[0].outbox.additional.";
  EXPECT_EQ(keys_of(result),
            (std::vector<std::string>{
                "tables[0].outbox.event_type", "tables[0].outbox.timestamp", a + "a", a + "b",
                a + "c", a + "d", a + "f", a + "g", a + "z", "tables[0].outbox.payload_digest",
                "tables[0].outbox.tombstone_on_empty_payload", "tables[0].outbox.topic", a + "h"}))
      << dump(result.errors);
  EXPECT_EQ(reason_for(result, a + "a"),
            "only header placement is supported: expected \"header\" or \"header:<name>\", got "
            "\"envelope\"");
  EXPECT_NE(reason_for(result, a + "z").find("only header placement is supported"),
            std::string::npos);
  EXPECT_EQ(reason_for(result, a + "c"), "header name after \"header:\" must not be empty");
  EXPECT_EQ(reason_for(result, a + "f"), "header \"shared\" is also set by column \"e\"");
  EXPECT_EQ(reason_for(result, a + "g"), "duplicate key");
  EXPECT_EQ(reason_for(result, a + "h"), "header \"id\" is already set from event_id");
  // eventType is free while event_type is not set (here it is invalid, so not set).
  EXPECT_EQ(reason_for(result, a + "type"), "");

  const LoadResult taken = load(head(R"(tables:
  - name: s.outbox
    outbox:
      event_type: type
      payload_digest: true
      additional: {t: "header:eventType", d: "header:payload_digest"}
)"));
  EXPECT_EQ(keys_of(taken), (std::vector<std::string>{a + "t", a + "d"})) << dump(taken.errors);
  EXPECT_EQ(reason_for(taken, a + "t"), "header \"eventType\" is already set from event_type");

  EXPECT_EQ(reason_for(load(head("tables: [{name: s.t, outbox: {additional: [a]}}]\n")),
                       "tables[0].outbox.additional"),
            "expected a map of column: \"header\" or \"header:<name>\", got a list");
}

TEST(ConfigExclude, StringsAndMaps) {
  const Config config = load_ok(with("", R"(exclude:
  - public.audit_*
  - name: '"my.schema".t'
  - {name: "*.tmp_*"}
)"));
  ASSERT_EQ(config.exclude.size(), 3u);
  EXPECT_EQ(config.exclude[0].name, "public.audit_*");
  EXPECT_EQ(config.exclude[0].schema_pattern, "public");
  EXPECT_EQ(config.exclude[0].table_pattern, "audit_*");
  EXPECT_EQ(config.exclude[1].schema_pattern, "my.schema");
  EXPECT_EQ(config.exclude[1].table_pattern, "t");
  EXPECT_EQ(config.exclude[2].schema_pattern, "*");
  EXPECT_EQ(config.exclude[2].table_pattern, "tmp_*");
  EXPECT_FALSE(config.exclude[0].outbox.has_value());
  EXPECT_TRUE(load_ok(with("", "exclude: []\n")).exclude.empty());
}

TEST(ConfigExclude, Errors) {
  const LoadResult result = load(with("", R"(exclude:
  - noschema
  - {name: s.}
  - {nam: s.t}
  - {name: s.t, outbox: {}}
  - [s.t]
  -
)"));
  EXPECT_EQ(keys_of(result),
            (std::vector<std::string>{"exclude[0]", "exclude[1].name", "exclude[2].nam",
                                      "exclude[2].name", "exclude[3].outbox", "exclude[4]",
                                      "exclude[5]"}))
      << dump(result.errors);
  EXPECT_NE(reason_for(result, "exclude[0]").find("expected schema.table"), std::string::npos);
  EXPECT_EQ(reason_for(result, "exclude[2].nam"), "unknown key (did you mean \"name\"?)");
  EXPECT_EQ(reason_for(result, "exclude[2].name"), "required key is missing");
  EXPECT_EQ(reason_for(result, "exclude[3].outbox"), "unknown key");
  EXPECT_EQ(reason_for(result, "exclude[4]"),
            "expected schema.table or a map with name, got a list");
  EXPECT_EQ(reason_for(load(with("", "exclude: public.t\n")), "exclude"),
            "expected a list of table names, got \"public.t\"");
}

TEST(ConfigMessages, ReadWithDefaults) {
  const Config config = load_ok(head(R"(messages:
  - prefix: orders
    outbox:
      aggregate_type: kind
      event_type: type
      additional: {tenant: header}
      topic: "msg.{aggregate_type}"
      tombstone_on_empty_payload: true
  - prefix: billing.events
)"));
  EXPECT_TRUE(config.tables.empty());
  ASSERT_EQ(config.messages.size(), 2u);
  EXPECT_EQ(config.messages[0].prefix, "orders");
  EXPECT_EQ(config.messages[0].outbox.aggregate_type, "kind");
  EXPECT_EQ(config.messages[0].outbox.event_id, "id");
  EXPECT_EQ(config.messages[0].outbox.event_type, "type");
  ASSERT_EQ(config.messages[0].outbox.additional.size(), 1u);
  EXPECT_EQ(config.messages[0].outbox.additional[0].header, "tenant");
  EXPECT_EQ(config.messages[0].outbox.topic, "msg.{aggregate_type}");
  EXPECT_TRUE(config.messages[0].outbox.tombstone_on_empty_payload);
  EXPECT_EQ(config.messages[1].prefix, "billing.events");
  EXPECT_EQ(config.messages[1].outbox.topic, "outbox.event.{aggregate_type}");
  EXPECT_EQ(config.messages[1].outbox.payload, "payload");
}

TEST(ConfigMessages, Errors) {
  const LoadResult result = load(head(R"(messages:
  - prefix: orders
  - prefix: orders
  - prefix: ""
  - outbox: {}
  - prefix: p
    outbox:
  - prefix: q
    outbox: {topic: "{table}", paylaod: x}
    prefx: q
  - orders
)"));
  EXPECT_EQ(keys_of(result), (std::vector<std::string>{
                                 "messages[1].prefix", "messages[2].prefix", "messages[3].prefix",
                                 "messages[4].outbox", "messages[5].outbox.topic",
                                 "messages[5].outbox.paylaod", "messages[5].prefx", "messages[6]"}))
      << dump(result.errors);
  EXPECT_EQ(reason_for(result, "messages[1].prefix"),
            "duplicate prefix \"orders\" (also in messages[0])");
  EXPECT_EQ(reason_for(result, "messages[2].prefix"), "must not be empty");
  EXPECT_EQ(reason_for(result, "messages[3].prefix"), "required key is missing");
  EXPECT_EQ(reason_for(result, "messages[5].outbox.paylaod"),
            "unknown key (did you mean \"payload\"?)");
  EXPECT_EQ(reason_for(result, "messages[5].prefx"), "unknown key (did you mean \"prefix\"?)");
}

TEST(ConfigMessages, TablesOrMessagesRequired) {
  EXPECT_TRUE(load_ok(head("tables: []\nmessages: [{prefix: p}]\n")).tables.empty());
  EXPECT_EQ(load_ok(head("messages: [{prefix: p}]\n")).messages.size(), 1u);
  for (const char* rest :
       {"", "tables: []\n", "messages: []\n", "tables: []\nmessages: []\n", "exclude: [s.t]\n"}) {
    const LoadResult result = load(head(rest));
    EXPECT_EQ(keys_of(result), std::vector<std::string>{"tables"}) << rest << dump(result.errors);
    EXPECT_EQ(reason_for(result, "tables"), "at least one table or message outbox is required");
  }
  // A malformed list is reported as such, not also as missing.
  EXPECT_EQ(keys_of(load(head("messages: {prefix: p}\n"))), std::vector<std::string>{"messages"});
  EXPECT_EQ(keys_of(load(head("tables: s.t\n"))), std::vector<std::string>{"tables"});
  EXPECT_EQ(reason_for(load(head("tables: s.t\n")), "tables"),
            "expected a list of tables, got \"s.t\"");
}

TEST(ConfigLoad, ReportsEveryNewKeyMistakeAtOnce) {
  const LoadResult result = load(R"(name: app
source: {conninfo: host=db}
events:
  value_format: debezium
  json_as_document: true
  operations: [c, z]
  partitions: both
  trasnaction_metadata: true
tables:
  - name: public.orders
    topic: "{prefix}.{db}.{table}"
    key_columns: [id, id]
    exclude_columns: [email]
    mask_columns: [email]
    operations: "c,q"
    tombstones_on_delete: perhaps
  - name: public.outbox
    operations: [c]
    outbox:
      additional: {tenant: envelope}
      payload_digest: 2
      topic: "{prefix}.x"
exclude:
  - nodot
messages:
  - prefix: m
    outbox: {timestamp: ""}
  - prefix: m
)");
  EXPECT_FALSE(result.config.has_value());
  const std::vector<std::string> expected{
      "events.operations[1]",
      "events.partitions",
      "events.trasnaction_metadata",
      "events.json_as_document",
      "tables[0].topic",
      "tables[0].key_columns[1]",
      "tables[0].operations",
      "tables[0].tombstones_on_delete",
      "tables[0].mask_columns",
      "tables[1].operations",
      "tables[1].outbox.additional.tenant",
      "tables[1].outbox.payload_digest",
      "tables[1].outbox.topic",
      "exclude[0]",
      "messages[0].outbox.timestamp",
      "messages[1].prefix",
      "events.mask_salt",
  };
  EXPECT_EQ(keys_of(result), expected) << dump(result.errors);
  EXPECT_EQ(reason_for(result, "events.trasnaction_metadata"),
            "unknown key (did you mean \"transaction_metadata\"?)");
  EXPECT_EQ(reason_for(result, "tables[1].operations"), "not used for outbox tables");
  EXPECT_NE(reason_for(result, "tables[0].topic").find("unknown placeholder {db}"),
            std::string::npos);
}

TEST(ConfigEnv, SubstitutesScalarsBeforeInterpretation) {
  const Config config = load_ok(R"(name: ${APP}
source:
  conninfo: "host=${PGHOST} port=${PGPORT:-5432} password=${PGPASSWORD}"
  status_interval: ${INTERVAL}
kafka:
  max_in_flight_events: ${EVENTS}
  bootstrap_servers: ${KAFKA:-localhost:9092}
tables:
  - name: ${SCHEMA:-public}.orders
)",
                                env_of({{"APP", "shop"},
                                        {"PGHOST", "db"},
                                        {"PGPASSWORD", "p$$w"},
                                        {"INTERVAL", "5s"},
                                        {"EVENTS", "42"},
                                        {"SCHEMA", ""}}));
  EXPECT_EQ(config.name, "shop");
  // The value of a variable is not substituted again.
  EXPECT_EQ(config.source.conninfo, "host=db port=5432 password=p$$w");
  EXPECT_EQ(config.source.status_interval, 5s);
  EXPECT_EQ(config.kafka.max_in_flight_events, 42u);
  EXPECT_EQ(config.kafka.bootstrap_servers, "localhost:9092");
  EXPECT_EQ(config.tables.at(0).schema_pattern, "public");  // `:-` also replaces an empty value
  EXPECT_EQ(config.source.slot, "walrelay_shop");
}

TEST(ConfigEnv, UnsetVariablesAreErrorsNamingKeyAndVariable) {
  const LoadResult result = load(R"(name: app
source:
  conninfo: "host=${PGHOST}"
kafka:
  max_in_flight_events: ${EVENTS}
tables:
  - name: ${SCHEMA}.${TABLE}
)");
  EXPECT_EQ(
      keys_of(result),
      (std::vector<std::string>{"source.conninfo", "kafka.max_in_flight_events", "tables[0].name"}))
      << dump(result.errors);
  EXPECT_NE(reason_for(result, "source.conninfo").find("PGHOST is not set"), std::string::npos);
  EXPECT_NE(reason_for(result, "tables[0].name").find("SCHEMA, TABLE are not set"),
            std::string::npos);
}

TEST(ConfigEnv, ReadsTheProcessEnvironment) {
  ::setenv("WALRELAY_CONFIG_TEST_HOST", "envhost", 1);
  ::unsetenv("WALRELAY_CONFIG_TEST_UNSET");
  const LoadResult ok = load_config_text(
      with("", "kafka: {bootstrap_servers: '${WALRELAY_CONFIG_TEST_HOST}:1'}\n"), "test.yaml");
  ASSERT_TRUE(ok.config.has_value()) << dump(ok.errors);
  EXPECT_EQ(ok.config->kafka.bootstrap_servers, "envhost:1");
  const LoadResult missing = load_config_text(
      with("", "kafka: {bootstrap_servers: '${WALRELAY_CONFIG_TEST_UNSET}'}\n"), "test.yaml");
  EXPECT_EQ(keys_of(missing), std::vector<std::string>{"kafka.bootstrap_servers"});
  ::unsetenv("WALRELAY_CONFIG_TEST_HOST");
}

TEST(ConfigEnv, SubstituteEnvSyntax) {
  const EnvLookup env = env_of({{"A", "1"}, {"EMPTY", ""}});
  EXPECT_EQ(substitute_env("x${A}y", env).value(), "x1y");
  EXPECT_EQ(substitute_env("${EMPTY}", env).value(), "");
  EXPECT_EQ(substitute_env("${EMPTY:-d}", env).value(), "d");
  EXPECT_EQ(substitute_env("${NOPE:-}", env).value(), "");
  EXPECT_EQ(substitute_env("${NOPE:-a b:c}", env).value(), "a b:c");
  EXPECT_EQ(substitute_env("$${A}", env).value(), "${A}");
  EXPECT_EQ(substitute_env("a$$b", env).value(), "a$b");
  EXPECT_EQ(substitute_env("pa$word$", env).value(), "pa$word$");
  EXPECT_EQ(substitute_env("no refs", env).value(), "no refs");

  const auto unterminated = substitute_env("${A", env);
  ASSERT_FALSE(unterminated.has_value());
  EXPECT_NE(unterminated.error().find("unterminated"), std::string::npos);
  EXPECT_FALSE(substitute_env("${}", env).has_value());
  EXPECT_FALSE(substitute_env("${1A}", env).has_value());
  EXPECT_FALSE(substitute_env("${A-B}", env).has_value());
  const auto unset = substitute_env("${X}${A}${Y}", env);
  ASSERT_FALSE(unset.has_value());
  EXPECT_EQ(unset.error(),
            "environment variables X, Y are not set (use ${X:-default} for a default)");
}

TEST(ConfigUnits, Durations) {
  EXPECT_EQ(parse_duration("500").value(), 500ms);
  EXPECT_EQ(parse_duration("500ms").value(), 500ms);
  EXPECT_EQ(parse_duration("10s").value(), 10s);
  EXPECT_EQ(parse_duration("10 s").value(), 10s);
  EXPECT_EQ(parse_duration("1m").value(), 1min);
  EXPECT_EQ(parse_duration("2h").value(), 2h);
  for (const char* bad : {"", "0", "0s", "-1s", "1d", "1.5s", "abc", "s", "10S", " 1s", "1s ",
                          "99999999999999999999", "9999999999999999h"}) {
    EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
  }
  EXPECT_EQ(parse_duration("abc").error(),
            "expected a positive duration such as 500ms, 10s, 1m or 1h (a bare integer is "
            "milliseconds), got \"abc\"");
  EXPECT_NE(parse_duration("9999999999999999h").error().find("too large"), std::string::npos);
}

TEST(ConfigUnits, Sizes) {
  EXPECT_EQ(parse_size("1048576").value(), 1048576u);
  EXPECT_EQ(parse_size("1B").value(), 1u);
  EXPECT_EQ(parse_size("512KiB").value(), 512u * 1024);
  EXPECT_EQ(parse_size("64MiB").value(), 64u * 1024 * 1024);
  EXPECT_EQ(parse_size("1GiB").value(), 1024u * 1024 * 1024);
  EXPECT_EQ(parse_size("2TiB").value(), 2ull << 40);
  EXPECT_EQ(parse_size("10MB").value(), 10'000'000u);
  EXPECT_EQ(parse_size("10 mb").value(), 10'000'000u);
  EXPECT_EQ(parse_size("3kb").value(), 3000u);
  for (const char* bad : {"", "0", "0MiB", "-1", "abc", "1.5MiB", "10XB", "MiB", "20000000TiB",
                          "99999999999999999999"}) {
    EXPECT_FALSE(parse_size(bad).has_value()) << bad;
  }
  EXPECT_NE(parse_size("20000000TiB").error().find("too large"), std::string::npos);
}

TEST(ConfigTableName, SplitsOnFirstUnquotedDot) {
  const auto check = [](std::string_view text, std::string_view schema, std::string_view table) {
    const auto parsed = parse_table_name(text);
    ASSERT_TRUE(parsed.has_value()) << text << ": " << parsed.error();
    EXPECT_EQ(parsed->schema, schema) << text;
    EXPECT_EQ(parsed->table, table) << text;
  };
  check("public.invoices", "public", "invoices");
  check("Public.MyTable", "Public", "MyTable");
  check(R"("my.schema"."Weird ""T""")", "my.schema", "Weird \"T\"");
  check(R"("a.b".c)", "a.b", "c");
  check(R"(a."b.c")", "a", "b.c");
  check(R"("""".x)", "\"", "x");
  check("a.b.c", "a", "b.c");  // unquoted parts are verbatim
  check("*.*", "*", "*");
  check("app_*.event_*", "app_*", "event_*");
}

TEST(ConfigTableName, Errors) {
  for (const char* bad : {"", "noschema", ".t", "s.", R"("unterminated.t)", R"("a"x.t)",
                          R"(a."b"x)", R"("".t)", R"(s."")", R"("no.dot")", R"(s."t)"}) {
    const auto parsed = parse_table_name(bad);
    EXPECT_FALSE(parsed.has_value()) << bad;
  }
  EXPECT_NE(parse_table_name("noschema").error().find("expected schema.table"), std::string::npos);
  EXPECT_NE(parse_table_name(R"("no.dot")").error().find("expected schema.table"),
            std::string::npos);
}

TEST(ConfigMask, KeywordValueForm) {
  EXPECT_EQ(mask_conninfo("host=db password=secret user=u"), "host=db password=**** user=u");
  EXPECT_EQ(mask_conninfo("password='a b' host=db"), "password=**** host=db");
  EXPECT_EQ(mask_conninfo(R"(password = 'it\'s a secret' host=x)"), "password = **** host=x");
  EXPECT_EQ(mask_conninfo(R"(password=a\ b host=x)"), "password=**** host=x");
  EXPECT_EQ(mask_conninfo("host=x sslpassword=k"), "host=x sslpassword=****");
  EXPECT_EQ(mask_conninfo("host=x password="), "host=x password=****");
  EXPECT_EQ(mask_conninfo("host=127.0.0.1 port=5432 dbname=app user=walrelay"),
            "host=127.0.0.1 port=5432 dbname=app user=walrelay");
  EXPECT_EQ(mask_conninfo(""), "");
  // libpq would reject this, and the error path may log it: hide what follows the keyword.
  EXPECT_EQ(mask_conninfo("host=x password secret"), "host=x password ****");
  EXPECT_EQ(mask_conninfo("password='unterminated host=x"), "password=****");
}

TEST(ConfigMask, UriForm) {
  EXPECT_EQ(mask_conninfo("postgresql://user:secret@host/db"), "postgresql://user:****@host/db");
  EXPECT_EQ(mask_conninfo("postgres://user:secret@host:5432"), "postgres://user:****@host:5432");
  EXPECT_EQ(mask_conninfo("postgresql://user@host/db"), "postgresql://user@host/db");
  EXPECT_EQ(mask_conninfo("postgresql://host/db"), "postgresql://host/db");
  EXPECT_EQ(mask_conninfo("postgresql://u:p@ss@host/db"), "postgresql://u:****@host/db");
  EXPECT_EQ(mask_conninfo("postgresql://host/db?sslmode=require&password=x&user=u"),
            "postgresql://host/db?sslmode=require&password=****&user=u");
  EXPECT_EQ(mask_conninfo("postgresql:///db?password=x"), "postgresql:///db?password=****");
}

TEST(ConfigMask, DbnameHoldingAConnectionString) {
  // libpq expands a dbname that looks like a conninfo string or URI (docs §34.1.2).
  EXPECT_EQ(mask_conninfo("dbname='postgresql://u:pw@h/db' connect_timeout=5"),
            "dbname='postgresql://u:****@h/db' connect_timeout=5");
  EXPECT_EQ(mask_conninfo("dbname='host=h password=pw'"), "dbname='host=h password=****'");
  EXPECT_EQ(mask_conninfo("dbname=app"), "dbname=app");
}

TEST(ConfigMask, SecretProperties) {
  for (const char* secret :
       {"sasl.password", "SASL.USERNAME", "sasl.oauthbearer.config", "ssl.keystore.password",
        "ssl.key.password", "ssl.key.pem", "my.Secret.thing", "PASSWORD"}) {
    EXPECT_TRUE(is_secret_property(secret)) << secret;
  }
  for (const char* plain : {"compression.type", "ssl.ca.location", "bootstrap.servers",
                            "security.protocol", "xsasl.mechanism"}) {
    EXPECT_FALSE(is_secret_property(plain)) << plain;
  }
}

TEST(ConfigGlob, Matches) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "anything"));
  EXPECT_TRUE(glob_match("", ""));
  EXPECT_FALSE(glob_match("", "a"));
  EXPECT_TRUE(glob_match("invoices", "invoices"));
  EXPECT_FALSE(glob_match("invoices", "invoices2"));
  EXPECT_TRUE(glob_match("pub*", "public"));
  EXPECT_TRUE(glob_match("*_outbox", "event_outbox"));
  EXPECT_FALSE(glob_match("*_outbox", "event_outbox_old"));
  EXPECT_TRUE(glob_match("a*b*c", "aXbYbZc"));
  EXPECT_TRUE(glob_match("a**c", "ac"));
  EXPECT_FALSE(glob_match("a*b*c", "aXbYbZ"));
  EXPECT_FALSE(glob_match("Public", "public"));  // case-sensitive
  EXPECT_TRUE(glob_match("a?c", "a?c"));         // only `*` is special
  EXPECT_FALSE(glob_match("a?c", "abc"));
  EXPECT_TRUE(glob_match("a.b", "a.b"));
  EXPECT_FALSE(glob_match("a.b", "axb"));
  // Would take exponential time with naive recursion.
  EXPECT_FALSE(glob_match("*a*a*a*a*a*a*a*a*b", std::string(200, 'a')));
}

TEST(ConfigFile, UnreadableFileIsOneError) {
  const LoadResult missing = load_config_file("/nonexistent/walrelay.yaml");
  ASSERT_EQ(missing.errors.size(), 1u);
  EXPECT_EQ(missing.errors[0].key, "");
  EXPECT_EQ(missing.errors[0].reason,
            "cannot read /nonexistent/walrelay.yaml: No such file or directory");
  EXPECT_FALSE(missing.config.has_value());

  const LoadResult directory = load_config_file("/");
  ASSERT_EQ(directory.errors.size(), 1u);
  EXPECT_EQ(directory.errors[0].reason, "cannot read /: Is a directory");
}

TEST(ConfigFile, LoadsAFile) {
  const std::string path = ::testing::TempDir() + "walrelay_config_test.yaml";
  {
    std::ofstream out(path);
    out << kMinimal;
  }
  const LoadResult result = load_config_file(path);
  std::remove(path.c_str());
  ASSERT_TRUE(result.config.has_value()) << dump(result.errors);
  EXPECT_EQ(result.config->name, "app");
}

// The configurations the repository ships load without errors: docker/walrelay.yaml (compose),
// the Kubernetes ConfigMap's walrelay.yaml (deploy/kubernetes/configmap.yaml) and the demo's.
TEST(ConfigFile, ShippedConfigurationsLoad) {
  const std::string root = WALRELAY_SOURCE_DIR;
  const EnvLookup env = env_of({{"WALRELAY_PG_PASSWORD", "secret"},
                                {"DEMO_PG_CONNINFO", "host=db"},
                                {"DEMO_STATE_DIR", "/tmp/x"},
                                {"DEMO_KAFKA_BOOTSTRAP", "k:9092"}});
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  for (const char* file : {"/docker/walrelay.yaml", "/examples/demo.yaml"}) {
    const LoadResult result = load_config_text(read(root + file), file, env);
    EXPECT_TRUE(result.config.has_value()) << file << "\n" << dump(result.errors);
  }
  // The ConfigMap holds the file as a literal block under `walrelay.yaml: |`, indented by 4.
  const std::string configmap = read(root + "/deploy/kubernetes/configmap.yaml");
  const auto at = configmap.find("walrelay.yaml: |\n");
  ASSERT_NE(at, std::string::npos);
  std::string embedded;
  std::istringstream lines(configmap.substr(at + 17));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && !line.starts_with("    ")) break;
    embedded += (line.size() >= 4 ? line.substr(4) : std::string()) + "\n";
  }
  const LoadResult result = load_config_text(embedded, "configmap.yaml", env);
  ASSERT_TRUE(result.config.has_value()) << embedded << dump(result.errors);
  EXPECT_EQ(result.config->metrics.listen, "0.0.0.0:9187");  // probes come from outside the pod
  EXPECT_EQ(result.config->source.state_dir, "/var/lib/walrelay");  // the mounted volume
  EXPECT_NE(result.config->source.conninfo.find("password='secret'"), std::string::npos);
}

TEST(ConfigSyntax, YamlSyntaxErrorIsOneErrorWithPosition) {
  const LoadResult result = load("name: app\nsource: [unclosed\n");
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);
  EXPECT_EQ(result.errors[0].key, "");
  EXPECT_TRUE(result.errors[0].reason.starts_with("test.yaml: YAML syntax error at line "))
      << result.errors[0].reason;
  EXPECT_NE(result.errors[0].reason.find("column"), std::string::npos);

  const LoadResult tabs = load("name: app\nsource:\n\tconninfo: x\n");
  ASSERT_EQ(tabs.errors.size(), 1u) << dump(tabs.errors);
  EXPECT_EQ(tabs.errors[0].key, "");
}

TEST(ConfigSyntax, SeveralDocumentsAreAnError) {
  const LoadResult result = load(std::string(kMinimal) + "---\nname: other\n");
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].key, "");
  // Documents are counted only up to two (yaml-cpp 0.7 never stops counting on some inputs).
  EXPECT_NE(result.errors[0].reason.find("expected one YAML document, found several"),
            std::string::npos);
}

}  // namespace
}  // namespace walrelay::config

// ---- reliability keys: errors, heartbeat, slot record, reconnect --------------------------------

namespace {
walrelay::config::LoadResult load_with(const std::string& extra) {
  return walrelay::config::load_config_text(
      "name: billing\nsource:\n  conninfo: \"host=x\"\n" + extra + "tables:\n  - name: public.t\n",
      "test.yaml");
}
bool has_error(const walrelay::config::LoadResult& r, const std::string& key) {
  for (const auto& e : r.errors) {
    if (e.key == key) return true;
  }
  return false;
}
}  // namespace

TEST(ConfigReliability, DefaultsWhenAbsent) {
  auto r = load_with("");
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].key + ": " + r.errors[0].reason);
  EXPECT_EQ(walrelay::config::to_string(r.config->errors.policy), "fail");
  EXPECT_TRUE(r.config->heartbeat.enabled);
  EXPECT_EQ(r.config->heartbeat.interval, std::chrono::seconds(10));
  EXPECT_TRUE(r.config->source.state_dir.empty());
  EXPECT_FALSE(r.config->source.allow_slot_reset);
  EXPECT_FALSE(r.config->source.allow_sql_ascii);
  EXPECT_EQ(r.config->source.reconnect_min, std::chrono::milliseconds(500));
  EXPECT_EQ(r.config->source.reconnect_max, std::chrono::seconds(30));
}

TEST(ConfigReliability, EveryKeyIsRead) {
  auto r = load_with(
      "  state_dir: /var/lib/walrelay\n  allow_slot_reset: true\n  allow_sql_ascii: true\n"
      "  reconnect_min: 1s\n"
      "  reconnect_max: 1m\nerrors:\n  policy: dead_letter\n  dead_letter_topic: billing.dlq\n"
      "heartbeat:\n  enabled: false\n  interval: 2s\n  query: \"UPDATE hb SET at = now()\"\n");
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].key + ": " + r.errors[0].reason);
  const auto& c = *r.config;
  EXPECT_EQ(c.source.state_dir, "/var/lib/walrelay");
  EXPECT_TRUE(c.source.allow_slot_reset);
  EXPECT_TRUE(c.source.allow_sql_ascii);
  EXPECT_EQ(c.source.reconnect_min, std::chrono::seconds(1));
  EXPECT_EQ(c.source.reconnect_max, std::chrono::minutes(1));
  EXPECT_EQ(walrelay::config::to_string(c.errors.policy), "dead_letter");
  EXPECT_EQ(c.errors.dead_letter_topic, "billing.dlq");
  EXPECT_FALSE(c.heartbeat.enabled);
  EXPECT_EQ(c.heartbeat.interval, std::chrono::seconds(2));
  EXPECT_EQ(c.heartbeat.query, "UPDATE hb SET at = now()");
}

TEST(ConfigReliability, MistakesAreReportedTogether) {
  auto r = load_with(
      "  reconnect_min: 1m\n  reconnect_max: 1s\nerrors:\n  policy: retry\n"
      "heartbeat:\n  interval: soon\n  querry: x\n");
  EXPECT_FALSE(r.config);
  EXPECT_TRUE(has_error(r, "source.reconnect_min"));
  EXPECT_TRUE(has_error(r, "errors.policy"));
  EXPECT_TRUE(has_error(r, "heartbeat.interval"));
  EXPECT_TRUE(has_error(r, "heartbeat.querry"));
  // Booleans are booleans: a typo is an error naming the key, never a silent false.
  auto sql_ascii = load_with("  allow_sql_ascii: maybe\n");
  EXPECT_FALSE(sql_ascii.config);
  EXPECT_TRUE(has_error(sql_ascii, "source.allow_sql_ascii"));
  auto dlq = load_with("errors:\n  policy: dead_letter\n");
  EXPECT_TRUE(has_error(dlq, "errors.dead_letter_topic"));
  auto bad_topic = load_with("errors:\n  policy: dead_letter\n  dead_letter_topic: \"a b\"\n");
  EXPECT_TRUE(has_error(bad_topic, "errors.dead_letter_topic"));
}

TEST(ConfigMask, MalformedTailAfterAPasswordIsMasked) {
  // libpq reads `password=Pg-S3cret` and fails on `Tail-S3cret-Part`: both may be the password.
  const std::string masked =
      walrelay::config::mask_conninfo("host=x password=Pg-S3cret Tail-S3cret-Part dbname=app");
  EXPECT_EQ(masked.find("S3cret"), std::string::npos) << masked;
  EXPECT_EQ(masked.rfind("host=x password=****", 0), 0u) << masked;
}

// Found by tests/fuzz/fuzz_config: yaml-cpp 0.7's LoadAll never returns on a leading comma.
TEST(ConfigSyntax, LeadingCommaIsAnErrorNotAnEndlessLoad) {
  for (const char* text : {",", "# comment\n, name: app", "name: a\n---\n,"}) {
    auto r = walrelay::config::load_config_text(text, "test.yaml");
    EXPECT_FALSE(r.config) << text;
    EXPECT_FALSE(r.errors.empty()) << text;
  }
}

TEST(ConfigKafka, PropertiesThatBreakTheDeliveryGuaranteeAreRefused) {
  auto r = walrelay::config::load_config_text(
      "name: b\nsource:\n  conninfo: x\nkafka:\n  properties:\n    acks: 0\n"
      "    enable.idempotence: false\n    compression.type: lz4\ntables:\n  - name: public.t\n",
      "test.yaml");
  EXPECT_FALSE(r.config);
  std::set<std::string> keys;
  for (const auto& e : r.errors) keys.insert(e.key);
  EXPECT_TRUE(keys.contains("kafka.properties.acks"));
  EXPECT_TRUE(keys.contains("kafka.properties.enable.idempotence"));
  EXPECT_FALSE(keys.contains("kafka.properties.compression.type"));
}

// ---- snapshot keys
// --------------------------------------------------------------------------------

TEST(ConfigSnapshot, DefaultsAreAnInitialSnapshotInChunksOf8192) {
  auto r = load_with("");
  ASSERT_TRUE(r.config);
  EXPECT_EQ(walrelay::config::to_string(r.config->snapshot.mode), "initial");
  EXPECT_EQ(r.config->snapshot.chunk_size, 8192u);
  EXPECT_EQ(r.config->snapshot.parallelism, 1u);
  EXPECT_EQ(r.config->snapshot.max_window_keys, 65536u);
  EXPECT_FALSE(r.config->snapshot.row_security);
}

TEST(ConfigSnapshot, MaxWindowKeysIsAtLeast1024) {
  auto r = load_with("snapshot:\n  max_window_keys: 4096\n");
  ASSERT_TRUE(r.config);
  EXPECT_EQ(r.config->snapshot.max_window_keys, 4096u);
  for (const char* bad : {"0", "1023", "-5", "many"}) {
    auto b = load_with(std::string("snapshot:\n  max_window_keys: ") + bad + "\n");
    EXPECT_FALSE(b.config) << bad;
    EXPECT_TRUE(has_error(b, "snapshot.max_window_keys")) << bad;
  }
}

TEST(ConfigSnapshot, EveryKeyIsReadAndMistakesNameTheKey) {
  auto r = load_with(
      "snapshot:\n  mode: initial_only\n  chunk_size: 500\n  parallelism: 4\n  row_security: "
      "true\n");
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].key + ": " + r.errors[0].reason);
  EXPECT_EQ(walrelay::config::to_string(r.config->snapshot.mode), "initial_only");
  EXPECT_EQ(r.config->snapshot.chunk_size, 500u);
  EXPECT_EQ(r.config->snapshot.parallelism, 4u);
  EXPECT_TRUE(r.config->snapshot.row_security);
  auto bad =
      load_with("snapshot:\n  mode: always\n  chunk_size: 0\n  parallelism: 17\n  fetch_size: 3\n");
  auto huge = load_with("snapshot:\n  chunk_size: 2147483648\n");
  EXPECT_FALSE(huge.config);
  EXPECT_TRUE(has_error(huge, "snapshot.chunk_size"));
  EXPECT_FALSE(bad.config);
  EXPECT_TRUE(has_error(bad, "snapshot.mode"));
  EXPECT_TRUE(has_error(bad, "snapshot.chunk_size"));
  EXPECT_TRUE(has_error(bad, "snapshot.parallelism"));
  EXPECT_TRUE(has_error(bad, "snapshot.fetch_size"));
}
