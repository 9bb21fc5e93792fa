// The configuration loader: the events, metrics, tables, outbox, exclude and messages sections.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "config_test_support.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay::config {
namespace {

using namespace std::chrono_literals;
using namespace walrelay::config::test;

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

}  // namespace
}  // namespace walrelay::config
