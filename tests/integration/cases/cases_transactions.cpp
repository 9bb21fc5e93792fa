// The case corpus (case_corpus.hpp): transactions, messages, LSNs, oversize records, partitions and
// outbox rows (BUG-14 to BUG-27, CASE-05).

#include <gtest/gtest.h>

#include "case_corpus.hpp"

namespace walrelay::itest {

// ======================================================================== BUG-14
// One big transaction (20 000 + 1 000 rows here): streamed with backpressure, in WAL order, one
// txid, and no LSN at or past its commit confirmed before all of its events are in Kafka.
void bug14(CaseCorpusTest& t) {
  constexpr std::size_t kRows = 20000;
  constexpr std::size_t kUpdates = 1000;
  t.table_lines = {row_entry(t, "meter_sample")};
  t.kafka_lines = {"max_in_flight_events: 2000"};  // forces the backpressure path
  ASSERT_NO_FATAL_FAILURE(t.run_setup());
  ASSERT_NO_FATAL_FAILURE(t.start());
  const std::string topic = t.row_topic("meter_sample");
  ASSERT_NO_FATAL_FAILURE(t.run_workload());
  // Sample (confirmed_flush_lsn, then records in Kafka) until everything arrived.
  std::vector<std::pair<Lsn, std::int64_t>> samples;
  const auto deadline = Clock::now() + 60s;
  while (Clock::now() < deadline) {
    const auto c = t.confirmed();
    const std::int64_t n = topic_record_count(t.env().kafka_bootstrap, topic);
    if (c) samples.emplace_back(*c, n);
    if (n >= static_cast<std::int64_t>(kRows + kUpdates)) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_NO_FATAL_FAILURE(t.finish());
  const auto rs = t.on(topic);
  ASSERT_EQ(rs.size(), kRows + kUpdates);
  const auto first = id_of(rs.front());
  ASSERT_TRUE(first.has_value()) << rs.front().describe();
  const Lsn commit = first->first;
  const std::string txid = raw(rs.front(), "/source/txId");
  std::size_t bad = 0;
  for (std::size_t i = 0; i < rs.size() && bad < 5; ++i) {
    const auto& r = rs[i];
    const auto id = id_of(r);
    const bool create = i < kRows;
    const std::size_t sample = create ? i + 1 : i - kRows + 1;
    const bool ok = id && id->first == commit && raw(r, "/source/txId") == txid &&
                    op(r) == (create ? "c" : "u") &&
                    key_of(r) == "{\"sample_id\":" + std::to_string(sample) + "}" &&
                    raw(r, "/after/note") == jstr(create ? std::string(100, 'x') : "y");
    if (!ok) {
      ++bad;
      ADD_FAILURE() << "event " << i << " is not " << (create ? "c" : "u") << " of sample "
                    << sample << " in the one transaction: " << r.describe();
    }
  }
  EXPECT_TRUE(one_of(rs[0], "/after/reading", decimal("0.143")));
  EXPECT_TRUE(one_of(rs[6], "/after/reading", decimal("1.000")));
  // Confirmation: a confirmed_flush_lsn at or past the commit's start means the whole transaction
  // was acknowledged, so Kafka (read after it) must already hold all its records.
  std::size_t in_progress = 0;
  for (const auto& [c, n] : samples) {
    if (n < static_cast<std::int64_t>(kRows + kUpdates)) ++in_progress;
    if (c >= commit) {
      EXPECT_EQ(n, static_cast<std::int64_t>(kRows + kUpdates))
          << "confirmed_flush_lsn " << c.to_string() << " (commit at " << commit.to_string()
          << ") while only " << n << " records were in Kafka";
    }
  }
  std::cerr << "[BUG-14] " << samples.size() << " samples, " << in_progress
            << " taken while the transaction was partly in Kafka\n";
  const auto end = t.confirmed();
  ASSERT_TRUE(end.has_value());
  EXPECT_GT(*end, commit) << "the transaction's end (nextlsn) is confirmed after the stop";
}

// ======================================================================== BUG-15
// Savepoints, exception blocks, aborted transactions.
void bug15(CaseCorpusTest& t) {
  const std::string domain = t.name() + ".outbox.";
  t.table_lines = {row_entry(t, "payment"),
                   row_entry(t, "outbox_event"),
                   "  outbox:",
                   "    event_id: event_id",
                   "    aggregate_id: aggregate_id",
                   "    aggregate_type: event_type",
                   "    payload: payload",
                   "    topic: " + yq(domain + "{aggregate_type}")};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  t.expect_topics({t.row_topic("payment"), domain + "PaymentAuthorised"});
  const auto p = t.on(t.row_topic("payment"));
  ASSERT_EQ(p.size(), 3u) << describe(p);
  EXPECT_EQ(ops_of(p), "c u c");
  EXPECT_EQ(keys_of(p), R"({"payment_id":1} {"payment_id":1} {"payment_id":3})");
  EXPECT_TRUE(is(p[0], "/after/state", jstr("new")));
  EXPECT_TRUE(is(p[1], "/after/state", jstr("authorised")));
  EXPECT_TRUE(is(p[2], "/after/state", jstr("new")));
  EXPECT_EQ(raw(p[0], "/source/txId"), raw(p[1], "/source/txId"));
  EXPECT_NE(raw(p[0], "/source/txId"), raw(p[2], "/source/txId"));
  const auto ev = t.on(domain + "PaymentAuthorised");
  ASSERT_EQ(ev.size(), 1u) << describe(ev);
  EXPECT_EQ(ev[0].key, "p-1");
  EXPECT_EQ(ev[0].header("id"), "00000000-0000-0000-0000-0000000000a1");
  ASSERT_TRUE(ev[0].value.has_value());
  EXPECT_EQ(canon(*ev[0].value), R"({"id":1})") << ev[0].describe();
}

// ======================================================================== BUG-17
// Logical decoding messages: with no message outbox configured every M line is unknown and must
// be skipped without error; only the two shipment rows are published, in one transaction.
void bug17(CaseCorpusTest& t) {
  t.table_lines = {row_entry(t, "shipment")};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  t.expect_topics({t.row_topic("shipment")});
  const auto rs = t.on(t.row_topic("shipment"));
  ASSERT_EQ(rs.size(), 2u) << describe(t.records);
  EXPECT_EQ(ops_of(rs), "c c");
  EXPECT_EQ(keys_of(rs), R"({"shipment_id":1} {"shipment_id":2})");
  EXPECT_EQ(raw(rs[0], "/source/txId"), raw(rs[1], "/source/txId"));
  // Everything up to the marker was confirmed: nothing of the shipment transaction is left.
  const auto left = t.remaining_in_slot({"shipment"}, {"outbox", "audit", "bin", ""});
  std::string listed;
  for (const auto& l : left) listed += "\n  " + l.substr(0, 300);
  EXPECT_TRUE(left.empty()) << "left in the slot:" << listed;
}

// ======================================================================== BUG-18
// Another database writes a lot while the watched one is idle: confirmed_flush_lsn must follow.
void bug18(CaseCorpusTest& t) {
  t.table_lines = {row_entry(t, "watched")};
  ASSERT_NO_FATAL_FAILURE(t.run_setup());
  ASSERT_NO_FATAL_FAILURE(t.start());
  Pg other(t.env().pg_admin_conninfo);  // database `postgres`
  const std::string noise = sql_ident(t.name() + "_noise");
  t.cleanups.emplace_back([&t, noise] {
    Pg o(t.env().pg_admin_conninfo);
    o.exec("DROP TABLE IF EXISTS " + noise);
  });
  ASSERT_NE(other.value("SELECT current_database()"), t.pg().value("SELECT current_database()"));
  other.exec("CREATE TABLE " + noise + " (id bigint, pad text)");
  other.exec("INSERT INTO " + noise +
             " SELECT g, repeat('z', 200) FROM generate_series(1, 50000) g");
  const auto wal_after = Lsn::parse(other.value("SELECT pg_current_wal_lsn()::text"));
  ASSERT_TRUE(wal_after.has_value());
  const auto start_confirmed = t.confirmed();
  const bool followed = wait_until(
      [&] {
        const auto c = t.confirmed();
        return c && *c >= *wal_after;
      },
      15s, 100ms);
  EXPECT_TRUE(followed) << "confirmed_flush_lsn stayed at "
                        << (t.confirmed() ? t.confirmed()->to_string() : "?") << " (was "
                        << (start_confirmed ? start_confirmed->to_string() : "?")
                        << " before) while only another database wrote up to "
                        << wal_after->to_string();
  // The heartbeat message of the watched database goes nowhere (no message outbox configured).
  ASSERT_NO_FATAL_FAILURE(t.run_workload());
  ASSERT_NO_FATAL_FAILURE(t.finish());
  t.expect_topics({});
}

// ======================================================================== BUG-20
// Which LSN to confirm; interleaved sessions give non-monotonic row LSNs.
void bug20(CaseCorpusTest& t) {
  t.table_lines = {row_entry(t, "stock_move")};
  ASSERT_NO_FATAL_FAILURE(t.run_setup());
  ASSERT_NO_FATAL_FAILURE(t.start());
  const std::string tbl = t.qualified("stock_move");
  {
    Pg a(t.env().pg_conninfo);
    Pg b(t.env().pg_conninfo);
    a.exec("BEGIN");
    a.exec("INSERT INTO " + tbl + " VALUES (1, 10)");
    b.exec("INSERT INTO " + tbl + " VALUES (2, 20)");  // session B: autocommit, commits first
    a.exec("INSERT INTO " + tbl + " VALUES (3, 30)");
    a.exec("COMMIT");
  }
  ASSERT_NO_FATAL_FAILURE(t.finish());
  const auto rs = t.on(t.row_topic("stock_move"));
  ASSERT_EQ(rs.size(), 3u) << "moves 1 and 3 must not be dropped:\n" << describe(rs);
  EXPECT_EQ(ops_of(rs), "c c c");
  EXPECT_EQ(keys_of(rs), R"({"move_id":2} {"move_id":1} {"move_id":3})");
  EXPECT_EQ(raw(rs[1], "/source/txId"), raw(rs[2], "/source/txId"));
  EXPECT_NE(raw(rs[0], "/source/txId"), raw(rs[1], "/source/txId"));
  const auto a_commit = id_of(rs[2]);
  ASSERT_TRUE(a_commit.has_value());
  // Session A's transaction is confirmed by its end (nextlsn), not its commit start: nothing of
  // either transaction is left in the slot, and confirmed_flush_lsn is past A's commit LSN.
  const auto c = t.confirmed();
  ASSERT_TRUE(c.has_value());
  EXPECT_GT(*c, a_commit->first);
  const auto left = t.remaining_in_slot({"stock_move"});
  EXPECT_TRUE(left.empty()) << "still in the slot after the stop (would be re-delivered):\n"
                            << (left.empty() ? "" : left.front());
}

// ======================================================================== BUG-22
// A change larger than the producer's message.max.bytes: default policy = stop (exit 3) naming
// table, key and LSN, without confirming that transaction.
void bug22(CaseCorpusTest& t) {
  const std::string domain = t.name() + ".outbox.";
  const std::vector<std::string> outbox = {row_entry(t, "outbox_event"),
                                           "  outbox:",
                                           "    event_id: event_id",
                                           "    aggregate_id: aggregate_id",
                                           "    aggregate_type: event_type",
                                           "    payload: payload",
                                           "    topic: " + yq(domain + "{aggregate_type}")};
  t.table_lines = outbox;
  t.table_lines.insert(t.table_lines.begin(), row_entry(t, "contract_doc"));
  t.kafka_properties = {{"message.max.bytes", "100000"}};
  ASSERT_NO_FATAL_FAILURE(t.run_setup());
  ASSERT_NO_FATAL_FAILURE(t.start("walrelay (row change too large)"));
  ASSERT_NO_FATAL_FAILURE(t.run_workload());
  const int rc = t.proc->wait_exit(30s);
  EXPECT_EQ(rc, 3) << "exit code (3 = delivery failed for good)";
  const std::string err = t.proc->stderr_text();
  EXPECT_NE(err.find("contract_doc"), std::string::npos) << "error does not name the table";
  EXPECT_NE(err.find(R"({"doc_id":2})"), std::string::npos) << "error does not name the key";
  EXPECT_TRUE(std::regex_search(err, std::regex("[0-9A-F]+/[0-9A-F]+"))) << "no LSN named";
  ASSERT_TRUE(wait_slot_inactive(t.pg(), t.name()));
  t.collect();
  const auto docs = t.on(t.row_topic("contract_doc"));
  ASSERT_FALSE(docs.empty()) << "row 1 (small) must be published";
  EXPECT_EQ(key_of(docs[0]), R"({"doc_id":1})");
  EXPECT_EQ(op(docs[0]), "c");
  for (const auto& r : docs) {
    EXPECT_NE(key_of(r), R"({"doc_id":2})") << "oversized row published? " << r.describe();
  }
  std::cerr << "[BUG-22] contract_doc records published before the stop: " << keys_of(docs) << "\n";
  // The oversized transaction (insert of doc 2) is not confirmed: it is still in the slot.
  const auto left = t.remaining_in_slot({"contract_doc"});
  ASSERT_FALSE(left.empty()) << "the oversized transaction was confirmed (dropped)";
  EXPECT_NE(left.front().find("\"action\":\"I\""), std::string::npos) << left.front();
  EXPECT_NE(left.front().find("\"value\":2"), std::string::npos)
      << "first change left in the slot is not doc 2's insert: " << left.front().substr(0, 300);
  std::cerr << "[BUG-22] doc 1's transaction "
            << (left.front().find("\"value\":1,") != std::string::npos ? "was NOT" : "was")
            << " confirmed before the stop\n";

  // Second run on the same slot, capturing only the outbox: the 128 kB payload is oversized too.
  t.table_lines = outbox;
  // It stops as soon as it reaches the event, possibly before the slot shows as active: only
  // the exit is awaited.
  t.proc = std::make_unique<WalrelayProcess>(t.yaml(), "walrelay (outbox event too large)");
  t.proc->start();
  const int rc2 = t.proc->wait_exit(30s);
  EXPECT_EQ(rc2, 3) << "exit code for the oversized outbox event";
  const std::string err2 = t.proc->stderr_text();
  EXPECT_NE(err2.find("doc-2"), std::string::npos) << "error does not name the event key";
  EXPECT_NE(err2.find("DocumentStored"), std::string::npos) << "error does not name the topic";
  ASSERT_TRUE(wait_slot_inactive(t.pg(), t.name()));
  t.collect();
  EXPECT_TRUE(t.on(domain + "DocumentStored").empty());
  EXPECT_FALSE(t.remaining_in_slot({"outbox_event"}).empty())
      << "the oversized outbox transaction was confirmed (dropped)";
}

// ======================================================================== BUG-23
// Three transactions over two accounts: all delivered, T3's two events in one transaction, and
// T3 confirmed by its end. (Forcing partitions and slow/down brokers needs a mock cluster: the
// component tier covers those; see the report.)
void bug23(CaseCorpusTest& t) {
  t.table_lines = {row_entry(t, "account_move")};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  const auto rs = t.on(t.row_topic("account_move"));
  ASSERT_EQ(rs.size(), 4u) << describe(rs);
  EXPECT_EQ(ops_of(rs), "c c c c");
  EXPECT_EQ(
      keys_of(rs),
      R"({"account_id":1,"move_no":1} {"account_id":2,"move_no":1} {"account_id":1,"move_no":2} {"account_id":2,"move_no":2})");
  EXPECT_TRUE(is(rs[2], "/after/amount", "-50"));
  EXPECT_TRUE(is(rs[3], "/after/amount", "50"));
  EXPECT_EQ(raw(rs[2], "/source/txId"), raw(rs[3], "/source/txId"));
  EXPECT_NE(raw(rs[0], "/source/txId"), raw(rs[1], "/source/txId"));
  EXPECT_NE(raw(rs[1], "/source/txId"), raw(rs[2], "/source/txId"));
  const auto t3 = id_of(rs[3]);
  ASSERT_TRUE(t3.has_value());
  const auto c = t.confirmed();
  ASSERT_TRUE(c.has_value());
  EXPECT_GT(*c, t3->first);
  EXPECT_TRUE(t.remaining_in_slot({"account_move"}).empty());
}

// ======================================================================== BUG-24
// Partitioned table configured by its root: every leaf's change on the root's topic.
void bug24(CaseCorpusTest& t) {
  t.table_lines = {row_entry(t, "order_event")};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  const std::string topic = t.row_topic("order_event");
  t.expect_topics({topic});
  const auto rs = t.on(topic);
  ASSERT_EQ(rs.size(), 10u) << describe(t.records);
  EXPECT_EQ(ops_of(rs), "c c c u d tombstone c d tombstone c");
  const std::string k1a = R"({"order_id":1,"created_on":"2024-01-15"})";
  const std::string k2 = R"({"order_id":2,"created_on":"2024-02-10"})";
  const std::string k3 = R"({"order_id":3,"created_on":"2030-01-01"})";
  const std::string k1b = R"({"order_id":1,"created_on":"2024-02-20"})";
  const std::string k4 = R"({"order_id":4,"created_on":"2024-03-05"})";
  EXPECT_EQ(keys_of(rs), k1a + " " + k2 + " " + k3 + " " + k1a + " " + k1a + " " + k1a + " " + k1b +
                             " " + k3 + " " + k3 + " " + k4);
  for (const auto& r : rs) {
    if (r.value) {
      EXPECT_TRUE(is(r, "/source/table", jstr("order_event")));
    }
  }
  EXPECT_TRUE(is(rs[3], "/after/status", jstr("paid")));
  EXPECT_TRUE(is(rs[6], "/after", R"({"order_id":1,"created_on":"2024-02-20","status":"paid"})"));
  EXPECT_TRUE(is(rs[9], "/after", R"({"order_id":4,"created_on":"2024-03-05","status":"new"})"));
  // The move between leaves is one transaction.
  EXPECT_EQ(raw(rs[4], "/source/txId"), raw(rs[6], "/source/txId"));
}

// ======================================================================== BUG-27
// Outbox rows deleted in the same transaction, updated later, odd payloads.
void bug27(CaseCorpusTest& t) {
  const std::string domain = t.name() + ".outbox.";
  t.table_lines = {row_entry(t, "customer_order"),
                   row_entry(t, "outbox_event"),
                   "  outbox:",
                   "    event_id: event_id",
                   "    aggregate_id: aggregate_id",
                   "    aggregate_type: aggregate_type",
                   "    payload: payload",
                   "    event_type: event_type",
                   "    topic: " + yq(domain + "{aggregate_type}")};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  t.expect_topics({t.row_topic("customer_order"), domain + "order"});
  auto ev = t.on(domain + "order");
  ASSERT_EQ(ev.size(), 3u) << "exactly three domain events:\n" << describe(ev);
  std::set<std::int32_t> parts;
  for (const auto& r : ev) parts.insert(r.partition);
  EXPECT_EQ(parts.size(), 1u) << "one key, one partition";
  const std::vector<std::string> ids = {"11111111-1111-1111-1111-111111111111",
                                        "22222222-2222-2222-2222-222222222222",
                                        "33333333-3333-3333-3333-333333333333"};
  const std::vector<std::string> types = {"OrderPlaced", "OrderPaid", "OrderShipped"};
  const std::vector<std::string> payloads = {
      "{\"note\": \"n\xC3\xA4ive \\\"quoted\\\"\", \"lines\": [{\"qty\": 2, \"sku\": \"A-1\"}], "
      "\"total\": 99.90, \"orderId\": 9007199254740993}",
      R"({"paid": true})", R"({"carrier": null})"};
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const auto& r = ev[i];
    EXPECT_EQ(r.header("id"), ids[i]) << r.describe();
    EXPECT_EQ(r.key, "9007199254740993") << r.describe();
    EXPECT_EQ(r.header("eventType"), types[i]) << r.describe();
    ASSERT_TRUE(r.value.has_value()) << "no tombstones for outbox rows: " << r.describe();
    EXPECT_EQ(r.value->front(), '{') << "payload published as a JSON string? " << r.describe();
    EXPECT_EQ(canon(*r.value), canon(payloads[i])) << r.describe();
  }
  const auto co = t.on(t.row_topic("customer_order"));
  ASSERT_EQ(co.size(), 1u) << describe(co);
  EXPECT_EQ(op(co[0]), "c");
  EXPECT_EQ(key_of(co[0]), R"({"order_id":9007199254740993})");
  EXPECT_TRUE(one_of(co[0], "/after/total", decimal("99.90")));
}

// ======================================================================== CASE-05
// REPLICA IDENTITY changed while changes are in flight: every change is decoded after the last
// ALTER (walrelay is stopped during the workload), and each is read from its own content.
void case05(CaseCorpusTest& t) {
  t.table_lines = {row_entry(t, "account")};
  ASSERT_NO_FATAL_FAILURE(t.run_setup());
  ASSERT_NO_FATAL_FAILURE(t.start());  // creates the slot
  ASSERT_TRUE(t.stop_gracefully_now());
  ASSERT_NO_FATAL_FAILURE(t.run_workload());
  ASSERT_NO_FATAL_FAILURE(t.start("walrelay (after the last ALTER)"));
  ASSERT_NO_FATAL_FAILURE(t.finish());
  const auto a = t.on(t.row_topic("account"));
  // u1, d6 + tombstone, u2, u3, u3, u4, u1 (103); the update/delete of 5 and the update of 1
  // under NOTHING are not in the stream at all (wal2json drops them).
  ASSERT_EQ(ops_of(a), "u d tombstone u u u u u") << describe(a);
  EXPECT_EQ(keys_of(a), R"({"account_id":1} {"account_id":6} {"account_id":6} {"account_id":2} )"
                        R"({"account_id":3} {"account_id":3} {"account_id":4} {"account_id":1})");
  // Written under DEFAULT: key-only before (the table was FULL when decoded: irrelevant).
  EXPECT_TRUE(before_null_or_key(a[0], {{"account_id", "1"}}));
  EXPECT_TRUE(one_of(a[0], "/after/balance", decimal("101.00")));
  EXPECT_TRUE(before_null_or_key(a[1], {{"account_id", "6"}}));
  // Written under FULL: the whole old row.
  EXPECT_TRUE(one_of(a[3], "/before/balance", decimal("200.00")));
  EXPECT_TRUE(one_of(a[3], "/before/owner", {jstr("bob")}));
  // One transaction, the identity switched between two updates of one row.
  EXPECT_TRUE(one_of(a[4], "/before/balance", decimal("300.00")));
  EXPECT_TRUE(before_null_or_key(a[5], {{"account_id", "3"}}));
  EXPECT_EQ(raw(a[4], "/source/txId"), raw(a[5], "/source/txId"));
  // USING INDEX: keyed by the primary key the line names, before = the index's columns as given,
  // and not a key change (no delete/create).
  EXPECT_TRUE(is(a[6], "/before", R"({"ext_ref":"A-4"})"));
  EXPECT_TRUE(is(a[6], "/after/ext_ref", jstr("A-4x")));
  EXPECT_TRUE(before_null_or_key(a[7], {{"account_id", "1"}}));
  EXPECT_TRUE(one_of(a[7], "/after/balance", decimal("103.00")));

  // Own input: a table with a primary key that is now REPLICA IDENTITY USING INDEX has no key
  // that fits its DELETEs (they carry only the index): start-up refuses it by name (exit 2)
  // until key_columns says how to key it, instead of keying it one way now and another later.
  t.pg().exec("CREATE UNIQUE INDEX account_ext_uk ON " + t.qualified("account") + " (ext_ref)");
  t.pg().exec("ALTER TABLE " + t.qualified("account") +
              " REPLICA IDENTITY USING INDEX account_ext_uk");
  WalrelayProcess refused(t.yaml(), "walrelay (USING INDEX)");
  refused.start();
  EXPECT_EQ(refused.wait_exit(), 2) << refused.logs();
  EXPECT_NE(
      refused.stderr_text().find(t.qualified("account") + " has a primary key but REPLICA "
                                                          "IDENTITY USING INDEX on (ext_ref)"),
      std::string::npos)
      << refused.logs();
  EXPECT_NE(refused.stderr_text().find("key_columns: [ext_ref]"), std::string::npos)
      << refused.logs();
}

}  // namespace walrelay::itest
