// The case corpus (case_corpus.hpp): encodings, catalog moves and awkward outbox rows (CASE-01,
// CASE-06, CASE-09).

#include <gtest/gtest.h>

#include "case_corpus.hpp"

namespace walrelay::itest {

// ======================================================================== CASE-01
// The database's encoding is not UTF8: wal2json writes LATIN1 bytes (or, in SQL_ASCII, whatever
// bytes were stored) and the replication protocol does not convert them. Each part runs in a
// database of its own, created here; everything is checked on the bytes Kafka holds.

/// Whether `s` is well-formed UTF-8 (RFC 3629 §4), checked here independently of walrelay.
bool is_utf8(std::string_view s) {
  static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (b < 0x80) {
      ++i;
      continue;
    }
    if ((b & 0xE0) == 0xC0) {
      n = 1;
      cp = b & 0x1Fu;
    } else if ((b & 0xF0) == 0xE0) {
      n = 2;
      cp = b & 0x0Fu;
    } else if ((b & 0xF8) == 0xF0) {
      n = 3;
      cp = b & 0x07u;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3Fu);
    }
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

/// Key, value (unless `value_too` is false) and every header name and value are UTF-8.
::testing::AssertionResult utf8_record(const KafkaRecord& r, bool value_too = true) {
  std::vector<std::pair<std::string, std::string_view>> parts;
  if (r.key) parts.emplace_back("key", *r.key);
  if (r.value && value_too) parts.emplace_back("value", *r.value);
  for (const auto& [name, value] : r.headers) {
    parts.emplace_back("header name", name);
    parts.emplace_back("header " + name, value);
  }
  for (const auto& [what, bytes] : parts) {
    if (!is_utf8(bytes)) {
      return ::testing::AssertionFailure() << what << " is not UTF-8: " << r.describe();
    }
  }
  return ::testing::AssertionSuccess();
}

std::string hex_of(std::string_view s) {
  std::string out;
  for (const char c : s) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(c));
    out += (out.empty() ? "" : " ") + std::string(buf);
  }
  return out;
}

void case01(CaseCorpusTest& t) {
  // The script's four parts (cases/CASE-01.sql).
  const std::string& rest = t.workload_sql();
  const std::string setup2_mark = "-- @@ part 2 set-up\n";
  const std::string workload2_mark = "-- @@ part 2 workload\n";
  const auto at_setup2 = rest.find(setup2_mark);
  const auto at_workload2 = rest.find(workload2_mark);
  ASSERT_NE(at_setup2, std::string::npos);
  ASSERT_NE(at_workload2, std::string::npos);
  const std::string workload1 = rest.substr(0, at_setup2);
  const std::string setup2 =
      rest.substr(at_setup2 + setup2_mark.size(), at_workload2 - at_setup2 - setup2_mark.size());
  const std::string workload2 = rest.substr(at_workload2 + workload2_mark.size());

  Pg admin(t.env().pg_admin_conninfo);
  const std::string in_schema = "SET search_path = " + sql_ident(t.schema()) + ";\n";
  const auto psql_in = [&](const std::string& conninfo, const std::string& sql) {
    const auto res = run_psql(conninfo, in_schema + sql);
    ASSERT_EQ(res.code, 0) << "psql failed:\n" << res.output << "\nSQL:\n" << sql;
  };
  // A database of this test's own with the test's schema and marker table; dropped at the end,
  // after the slot that may live in it.
  const auto make_db = [&](const std::string& suffix, const std::string& encoding,
                           std::string& conninfo) {
    const std::string db = t.name() + suffix;
    admin.exec("CREATE DATABASE " + sql_ident(db) + " ENCODING " + sql_literal(encoding) +
               " LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
    t.cleanups.emplace_back([&t, db] {
      Pg o(t.env().pg_admin_conninfo);
      drop_slot_quietly(o, t.name());
      o.exec("DROP DATABASE IF EXISTS " + sql_ident(db) + " WITH (FORCE)");
    });
    conninfo = t.env().pg_conninfo + " dbname=" + db;
    ASSERT_EQ(Pg(conninfo).value("SHOW server_encoding"), encoding);
    const auto res =
        run_psql(conninfo, "CREATE SCHEMA " + sql_ident(t.schema()) + ";\n" + in_schema +
                               "CREATE TABLE case_marker (id int PRIMARY KEY);\n");
    ASSERT_EQ(res.code, 0) << res.output;
  };
  const auto check_output = [&](const std::string& label, int& rc) {
    WalrelayProcess check(t.yaml(), label);
    check.start({"check", "--config", check.config_path().string()});
    rc = check.wait_exit(60s);
    return check.stdout_text();
  };

  // ---- part 1: LATIN1, transcoded. Supplier 3 exists before the slot: the initial snapshot
  // reads it through a connection whose client_encoding is UTF8.
  std::string latin1;
  ASSERT_NO_FATAL_FAILURE(make_db("_l1", "LATIN1", latin1));
  ASSERT_NO_FATAL_FAILURE(psql_in(latin1, t.setup_sql()));
  t.conninfo = latin1;
  t.snapshot_mode = "initial";
  const std::string domain = t.name() + ".outbox.";
  t.table_lines = {row_entry(t, "supplier"),
                   row_entry(t, "outbox_event"),
                   "  outbox:",
                   "    event_id: event_id",
                   "    aggregate_id: aggregate_id",
                   "    aggregate_type: aggregate_type",
                   "    payload: payload",
                   "    event_type: event_type",
                   "    topic: " + yq(domain + "{aggregate_type}")};
  ASSERT_NO_FATAL_FAILURE(t.start("walrelay (LATIN1)"));
  ASSERT_NO_FATAL_FAILURE(psql_in(latin1, workload1));
  Pg(latin1).exec("INSERT INTO " + t.qualified("case_marker") + " VALUES (1)");
  ASSERT_FALSE(t.kafka().read_at_least({t.marker_topic()}, 1, 30s).empty())
      << "the marker was not published\n"
      << t.proc->logs();
  ASSERT_TRUE(t.stop_gracefully_now());
  EXPECT_NE(t.proc->stderr_text().find(
                "server_encoding LATIN1: transcoded from LATIN1 to UTF-8 (iconv ISO-8859-1)"),
            std::string::npos)
      << t.proc->logs();
  t.collect();
  t.expect_topics({t.row_topic("supplier"), domain + "supplier"});
  for (const auto& r : t.records) EXPECT_TRUE(utf8_record(r));
  // Supplier 3 (the snapshot's row) and the streamed 1 and 2, by key.
  std::map<std::string, KafkaRecord> sup;
  for (const auto& r : t.on(t.row_topic("supplier"))) sup.emplace(key_of(r), r);
  ASSERT_EQ(sup.size(), 3u) << describe(t.records);
  const KafkaRecord& s1 = sup[R"({"supplier_id":1})"];
  const KafkaRecord& s2 = sup[R"({"supplier_id":2})"];
  const KafkaRecord& s3 = sup[R"({"supplier_id":3})"];
  EXPECT_EQ(op(s1) + op(s2) + op(s3), "ccr") << describe(t.records);
  // é c3 a9, ü c3 bc, ö c3 b6, ç c3 a7, ñ c3 b1, á c3 a1, ß c3 9f
  const std::string cafe = "Caf\xC3\xA9 M\xC3\xBCller & S\xC3\xB6hne";
  EXPECT_TRUE(is(s1, "/after/trade_name", jstr(cafe)));
  EXPECT_TRUE(is(s1, "/after/city", jstr("Besan\xC3\xA7on")));
  EXPECT_TRUE(is(s2, "/after/trade_name",
                 jstr("Pe\xC3\xB1"
                      "a Ib\xC3\xA1\xC3\xB1"
                      "ez")));
  EXPECT_TRUE(is(s2, "/after/city",
                 jstr("A Coru\xC3\xB1"
                      "a")));
  EXPECT_TRUE(is(s3, "/after/trade_name", jstr("Wei\xC3\x9F & S\xC3\xB6hne")));
  EXPECT_TRUE(is(s3, "/after/city", jstr("K\xC3\xB6ln")));
  // The characters are in the value as UTF-8 bytes (not only after unescaping).
  ASSERT_TRUE(s1.value.has_value());
  EXPECT_NE(s1.value->find("\"" + cafe + "\""), std::string::npos) << s1.describe();
  const auto ev = t.on(domain + "supplier");
  ASSERT_EQ(ev.size(), 1u) << describe(ev);
  ASSERT_TRUE(ev[0].key.has_value());
  EXPECT_EQ(hex_of(*ev[0].key), "47 72 c3 b6 c3 9f 65 2d 37") << ev[0].describe();
  EXPECT_EQ(ev[0].value, "{\"new\": \"" + cafe + "\", \"old\": \"Cafe Muller\"}")
      << ev[0].describe();
  EXPECT_EQ(ev[0].header("id"), "00000000-0000-0000-0000-0000000000e1");
  EXPECT_EQ(ev[0].header("eventType"), "SupplierRenamed");
  int rc = -1;
  const std::string checked = check_output("walrelay check (LATIN1)", rc);
  EXPECT_EQ(rc, 0) << checked;
  EXPECT_NE(checked.find("server_encoding LATIN1: transcoded from LATIN1 to UTF-8"),
            std::string::npos)
      << checked;

  // ---- part 2: SQL_ASCII. A new slot of the same name in another database: a fresh slot
  // record too.
  drop_slot_quietly(admin, t.name());
  t.state_dir_.clear();
  std::string sqlascii;
  ASSERT_NO_FATAL_FAILURE(make_db("_sa", "SQL_ASCII", sqlascii));
  ASSERT_NO_FATAL_FAILURE(psql_in(sqlascii, setup2));
  t.conninfo = sqlascii;
  t.snapshot_mode = "never";
  t.table_lines = {row_entry(t, "note")};
  // Refused by default, before anything is created.
  {
    WalrelayProcess refused(t.yaml(), "walrelay (SQL_ASCII, default)");
    refused.start();
    EXPECT_EQ(refused.wait_exit(), 2) << refused.logs();
    const std::string err = refused.stderr_text();
    EXPECT_NE(err.find("server_encoding is SQL_ASCII"), std::string::npos) << err;
    EXPECT_NE(err.find("source.allow_sql_ascii: true"), std::string::npos) << err;
    EXPECT_FALSE(slot_state(admin, t.name())) << "a refused start must leave no slot";
    const std::string refused_check = check_output("walrelay check (SQL_ASCII)", rc);
    EXPECT_EQ(rc, 2) << refused_check;  // as `run` exits
    EXPECT_NE(refused_check.find("server_encoding SQL_ASCII  FAIL"), std::string::npos)
        << refused_check;
    EXPECT_NE(refused_check.find("source.allow_sql_ascii"), std::string::npos) << refused_check;
  }
  // What a peek of the slot still holds: changes whose body has na\xEFve, and raw \xFF.
  const auto left_in_slot = [&] {
    return Pg(sqlascii).value(
        "SELECT count(*) FILTER (WHERE position('\\x6e61ef7665'::bytea IN data) > 0) || ',' || "
        "count(*) FILTER (WHERE position('\\x72617720ff'::bytea IN data) > 0) "
        "FROM pg_logical_slot_peek_binary_changes(" +
        sql_literal(t.name()) + ", NULL, NULL, 'format-version', '2')");
  };

  // Allowed, errors.policy fail: note 1 is published, the stream stops at note 2 (exit 4)
  // naming table, key and LSN, and confirms nothing at or after it.
  t.source_lines = {"allow_sql_ascii: true"};
  ASSERT_NO_FATAL_FAILURE(t.start("walrelay (SQL_ASCII allowed, errors.policy fail)"));
  ASSERT_NO_FATAL_FAILURE(psql_in(sqlascii, workload2));
  EXPECT_EQ(t.proc->wait_exit(30s), 4) << t.proc->logs();
  {
    const std::string err = t.proc->stderr_text();
    EXPECT_NE(err.find("table " + t.qualified("note") + R"(, key {"note_id":2})"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("is not UTF-8"), std::string::npos) << err;
    EXPECT_NE(err.find("0xef 0x76"), std::string::npos) << err;
    EXPECT_TRUE(std::regex_search(err, std::regex("LSN [0-9A-F]+/[0-9A-F]+"))) << err;
    EXPECT_NE(err.find("stopping without confirming past it"), std::string::npos) << err;
  }
  ASSERT_TRUE(wait_slot_inactive(admin, t.name()));
  EXPECT_EQ(left_in_slot(), "1,1") << "notes 2 and 3 must stay in the slot";
  t.collect();
  {
    const auto notes = t.on(t.row_topic("note"));
    ASSERT_FALSE(notes.empty()) << "note 1 is valid UTF-8 and must be published";
    for (const auto& r : notes) {
      EXPECT_EQ(key_of(r), R"({"note_id":1})") << r.describe();
      EXPECT_TRUE(utf8_record(r));
    }
    EXPECT_TRUE(is(notes[0], "/after/body", jstr("na\xC3\xAFve UTF-8")));
  }

  // errors.policy dead_letter on the same slot: notes 2 and 3 are replayed to the dead-letter
  // topic and streaming goes on (note 4 and the marker).
  const std::string dlq = t.name() + ".dlq";
  t.top_lines = {"errors:", "  policy: dead_letter", "  dead_letter_topic: " + yq(dlq)};
  ASSERT_NO_FATAL_FAILURE(t.start("walrelay (SQL_ASCII allowed, dead_letter)"));
  {
    Pg db(sqlascii);
    db.exec("INSERT INTO " + t.qualified("note") + " VALUES (4, 'after the bad rows')");
    db.exec("INSERT INTO " + t.qualified("case_marker") + " VALUES (2)");
  }
  ASSERT_GE(t.kafka().read_at_least({t.marker_topic()}, 2, 30s).size(), 2u)
      << "the marker was not published\n"
      << t.proc->logs();
  ASSERT_TRUE(t.stop_gracefully_now());
  EXPECT_EQ(left_in_slot(), "0,0") << "the dead-lettered changes are confirmed";
  t.collect();
  const auto notes = t.on(t.row_topic("note"));
  std::set<std::string> keys;
  for (const auto& r : notes) {
    keys.insert(key_of(r));
    EXPECT_TRUE(utf8_record(r));
  }
  EXPECT_EQ(keys, (std::set<std::string>{R"({"note_id":1})", R"({"note_id":4})"}))
      << describe(notes);
  const auto dead = t.on(dlq);
  ASSERT_EQ(dead.size(), 2u) << describe(dead);
  int latin1_line = 0;
  int ff_line = 0;
  for (const auto& r : dead) {
    // Headers are UTF-8; the value is the line as received (its bytes are not UTF-8).
    EXPECT_TRUE(utf8_record(r, /*value_too=*/false));
    EXPECT_EQ(r.header("walrelay.error.kind"), "mapping") << r.describe();
    EXPECT_EQ(r.header("walrelay.source"), t.qualified("note")) << r.describe();
    EXPECT_FALSE(r.header("walrelay.lsn").empty()) << r.describe();
    EXPECT_NE(r.header("walrelay.error.reason").find("is not UTF-8"), std::string::npos)
        << r.describe();
    ASSERT_TRUE(r.value.has_value()) << r.describe();
    EXPECT_TRUE(r.value->starts_with(R"({"action":"I")")) << r.describe();
    EXPECT_FALSE(is_utf8(*r.value)) << r.describe();
    if (r.value->find("na\xEFve LATIN1") != std::string::npos) ++latin1_line;
    if (r.value->find("raw \xFF byte") != std::string::npos) ++ff_line;
  }
  EXPECT_EQ(latin1_line, 1) << describe(dead);
  EXPECT_EQ(ff_line, 1) << describe(dead);

  // ---- own input: WIN1252, where conversion must be exact. € (0x80) is published as UTF-8;
  // 0x81 is a byte WIN1252 stores but has no UTF-8 equivalent for: the streamed change is a
  // mapping error (exit 4, not confirmed), never a replacement character, and a snapshot that
  // meets the value stops the same way instead of retrying for ever.
  drop_slot_quietly(admin, t.name());
  t.state_dir_.clear();
  std::string win1252;
  ASSERT_NO_FATAL_FAILURE(make_db("_w", "WIN1252", win1252));
  ASSERT_NO_FATAL_FAILURE(psql_in(win1252,
                                  "SET client_encoding = 'UTF8';\n"
                                  "CREATE TABLE price (price_id int PRIMARY KEY, label text);\n"
                                  "INSERT INTO price VALUES (1, '12 \xE2\x82\xAC');\n"));
  t.conninfo = win1252;
  t.source_lines.clear();
  t.top_lines.clear();
  t.snapshot_mode = "initial";
  t.table_lines = {row_entry(t, "price")};
  ASSERT_NO_FATAL_FAILURE(t.start("walrelay (WIN1252)"));
  ASSERT_NO_FATAL_FAILURE(psql_in(win1252,
                                  "SET client_encoding = 'WIN1252';\n"
                                  "INSERT INTO price VALUES (2, E'a\\x81z');\n"));
  EXPECT_EQ(t.proc->wait_exit(30s), 4) << t.proc->logs();
  {
    const std::string err = t.proc->stderr_text();
    EXPECT_NE(err.find("table " + t.qualified("price") +
                       R"(, key {"price_id":2} is not )"
                       "convertible from server_encoding WIN1252 to UTF-8"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("0x81"), std::string::npos) << err;
  }
  ASSERT_TRUE(wait_slot_inactive(admin, t.name()));
  t.collect();
  const auto prices = t.on(t.row_topic("price"));
  ASSERT_EQ(keys_of(prices), R"({"price_id":1})") << describe(prices);
  EXPECT_EQ(op(prices[0]), "r");
  EXPECT_TRUE(is(prices[0], "/after/label", jstr("12 \xE2\x82\xAC")));
  EXPECT_TRUE(utf8_record(prices[0]));
  // A new slot's snapshot reads price 2 through the server's conversion, which refuses it.
  drop_slot_quietly(admin, t.name());
  t.state_dir_.clear();
  WalrelayProcess snapshot(t.yaml(), "walrelay (WIN1252 snapshot)");
  snapshot.start();
  EXPECT_EQ(snapshot.wait_exit(60s), 4) << snapshot.logs();
  EXPECT_NE(snapshot.stderr_text().find("snapshot of " + t.qualified("price") +
                                        ": a value cannot be converted to UTF-8"),
            std::string::npos)
      << snapshot.logs();
  EXPECT_NE(snapshot.stderr_text().find("0x81"), std::string::npos) << snapshot.logs();
}

// ======================================================================== CASE-06
// Tables renamed, moved, dropped and re-created: each line is routed by the names in it and keyed
// by its own pk; every line is decoded after the last DDL (walrelay is stopped meanwhile).
void case06(CaseCorpusTest& t) {
  const std::string app = t.schema() + "_app";
  const std::string domain = t.name() + ".domain.";
  t.table_lines = {"- name: " + yq(app + ".outbox_event"),
                   "  outbox:",
                   "    event_id: event_id",
                   "    aggregate_id: aggregate_id",
                   "    aggregate_type: aggregate_type",
                   "    payload: payload",
                   "    topic: " + yq(domain + "{aggregate_type}"),
                   "- name: " + yq(app + ".*")};
  t.cleanup_sql = {"DROP SCHEMA IF EXISTS " + sql_ident(t.schema() + "_billing") + " CASCADE",
                   "DROP SCHEMA IF EXISTS " + sql_ident(t.schema() + "_archive") + " CASCADE",
                   "DROP SCHEMA IF EXISTS " + sql_ident(app) + " CASCADE"};
  ASSERT_NO_FATAL_FAILURE(t.run_setup());
  ASSERT_NO_FATAL_FAILURE(t.start());  // creates the slot
  ASSERT_TRUE(t.stop_gracefully_now());
  ASSERT_NO_FATAL_FAILURE(t.run_workload());
  ASSERT_NO_FATAL_FAILURE(t.start("walrelay (after the last DDL)"));
  ASSERT_NO_FATAL_FAILURE(t.finish());
  const std::string prefix = t.name() + "." + app + ".";
  // Row 1 keyed by the pk it was written with; row 3 (a new table under the old name) by its
  // own pk: same topic, another key and columns.
  const auto inv = t.on(prefix + "invoice");
  ASSERT_EQ(inv.size(), 2u) << describe(inv);
  EXPECT_EQ(key_of(inv[0]), R"({"invoice_id":1})");
  EXPECT_TRUE(is(inv[0], "/after/customer", jstr("ada")));
  EXPECT_EQ(key_of(inv[1]), R"({"invoice_no":"INV-3"})");
  EXPECT_TRUE(is(inv[1], "/after/customer_id", "3"));
  // Row 2 under the name it had when written.
  const auto renamed = t.on(prefix + "invoice_2023");
  ASSERT_EQ(renamed.size(), 1u) << describe(renamed);
  EXPECT_EQ(key_of(renamed[0]), R"({"invoice_id":2})");
  // Rows 5 and 6 of a table that no longer exists.
  const auto cn = t.on(prefix + "credit_note");
  ASSERT_EQ(cn.size(), 2u) << describe(cn);
  EXPECT_EQ(keys_of(cn), R"({"credit_note_id":5} {"credit_note_id":6})");
  EXPECT_TRUE(one_of(cn[1], "/after/amount", decimal("2.50")));
  // Event 7 through the swapped outbox (its extra column ignored); event 8 of the renamed-away
  // outbox table is at most a row change, never a domain event.
  const auto events = t.on(domain + "invoice");
  ASSERT_EQ(events.size(), 1u) << describe(events);
  EXPECT_EQ(events[0].key, "INV-3");
  EXPECT_EQ(events[0].header("id"), "00000000-0000-0000-0000-000000000007");
  EXPECT_EQ(canon(*events[0].value), canon(R"({"no": "INV-3"})"));
  const auto old = t.on(prefix + "outbox_event_old");
  ASSERT_EQ(old.size(), 1u) << describe(old);
  EXPECT_EQ(op(old[0]), "c");
  // Nothing from archive (outside the pattern) or billing (renamed schema).
  t.expect_topics({prefix + "invoice", prefix + "invoice_2023", prefix + "credit_note",
                   prefix + "outbox_event_old", domain + "invoice"});
  // The changed shape under one name, and the gone table, are said.
  EXPECT_FALSE(log_lines_about(*t.proc, std::regex("invoice.*changed shape")).empty())
      << t.proc->stderr_text();
  EXPECT_FALSE(log_lines_about(*t.proc, std::regex("credit_note is not in the catalog")).empty())
      << t.proc->stderr_text();
  EXPECT_FALSE(log_lines_about(*t.proc, std::regex("matches no table")).empty())
      << t.proc->stderr_text();
}

// ======================================================================== CASE-09
// Outbox rows that are legal SQL but awkward events, with errors.policy dead_letter so every
// outcome is visible: published, tombstone, dead-lettered (empty/NULL aggregate id, text that is
// not JSON) or dropped with a warning (UPDATE).
void case09(CaseCorpusTest& t) {
  const std::string domain = t.name() + ".domain.";
  const std::string dlq = t.name() + ".dlq";
  const auto outbox = [&](const std::string& table, bool tombstones) {
    std::vector<std::string> lines = {"- name: " + yq(t.qualified(table)),
                                      "  outbox:",
                                      "    event_id: event_id",
                                      "    aggregate_id: aggregate_id",
                                      "    aggregate_type: aggregate_type",
                                      "    payload: payload",
                                      "    event_type: event_type",
                                      "    topic: " + yq(domain + "{aggregate_type}")};
    if (tombstones) lines.push_back("    tombstone_on_empty_payload: true");
    return lines;
  };
  t.table_lines = outbox("outbox_event", true);
  for (const auto& l : outbox("outbox_event_text", false)) t.table_lines.push_back(l);
  t.top_lines = {"errors:", "  policy: dead_letter", "  dead_letter_topic: " + yq(dlq)};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  const auto ev = t.on(domain + "order");
  // Records per event id in publication order (one key, one partition, so in order per key).
  std::map<std::string, std::vector<const KafkaRecord*>> by_id;
  for (const auto& r : ev) by_id[r.header("id").substr(r.header("id").size() - 2)].push_back(&r);
  // a1 twice (re-inserted after its delete: published again), a2 (tombstone), a3, a4-a6, b3.
  std::map<std::string, std::size_t> counts;
  for (const auto& [id, rs] : by_id) counts[id] = rs.size();
  const std::map<std::string, std::size_t> expected = {{"a1", 2}, {"a2", 1}, {"a3", 1}, {"a4", 1},
                                                       {"a5", 1}, {"a6", 1}, {"b3", 1}};
  ASSERT_EQ(counts, expected) << describe(ev);
  const KafkaRecord& a1 = *by_id["a1"][0];
  EXPECT_EQ(a1.key, "o-1");
  EXPECT_EQ(a1.header("eventType"), "OrderPlaced");
  // jsonb's own text (it orders keys by length): exactly what the case's wal2json line holds.
  EXPECT_EQ(*a1.value, R"({"total": 12.50, "orderId": "o-1"})");
  EXPECT_EQ(*by_id["a1"][1]->value, R"({"total": 13.00, "orderId": "o-1"})");
  // SQL NULL payload: a tombstone with the key and headers; JSON null: the 4 bytes `null`.
  EXPECT_FALSE(by_id["a2"][0]->value.has_value()) << by_id["a2"][0]->describe();
  EXPECT_EQ(by_id["a2"][0]->key, "o-2");
  ASSERT_TRUE(by_id["a3"][0]->value.has_value());
  EXPECT_EQ(*by_id["a3"][0]->value, "null");
  // Non-object JSON published as is.
  EXPECT_EQ(*by_id["a4"][0]->value, R"([{"sku": "A"}, {"sku": "B"}])");
  EXPECT_EQ(*by_id["a5"][0]->value, R"("just a string")");
  EXPECT_EQ(*by_id["a6"][0]->value, "42");
  EXPECT_EQ(*by_id["b3"][0]->value, R"({"a": 1})");
  // Empty and NULL aggregate ids, and text payloads that are not (only) JSON: dead-lettered.
  const auto dead = t.on(dlq);
  std::set<std::string> dead_ids;
  for (const auto& r : dead) {
    EXPECT_EQ(r.header("walrelay.error.kind"), "mapping") << r.describe();
    dead_ids.insert(r.header("id").substr(r.header("id").size() - 2));
  }
  EXPECT_EQ(dead_ids, (std::set<std::string>{"a7", "a8", "b1", "b2"})) << describe(dead);
  // The upsert's UPDATE: no event, but a warning naming the table.
  EXPECT_FALSE(
      log_lines_about(*t.proc, std::regex("UPDATE of outbox table .*outbox_event publishes"))
          .empty())
      << t.proc->stderr_text();
}

}  // namespace walrelay::itest
