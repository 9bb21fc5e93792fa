#include <gtest/gtest.h>

#include <map>

#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/router/event_router.hpp"

using walrelay::Lsn;
using walrelay::Record;
using walrelay::config::Config;
using walrelay::config::MessageOutboxConfig;
using walrelay::config::OutboxConfig;
using walrelay::config::TableConfig;
using walrelay::decoder::Wal2JsonDecoder;
using walrelay::router::ColumnInfo;
using walrelay::router::EventRouter;
using walrelay::router::SchemaProvider;
using walrelay::router::TableRole;
using walrelay::router::TableSchema;
using walrelay::router::TypeRegistry;

namespace {

TableConfig table(std::string schema, std::string name) {
  TableConfig t;
  t.name = schema + "." + name;
  t.schema_pattern = std::move(schema);
  t.table_pattern = std::move(name);
  return t;
}

OutboxConfig billing_outbox() {
  OutboxConfig o;
  o.event_id = "event_id";
  o.aggregate_id = "subscription_id";
  o.aggregate_type = "event_type";
  o.payload = "payload";
  return o;
}

Config base_config() {
  Config cfg;
  cfg.name = "billing";
  cfg.topics.prefix = "billing";
  auto outbox = table("public", "event_outbox");
  outbox.outbox = billing_outbox();
  cfg.tables = {table("public", "invoices"), outbox, table("audit", "*")};
  return cfg;
}

// A catalog stand-in: table shapes given by the test.
struct FakeSchemas : SchemaProvider {
  std::map<std::string, TableSchema> tables;
  int refreshes = 0;
  const TableSchema* table(std::string_view schema, std::string_view name, bool refresh) override {
    if (refresh) ++refreshes;
    auto it = tables.find(std::string(schema) + "." + std::string(name));
    return it == tables.end() ? nullptr : &it->second;
  }
};

struct Out {
  std::string topic;
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::map<std::string, std::string> headers;
  std::int64_t timestamp_ms = 0;
};

struct Harness {
  Config cfg = base_config();
  TypeRegistry types;
  FakeSchemas schemas;
  std::unique_ptr<EventRouter> router;
  Wal2JsonDecoder decoder;

  void build() {
    walrelay::router::RouterSettings s{"billing", "billing", "app", "0.1.0", cfg.events};
    router = std::make_unique<EventRouter>(s, cfg, &schemas, types);
    router->begin(1031, *Lsn::parse("0/26B3D938"), std::chrono::microseconds{1795997677104367});
  }

  static std::vector<Out> copy(std::span<const Record> recs) {
    std::vector<Out> out;
    for (const Record& r : recs) {
      Out o;
      o.topic = r.topic;
      if (r.key) o.key = std::string(*r.key);
      if (r.value) o.value = std::string(*r.value);
      for (const auto& h : r.headers) o.headers[std::string(h.name)] = std::string(h.value);
      o.timestamp_ms = r.timestamp_ms;
      out.push_back(std::move(o));
    }
    return out;
  }

  std::vector<Out> route(const std::string& line) {
    if (!router) build();
    auto c = decoder.decode(line);
    EXPECT_TRUE(c) << (c ? "" : c.error().reason);
    if (!c) return {};
    auto recs = router->route(**c);
    EXPECT_TRUE(recs) << (recs ? "" : recs.error().reason);
    if (!recs) return {};
    return copy(*recs);
  }

  std::string route_error(const std::string& line) {
    if (!router) build();
    auto c = decoder.decode(line);
    EXPECT_TRUE(c);
    auto recs = router->route(**c);
    EXPECT_FALSE(recs);
    return recs ? "" : recs.error().reason;
  }
};

bool has(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

constexpr const char* kInsert =
    R"({"action":"I","xid":1031,"lsn":"0/26B3DA48","schema":"public","table":"invoices","columns":[{"name":"b","typeoid":23,"value":2},{"name":"amount","typeoid":1700,"value":12345678901234567890.123456789},{"name":"a","typeoid":25,"value":"x"}],"pk":[{"name":"a","typeoid":25},{"name":"b","typeoid":23}]})";

}  // namespace

TEST(Router, InsertBecomesCreateEventKeyedByPrimaryKey) {
  Harness h;
  auto out = h.route(kInsert);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].topic, "billing.public.invoices");
  // No catalog shape here: the key columns in the order of wal2json's `pk`.
  EXPECT_EQ(out[0].key, R"({"a":"x","b":2})");
  // numeric keeps its digits, as a string in the native value format.
  EXPECT_EQ(
      out[0].value->rfind(
          R"({"before":null,"after":{"b":2,"amount":"12345678901234567890.123456789","a":"x"},"source":{)",
          0),
      0u)
      << *out[0].value;
  EXPECT_TRUE(has(
      *out[0].value,
      R"("connector":"postgresql","name":"billing","ts_ms":1795997677104,"snapshot":"false","db":"app","sequence":"[null,\"649321032\"]","ts_us":1795997677104367,"ts_ns":1795997677104367000,"schema":"public","table":"invoices","txId":1031,"lsn":649321032,"xmin":null,"origin":null,"origin_lsn":null},"transaction":null,"op":"c","ts_ms":)"))
      << *out[0].value;
  EXPECT_EQ(out[0].headers["id"], "0/26B3D938:0");
  EXPECT_EQ(out[0].timestamp_ms, 1795997677104);
}

TEST(Router, ProcessingTimesAreOneReadingNeverBeforeTheCommit) {
  Harness h;
  auto out = h.route(kInsert);
  ASSERT_EQ(out.size(), 1u);
  const std::string& v = *out[0].value;
  const auto tail = v.substr(v.rfind(R"("op":"c",)"));
  long long ms = 0, us = 0, ns = 0;
  ASSERT_EQ(std::sscanf(tail.c_str(), R"("op":"c","ts_ms":%lld,"ts_us":%lld,"ts_ns":%lld})", &ms,
                        &us, &ns),
            3)
      << tail;
  EXPECT_EQ(us / 1000, ms);
  EXPECT_EQ(ns / 1000, us);
  EXPECT_GE(us, 1795997677104367);
}

TEST(Router, SequenceStartsWithTheEndOfTheLastTransactionPgoutputWouldSend) {
  // Debezium's source.sequence[0] is the end LSN of the last COMMIT its pgoutput stream carried
  // (PostgresStreamingChangeEventSource#lastCompletelyProcessedLsn); PostgreSQL 15's pgoutput
  // skips transactions with nothing for the publication, so those do not move it.
  Harness h;
  h.build();
  h.router->set_stream_start(*Lsn::parse("0/100"));
  auto first = h.route(kInsert);
  EXPECT_TRUE(has(*first[0].value, R"("sequence":"[\"256\",\"649321032\"]")")) << *first[0].value;
  h.router->commit(*Lsn::parse("0/200"));
  // A transaction that touched only tables walrelay does not capture: not sent by pgoutput.
  h.router->begin(1032, *Lsn::parse("0/280"), std::chrono::microseconds{1});
  h.route(
      R"({"action":"I","xid":1032,"lsn":"0/270","schema":"public","table":"not_captured","columns":[{"name":"a","typeoid":23,"value":1}]})");
  h.router->commit(*Lsn::parse("0/300"));
  // A transaction with only a transactional logical message: pgoutput sends it (messages=true).
  h.router->begin(1033, *Lsn::parse("0/380"), std::chrono::microseconds{1});
  h.route(
      R"({"action":"M","xid":1033,"lsn":"0/370","transactional":true,"prefix":"other","content":"x"})");
  h.router->commit(*Lsn::parse("0/400"));
  h.router->begin(1034, *Lsn::parse("0/480"), std::chrono::microseconds{1});
  auto next = h.route(kInsert);
  EXPECT_TRUE(has(*next[0].value, R"("sequence":"[\"1024\",\"649321032\"]")")) << *next[0].value;
  // A new slot's first start has no last commit.
  h.router->set_stream_start(walrelay::Lsn{});
  EXPECT_TRUE(has(*h.route(kInsert)[0].value, R"("sequence":"[null,)"));
}

TEST(Router, EventIdsCountRecordsOfTheTransactionAndRepeatOnReplay) {
  Harness h;
  EXPECT_EQ(h.route(kInsert)[0].headers["id"], "0/26B3D938:0");
  EXPECT_EQ(h.route(kInsert)[0].headers["id"], "0/26B3D938:1");
  h.router->commit(*Lsn::parse("0/26B3DA00"));
  h.router->begin(1031, *Lsn::parse("0/26B3D938"),
                  std::chrono::microseconds{1795997677104367});  // the same WAL again
  EXPECT_EQ(h.route(kInsert)[0].headers["id"], "0/26B3D938:0");
}

TEST(Router, UpdateCarriesKeyOnlyBeforeUnderDefaultIdentity) {
  Harness h;
  auto u = h.route(
      R"({"action":"U","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"id","typeoid":23,"value":7},{"name":"n","typeoid":25,"value":"new"}],"identity":[{"name":"id","typeoid":23,"value":7}],"pk":[{"name":"id","typeoid":23}]})");
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].key, R"({"id":7})");
  EXPECT_EQ(u[0].value->rfind(R"({"before":{"id":7},"after":{"id":7,"n":"new"},)", 0), 0u);
  EXPECT_TRUE(has(*u[0].value, R"("op":"u")"));
}

TEST(Router, DeleteIsFollowedByATombstoneUnlessDisabled) {
  const std::string del =
      R"({"action":"D","xid":5,"lsn":"0/10","schema":"public","table":"invoices","identity":[{"name":"id","typeoid":23,"value":7}],"pk":[{"name":"id","typeoid":23}]})";
  Harness h;
  auto d = h.route(del);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].key, R"({"id":7})");
  EXPECT_EQ(d[0].value->rfind(R"({"before":{"id":7},"after":null,)", 0), 0u);
  EXPECT_TRUE(has(*d[0].value, R"("op":"d")"));
  EXPECT_EQ(d[1].topic, "billing.public.invoices");
  EXPECT_EQ(d[1].key, R"({"id":7})");
  EXPECT_FALSE(d[1].value.has_value());
  EXPECT_NE(d[0].headers["id"], d[1].headers["id"]);

  Harness off;
  off.cfg.events.tombstones_on_delete = false;
  EXPECT_EQ(off.route(del).size(), 1u);
  Harness per_table;
  per_table.cfg.tables[0].tombstones_on_delete = false;
  EXPECT_EQ(per_table.route(del).size(), 1u);
}

// shared/cases/BUG-11.md: a key change is a delete of the old key (+ tombstone) and a create.
TEST(Router, PrimaryKeyChangeBecomesDeleteTombstoneCreate) {
  Harness h;
  auto out = h.route(
      R"({"action":"U","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"region","typeoid":25,"value":"eu"},{"name":"no","typeoid":23,"value":10},{"name":"v","typeoid":25,"value":"x"}],"identity":[{"name":"region","typeoid":25,"value":"eu"},{"name":"no","typeoid":23,"value":1}],"pk":[{"name":"region","typeoid":25},{"name":"no","typeoid":23}]})");
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].key, R"({"region":"eu","no":1})");
  EXPECT_TRUE(has(*out[0].value, R"("op":"d")"));
  EXPECT_EQ(out[0].value->rfind(R"({"before":{"region":"eu","no":1},"after":null)", 0), 0u);
  EXPECT_EQ(out[1].key, R"({"region":"eu","no":1})");
  EXPECT_FALSE(out[1].value.has_value());
  EXPECT_EQ(out[2].key, R"({"region":"eu","no":10})");
  EXPECT_EQ(out[2].value->rfind(R"({"before":null,"after":{"region":"eu","no":10,"v":"x"})", 0),
            0u);
  EXPECT_TRUE(has(*out[2].value, R"("op":"c")"));
  // Debezium's headers naming the other key (issue "Debezium drop-in" item 5).
  EXPECT_EQ(out[0].headers["__debezium.newkey"], R"({"region":"eu","no":10})");
  EXPECT_EQ(out[1].headers["__debezium.newkey"], R"({"region":"eu","no":10})");
  EXPECT_EQ(out[2].headers["__debezium.oldkey"], R"({"region":"eu","no":1})");
  EXPECT_FALSE(out[2].headers.contains("__debezium.newkey"));
}

TEST(Router, TruncateIsOffByDefaultAndAnEventWhenEnabled) {
  const std::string t =
      R"({"action":"T","xid":5,"lsn":"0/10","schema":"public","table":"invoices"})";
  Harness h;
  EXPECT_TRUE(h.route(t).empty());
  Harness on;
  on.cfg.events.operations.truncate = true;
  auto out = on.route(t);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].key.has_value());
  EXPECT_EQ(out[0].value->rfind(R"({"before":null,"after":null,)", 0), 0u);
  EXPECT_TRUE(has(*out[0].value, R"("op":"t")"));
}

TEST(Router, OperationsFilterPerTable) {
  Harness h;
  walrelay::config::Operations only_deletes;
  only_deletes.create = false;
  only_deletes.update = false;
  h.cfg.tables[0].operations = only_deletes;
  EXPECT_TRUE(h.route(kInsert).empty());
}

// Issue "Debezium drop-in" item 1: for PRIMARY KEY (b, a) on columns (a, b, v) Debezium's key is
// {"b":"x","a":1}; message.key.columns keeps the listed order. wal2json lists pk in column order.
TEST(Router, KeyColumnsFollowTheKeysDeclarationOrder) {
  const std::string line =
      R"({"action":"I","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"a","typeoid":23,"value":1},{"name":"b","typeoid":25,"value":"x"},{"name":"v","typeoid":25,"value":"y"}],"pk":[{"name":"a","typeoid":23},{"name":"b","typeoid":25}]})";
  Harness h;
  TableSchema ts;
  ts.schema = ts.root_schema = "public";
  ts.table = ts.root_table = "invoices";
  ts.columns = {ColumnInfo{"a", 23, -1, true, false}, ColumnInfo{"b", 25, -1, true, true},
                ColumnInfo{"v", 25, -1, false, true}};
  ts.primary_key = {"b", "a"};  // the constraint's order, as the catalog reads it
  h.schemas.tables["public.invoices"] = ts;
  EXPECT_EQ(h.route(line)[0].key, R"({"b":"x","a":1})");
  Harness listed;
  listed.cfg.tables[0].key_columns = {"v", "a"};
  EXPECT_EQ(listed.route(line)[0].key, R"({"v":"y","a":1})");
}

TEST(Router, TableWithoutPrimaryKeyGetsNullKeyOrConfiguredKeyColumns) {
  const std::string line =
      R"({"action":"I","xid":5,"lsn":"0/10","schema":"audit","table":"log","columns":[{"name":"at","typeoid":25,"value":"t1"},{"name":"msg","typeoid":25,"value":"hi"}]})";
  Harness h;
  auto out = h.route(line);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].topic, "billing.audit.log");
  EXPECT_FALSE(out[0].key.has_value());
  Harness keyed;
  keyed.cfg.tables[2].key_columns = {"msg"};
  EXPECT_EQ(keyed.route(line)[0].key, R"({"msg":"hi"})");
}

// key_columns naming a column the table does not have: never keyed by the whole row instead
// (the key would change with every UPDATE), but a mapping error naming the column.
TEST(Router, KeyColumnTheTableDoesNotHaveIsAnErrorNotTheWholeRow) {
  const std::string insert =
      R"({"action":"I","xid":5,"lsn":"0/10","schema":"audit","table":"customers","columns":[{"name":"id","typeoid":23,"value":3},{"name":"email","typeoid":25,"value":"c@x"}],"pk":[{"name":"id","typeoid":23}]})";
  {
    Harness h;  // no catalog shape: the INSERT's own columns tell
    h.cfg.tables[2].key_columns = {"mail"};
    const std::string err = h.route_error(insert);
    EXPECT_TRUE(has(err, "key column 'mail'")) << err;
    EXPECT_TRUE(has(err, "audit.customers")) << err;
  }
  Harness h;
  h.cfg.tables[2].key_columns = {"mail"};
  h.cfg.tables[2].mask_columns = {"emial"};
  TableSchema ts;
  ts.schema = ts.root_schema = "audit";
  ts.table = ts.root_table = "customers";
  ts.columns = {ColumnInfo{"id", 23, -1, true, false}, ColumnInfo{"email", 25, -1, false, true}};
  ts.primary_key = {"id"};
  h.schemas.tables["audit.customers"] = ts;
  h.build();
  EXPECT_EQ(h.router->missing_key_columns("audit", "customers"), std::vector<std::string>{"mail"});
  EXPECT_EQ(h.router->missing_mask_columns("audit", "customers"),
            std::vector<std::string>{"emial"});
  EXPECT_TRUE(h.router->missing_key_columns("public", "invoices").empty());
  EXPECT_TRUE(has(h.route_error(insert), "key column 'mail'"));
  const std::string update =
      R"({"action":"U","xid":5,"lsn":"0/20","schema":"audit","table":"customers","columns":[{"name":"id","typeoid":23,"value":3},{"name":"email","typeoid":25,"value":"d@x"}],"identity":[{"name":"id","typeoid":23,"value":3}]})";
  EXPECT_TRUE(has(h.route_error(update), "key column 'mail'"));
}

// A configured key column that a change's new row lacks (dropped since the shape was read): an
// error, not a key of the remaining columns.
TEST(Router, ChangeWithoutItsConfiguredKeyColumnIsAnError) {
  Harness h;
  h.cfg.tables[2].key_columns = {"email"};
  TableSchema ts;
  ts.schema = ts.root_schema = "audit";
  ts.table = ts.root_table = "customers";
  ts.columns = {ColumnInfo{"id", 23, -1, true, false}, ColumnInfo{"email", 25, -1, false, true},
                ColumnInfo{"note", 25, -1, false, true}};
  h.schemas.tables["audit.customers"] = ts;
  EXPECT_EQ(
      h.route(
           R"({"action":"I","xid":5,"lsn":"0/10","schema":"audit","table":"customers","columns":[{"name":"id","typeoid":23,"value":3},{"name":"email","typeoid":25,"value":"c@x"},{"name":"note","typeoid":25,"value":"n"}]})")
          [0]
              .key,
      R"({"email":"c@x"})");
  // An UPDATE whose row no longer has `email` (its shape is re-read at most once a second).
  const std::string err = h.route_error(
      R"({"action":"U","xid":5,"lsn":"0/20","schema":"audit","table":"customers","columns":[{"name":"id","typeoid":23,"value":3},{"name":"note","typeoid":25,"value":"m"}]})");
  EXPECT_TRUE(has(err, "email")) << err;
  EXPECT_TRUE(has(err, "not published with another key")) << err;
}

TEST(Router, ExcludedAndMaskedColumns) {
  Harness h;
  h.cfg.events.mask_salt = "pepper";
  h.cfg.tables[0].exclude_columns = {"secret"};
  h.cfg.tables[0].mask_columns = {"email"};
  auto out = h.route(
      R"({"action":"I","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"id","typeoid":23,"value":1},{"name":"secret","typeoid":25,"value":"s"},{"name":"email","typeoid":25,"value":"alice@example.com"}],"pk":[{"name":"id","typeoid":23}]})");
  ASSERT_EQ(out.size(), 1u);
  // sha256("pepper" + "alice@example.com"), computed independently.
  EXPECT_EQ(
      out[0].value->rfind(
          R"({"before":null,"after":{"id":1,"email":"8b8d9adc4875c0dca816e3e17b7ac87b45e40945b731fa02e3b42bf101589e21"})",
          0),
      0u)
      << *out[0].value;
}

TEST(Router, ExcludeListAndTopicTemplate) {
  Harness h;
  TableConfig ex = table("audit", "private_*");
  h.cfg.exclude = {ex};
  h.cfg.tables[2].topic = "{prefix}.audit-{table}";
  h.build();
  EXPECT_EQ(h.router->role_of("audit", "private_notes"), TableRole::kIgnored);
  EXPECT_EQ(h.router->role_of("public", "other"), TableRole::kIgnored);
  EXPECT_EQ(h.router->role_of("public", "event_outbox"), TableRole::kOutbox);
  EXPECT_EQ(h.router->topic_of("audit", "log"), "billing.audit-log");
  EXPECT_EQ(h.router->topic_of("audit", "Tä\"ble x"), "billing.audit-T___ble_x");
}

// shared/cases/BUG-09.md: an unchanged TOASTed column is never published as null.
TEST(Router, UnchangedToastColumnGetsPlaceholderOrOldValue) {
  Harness h;
  TableSchema ts;
  ts.schema = "public";
  ts.table = "invoices";
  ts.root_schema = "public";
  ts.root_table = "invoices";
  ts.columns = {ColumnInfo{"id", 23, -1, true, false}, ColumnInfo{"title", 25, -1, false, true},
                ColumnInfo{"body", 25, -1, false, true}};
  ts.primary_key = {"id"};
  h.schemas.tables["public.invoices"] = ts;
  auto out = h.route(
      R"({"action":"U","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"id","typeoid":23,"value":1},{"name":"title","typeoid":25,"value":"second"}],"identity":[{"name":"id","typeoid":23,"value":1}],"pk":[{"name":"id","typeoid":23}]})");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(has(*out[0].value,
                  R"("after":{"id":1,"title":"second","body":"__debezium_unavailable_value"})"))
      << *out[0].value;

  // REPLICA IDENTITY FULL: the old row carries the value.
  auto full = h.route(
      R"({"action":"U","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"id","typeoid":23,"value":1},{"name":"title","typeoid":25,"value":"second"}],"identity":[{"name":"id","typeoid":23,"value":1},{"name":"title","typeoid":25,"value":"first"},{"name":"body","typeoid":25,"value":"long body"}],"pk":[{"name":"id","typeoid":23}]})");
  EXPECT_TRUE(has(*full[0].value, R"("after":{"id":1,"title":"second","body":"long body"})"))
      << *full[0].value;
  // A real NULL stays null.
  auto null_body = h.route(
      R"({"action":"U","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"id","typeoid":23,"value":1},{"name":"title","typeoid":25,"value":"t"},{"name":"body","typeoid":25,"value":null}],"identity":[{"name":"id","typeoid":23,"value":1}],"pk":[{"name":"id","typeoid":23}]})");
  EXPECT_TRUE(has(*null_body[0].value, R"("after":{"id":1,"title":"t","body":null})"));
}

namespace {

// The catalog after DDL a backlog is decoded against: `xmins` is each column's pg_attribute xmin
// (the transaction that added or last altered it).
TableSchema big_after_ddl(std::vector<ColumnInfo> columns) {
  TableSchema ts;
  ts.schema = ts.root_schema = "public";
  ts.table = ts.root_table = "invoices";
  ts.columns = std::move(columns);
  ts.primary_key = {"id"};
  return ts;
}

ColumnInfo col(std::string name, std::uint32_t type, bool toastable, std::uint32_t xmin,
               std::int32_t typmod = -1) {
  ColumnInfo c{std::move(name), type, typmod, false, toastable};
  c.attribute_xmin = xmin;
  return c;
}

std::string update_line(std::uint64_t xid, const std::string& columns) {
  return R"({"action":"U","xid":)" + std::to_string(xid) +
         R"(,"lsn":"0/10","schema":"public","table":"invoices","columns":[)" + columns +
         R"(],"identity":[{"name":"id","typeoid":23,"value":1}],"pk":[{"name":"id","typeoid":23}]})";
}

std::string after_of(const std::vector<Out>& out) {
  if (out.size() != 1 || !out[0].value) return "<no single event>";
  const std::string& v = *out[0].value;
  const auto at = v.find(R"("after":)");
  if (at == std::string::npos) return v;
  std::size_t depth = 0;
  for (std::size_t i = at + 8; i < v.size(); ++i) {
    if (v[i] == '{') ++depth;
    if (v[i] == '}' && --depth == 0) return v.substr(at + 8, i - at - 7);
  }
  return v;
}

constexpr const char* kId = R"({"name":"id","typeoid":23,"value":1})";

}  // namespace

// Issue 25 item 5: `big (id, a, t, u)`, t TOASTed; walrelay stopped; UPDATE a (wal2json sends id,
// a, u), DROP COLUMN u, UPDATE a (id, a), ADD COLUMN w text; then decoded: the first update lost
// its own u and got w as the placeholder, a column that did not exist when it was written.
TEST(Router, UnchangedToastPlaceholderOnlyForColumnsOfTheChangesOwnShape) {
  Harness h;
  // Created by xid 100; u dropped by 210; w added by 300.
  h.schemas.tables["public.invoices"] =
      big_after_ddl({col("id", 23, false, 100), col("a", 25, true, 100), col("t", 25, true, 100),
                     col("w", 25, true, 300)});
  EXPECT_EQ(after_of(h.route(update_line(
                200, std::string(kId) + R"(,{"name":"a","typeoid":25,"value":"before-drop"},)"
                                        R"({"name":"u","typeoid":25,"value":"u-value"})"))),
            R"({"id":1,"a":"before-drop","t":"__debezium_unavailable_value","u":"u-value"})");
  EXPECT_EQ(after_of(h.route(update_line(
                250, std::string(kId) + R"(,{"name":"a","typeoid":25,"value":"after-drop"})"))),
            R"({"id":1,"a":"after-drop","t":"__debezium_unavailable_value"})");
  // Written after the ADD COLUMN: w is unchanged TOAST like t.
  EXPECT_EQ(after_of(h.route(update_line(
                400, std::string(kId) + R"(,{"name":"a","typeoid":25,"value":"after-add"})"))),
            R"({"id":1,"a":"after-add","t":"__debezium_unavailable_value",)"
            R"("w":"__debezium_unavailable_value"})");
}

TEST(Router, UnchangedToastAcrossSeveralDdlsTypeChangesAndARecreatedName) {
  Harness h;
  // Several DDLs after the changes: v added by 300, w by 350; n's type changed by 320 (text to
  // varchar(40)); u dropped and added again as int by 330.
  h.schemas.tables["public.invoices"] = big_after_ddl(
      {col("id", 23, false, 100), col("n", 1043, true, 320, 44), col("t", 25, true, 100),
       col("v", 25, true, 300), col("u", 23, false, 330), col("w", 25, true, 350)});
  const std::string n_text = R"({"name":"n","typeoid":25,"value":"1.50"})";
  // Before every DDL: n is the change's text, u its own text; t existed (older than the change,
  // it is followed by nothing older, yet is older itself); v and w did not exist.
  EXPECT_EQ(
      after_of(h.route(update_line(
          200, std::string(kId) + "," + n_text + R"(,{"name":"u","typeoid":25,"value":"old u"})"))),
      R"({"id":1,"n":"1.50","t":"__debezium_unavailable_value","u":"old u"})");
  // Between the two ADD COLUMNs: v existed, w not.
  EXPECT_EQ(after_of(h.route(update_line(
                340, std::string(kId) + R"(,{"name":"n","typeoid":1043,"value":"x2"})"))),
            R"({"id":1,"n":"x2","t":"__debezium_unavailable_value",)"
            R"("v":"__debezium_unavailable_value"})");
  // A column altered since (t: SET STORAGE by 500) still existed when a later column that is
  // older than the change did (attnums only grow): the placeholder.
  h.schemas.tables["public.invoices"] =
      big_after_ddl({col("id", 23, false, 100), col("t", 25, true, 500), col("a", 25, true, 100)});
  h.router.reset();
  EXPECT_EQ(after_of(h.route(
                update_line(200, std::string(kId) + R"(,{"name":"a","typeoid":25,"value":"x"})"))),
            R"({"id":1,"t":"__debezium_unavailable_value","a":"x"})");
  // xids wrap around: a column added by 4294967000 is older than a change of xid 5.
  h.schemas.tables["public.invoices"] =
      big_after_ddl({col("id", 23, false, 100), col("t", 25, true, 4294967000u)});
  h.router.reset();
  EXPECT_EQ(after_of(h.route(update_line(5, kId))),
            R"({"id":1,"t":"__debezium_unavailable_value"})");
  EXPECT_EQ(after_of(h.route(update_line(4294966000u, kId))), R"({"id":1})");
}

TEST(Router, NewColumnRefreshesTheCatalog) {
  Harness h;
  TableSchema ts;
  ts.schema = ts.root_schema = "public";
  ts.table = ts.root_table = "invoices";
  ts.columns = {ColumnInfo{"id", 23, -1, true, false}};
  h.schemas.tables["public.invoices"] = ts;
  h.route(
      R"({"action":"I","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"id","typeoid":23,"value":1},{"name":"added","typeoid":25,"value":"x"}]})");
  EXPECT_EQ(h.schemas.refreshes, 1);
}

// shared/cases/BUG-24.md: a leaf partition's changes go to the root's topic.
TEST(Router, LeafPartitionRoutesToRoot) {
  Harness h;
  h.cfg.tables = {table("public", "order_event")};
  TableSchema leaf;
  leaf.schema = "public";
  leaf.table = "order_event_2024_01";
  leaf.root_schema = "public";
  leaf.root_table = "order_event";
  leaf.columns = {ColumnInfo{"order_id", 23, -1, true, false}};
  h.schemas.tables["public.order_event_2024_01"] = leaf;
  auto out = h.route(
      R"({"action":"I","xid":5,"lsn":"0/10","schema":"public","table":"order_event_2024_01","columns":[{"name":"order_id","typeoid":23,"value":1}],"pk":[{"name":"order_id","typeoid":23}]})");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].topic, "billing.public.order_event");
  EXPECT_TRUE(has(*out[0].value, R"("schema":"public","table":"order_event")"));
  Harness leaves;
  leaves.cfg.tables = {table("public", "order_event")};
  leaves.cfg.events.partitions = walrelay::config::Partitions::kLeaf;
  leaves.schemas.tables["public.order_event_2024_01"] = leaf;
  EXPECT_EQ(
      leaves
          .route(
              R"({"action":"I","xid":5,"lsn":"0/10","schema":"public","table":"order_event_2024_01","columns":[{"name":"order_id","typeoid":23,"value":1}]})")
              [0]
          .topic,
      "billing.public.order_event_2024_01");
}

TEST(Router, TransactionMetadataBeginEventsEnd) {
  Harness h;
  h.cfg.events.transaction_metadata = true;
  auto first = h.route(kInsert);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].topic, "billing.transaction");
  // Debezium 3.6.1 (checked against it): ids are "<txId>:<LSN>" with the LSN of what each record
  // describes: BEGIN the first change, an event its own change, END the commit's end.
  EXPECT_EQ(first[0].key, R"({"id":"1031:649321032"})");
  EXPECT_EQ(
      *first[0].value,
      R"({"status":"BEGIN","id":"1031:649321032","event_count":null,"data_collections":null,"ts_ms":1795997677104})");
  EXPECT_TRUE(has(
      *first[1].value,
      R"("transaction":{"id":"1031:649321032","total_order":1,"data_collection_order":1},"op":"c")"));
  auto second = h.route(kInsert);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_TRUE(has(*second[0].value, R"("total_order":2,"data_collection_order":2)"));
  auto end = Harness::copy(h.router->commit(*Lsn::parse("0/26B3DA00")));
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(
      *end[0].value,
      R"({"status":"END","id":"1031:649320960","event_count":2,"data_collections":[{"data_collection":"public.invoices","event_count":2}],"ts_ms":1795997677104})");
}

TEST(Router, NoTransactionMetadataByDefault) {
  Harness h;
  h.route(kInsert);
  EXPECT_TRUE(h.router->commit(*Lsn::parse("0/26B3DA00")).empty());
}

constexpr const char* kOutboxInsert =
    R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"outbox_id","typeoid":20,"value":1},{"name":"event_id","typeoid":2950,"value":"4d649ef9-aa45-4515-b3e2-da097296fe99"},{"name":"subscription_id","typeoid":2950,"value":"11111111-1111-1111-1111-111111111111"},{"name":"event_type","typeoid":25,"value":"InvoicePaid"},{"name":"payload","typeoid":3802,"value":"{\"a\": 1.50, \"s\": \"q\\\"x\"}"},{"name":"tenant","typeoid":25,"value":"acme"},{"name":"created_at","typeoid":1184,"value":"2024-03-10 06:30:00.12+00"}],"pk":[{"name":"outbox_id","typeoid":20}]})";

TEST(Router, OutboxInsertBecomesOneDomainEvent) {
  Harness h;
  auto out = h.route(kOutboxInsert);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].topic, "outbox.event.InvoicePaid");
  EXPECT_EQ(out[0].key, "11111111-1111-1111-1111-111111111111");
  // The jsonb payload arrives as JSON, not as a JSON string holding JSON.
  EXPECT_EQ(out[0].value, R"({"a": 1.50, "s": "q\"x"})");
  EXPECT_EQ(out[0].headers["id"], "4d649ef9-aa45-4515-b3e2-da097296fe99");
  EXPECT_EQ(out[0].headers.size(), 1u);
  EXPECT_EQ(out[0].timestamp_ms, 1795997677104);  // commit time
}

TEST(Router, OutboxOptionsHeadersTimestampDigest) {
  Harness h;
  auto& ob = *h.cfg.tables[1].outbox;
  ob.event_type = "event_type";
  ob.timestamp = "created_at";
  ob.additional = {{"tenant", "tenant"}, {"outbox_id", "outboxId"}};
  ob.payload_digest = true;
  ob.topic = "billing.{aggregate_type}.events";
  auto out = h.route(kOutboxInsert);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].topic, "billing.InvoicePaid.events");
  EXPECT_EQ(out[0].headers["eventType"], "InvoicePaid");
  EXPECT_EQ(out[0].headers["tenant"], "acme");
  EXPECT_EQ(out[0].headers["outboxId"], "1");
  // sha256 of the value bytes, computed independently.
  EXPECT_EQ(out[0].headers["payload_digest"],
            "0dbd6cd6a1a4cdc67eca5241dc6212383641cfe03cd979fcaf7984b73748da30");
  // 2024-03-10T06:30:00.12Z
  EXPECT_EQ(out[0].timestamp_ms, 1710052200120);
}

TEST(Router, OutboxUpdateAndDeleteProduceNothing) {
  Harness h;
  EXPECT_TRUE(
      h.route(
           R"({"action":"U","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"outbox_id","typeoid":20,"value":1}],"identity":[{"name":"outbox_id","typeoid":20,"value":1}],"pk":[{"name":"outbox_id","typeoid":20}]})")
          .empty());
  EXPECT_TRUE(
      h.route(
           R"({"action":"D","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","identity":[{"name":"outbox_id","typeoid":20,"value":1}],"pk":[{"name":"outbox_id","typeoid":20}]})")
          .empty());
}

TEST(Router, OutboxEmptyAggregateIdIsAnErrorUnlessAllowedAndUpdatesAreCounted) {
  // shared/cases/CASE-09: key '' would give unrelated aggregates one key and one partition.
  const std::string line =
      R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"event_id","typeoid":25,"value":"e1"},{"name":"subscription_id","typeoid":25,"value":""},{"name":"event_type","typeoid":25,"value":"T"},{"name":"payload","typeoid":3802,"value":"{}"}]})";
  Harness h;
  const std::string err = h.route_error(line);
  EXPECT_NE(err.find("subscription_id"), std::string::npos) << err;
  EXPECT_NE(err.find("empty string"), std::string::npos) << err;
  Harness allowed;
  allowed.cfg.tables[1].outbox->allow_empty_aggregate_id = true;
  auto out = allowed.route(line);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key, "");
  // An UPDATE of an outbox row publishes nothing but is counted (and warned once per table).
  const std::string update =
      R"({"action":"U","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"outbox_id","typeoid":20,"value":1}],"identity":[{"name":"outbox_id","typeoid":20,"value":1}],"pk":[{"name":"outbox_id","typeoid":20}]})";
  EXPECT_TRUE(h.route(update).empty());
  EXPECT_TRUE(h.route(update).empty());
  EXPECT_EQ(h.router->outbox_updates_ignored(), 2u);
}

TEST(Router, OutboxPayloadKinds) {
  auto line = [](const std::string& oid, const std::string& value) {
    return R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"event_id","typeoid":25,"value":"e1"},{"name":"subscription_id","typeoid":25,"value":"s1"},{"name":"event_type","typeoid":25,"value":"T"},{"name":"payload","typeoid":)" +
           oid + R"(,"value":)" + value + "}]}";
  };
  Harness h;
  EXPECT_EQ(h.route(line("25", R"("{\"n\": 123456789012345678901234567890}")"))[0].value,
            R"({"n": 123456789012345678901234567890})");
  EXPECT_NE(h.route_error(line("25", R"("not json")")).find("not JSON"), std::string::npos);
  EXPECT_EQ(h.route(line("17", R"("\\x00ff41")"))[0].value, std::string("\x00\xff\x41", 3));
  EXPECT_EQ(h.route(line("17", R"("00ff41")"))[0].value, std::string("\x00\xff\x41", 3));
  EXPECT_NE(h.route_error(line("3802", "null")).find("NULL"), std::string::npos);
  Harness tomb;
  tomb.cfg.tables[1].outbox->tombstone_on_empty_payload = true;
  auto t = tomb.route(line("3802", "null"));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_FALSE(t[0].value.has_value());
  EXPECT_EQ(t[0].key, "s1");
}

TEST(Router, OutboxRowThatCannotBeMappedIsAnError) {
  Harness h;
  EXPECT_NE(
      h.route_error(
           R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"event_id","typeoid":2950,"value":"4d649ef9-aa45-4515-b3e2-da097296fe99"},{"name":"subscription_id","typeoid":2950,"value":null},{"name":"event_type","typeoid":25,"value":"X"},{"name":"payload","typeoid":3802,"value":"{}"}]})")
          .find("subscription_id"),
      std::string::npos);
  EXPECT_NE(
      h.route_error(
           R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"event_id","typeoid":25,"value":"e1"},{"name":"subscription_id","typeoid":25,"value":"s"},{"name":"event_type","typeoid":25,"value":"Invoice Paid/é"},{"name":"payload","typeoid":3802,"value":"{}"}]})")
          .find("Invoice Paid"),
      std::string::npos);
  // A payload value that only starts like null (found by the fuzzer): an error, not a crash.
  EXPECT_NE(
      h.route_error(
           R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"event_id","typeoid":25,"value":"e2"},{"name":"subscription_id","typeoid":25,"value":"s"},{"name":"event_type","typeoid":25,"value":"X"},{"name":"payload","typeoid":25,"value":"{\"note\": name}"}]})")
          .find("payload"),
      std::string::npos);
}

TEST(Router, MessageOutboxGivesTheSameRecordAsTheTable) {
  Harness h;
  MessageOutboxConfig m;
  m.prefix = "outbox";
  m.outbox = billing_outbox();
  h.cfg.messages = {m};
  auto from_table = h.route(
      R"({"action":"I","xid":9,"lsn":"0/10","schema":"public","table":"event_outbox","columns":[{"name":"event_id","typeoid":2950,"value":"e-1"},{"name":"subscription_id","typeoid":2950,"value":"s-1"},{"name":"event_type","typeoid":25,"value":"Shipped"},{"name":"payload","typeoid":3802,"value":"{\"carrier\": null}"}]})");
  auto from_message = h.route(
      R"({"action":"M","xid":9,"lsn":"0/20","transactional":true,"prefix":"outbox","content":"{\"event_id\":\"e-1\",\"subscription_id\":\"s-1\",\"event_type\":\"Shipped\",\"payload\":{\"carrier\": null}}"})");
  ASSERT_EQ(from_table.size(), 1u);
  ASSERT_EQ(from_message.size(), 1u);
  EXPECT_EQ(from_message[0].topic, from_table[0].topic);
  EXPECT_EQ(from_message[0].key, from_table[0].key);
  EXPECT_EQ(from_message[0].value, from_table[0].value);
  EXPECT_EQ(from_message[0].headers, from_table[0].headers);
  // Other prefixes are skipped; a malformed outbox message is an error.
  EXPECT_TRUE(
      h.route(
           R"({"action":"M","xid":null,"lsn":"0/30","transactional":false,"prefix":"audit","content":"x"})")
          .empty());
  EXPECT_NE(
      h.route_error(
           R"({"action":"M","xid":9,"lsn":"0/30","transactional":true,"prefix":"outbox","content":"{not json"})")
          .find("outbox"),
      std::string::npos);
}

TEST(CommitTimestamp, ParsesIsoWithOffsets) {
  using walrelay::router::parse_commit_timestamp_ms;
  // 2026-11-30T00:14:37.104367Z, computed independently.
  EXPECT_EQ(parse_commit_timestamp_ms("2026-11-30 00:14:37.104367+00"), 1795997677104);
  EXPECT_EQ(parse_commit_timestamp_ms("2026-11-29 19:14:37.104367-05"), 1795997677104);
  EXPECT_EQ(parse_commit_timestamp_ms("2026-11-30 05:44:37.1+05:30"), 1795997677100);
  EXPECT_EQ(parse_commit_timestamp_ms("1970-01-01 00:00:00+00"), 0);
  EXPECT_EQ(parse_commit_timestamp_ms("1970-01-01 00:00:01"), 1000);
  EXPECT_FALSE(parse_commit_timestamp_ms("yesterday"));
  EXPECT_FALSE(parse_commit_timestamp_ms("infinity"));
  EXPECT_FALSE(parse_commit_timestamp_ms(""));
  // Microseconds kept for source.ts_us/ts_ns; a time before 1970 rounds down in ms.
  using walrelay::router::parse_commit_timestamp;
  EXPECT_EQ(parse_commit_timestamp("2026-11-30 00:14:37.104367+00"),
            std::chrono::microseconds{1795997677104367});
  EXPECT_EQ(parse_commit_timestamp("2026-11-30 05:44:37.1+05:30"),
            std::chrono::microseconds{1795997677100000});
  EXPECT_EQ(parse_commit_timestamp_ms("1969-12-31 23:59:59.9995+00"), -1);
}

TEST(Router, TwoTablesMappedToOneTopicIsAnErrorNotAMix) {
  Harness h;
  h.cfg.tables = {table("public", "*")};
  // "a b" and "a_b" both map to billing.public.a_b.
  auto first = h.route(
      R"({"action":"I","xid":5,"lsn":"0/10","schema":"public","table":"a b","columns":[{"name":"id","typeoid":23,"value":1}]})");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].topic, "billing.public.a_b");
  EXPECT_NE(
      h.route_error(
           R"({"action":"I","xid":5,"lsn":"0/10","schema":"public","table":"a_b","columns":[{"name":"id","typeoid":23,"value":1}]})")
          .find("billing.public.a_b"),
      std::string::npos);
}

TEST(Router, SnapshotRowIsAReadEventBuiltLikeAStreamedRow) {
  Harness h;
  h.cfg.events.transaction_metadata = true;
  h.build();
  auto streamed = h.route(kInsert);
  auto c = h.decoder.decode(kInsert);
  ASSERT_TRUE(c);
  walrelay::decoder::Change row = **c;
  row.lsn = *Lsn::parse("0/1000");
  row.xid = 77;
  const walrelay::router::SnapshotRead read{"first", "0/1000:r:public.invoices:0:0",
                                            std::chrono::microseconds{1700000000000123}};
  auto recs = h.router->route_snapshot(row, read);
  ASSERT_TRUE(recs) << recs.error().reason;
  auto out = Harness::copy(*recs);
  ASSERT_EQ(out.size(), 1u);  // no transaction-metadata records around it
  EXPECT_EQ(out[0].topic, streamed[1].topic);
  EXPECT_EQ(out[0].key, streamed[1].key);
  EXPECT_EQ(out[0].headers["id"], "0/1000:r:public.invoices:0:0");
  EXPECT_EQ(out[0].timestamp_ms, 1700000000000);
  const std::string& v = *out[0].value;
  EXPECT_EQ(
      v.rfind(
          R"({"before":null,"after":{"b":2,"amount":"12345678901234567890.123456789","a":"x"},"source":{)",
          0),
      0u)
      << v;
  EXPECT_TRUE(has(
      v,
      R"("ts_ms":1700000000000,"snapshot":"first","db":"app","sequence":"[null,\"4096\"]","ts_us":1700000000000123,"ts_ns":1700000000000123000,"schema":"public","table":"invoices","txId":77,"lsn":4096,"xmin":null,"origin":null,"origin_lsn":null},"transaction":null,"op":"r","ts_ms":)"))
      << v;
  // The streaming transaction around it is untouched: its next record keeps counting, and its
  // source is the transaction's again (not the snapshot row's time, marker or sequence).
  auto again = h.route(kInsert);
  EXPECT_EQ(again[0].headers["id"], "0/26B3D938:2");
  EXPECT_TRUE(has(
      *again[0].value,
      R"("ts_ms":1795997677104,"snapshot":"false","db":"app","sequence":"[null,\"649321032\"]","ts_us":1795997677104367,"ts_ns":1795997677104367000,"schema":"public","table":"invoices","txId":1031,"lsn":649321032,"xmin":null,"origin":null,"origin_lsn":null})"))
      << *again[0].value;
}

TEST(Router, SnapshotOfAnOutboxTableGivesNothing) {
  Harness h;
  h.build();
  walrelay::decoder::Change row;
  row.action = walrelay::decoder::Action::kInsert;
  row.schema = "public";
  row.table = "event_outbox";
  const walrelay::router::SnapshotRead read{"true", "x", std::chrono::microseconds{1000}};
  auto recs = h.router->route_snapshot(row, read);
  ASSERT_TRUE(recs);
  EXPECT_TRUE(recs->empty());
}

// Issue "Debezium drop-in" item 3: under REPLICA IDENTITY DEFAULT Debezium writes before: null on
// an UPDATE that keeps the key, and on a DELETE every column with the non-key ones null. The native
// format keeps the key columns only.
TEST(Router, KeyOnlyBeforeImageInBothFormats) {
  const std::string update =
      R"({"action":"U","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"id","typeoid":23,"value":7},{"name":"n","typeoid":23,"value":2},{"name":"note","typeoid":25,"value":"b"}],"identity":[{"name":"id","typeoid":23,"value":7}],"pk":[{"name":"id","typeoid":23}]})";
  const std::string del =
      R"({"action":"D","xid":5,"lsn":"0/10","schema":"public","table":"invoices","identity":[{"name":"id","typeoid":23,"value":7}],"pk":[{"name":"id","typeoid":23}]})";
  TableSchema ts;
  ts.schema = ts.root_schema = "public";
  ts.table = ts.root_table = "invoices";
  ts.columns = {ColumnInfo{"id", 23, -1, true, false}, ColumnInfo{"n", 23, -1, false, false},
                ColumnInfo{"note", 25, -1, false, true}};
  ts.primary_key = {"id"};
  Harness deb;
  deb.cfg.events.value_format = walrelay::config::ValueFormat::kDebezium;
  deb.schemas.tables["public.invoices"] = ts;
  EXPECT_EQ(deb.route(update)[0].value->rfind(R"({"before":null,"after":{"id":7,"n":2,)", 0), 0u);
  EXPECT_EQ(
      deb.route(del)[0].value->rfind(R"({"before":{"id":7,"n":null,"note":null},"after":null,)", 0),
      0u);
  Harness native;
  native.schemas.tables["public.invoices"] = ts;
  EXPECT_EQ(native.route(update)[0].value->rfind(R"({"before":{"id":7},"after":{"id":7,)", 0), 0u);
  EXPECT_EQ(native.route(del)[0].value->rfind(R"({"before":{"id":7},"after":null,)", 0), 0u);
}

// A debezium-format DELETE of a backlog decoded after ADD COLUMN: its padded `before` lists the
// columns the row had then, not one added since (issue 25 item 5, as for the TOAST placeholder).
TEST(Router, KeyOnlyBeforeImageOfAnOlderDeleteLacksColumnsAddedSince) {
  Harness deb;
  deb.cfg.events.value_format = walrelay::config::ValueFormat::kDebezium;
  deb.schemas.tables["public.invoices"] =
      big_after_ddl({col("id", 23, false, 100), col("n", 23, false, 100), col("w", 25, true, 300)});
  const auto del = [](int xid) {
    return R"({"action":"D","xid":)" + std::to_string(xid) +
           R"(,"lsn":"0/10","schema":"public","table":"invoices","identity":[{"name":"id","typeoid":23,"value":7}],"pk":[{"name":"id","typeoid":23}]})";
  };
  EXPECT_EQ(deb.route(del(200))[0].value->rfind(R"({"before":{"id":7,"n":null},"after":null,)", 0),
            0u);
  EXPECT_EQ(deb.route(del(400))[0].value->rfind(
                R"({"before":{"id":7,"n":null,"w":null},"after":null,)", 0),
            0u);
}

TEST(Router, KeyChangeHeadersAreConnectsHeaderTextInDebeziumFormat) {
  // Debezium's __debezium.newkey/oldkey go through Kafka Connect's SimpleHeaderConverter
  // (Values#append): a Decimal as BigDecimal#toString, strings with only \\ and " escaped. Seen
  // side by side with Debezium 3.6.1 (tests/debezium).
  Harness h;
  h.cfg.events.value_format = walrelay::config::ValueFormat::kDebezium;
  TableSchema ts;
  ts.schema = ts.root_schema = "public";
  ts.table = ts.root_table = "invoices";
  ts.columns = {ColumnInfo{"k", 25, -1, true, true},
                ColumnInfo{"n", 1700, (10 << 16 | 2) + 4, true, true},
                ColumnInfo{"v", 23, -1, false, false}};
  ts.primary_key = {"k", "n"};
  h.schemas.tables["public.invoices"] = ts;
  auto out = h.route(
      R"({"action":"U","xid":1031,"lsn":"0/26B3DA48","schema":"public","table":"invoices","columns":[{"name":"k","typeoid":25,"value":"a\"b\t"},{"name":"n","typeoid":1700,"value":13.50},{"name":"v","typeoid":23,"value":1}],"identity":[{"name":"k","typeoid":25,"value":"a\"b\t"},{"name":"n","typeoid":1700,"value":0.00}],"pk":[{"name":"k","typeoid":25},{"name":"n","typeoid":1700}]})");
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].key, R"({"k":"a\"b\t","n":"AA=="})");  // JsonConverter: Decimal 0.00 = 0
  EXPECT_EQ(out[0].headers["__debezium.newkey"], "{\"k\":\"a\\\"b\t\",\"n\":13.50}");
  EXPECT_EQ(out[2].headers["__debezium.oldkey"], "{\"k\":\"a\\\"b\t\",\"n\":0.00}");
}

TEST(Router, ColumnTypesAreLookedUpAgainWhenTheRegistryLearnsAType) {
  // The router keeps each column's resolved type per table; a type the registry learns later
  // (an OID first seen unknown, then read from pg_type) must change how the next row is mapped.
  Harness h;
  const std::string line =
      R"({"action":"I","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"id","typeoid":23,"value":7},{"name":"qty","typeoid":90001,"value":"5"}],"pk":[{"name":"id","typeoid":23}]})";
  auto before = h.route(line);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_TRUE(has(*before[0].value, R"("after":{"id":7,"qty":"5"})")) << *before[0].value;
  walrelay::router::TypeInfo domain;
  domain.oid = 90001;
  domain.name = "qty_t";
  domain.category = 'N';
  domain.kind = 'd';
  domain.base = 23;  // a domain over integer: wal2json prints it as a string, mapped as a number
  h.types.add(domain);
  auto after = h.route(line);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_TRUE(has(*after[0].value, R"("after":{"id":7,"qty":5})")) << *after[0].value;
  // And a column whose type changes at the same position (ALTER COLUMN TYPE) is mapped by its new
  // type.
  const std::string altered =
      R"({"action":"I","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"id","typeoid":23,"value":7},{"name":"qty","typeoid":25,"value":"5"}],"pk":[{"name":"id","typeoid":23}]})";
  auto text = h.route(altered);
  ASSERT_EQ(text.size(), 1u);
  EXPECT_TRUE(has(*text[0].value, R"("after":{"id":7,"qty":"5"})")) << *text[0].value;
}

// wal2json < 2.6 prints NaN of a NOT NULL numeric column as null: counted. A DELETE's before image
// in the debezium format is padded with null for the columns outside the replica identity; those
// nulls are not values and never count (nor warn).
TEST(Router, NanAsNullCountsRealValuesNotADeletesPaddedBeforeImage) {
  Harness h;
  h.cfg.events.value_format = walrelay::config::ValueFormat::kDebezium;
  TableSchema ts;
  ts.schema = ts.root_schema = "public";
  ts.table = ts.root_table = "invoices";
  ts.columns = {ColumnInfo{"id", 23, -1, true, false}, ColumnInfo{"total", 1700, -1, true, true}};
  ts.primary_key = {"id"};
  h.schemas.tables["public.invoices"] = ts;
  auto deleted = h.route(
      R"({"action":"D","xid":5,"lsn":"0/10","schema":"public","table":"invoices","identity":[{"name":"id","typeoid":23,"value":1}],"pk":[{"name":"id","typeoid":23}]})");
  ASSERT_FALSE(deleted.empty());
  EXPECT_TRUE(has(*deleted[0].value, R"("before":{"id":1,"total":null})")) << *deleted[0].value;
  EXPECT_EQ(h.router->nan_as_null_count(), 0u);
  h.route(
      R"({"action":"I","xid":5,"lsn":"0/10","schema":"public","table":"invoices","columns":[{"name":"id","typeoid":23,"value":2},{"name":"total","typeoid":1700,"value":null}],"pk":[{"name":"id","typeoid":23}]})");
  EXPECT_EQ(h.router->nan_as_null_count(), 1u);
}
