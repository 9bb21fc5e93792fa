// End-to-end streaming behaviour of `walrelay run` against a real PostgreSQL (wal2json) and a real
// Kafka broker, checked as a user would: SQL in, Kafka records out, slot state in
// pg_replication_slots.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "harness.hpp"
#include "walrelay/core/lsn.hpp"

namespace walrelay::itest {
namespace {

/// Commit LSN part of a row-change event's `id` header (`<commit lsn>:<position>`).
std::optional<Lsn> commit_lsn_of(const KafkaRecord& r) {
  const std::string id = r.header("id");
  const auto colon = id.find(':');
  if (colon == std::string::npos) return std::nullopt;
  return Lsn::parse(std::string_view(id).substr(0, colon));
}

/// Position part of a row-change event's `id` header.
long position_of(const KafkaRecord& r) {
  const std::string id = r.header("id");
  return std::stol(id.substr(id.find(':') + 1));
}

/// "op:field" of a row-change event: the op and the `after` value of `field` (unquoted string or
/// number text), or "op:-" when `after` is null (a delete).
std::string op_and_after(const KafkaRecord& r, const std::string& field) {
  if (!r.value) return "tombstone";
  const std::string& v = *r.value;
  const std::string op = json_string_at(v, "/op");
  if (json_at(v, "/after") == "null") return op + ":-";
  const std::string f = json_at(v, "/after/" + field);
  if (f.size() >= 2 && f.front() == '"') return op + ":" + json_string_at(v, "/after/" + field);
  return op + ":" + f;
}

/// Per record key (in Kafka partition order): the op:after sequence. Also checks that every
/// record of a key is on one partition and that (commit LSN, position) increases along it.
std::map<std::string, std::vector<std::string>> sequences_by_key(std::vector<KafkaRecord> records,
                                                                 const std::string& field) {
  sort_by_partition_order(records);
  std::map<std::string, std::vector<std::string>> seq;
  std::map<std::string, std::int32_t> partition_of;
  std::map<std::string, std::pair<Lsn, long>> last_id;
  for (const auto& r : records) {
    const std::string key = r.key.value_or("<null>");
    seq[key].push_back(op_and_after(r, field));
    const auto [it, inserted] = partition_of.emplace(key, r.partition);
    EXPECT_EQ(it->second, r.partition) << "key " << key << " on two partitions: " << r.describe();
    const auto lsn = commit_lsn_of(r);
    EXPECT_TRUE(lsn.has_value()) << "bad id header: " << r.describe();
    if (!lsn) continue;
    const std::pair<Lsn, long> id{*lsn, position_of(r)};
    if (const auto prev = last_id.find(key); prev != last_id.end()) {
      EXPECT_LT(prev->second, id) << "events of key " << key
                                  << " are not in commit order: " << r.describe();
    }
    last_id[key] = id;
  }
  return seq;
}

/// Every `id` header value, checking that none repeats.
std::set<std::string> unique_ids(const std::vector<KafkaRecord>& records) {
  std::set<std::string> ids;
  for (const auto& r : records) {
    EXPECT_TRUE(ids.insert(r.header("id")).second)
        << "duplicate event id " << r.header("id") << ": " << r.describe();
  }
  return ids;
}

/// The largest commit LSN among row-change records.
Lsn max_commit_lsn(const std::vector<KafkaRecord>& records) {
  Lsn max;
  for (const auto& r : records) {
    if (auto l = commit_lsn_of(r); l && *l > max) max = *l;
  }
  return max;
}

class StreamingTest : public IntegrationTest {};

// 1. INSERT/UPDATE/DELETE on two tables: right topics, keys, ops, envelope, and per-key commit
//    order (per partition) across several transactions.
TEST_F(StreamingTest, RowChangesArriveOnTableTopicsInCommitOrderPerKey) {
  pg_->exec("CREATE TABLE " + table("invoices") +
            " (id int PRIMARY KEY, status text NOT NULL, amount numeric(12,2))");
  pg_->exec("CREATE TABLE " + table("customers") +
            " (region text, id int, name text, PRIMARY KEY (region, id))");
  WalrelayProcess proc(make_config({{table("invoices")}, {table("customers")}}).to_yaml());
  start_streaming(proc, name_);

  const std::string inv = table("invoices");
  const std::string cus = table("customers");
  pg_->commit({"INSERT INTO " + inv + " VALUES (1, 'draft', 10.00), (2, 'draft', 20.00)",
               "INSERT INTO " + inv + " VALUES (3, 'draft', 30.00)",
               "INSERT INTO " + cus + " VALUES ('eu', 7, 'Ann')"});
  pg_->commit({"UPDATE " + inv + " SET status = 'open' WHERE id = 1",
               "UPDATE " + inv + " SET status = 'open' WHERE id = 2",
               "UPDATE " + cus + " SET name = 'Anna' WHERE id = 7"});
  pg_->commit({"UPDATE " + inv + " SET status = 'paid' WHERE id = 1",
               "DELETE FROM " + inv + " WHERE id = 2",
               "UPDATE " + inv + " SET status = 'open' WHERE id = 3"});
  pg_->commit({"UPDATE " + inv + " SET status = 'void' WHERE id = 1",
               "DELETE FROM " + cus + " WHERE id = 7"});
  pg_->commit({"UPDATE " + inv + " SET status = 'closed' WHERE id = 3",
               "INSERT INTO " + inv + " VALUES (2, 'reborn', 22.00)"});
  // 11 invoice events + 3 customer events, and a tombstone after each of the 2 deletes.
  const std::vector<std::string> topics = {topic("invoices"), topic("customers")};
  const auto seen = kafka_->read_at_least(topics, 16);
  ASSERT_EQ(seen.size(), 16u) << describe(seen);
  ASSERT_TRUE(stop_gracefully(proc, name_));

  const auto all = kafka_->read_all(topics);
  ASSERT_EQ(all.size(), 16u) << "exactly the 14 changes and 2 tombstones, nothing more:\n"
                             << describe(all);
  unique_ids(all);

  std::vector<KafkaRecord> invoices;
  std::vector<KafkaRecord> customers;
  for (const auto& r : all) (r.topic == topic("invoices") ? invoices : customers).push_back(r);

  using Seq = std::vector<std::string>;
  const auto inv_seq = sequences_by_key(invoices, "status");
  EXPECT_EQ(inv_seq, (std::map<std::string, Seq>{
                         {R"({"id":1})", {"c:draft", "u:open", "u:paid", "u:void"}},
                         {R"({"id":2})", {"c:draft", "u:open", "d:-", "tombstone", "c:reborn"}},
                         {R"({"id":3})", {"c:draft", "u:open", "u:closed"}},
                     }))
      << describe(invoices);
  const auto cus_seq = sequences_by_key(customers, "name");
  EXPECT_EQ(cus_seq, (std::map<std::string, Seq>{
                         {R"({"region":"eu","id":7})", {"c:Ann", "u:Anna", "d:-", "tombstone"}},
                     }))
      << describe(customers);

  const std::string db = pg_->value("SELECT current_database()");
  const std::regex id_re("^[0-9A-F]+/[0-9A-F]+:[0-9]+$");
  for (const auto& r : all) {
    SCOPED_TRACE(r.describe());
    if (!r.value) continue;  // a tombstone (checked in the sequences above)
    const std::string& v = *r.value;
    EXPECT_TRUE(std::regex_match(r.header("id"), id_re));
    EXPECT_EQ(json_string_at(v, "/source/connector"), "postgresql");
    EXPECT_EQ(json_string_at(v, "/source/name"), name_);
    EXPECT_EQ(json_string_at(v, "/source/snapshot"), "false");
    EXPECT_EQ(json_string_at(v, "/source/db"), db);
    EXPECT_EQ(json_string_at(v, "/source/schema"), schema_);
    EXPECT_EQ(json_string_at(v, "/source/table"),
              r.topic == topic("invoices") ? "invoices" : "customers");
    EXPECT_EQ(json_at(v, "/source/xmin"), "null");
    const std::string op = json_string_at(v, "/op");
    if (op == "c") {
      EXPECT_EQ(json_at(v, "/before"), "null");
    }
    if (op == "d") {
      // REPLICA IDENTITY DEFAULT: the old image holds the primary key.
      EXPECT_EQ(json_at(v, "/before/id"), r.topic == topic("invoices") ? "2" : "7");
    }
  }
  // The amount of the first insert of key 1 keeps its scale (numeric: an exact decimal string).
  for (const auto& r : invoices) {
    if (r.key == R"({"id":1})" && r.value && json_string_at(*r.value, "/op") == "c") {
      EXPECT_NE(r.value->find("\"amount\":\"10.00\""), std::string::npos) << r.describe();
    }
  }
}

// 2. Outbox: an INSERT is one event (header id = event_id, key = aggregate id, value = payload
//    document) on the templated topic; UPDATE/DELETE produce nothing; INSERT+DELETE in one
//    transaction is still one event.
TEST_F(StreamingTest, OutboxInsertIsOneEventAndUpdateDeleteProduceNothing) {
  const std::string ob = table("event_outbox");
  pg_->exec("CREATE TABLE " + ob +
            " (event_id uuid PRIMARY KEY, subscription_id uuid NOT NULL, event_type text NOT NULL,"
            " payload jsonb, created_at timestamptz NOT NULL DEFAULT now())");
  const std::string created_topic = name_ + ".outbox.SubscriptionCreated";
  const std::string paid_topic = name_ + ".outbox.InvoicePaid";
  WalrelayProcess proc(make_config({{ob,
                                     {"event_id: event_id", "aggregate_id: subscription_id",
                                      "aggregate_type: event_type", "payload: payload",
                                      "topic: \"" + name_ + ".outbox.{aggregate_type}\""}}})
                           .to_yaml());
  start_streaming(proc, name_);

  const std::string e1 = "0b5f7d4e-1a2b-4c3d-8e9f-000000000001";
  const std::string e2 = "0b5f7d4e-1a2b-4c3d-8e9f-000000000002";
  const std::string e3 = "0b5f7d4e-1a2b-4c3d-8e9f-000000000003";
  const std::string sub1 = "5d2c1e0f-aaaa-4bbb-8ccc-000000000001";
  const std::string sub2 = "5d2c1e0f-aaaa-4bbb-8ccc-000000000002";
  const std::string p1 = R"({"a": 1.50, "b": [1, 2], "s": "quote \" and \\ backslash", "u": "é"})";
  const std::string p2 = R"({"n": 2})";
  const std::string p3 = R"({"amount": "12.00", "nested": {"x": null, "y": true}})";
  auto insert = [&](const std::string& id, const std::string& sub, const std::string& type,
                    const std::string& payload) {
    return "INSERT INTO " + ob + " (event_id, subscription_id, event_type, payload) VALUES (" +
           sql_literal(id) + ", " + sql_literal(sub) + ", " + sql_literal(type) + ", " +
           sql_literal(payload) + ")";
  };
  pg_->exec(insert(e1, sub1, "SubscriptionCreated", p1));
  pg_->exec("UPDATE " + ob +
            " SET payload = '{\"changed\": true}' WHERE event_id = " + sql_literal(e1));
  pg_->exec("DELETE FROM " + ob + " WHERE event_id = " + sql_literal(e1));
  pg_->commit({insert(e2, sub2, "SubscriptionCreated", p2),
               "DELETE FROM " + ob + " WHERE event_id = " + sql_literal(e2)});
  pg_->exec(insert(e3, sub1, "InvoicePaid", p3));  // last: marks the end

  const std::vector<std::string> topics = {created_topic, paid_topic};
  const auto seen = kafka_->read_at_least(topics, 3);
  ASSERT_EQ(seen.size(), 3u) << describe(seen);
  ASSERT_TRUE(stop_gracefully(proc, name_));

  // Everything walrelay wrote under this test's names: exactly the two outbox topics (no
  // row-change topic for the outbox table).
  EXPECT_EQ(kafka_->topics_with_prefix(name_ + "."),
            (std::vector<std::string>{paid_topic, created_topic}));
  auto created = kafka_->read_all({created_topic});
  auto paid = kafka_->read_all({paid_topic});
  ASSERT_EQ(created.size(), 2u) << describe(created);
  ASSERT_EQ(paid.size(), 1u) << describe(paid);
  unique_ids(created);

  // jsonb normalises its text; the event value is that text, the document itself.
  auto jsonb_text = [&](const std::string& doc) {
    return pg_->value("SELECT " + sql_literal(doc) + "::jsonb::text");
  };
  struct Expected {
    std::string id, key, payload;
  };
  std::map<std::string, Expected> expected = {
      {e1, {e1, sub1, jsonb_text(p1)}},
      {e2, {e2, sub2, jsonb_text(p2)}},
      {e3, {e3, sub1, jsonb_text(p3)}},
  };
  std::vector<KafkaRecord> all = created;
  all.insert(all.end(), paid.begin(), paid.end());
  for (const auto& r : all) {
    SCOPED_TRACE(r.describe());
    const auto it = expected.find(r.header("id"));
    ASSERT_NE(it, expected.end()) << "unexpected event id";
    EXPECT_EQ(r.key, it->second.key);
    ASSERT_TRUE(r.value.has_value());
    EXPECT_EQ(*r.value, it->second.payload);
    EXPECT_TRUE(json_equal(*r.value, it->second.payload));
    EXPECT_EQ(r.topic, it->first == e3 ? paid_topic : created_topic);
    expected.erase(it);
  }
  EXPECT_TRUE(expected.empty());
}

// 3. A rolled-back transaction (and a rolled-back savepoint) produces nothing.
TEST_F(StreamingTest, RolledBackTransactionProducesNothing) {
  const std::string items = table("items");
  pg_->exec("CREATE TABLE " + items + " (id int PRIMARY KEY, note text)");
  WalrelayProcess proc(make_config({{items}}).to_yaml());
  start_streaming(proc, name_);

  pg_->rollback(
      {"INSERT INTO " + items + " VALUES (1, 'rolled back')",
       "INSERT INTO " + items + " SELECT g, 'rolled back' FROM generate_series(1000, 1999) g",
       "UPDATE " + items + " SET note = 'rolled back too'"});
  pg_->commit({"INSERT INTO " + items + " VALUES (10, 'kept')", "SAVEPOINT sp",
               "INSERT INTO " + items + " VALUES (11, 'savepoint rolled back')",
               "ROLLBACK TO SAVEPOINT sp", "INSERT INTO " + items + " VALUES (12, 'kept')"});
  pg_->exec("INSERT INTO " + items + " VALUES (99, 'marker')");

  const auto seen = kafka_->read_at_least({topic("items")}, 3);
  ASSERT_EQ(seen.size(), 3u) << describe(seen);
  ASSERT_TRUE(stop_gracefully(proc, name_));

  const auto all = kafka_->read_all({topic("items")});
  std::multiset<std::string> keys;
  for (const auto& r : all) keys.insert(r.key.value_or("<null>"));
  EXPECT_EQ(keys, (std::multiset<std::string>{R"({"id":10})", R"({"id":12})", R"({"id":99})"}))
      << describe(all);
  for (const auto& r : all) {
    EXPECT_EQ(json_string_at(r.value.value_or("null"), "/op"), "c") << r.describe();
  }
}

// 4. Restart: events of a batch written while walrelay was down are delivered after the
//    restart, nothing acknowledged before the stop is sent again, and the slot's
//    confirmed_flush_lsn covers everything delivered.
TEST_F(StreamingTest, RestartDeliversEverythingExactlyOnceAndConfirmsTheSlot) {
  const std::string orders = table("orders");
  pg_->exec("CREATE TABLE " + orders + " (id int PRIMARY KEY, qty int NOT NULL)");
  const std::string yaml = make_config({{orders}}).to_yaml();
  const std::string t = topic("orders");

  // Batch A (walrelay running): 5 inserts, 5 updates, 5 inserts in three transactions.
  {
    WalrelayProcess proc(yaml, "walrelay run 1");
    start_streaming(proc, name_);
    pg_->exec("INSERT INTO " + orders + " SELECT g, 1 FROM generate_series(1, 5) g");
    pg_->exec("UPDATE " + orders + " SET qty = qty + 1");
    pg_->exec("INSERT INTO " + orders + " SELECT g, 1 FROM generate_series(6, 10) g");
    const auto a = kafka_->read_at_least({t}, 15);
    ASSERT_EQ(a.size(), 15u) << describe(a);
    ASSERT_TRUE(stop_gracefully(proc, name_));
  }
  const auto after_a = kafka_->read_all({t});
  ASSERT_EQ(after_a.size(), 15u) << describe(after_a);
  // The commit LSN (header id) is the start of the commit record; the slot confirms the end of it
  // (nextlsn), so confirmed_flush_lsn must be strictly greater than the last commit LSN. It may be
  // greater still (keepalives of an idle stream confirm the server's WAL end).
  const Lsn last_commit_a = max_commit_lsn(after_a);
  const auto s1 = slot_state(*pg_, name_);
  ASSERT_TRUE(s1 && s1->confirmed_flush_lsn);
  const auto confirmed_1 = Lsn::parse(*s1->confirmed_flush_lsn);
  ASSERT_TRUE(confirmed_1);
  EXPECT_GT(*confirmed_1, last_commit_a)
      << "confirmed_flush_lsn " << confirmed_1->to_string() << " does not cover the last "
      << "delivered commit " << last_commit_a.to_string();

  // Batch B (walrelay down): 5 inserts, 5 updates, 2 deletes.
  pg_->exec("INSERT INTO " + orders + " SELECT g, 1 FROM generate_series(11, 15) g");
  pg_->exec("UPDATE " + orders + " SET qty = qty + 10 WHERE id BETWEEN 6 AND 10");
  pg_->exec("DELETE FROM " + orders + " WHERE id IN (1, 2)");
  {
    WalrelayProcess proc(yaml, "walrelay run 2");
    start_streaming(proc, name_);
    // 27 events and a tombstone after each of the 2 deletes.
    const auto ab = kafka_->read_at_least({t}, 29);
    ASSERT_EQ(ab.size(), 29u) << describe(ab);
    ASSERT_TRUE(stop_gracefully(proc, name_));
  }

  const auto all = kafka_->read_all({t});
  ASSERT_EQ(all.size(), 29u) << "every event of A and B exactly once:\n" << describe(all);
  const auto ids = unique_ids(all);
  EXPECT_EQ(ids.size(), 29u);
  for (const auto& r : after_a) EXPECT_TRUE(ids.contains(r.header("id"))) << r.describe();

  using Seq = std::vector<std::string>;
  std::map<std::string, Seq> expected;
  for (int id = 1; id <= 15; ++id) {
    const std::string key = "{\"id\":" + std::to_string(id) + "}";
    if (id <= 5) expected[key] = {"c:1", "u:2"};
    if (id == 1 || id == 2) {
      expected[key].push_back("d:-");
      expected[key].push_back("tombstone");
    }
    if (id >= 6 && id <= 10) expected[key] = {"c:1", "u:11"};
    if (id >= 11) expected[key] = {"c:1"};
  }
  EXPECT_EQ(sequences_by_key(all, "qty"), expected) << describe(all);

  const Lsn last_commit = max_commit_lsn(all);
  EXPECT_GT(last_commit, last_commit_a);
  const auto s2 = slot_state(*pg_, name_);
  ASSERT_TRUE(s2 && s2->confirmed_flush_lsn);
  const auto confirmed_2 = Lsn::parse(*s2->confirmed_flush_lsn);
  ASSERT_TRUE(confirmed_2);
  EXPECT_GT(*confirmed_2, *confirmed_1) << "confirmed_flush_lsn did not move";
  EXPECT_GT(*confirmed_2, last_commit)
      << "confirmed_flush_lsn " << confirmed_2->to_string() << " does not cover the last "
      << "delivered commit " << last_commit.to_string();

  // Exact check: decoding skips every transaction whose commit record starts before
  // confirmed_flush_lsn, so a peek (which does not consume) shows this schema's changes iff some
  // delivered transaction was not confirmed.
  const auto left = pg_->query(
      "SELECT lsn::text, data FROM pg_logical_slot_peek_changes(" + sql_literal(name_) +
      ", NULL, NULL, 'format-version', '2', 'include-transaction', '0', 'include-lsn', '1', "
      // Logical messages are database-wide (other tests' heartbeats and watermarks): none here.
      "'add-msg-prefixes', 'none-wanted', 'add-tables', " +
      sql_literal(schema_ + ".*") + ")");
  std::string dump;
  for (const auto& row : left)
    dump += "  " + row[0].value_or("") + " " + row[1].value_or("") + "\n";
  EXPECT_TRUE(left.empty()) << "changes left in the slot after the final stop:\n" << dump;
}

// 5. Numeric values keep their exact digits end to end.
TEST_F(StreamingTest, NumericAndBigintValuesKeepTheirExactDigits) {
  const std::string amounts = table("amounts");
  pg_->exec("CREATE TABLE " + amounts +
            " (id bigint PRIMARY KEY, big numeric, scaled numeric(20, 3), n bigint, tiny numeric)");
  WalrelayProcess proc(make_config({{amounts}}).to_yaml());
  start_streaming(proc, name_);
  pg_->exec("INSERT INTO " + amounts +
            " VALUES (9007199254740993, 12345678901234567890.123456789, 1.5, 9007199254740993, "
            "-0.000000000000000001)");

  const auto seen = kafka_->read_at_least({topic("amounts")}, 1);
  ASSERT_EQ(seen.size(), 1u) << describe(seen);
  ASSERT_TRUE(stop_gracefully(proc, name_));

  const KafkaRecord& r = seen[0];
  EXPECT_EQ(r.key, R"({"id":9007199254740993})");
  ASSERT_TRUE(r.value.has_value());
  const std::string& v = *r.value;
  EXPECT_NO_THROW(json_at(v, "")) << "value is not valid JSON: " << v;
  for (const std::string digits :
       {"12345678901234567890.123456789", "9007199254740993", "1.500", "-0.000000000000000001"}) {
    EXPECT_NE(v.find(digits), std::string::npos) << digits << " not verbatim in " << v;
  }
  EXPECT_NE(v.find("\"n\":9007199254740993"), std::string::npos) << v;
  // numeric: the exact digits as a JSON string (native value format); bigint stays a number.
  EXPECT_NE(v.find("\"big\":\"12345678901234567890.123456789\""), std::string::npos) << v;
  EXPECT_NE(v.find("\"scaled\":\"1.500\""), std::string::npos) << v;
}

/// True when a line of `text` names `key` as a configuration error (`key: reason`).
bool names_key(const std::string& text, const std::string& key) {
  std::size_t pos = 0;
  while ((pos = text.find(key, pos)) != std::string::npos) {
    const bool starts_line = pos == 0 || text[pos - 1] == ' ' || text[pos - 1] == '\n';
    const bool ends_key = pos + key.size() < text.size() && text[pos + key.size()] == ':';
    if (starts_line && ends_key) return true;
    pos += key.size();
  }
  return false;
}

// 6. A bad configuration exits with code 2, names the key, and creates nothing.
TEST_F(StreamingTest, BadConfigExitsWithCode2NamingTheKeyAndCreatesNothing) {
  const std::string items = table("items");
  pg_->exec("CREATE TABLE " + items + " (id int PRIMARY KEY)");
  const std::string good = make_config({{items}}).to_yaml();

  {  // missing `name`
    std::string yaml = good;
    const auto at = yaml.find("name: ");
    ASSERT_EQ(at, 0u);
    yaml.erase(0, yaml.find('\n') + 1);
    WalrelayProcess proc(yaml, "walrelay (no name)");
    proc.start();
    EXPECT_EQ(proc.wait_exit(), 2);
    EXPECT_TRUE(names_key(proc.stderr_text(), "name")) << proc.stderr_text();
  }
  {  // unknown key in `source`
    std::string yaml = good;
    const auto at = yaml.find("  create_slot: true\n");
    ASSERT_NE(at, std::string::npos);
    yaml.insert(at, "  slott: typo\n");
    WalrelayProcess proc(yaml, "walrelay (unknown key)");
    proc.start();
    EXPECT_EQ(proc.wait_exit(), 2);
    EXPECT_TRUE(names_key(proc.stderr_text(), "source.slott")) << proc.stderr_text();
  }
  {  // unknown top-level section
    WalrelayProcess proc(good + "sinks:\n  - kafka\n", "walrelay (unknown section)");
    proc.start();
    EXPECT_EQ(proc.wait_exit(), 2);
    EXPECT_TRUE(names_key(proc.stderr_text(), "sinks")) << proc.stderr_text();
  }
  {  // unreadable file
    WalrelayProcess proc(good, "walrelay (missing file)");
    proc.start({"run", "--config", (proc.dir() / "does-not-exist.yaml").string()});
    EXPECT_EQ(proc.wait_exit(), 2);
    EXPECT_NE(proc.stderr_text().find("does-not-exist.yaml"), std::string::npos)
        << proc.stderr_text();
  }

  // Nothing was created: no slot, no topic.
  EXPECT_FALSE(slot_state(*pg_, name_).has_value()) << "slot " << name_ << " was created";
  EXPECT_TRUE(kafka_->topics_with_prefix(name_ + ".").empty());
}

// Issue 8: `walrelay check` lists the tables `run` would capture, with each one's topic and event
// key (the key's declaration order, as the events are keyed), outbox tables and entries that
// match nothing, before anything is started.
TEST_F(StreamingTest, CheckListsTablesWithTopicsAndKeys) {
  pg_->exec("CREATE TABLE " + table("orders") + " (a int, b text, v int, PRIMARY KEY (b, a))");
  pg_->exec("CREATE TABLE " + table("loose") + " (x int)");
  pg_->exec("CREATE TABLE " + table("ri") + " (x int NOT NULL, y int NOT NULL)");
  pg_->exec("CREATE UNIQUE INDEX ri_yx ON " + table("ri") + " (y, x)");
  pg_->exec("ALTER TABLE " + table("ri") + " REPLICA IDENTITY USING INDEX ri_yx");
  auto cfg = make_config({{table("*")}, {"nothere_" + name_ + ".*"}});
  WalrelayProcess proc(cfg.to_yaml());
  proc.start({"check", "--config", proc.config_path().string()});
  ASSERT_EQ(proc.wait_exit(), 0) << proc.logs();
  const std::string out = proc.stdout_text();
  EXPECT_NE(out.find("tables: 3 matched"), std::string::npos) << out;
  EXPECT_NE(out.find(table("orders") + " -> " + topic("orders") + ", key (b, a)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(table("loose") + " -> " + topic("loose") + ", key none (null keys)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(table("ri") + " -> " + topic("ri") + ", key (y, x)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("WARN: tables entry 'nothere_" + name_ + ".*' matches no table"),
            std::string::npos)
      << out;
  // Nothing was created by a check.
  EXPECT_FALSE(slot_state(*pg_, name_).has_value());

  // What `run` refuses, `check` fails on too: an outbox table without a configured column, and
  // two tables on one topic (Kafka treats '.' and '_' alike).
  pg_->exec("CREATE TABLE " + table("ob") +
            " (id uuid PRIMARY KEY, aggregateid text, "
            "aggregatetype text)");
  pg_->exec("CREATE TABLE " + table("a_b") + " (id int PRIMARY KEY)");
  pg_->exec("CREATE TABLE \"" + name_ + "\".\"a.b\" (id int PRIMARY KEY)");
  auto bad = make_config({{table("ob"), {"topic: \"x.{aggregate_type}\""}}, {table("a*")}});
  WalrelayProcess failing(bad.to_yaml(), "walrelay check (bad)");
  failing.start({"check", "--config", failing.config_path().string()});
  EXPECT_EQ(failing.wait_exit(), 2) << failing.logs();  // as `run` exits
  const std::string bad_out = failing.stdout_text();
  EXPECT_NE(bad_out.find("FAIL: outbox table " + table("ob") + " has no column payload"),
            std::string::npos)
      << bad_out;
  EXPECT_NE(bad_out.find("would both publish to topic"), std::string::npos) << bad_out;
  EXPECT_NE(bad_out.find("check: FAILED"), std::string::npos) << bad_out;
}

}  // namespace
}  // namespace walrelay::itest
