// Event semantics end to end (issue "Event semantics and data fidelity"): TOAST placeholder for a
// random >2 kB text left unchanged by an UPDATE, table vs logical-message outbox giving identical
// records, transaction metadata, TRUNCATE events, and the Debezium value format.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace walrelay::itest {
namespace {

class EventSemanticsTest : public IntegrationTest {};

// 3,200 hex digits of md5 output: random enough that pglz cannot compress it, so PostgreSQL
// stores it out of line (TOAST) and an UPDATE that does not touch it leaves it out of the WAL.
constexpr const char* kRandomText =
    "(SELECT string_agg(md5(random()::text || g::text), '') FROM generate_series(1, 100) g)";

TEST_F(EventSemanticsTest, UnchangedToastedColumnIsThePlaceholderOrTheOldValueNeverNull) {
  const std::string def = table("doc_default");
  const std::string full = table("doc_full");
  for (const auto& t : {def, full}) {
    pg_->exec("CREATE TABLE " + t + " (id int PRIMARY KEY, title text, body text)");
  }
  pg_->exec("ALTER TABLE " + full + " REPLICA IDENTITY FULL");
  WalrelayProcess proc(make_config({{def}, {full}}).to_yaml());
  start_streaming(proc, name_);
  for (const auto& t : {def, full}) {
    pg_->exec("INSERT INTO " + t + " VALUES (1, 'first', " + kRandomText + ")");
    pg_->exec("UPDATE " + t + " SET title = 'second' WHERE id = 1");
  }
  const std::string body_def = pg_->value("SELECT body FROM " + def + " WHERE id = 1");
  const std::string body_full = pg_->value("SELECT body FROM " + full + " WHERE id = 1");
  ASSERT_EQ(body_def.size(), 3200u);

  const auto recs = kafka_->read_at_least({topic("doc_default"), topic("doc_full")}, 4);
  ASSERT_EQ(recs.size(), 4u) << describe(recs);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  std::map<std::string, std::string> update_of;  // topic -> value of the update event
  for (const auto& r : recs) {
    ASSERT_TRUE(r.value);
    if (json_string_at(*r.value, "/op") == "u") update_of[r.topic] = *r.value;
  }
  ASSERT_EQ(update_of.size(), 2u) << describe(recs);
  // REPLICA IDENTITY DEFAULT: the unchanged body is not in the WAL; never null, the placeholder.
  const std::string& u_def = update_of[topic("doc_default")];
  EXPECT_EQ(json_string_at(u_def, "/after/title"), "second");
  EXPECT_EQ(json_string_at(u_def, "/after/body"), "__debezium_unavailable_value") << u_def;
  EXPECT_EQ(json_at(u_def, "/before"), R"({"id":1})");
  // REPLICA IDENTITY FULL: the old row carries the value, copied into `after`.
  const std::string& u_full = update_of[topic("doc_full")];
  EXPECT_EQ(json_string_at(u_full, "/after/body"), body_full);
  EXPECT_EQ(json_string_at(u_full, "/before/title"), "first");
  EXPECT_EQ(json_string_at(u_full, "/before/body"), body_full);
}

// Issue 9 item 2: after DROP COLUMN (or a drop and re-create with fewer columns) an UPDATE must
// not carry the gone column as the TOAST placeholder; while the column exists and is unchanged,
// it still does.
TEST_F(EventSemanticsTest, ADroppedColumnIsNeverFilledWithThePlaceholder) {
  const std::string memo = table("memo");
  const std::string redo = table("redo");
  pg_->exec("CREATE TABLE " + memo + " (id int PRIMARY KEY, a text, b text)");
  pg_->exec("CREATE TABLE " + redo + " (id int PRIMARY KEY, a text, b text)");
  WalrelayProcess proc(make_config({{memo}, {redo}}).to_yaml());
  start_streaming(proc, name_);
  for (const auto& t : {memo, redo}) {
    pg_->exec("INSERT INTO " + t + " VALUES (1, 'first', " + kRandomText + ")");
    pg_->exec("UPDATE " + t + " SET a = 'second' WHERE id = 1");  // b unchanged: placeholder
  }
  ASSERT_EQ(kafka_->read_at_least({topic("memo"), topic("redo")}, 4).size(), 4u);
  pg_->exec("ALTER TABLE " + memo + " DROP COLUMN b");
  pg_->exec("DROP TABLE " + redo);
  pg_->exec("CREATE TABLE " + redo + " (id int PRIMARY KEY, a text)");
  pg_->exec("INSERT INTO " + redo + " VALUES (1, 'first')");
  // The shape of an UPDATE with missing columns is verified at most once a second per table.
  std::this_thread::sleep_for(1200ms);
  pg_->exec("UPDATE " + memo + " SET a = 'third' WHERE id = 1");
  pg_->exec("UPDATE " + redo + " SET a = 'third' WHERE id = 1");
  const auto recs = kafka_->read_at_least({topic("memo"), topic("redo")}, 7);
  ASSERT_EQ(recs.size(), 7u) << describe(recs);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  std::map<std::string, std::vector<std::string>> updates;  // topic -> update values in order
  for (const auto& r : recs) {
    if (r.value && json_string_at(*r.value, "/op") == "u") updates[r.topic].push_back(*r.value);
  }
  for (const auto& t : {topic("memo"), topic("redo")}) {
    ASSERT_EQ(updates[t].size(), 2u) << describe(recs);
    EXPECT_EQ(json_string_at(updates[t][0], "/after/b"), "__debezium_unavailable_value");
    EXPECT_EQ(json_at(updates[t][1], "/after"), R"({"id":1,"a":"third"})") << updates[t][1];
  }
  EXPECT_NE(proc.stderr_text().find("changed shape"), std::string::npos) << proc.logs();
}

// Issue 25 item 5: a backlog decoded after DROP/ADD COLUMN. `big (id, a, t, u)` with t TOASTed;
// walrelay stopped; UPDATE a (wal2json sends id, a, u), DROP COLUMN u, UPDATE a (id, a), ADD
// COLUMN w: the first update lost its own u and got w as the placeholder. Each update keeps the
// shape it was written with. `redo` drops and re-adds u as another type and changes a's type.
TEST_F(EventSemanticsTest, UnchangedToastInABacklogKeepsTheShapeItWasWrittenWith) {
  const std::string big = table("big");
  const std::string redo = table("redo");
  for (const auto& t : {big, redo}) {
    pg_->exec("CREATE TABLE " + t + " (id int PRIMARY KEY, a text, t text, u text)");
    pg_->exec("INSERT INTO " + t + " VALUES (1, 'first', " + kRandomText + ", 'u-value')");
  }
  const auto cfg = make_config({{big}, {redo}});
  {
    WalrelayProcess first(cfg.to_yaml(), "walrelay (creates the slot)");
    start_streaming(first, name_);
    ASSERT_TRUE(stop_gracefully(first, name_));
  }
  pg_->exec("UPDATE " + big + " SET a = 'before-drop'");
  pg_->exec("ALTER TABLE " + big + " DROP COLUMN u");
  pg_->exec("UPDATE " + big + " SET a = 'after-drop'");
  pg_->exec("ALTER TABLE " + big + " ADD COLUMN w text");
  pg_->exec("UPDATE " + redo + " SET a = 'before'");
  pg_->exec("ALTER TABLE " + redo + " DROP COLUMN u");
  pg_->exec("ALTER TABLE " + redo + " ADD COLUMN u int");
  pg_->exec("ALTER TABLE " + redo + " ALTER COLUMN a TYPE varchar(40)");
  pg_->exec("UPDATE " + redo + " SET a = 'after', u = 7");
  WalrelayProcess proc(cfg.to_yaml(), "walrelay (after the DDL)");
  start_streaming(proc, name_);
  const auto recs = kafka_->read_at_least({topic("big"), topic("redo")}, 4);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  std::map<std::string, std::vector<std::string>> after;  // topic -> `after` of each update
  for (const auto& r : recs) {
    if (r.value && json_string_at(*r.value, "/op") == "u") {
      after[r.topic].push_back(json_at(*r.value, "/after"));
    }
  }
  const std::string placeholder = "\"__debezium_unavailable_value\"";
  EXPECT_EQ(after[topic("big")],
            (std::vector<std::string>{
                R"({"id":1,"a":"before-drop","t":)" + placeholder + R"(,"u":"u-value"})",
                R"({"id":1,"a":"after-drop","t":)" + placeholder + "}"}))
      << describe(recs);
  EXPECT_EQ(
      after[topic("redo")],
      (std::vector<std::string>{R"({"id":1,"a":"before","t":)" + placeholder + R"(,"u":"u-value"})",
                                R"({"id":1,"a":"after","t":)" + placeholder + R"(,"u":7})"}))
      << describe(recs);
}

TEST_F(EventSemanticsTest, TableAndMessageOutboxGiveIdenticalRecords) {
  const std::string ob = table("outbox");
  pg_->exec("CREATE TABLE " + ob +
            " (id uuid PRIMARY KEY, aggregateid text NOT NULL, aggregatetype text NOT NULL, "
            "payload jsonb)");
  const std::string prefix = name_ + "_msgs";
  auto cfg = make_config({{ob, {"topic: \"" + name_ + ".{aggregate_type}\""}}});
  cfg.extra_yaml = "messages:\n  - prefix: " + prefix + "\n    outbox:\n      topic: \"" + name_ +
                   ".{aggregate_type}\"\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  // The same event once through the table and once through a transactional message.
  pg_->commit({"INSERT INTO " + ob +
                   " VALUES ('11111111-1111-1111-1111-111111111111', 'order-7', 'Order', "
                   "'{\"total\": 99.90, \"lines\": [1, 2]}')",
               "DELETE FROM " + ob + " WHERE id = '11111111-1111-1111-1111-111111111111'"});
  // The message's content built from the same jsonb payload, as an application would.
  pg_->exec("SELECT pg_logical_emit_message(true, " + sql_literal(prefix) +
            ", jsonb_build_object('id', '11111111-1111-1111-1111-111111111111', 'aggregateid', "
            "'order-7', 'aggregatetype', 'Order', 'payload', "
            "'{\"total\": 99.90, \"lines\": [1, 2]}'::jsonb)::text)");
  const auto recs = kafka_->read_at_least({name_ + ".Order"}, 2);
  ASSERT_EQ(recs.size(), 2u) << describe(recs);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(recs[0].key, "order-7");
  EXPECT_EQ(recs[0].key, recs[1].key);
  EXPECT_EQ(recs[0].value, R"({"lines": [1, 2], "total": 99.90})");  // jsonb's own text
  EXPECT_EQ(recs[0].value, recs[1].value);
  EXPECT_EQ(recs[0].headers, recs[1].headers);
  EXPECT_EQ(recs[0].header("id"), "11111111-1111-1111-1111-111111111111");
  EXPECT_EQ(recs[0].partition, recs[1].partition);
  const auto all = kafka_->read_all({name_ + ".Order"});
  EXPECT_EQ(all.size(), 2u) << "the DELETE of the outbox row published nothing";
}

TEST_F(EventSemanticsTest, TransactionMetadataAndTruncate) {
  const std::string t = table("items");
  pg_->exec("CREATE TABLE " + t + " (id int PRIMARY KEY, v text)");
  auto cfg = make_config({{t}});
  cfg.extra_yaml = "events:\n  transaction_metadata: true\n  operations: [c, u, d, t]\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  pg_->commit({"INSERT INTO " + t + " VALUES (1, 'a')", "INSERT INTO " + t + " VALUES (2, 'b')"});
  pg_->exec("TRUNCATE " + t);
  const auto events = kafka_->read_at_least({topic("items")}, 3);
  const auto txns = kafka_->read_at_least({name_ + ".transaction"}, 4);
  ASSERT_EQ(events.size(), 3u) << describe(events);
  ASSERT_EQ(txns.size(), 4u) << describe(txns);
  ASSERT_TRUE(stop_gracefully(proc, name_));

  // Debezium 3.6.1 (checked against it, tests/debezium): ids are "<txId>:<LSN>" with the LSN of
  // what each record describes: BEGIN the transaction's first change, each event its own change,
  // END the end of the commit record. Group by the txId before the colon.
  const auto txid_of = [](const std::string& id) { return id.substr(0, id.find(':')); };
  std::map<std::string, std::vector<std::string>> by_txn;  // txId -> statuses in order
  std::map<std::string, std::string> begin_of, end_of;     // txId -> BEGIN/END value
  for (const auto& r : txns) {
    const std::string id = json_string_at(*r.value, "/id");
    EXPECT_EQ(r.key, R"({"id":")" + id + R"("})");
    const std::string status = json_string_at(*r.value, "/status");
    by_txn[txid_of(id)].push_back(status);
    (status == "END" ? end_of : begin_of)[txid_of(id)] = *r.value;
  }
  ASSERT_EQ(by_txn.size(), 2u) << describe(txns);
  for (const auto& [id, statuses] : by_txn) {
    EXPECT_EQ(statuses.size(), 2u) << id;
  }
  std::vector<const KafkaRecord*> inserts;
  const KafkaRecord* truncate = nullptr;
  for (const auto& r : events) {
    if (json_string_at(*r.value, "/op") == "t") {
      truncate = &r;
    } else {
      inserts.push_back(&r);
    }
  }
  ASSERT_EQ(inserts.size(), 2u) << describe(events);
  ASSERT_NE(truncate, nullptr) << describe(events);
  std::sort(inserts.begin(), inserts.end(), [](const KafkaRecord* a, const KafkaRecord* b) {
    return std::stoull(json_at(*a->value, "/source/lsn")) <
           std::stoull(json_at(*b->value, "/source/lsn"));
  });
  const std::string txid = json_at(*inserts[0]->value, "/source/txId");
  for (const auto* r : inserts) {
    EXPECT_EQ(json_string_at(*r->value, "/transaction/id"),
              txid + ":" + json_at(*r->value, "/source/lsn"));
  }
  ASSERT_TRUE(begin_of.contains(txid) && end_of.contains(txid)) << describe(txns);
  EXPECT_EQ(json_string_at(begin_of[txid], "/id"),
            json_string_at(*inserts[0]->value, "/transaction/id"));
  EXPECT_EQ(json_at(end_of[txid], "/event_count"), "2");
  EXPECT_EQ(json_at(end_of[txid], "/data_collections"),
            R"([{"data_collection":")" + schema_ + R"(.items","event_count":2}])");
  std::set<std::string> orders;
  for (const auto* r : inserts) {
    orders.insert(json_at(*r->value, "/transaction/total_order") + "/" +
                  json_at(*r->value, "/transaction/data_collection_order"));
  }
  EXPECT_EQ(orders, (std::set<std::string>{"1/1", "2/2"}));
  // TRUNCATE: op t, no key, no row images, in a transaction of its own.
  EXPECT_FALSE(truncate->key.has_value());
  EXPECT_EQ(json_at(*truncate->value, "/before"), "null");
  EXPECT_EQ(json_at(*truncate->value, "/after"), "null");
  EXPECT_NE(txid_of(json_string_at(*truncate->value, "/transaction/id")), txid);
}

TEST_F(EventSemanticsTest, DebeziumValueFormat) {
  const std::string t = table("typed");
  pg_->exec("CREATE TABLE " + t +
            " (id int PRIMARY KEY, price numeric(10,2), d date, ts timestamp(3), "
            "tstz timestamptz, b bytea, j jsonb, tags text[])");
  auto cfg = make_config({{t}});
  cfg.extra_yaml = "events:\n  value_format: debezium\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  pg_->exec("INSERT INTO " + t +
            " VALUES (1, 12.34, '2024-03-10', '2024-03-10 06:30:00.12', "
            "'2024-03-10 06:30:00.12+00', '\\xdeadbeef', '{\"a\": 1}', '{x,\"y z\"}')");
  const auto recs = kafka_->read_at_least({topic("typed")}, 1);
  ASSERT_EQ(recs.size(), 1u) << describe(recs);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  const std::string& v = *recs[0].value;
  // Values worked out by hand: 1234 = 0x04D2 -> base64 "BNI="; 2024-03-10 is day 19792 after
  // 1970-01-01; 06:30:00.120 that day is 1710052200120 ms; 0xdeadbeef -> "3q2+7w==".
  EXPECT_EQ(json_string_at(v, "/after/price"), "BNI=");
  EXPECT_EQ(json_at(v, "/after/d"), "19792");
  EXPECT_EQ(json_at(v, "/after/ts"), "1710052200120");
  EXPECT_EQ(json_string_at(v, "/after/tstz"), "2024-03-10T06:30:00.120000Z");
  EXPECT_EQ(json_string_at(v, "/after/b"), "3q2+7w==");
  EXPECT_EQ(json_string_at(v, "/after/j"), R"({"a": 1})");
  EXPECT_EQ(json_at(v, "/after/tags"), R"(["x","y z"])");
}

}  // namespace
}  // namespace walrelay::itest
