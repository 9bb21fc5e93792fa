// The case corpus (case_corpus.hpp): values and row images: numerics, session settings, arrays,
// JSON, types, TOAST, replica identity, key updates, keyless tables (BUG-01 to BUG-12).

#include <gtest/gtest.h>

#include "case_corpus.hpp"

namespace walrelay::itest {

// ======================================================================== BUG-01
// Exact numeric and bigint values.
void bug01(CaseCorpusTest& t) {
  t.table_lines = {row_entry(t, "ledger_entry")};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  const auto rs = t.on(t.row_topic("ledger_entry"));
  ASSERT_EQ(rs.size(), 4u) << "3 creates + 1 update, nothing else:\n" << describe(rs);
  EXPECT_EQ(ops_of(rs), "c c c u");
  EXPECT_EQ(
      keys_of(rs),
      R"({"entry_id":9007199254740993} {"entry_id":2} {"entry_id":3} {"entry_id":9007199254740993})");
  const std::string tiny = "0." + std::string(399, '0') + "1";  // 1e-400: 402 characters
  ASSERT_EQ(tiny.size(), 402u);
  const std::vector<std::string> amount = {"12345678901234567890.123456789",
                                           "123456789012345678901234567890", tiny,
                                           "12345678901234567891.123456789"};
  const std::vector<std::string> rate = {"1500.000000000", "0.000000001",
                                         "-99999999999999999999999999999.999999999",
                                         "1500.000000000"};
  const std::vector<std::string> big = {"9007199254740993", "9223372036854775807",
                                        "-9223372036854775808", "9007199254740993"};
  const std::vector<std::string> id = {"9007199254740993", "2", "3", "9007199254740993"};
  for (std::size_t i = 0; i < rs.size(); ++i) {
    EXPECT_TRUE(one_of(rs[i], "/after/amount", decimal(amount[i])));
    EXPECT_TRUE(one_of(rs[i], "/after/rate", decimal(rate[i])));
    EXPECT_TRUE(one_of(rs[i], "/after/big_count", decimal(big[i])));
    EXPECT_TRUE(one_of(rs[i], "/after/entry_id", decimal(id[i])));
  }
  for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(is(rs[i], "/before", "null"));
  EXPECT_TRUE(before_null_or_key(rs[3], {{"entry_id", "9007199254740993"}}));
}

// ======================================================================== BUG-03
// Date/time, interval, money, float and bytea text must not depend on session settings: the
// replication connection gets hostile settings through the conninfo's `options`.
void bug03(CaseCorpusTest& t) {
  t.conninfo = t.env().pg_conninfo +
               " options='-c DateStyle=SQL,DMY -c TimeZone=America/New_York "
               "-c IntervalStyle=sql_standard -c extra_float_digits=0 -c bytea_output=escape'";
  t.table_lines = {row_entry(t, "booking"), row_entry(t, "reading")};
  const auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const auto before_ms = now_ms();
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  const auto after_ms = now_ms();

  const auto rs = t.on(t.row_topic("booking"));
  ASSERT_EQ(rs.size(), 4u) << describe(rs);
  EXPECT_EQ(ops_of(rs), "c c c c");
  EXPECT_EQ(keys_of(rs), R"({"booking_id":1} {"booking_id":2} {"booking_id":3} {"booking_id":4})");
  const auto& r1 = rs[0];
  const auto& r2 = rs[1];
  const auto& r3 = rs[2];
  const auto& r4 = rs[3];
  // Row 1.
  EXPECT_TRUE(one_of(r1, "/after/starts_at",
                     texts({"2024-03-10 06:30:00+00", "2024-03-10T06:30:00Z",
                            "2024-03-10T06:30:00.000Z", "2024-03-10T06:30:00.000000Z"})));
  EXPECT_TRUE(
      one_of(r1, "/after/local_time", texts({"2024-03-10 06:30:00", "2024-03-10T06:30:00"})));
  EXPECT_TRUE(one_of(r1, "/after/valid_from", texts({"2024-03-10"})));
  EXPECT_TRUE(one_of(r1, "/after/opens", texts({"06:30:00"})));
  EXPECT_TRUE(one_of(r1, "/after/opens_tz", texts({"06:30:00+02"})));
  EXPECT_TRUE(one_of(r1, "/after/duration", texts({"1 day 02:03:04.5", "P1DT2H3M4.5S"})));
  auto money = [](const std::string& text, const std::string& digits) {
    auto v = decimal(digits);
    v.push_back(jstr(text));
    return v;
  };
  EXPECT_TRUE(one_of(r1, "/after/fee", money("$1,234.50", "1234.50")));
  // Row 2: the fraction .12 is 120 ms, never 12 µs.
  EXPECT_TRUE(one_of(r2, "/after/starts_at",
                     texts({"2024-03-10 06:30:00.12+00", "2024-03-10T06:30:00.12Z",
                            "2024-03-10T06:30:00.120Z", "2024-03-10T06:30:00.120000Z"})));
  EXPECT_TRUE(one_of(r2, "/after/local_time",
                     texts({"2024-03-10 06:30:00.000001", "2024-03-10T06:30:00.000001"})));
  EXPECT_TRUE(one_of(r2, "/after/valid_from", texts({"0044-03-15 BC", "-0043-03-15"})));
  EXPECT_TRUE(one_of(r2, "/after/opens", texts({"24:00:00"})));
  EXPECT_TRUE(one_of(r2, "/after/opens_tz", texts({"00:00:00-14:59"})));
  EXPECT_TRUE(one_of(r2, "/after/duration", texts({"-1 years -2 mons", "P-1Y-2M"})));
  EXPECT_TRUE(one_of(r2, "/after/fee", money("-$0.01", "-0.01")));
  // Row 3: infinity passes through (never epoch 0, never an error).
  EXPECT_TRUE(one_of(r3, "/after/starts_at", texts({"infinity"})));
  EXPECT_TRUE(one_of(r3, "/after/local_time", texts({"-infinity"})));
  EXPECT_TRUE(one_of(r3, "/after/valid_from", texts({"infinity"})));
  EXPECT_TRUE(one_of(r3, "/after/opens", texts({"00:00:00"})));
  EXPECT_TRUE(one_of(r3, "/after/opens_tz", texts({"12:00:00+00"})));
  EXPECT_TRUE(one_of(r3, "/after/duration", texts({"00:00:00", "PT0S"})));
  EXPECT_TRUE(
      one_of(r3, "/after/fee", money("$92,233,720,368,547,758.07", "92233720368547758.07")));
  // Row 4: extremes.
  EXPECT_TRUE(one_of(r4, "/after/starts_at",
                     texts({"0044-03-15 12:00:00+00 BC", "-0043-03-15T12:00:00Z"})));
  EXPECT_TRUE(one_of(r4, "/after/local_time",
                     texts({"294276-12-31 23:59:59.999999", "294276-12-31T23:59:59.999999"})));
  EXPECT_TRUE(one_of(r4, "/after/valid_from", texts({"5874897-12-31"})));
  EXPECT_TRUE(one_of(r4, "/after/opens", texts({"23:59:59.999999"})));
  EXPECT_TRUE(one_of(r4, "/after/opens_tz", texts({"23:59:59.999999+15:59"})));
  EXPECT_TRUE(one_of(r4, "/after/duration", texts({"178000000 years", "P178000000Y"})));
  EXPECT_TRUE(
      one_of(r4, "/after/fee", money("-$92,233,720,368,547,758.08", "-92233720368547758.08")));
  // source.ts_ms is the commit time whatever the walsender's TimeZone (-05 offset parsed).
  for (const auto& r : rs) {
    const std::string ts = raw(r, "/source/ts_ms");
    long long v = 0;
    try {
      v = std::stoll(ts);
    } catch (const std::exception&) {
      ADD_FAILURE() << "source.ts_ms = " << ts << ": " << r.describe();
      continue;
    }
    EXPECT_GE(v, before_ms - 5000) << "source.ts_ms " << v << " is before the test started";
    EXPECT_LE(v, after_ms + 5000) << "source.ts_ms " << v << " is after the test ended";
  }
  // From the pg_recvlogical step: extra_float_digits=0 printed 0.3, bytea_output=escape printed
  // "\336\255\276\357".
  const auto rd = t.on(t.row_topic("reading"));
  ASSERT_EQ(rd.size(), 1u) << describe(rd);
  EXPECT_TRUE(one_of(rd[0], "/after/f", decimal("0.30000000000000004")));
  EXPECT_TRUE(one_of(rd[0], "/after/b", texts({"\\xdeadbeef", "3q2+7w=="})));
}

// ======================================================================== BUG-04
// Arrays: the literal text unchanged, or a JSON array from a real array-literal parser.
void bug04(CaseCorpusTest& t) {
  t.table_lines = {row_entry(t, "tagged_item")};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  const auto rs = t.on(t.row_topic("tagged_item"));
  ASSERT_EQ(rs.size(), 4u) << describe(rs);
  EXPECT_EQ(ops_of(rs), "c c c c");
  auto arr = [](std::string json_array, std::string literal) {
    return std::vector<std::string>{std::move(json_array), jstr(literal)};
  };
  const auto& r1 = rs[0];
  EXPECT_TRUE(one_of(
      r1, "/after/tags",
      arr(R"(["plain","with space","comma,inside","quote\"inside","back\\slash","{brace}","NULL",""])",
          R"({plain,"with space","comma,inside","quote\"inside","back\\slash","{brace}","NULL",""})")));
  EXPECT_TRUE(one_of(r1, "/after/scores", arr("[1,null,3]", "{1,NULL,3}")));
  EXPECT_TRUE(one_of(r1, "/after/matrix", arr("[[1,2],[3,4]]", "{{1,2},{3,4}}")));
  EXPECT_TRUE(one_of(r1, "/after/flags", arr("[true,false,null]", "{t,f,NULL}")));
  const auto& r2 = rs[1];
  EXPECT_TRUE(one_of(r2, "/after/tags", arr("[]", "{}")));
  EXPECT_TRUE(one_of(r2, "/after/scores", arr("[]", "{}")));
  EXPECT_TRUE(one_of(r2, "/after/matrix", arr("[]", "{}")));
  EXPECT_TRUE(is(r2, "/after/flags", "null"));
  const auto& r3 = rs[2];
  EXPECT_TRUE(one_of(r3, "/after/tags", arr("[null]", "{NULL}")));
  EXPECT_TRUE(
      // The case allows the text or {"lower":0,...}; issue 8 (a column's JSON type must not
      // change from row to row, as Debezium) made it a JSON array without its bounds, which the
      // README says and a warning logs, so the bound is not dropped silently.
      one_of(r3, "/after/scores", {"[7,8,9]"}));
  EXPECT_TRUE(one_of(r3, "/after/matrix", arr("[[[1]],[[2]]]", "{{{1}},{{2}}}")));
  EXPECT_TRUE(one_of(r3, "/after/flags", arr("[true]", "{t}")));
  const auto& r4 = rs[3];
  EXPECT_TRUE(one_of(
      r4, "/after/tags",
      arr("[\"ünïcødé\",\"tab\\there\",\"new\\nline\"]", "{ünïcødé,\"tab\there\",\"new\nline\"}")));
  EXPECT_TRUE(
      one_of(r4, "/after/scores", arr("[-2147483648,2147483647]", "{-2147483648,2147483647}")));
  EXPECT_TRUE(is(r4, "/after/matrix", "null"));
  EXPECT_TRUE(one_of(r4, "/after/flags", arr("[]", "{}")));
}

// ======================================================================== BUG-05
// json/jsonb stay JSON strings holding the exact document text; control characters re-escaped.
void bug05(CaseCorpusTest& t) {
  t.table_lines = {row_entry(t, "doc_store")};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  const auto rs = t.on(t.row_topic("doc_store"));
  ASSERT_EQ(rs.size(), 6u) << "six creates; nothing for the rejected jsonb insert:\n"
                           << describe(rs);
  EXPECT_EQ(ops_of(rs), "c c c c c c");
  EXPECT_EQ(keys_of(rs),
            R"({"doc_id":1} {"doc_id":2} {"doc_id":3} {"doc_id":4} {"doc_id":5} {"doc_id":6})");
  struct Row {
    std::optional<std::string> j, jb, note;
  };
  const std::string note2 =
      "ctl:\x01\x1f del:\x7f ls:\xe2\x80\xa8 tab:\t nl:\n cr:\r quote:\" bs:\\";
  const std::vector<Row> want = {
      {R"({"b":1, "a":2, "a":3})", R"({"a": 3, "b": 1})", "plain"},
      {R"({"nul":"x\u0000y", "emoji":"\ud83d\ude00", "esc":"q\"b\\s"})",
       "{\"n\": 12345678901234567890.5, \"esc\": \"q\\\"b\\\\s\", \"emoji\": \"\xF0\x9F\x98\x80\"}",
       note2},
      {"[1, 2.50, 1e400]", "[1, 2.50, 100]", ""},
      {"null", "null", std::nullopt},
      {R"("just a string")", R"("just a string")", "\xF0\x9F\x98\x80"},
      {R"({"lone":"\ud83d"})",
       R"({"big": 10000000000000000000000000000000000000000, "int": 123456789012345678901234567890})",
       std::nullopt},
  };
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const auto& r = rs[i];
    const auto check = [&](const char* col, const std::optional<std::string>& text) {
      const std::string ptr = std::string("/after/") + col;
      const auto tok = raw_at(r.value.value_or(""), ptr);
      if (!text) {
        EXPECT_TRUE(is(r, ptr, "null"));
        return;
      }
      ASSERT_TRUE(tok && tok->front() == '"')
          << ptr << " must be a JSON string holding the text: " << r.describe();
      EXPECT_EQ(unescape(*tok), *text) << ptr << " of " << r.describe();
    };
    check("body_j", want[i].j);
    check("body_jb", want[i].jb);
    check("note", want[i].note);
  }
  // The envelope with control characters is valid JSON (strict parser) and keeps DEL/U+2028 as
  // UTF-8; \x01 and \x1f are re-escaped.
  const std::string& v2 = rs[1].value.value_or("");
  EXPECT_NO_THROW(json_at(v2, "")) << "not valid JSON: " << v2;
  const auto note_tok = std::string(raw_at(v2, "/after/note").value_or(""));
  std::string lower = note_tok;
  std::ranges::transform(lower, lower.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  EXPECT_NE(lower.find("\\u0001"), std::string::npos) << note_tok;
  EXPECT_NE(lower.find("\\u001f"), std::string::npos) << note_tok;
  EXPECT_NE(note_tok.find('\x7f'), std::string::npos) << "DEL not kept as UTF-8: " << note_tok;
  EXPECT_NE(note_tok.find("\xe2\x80\xa8"), std::string::npos)
      << "U+2028 not kept as UTF-8: " << note_tok;
}

// ======================================================================== BUG-07
// Enum, domain, composite and quoted type names.
void bug07(CaseCorpusTest& t) {
  const std::string int_schema = t.schema() + "_Int";
  const std::string billing = t.schema() + "_Billing";
  t.cleanup_sql = {"DROP SCHEMA IF EXISTS " + sql_ident(int_schema) + " CASCADE",
                   "DROP SCHEMA IF EXISTS " + sql_ident(billing) + " CASCADE"};
  t.table_lines = {"- name: " + yq("\"" + int_schema + "\".purchase")};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  const std::string topic = t.name() + "." + int_schema + ".purchase";
  t.expect_topics({topic});
  const auto rs = t.on(topic);
  ASSERT_EQ(rs.size(), 2u) << describe(t.records);
  EXPECT_EQ(ops_of(rs), "c c");
  EXPECT_EQ(keys_of(rs), R"({"purchase_id":1} {"purchase_id":2})");
  EXPECT_TRUE(is(rs[0], "/after/state", jstr("new")));
  EXPECT_TRUE(is(rs[1], "/after/state", jstr("it's \"shipped\"")));
  EXPECT_TRUE(one_of(rs[0], "/after/kinds", {R"(["A","b"])", jstr("{A,b}")}));
  EXPECT_TRUE(one_of(rs[1], "/after/kinds", {"[]", jstr("{}")}));
  EXPECT_TRUE(one_of(rs[0], "/after/total", decimal("10.50")));
  EXPECT_TRUE(one_of(rs[1], "/after/total", decimal("0.01")));
  EXPECT_TRUE(is(rs[0], "/after/pair", jstr("(10.5,EUR)")));
  EXPECT_TRUE(is(rs[1], "/after/pair", jstr(R"((,"a ""q"", b"))")));
  EXPECT_TRUE(is(rs[0], "/after/currency", jstr("EUR")));
  EXPECT_TRUE(is(rs[1], "/after/currency", "null"));
  EXPECT_TRUE(is(rs[0], "/after/odd", jstr("x")));
  EXPECT_TRUE(is(rs[1], "/after/odd", "null"));
}

// ======================================================================== BUG-09
// Unchanged TOASTed column in UPDATE.
void bug09(CaseCorpusTest& t) {
  t.table_lines = {row_entry(t, "article"), row_entry(t, "article_full")};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  const std::string big1 = t.pg().value("SELECT " + t.qualified("big_text") + "(1)");
  const std::string big2 = t.pg().value("SELECT " + t.qualified("big_text") + "(2)");
  ASSERT_EQ(big1.size(), 40000u);
  const auto a = t.on(t.row_topic("article"));
  ASSERT_EQ(a.size(), 3u) << describe(a);
  EXPECT_EQ(ops_of(a), "u u u");
  EXPECT_EQ(keys_of(a), R"({"article_id":1} {"article_id":1} {"article_id":1})");
  // (1) body unchanged and TOASTed: the unavailable-value placeholder, never null.
  EXPECT_TRUE(is(a[0], "/after/title", jstr("second")));
  EXPECT_TRUE(is(a[0], "/after/summary", jstr("short")));
  EXPECT_TRUE(is(a[0], "/after/article_id", "1"));
  EXPECT_TRUE(is(a[0], "/after/body", jstr("__debezium_unavailable_value")));
  EXPECT_TRUE(before_null_or_key(a[0], {{"article_id", "1"}}));
  // (3) a real NULL.
  EXPECT_TRUE(is(a[1], "/after/body", "null"));
  EXPECT_TRUE(is(a[1], "/after/title", jstr("second")));
  // (4) a new value.
  EXPECT_TRUE(is(a[2], "/after/body", jstr(big2)));
  EXPECT_TRUE(is(a[2], "/after/title", jstr("third")));
  const auto f = t.on(t.row_topic("article_full"));
  ASSERT_EQ(f.size(), 3u) << "update, delete, tombstone:\n" << describe(f);
  EXPECT_EQ(ops_of(f), "u d tombstone");
  EXPECT_EQ(keys_of(f), R"({"article_id":1} {"article_id":1} {"article_id":1})");
  // (2) REPLICA IDENTITY FULL: after.body from the old row, before = whole old row.
  EXPECT_TRUE(is(f[0], "/after/body", jstr(big1)));
  EXPECT_TRUE(is(f[0], "/after/title", jstr("second")));
  EXPECT_TRUE(is(f[0], "/before/title", jstr("first")));
  EXPECT_TRUE(is(f[0], "/before/body", jstr(big1)));
  EXPECT_TRUE(is(f[0], "/before/summary", jstr("short")));
  // (5) delete: before = full row with body.
  EXPECT_TRUE(is(f[1], "/after", "null"));
  EXPECT_TRUE(is(f[1], "/before/title", jstr("second")));
  EXPECT_TRUE(is(f[1], "/before/body", jstr(big1)));
  EXPECT_TRUE(is(f[1], "/before/summary", jstr("short")));
}

// ======================================================================== BUG-10
// What DELETE/UPDATE carry under each REPLICA IDENTITY.
void bug10(CaseCorpusTest& t) {
  // A table with a primary key and REPLICA IDENTITY USING INDEX is refused unless key_columns
  // says how to key it (issue 9 item 1); the case's "key consistently by the identity columns".
  t.table_lines = {"- name: " + yq(t.qualified("acct_index")), "  key_columns: [ext_ref]",
                   "- name: " + yq(t.qualified("acct_*"))};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  // DEFAULT + PK.
  const auto d = t.on(t.row_topic("acct_default"));
  ASSERT_EQ(d.size(), 3u) << describe(d);
  EXPECT_EQ(ops_of(d), "u d tombstone");
  EXPECT_EQ(keys_of(d), R"({"acct_id":1} {"acct_id":1} {"acct_id":1})");
  EXPECT_TRUE(before_null_or_key(d[0], {{"acct_id", "1"}}));
  EXPECT_TRUE(is(d[0], "/after/balance", "11"));
  EXPECT_TRUE(before_null_or_key(d[1], {{"acct_id", "1"}}));
  EXPECT_FALSE(is(d[1], "/before", "null")) << "a delete's before holds the key";
  EXPECT_TRUE(is(d[1], "/after", "null"));
  // FULL: key from the primary key, not all identity columns; before = old row.
  const auto f = t.on(t.row_topic("acct_full"));
  ASSERT_EQ(f.size(), 3u) << describe(f);
  EXPECT_EQ(ops_of(f), "u d tombstone");
  EXPECT_EQ(keys_of(f), R"({"acct_id":1} {"acct_id":1} {"acct_id":1})");
  EXPECT_TRUE(is(f[0], "/before", R"({"acct_id":1,"owner":"o1","balance":10})"));
  EXPECT_TRUE(is(f[0], "/after", R"({"acct_id":1,"owner":"o1","balance":11})"));
  EXPECT_TRUE(is(f[1], "/before", R"({"acct_id":1,"owner":"o1","balance":11})"));
  EXPECT_TRUE(is(f[1], "/after", "null"));
  // USING INDEX with key_columns [ext_ref]: keyed consistently by the identity columns, never
  // {"acct_id":null}.
  const auto i = t.on(t.row_topic("acct_index"));
  ASSERT_EQ(i.size(), 3u) << describe(i);
  EXPECT_EQ(ops_of(i), "u d tombstone");
  EXPECT_EQ(keys_of(i), R"({"ext_ref":"X-1"} {"ext_ref":"X-1"} {"ext_ref":"X-1"})");
  EXPECT_TRUE(is(i[0], "/after/balance", "11"));
  EXPECT_TRUE(is(i[1], "/before/ext_ref", jstr("X-1")));
  // NOTHING: nothing published (wal2json drops it), and a start-up warning names the table.
  EXPECT_TRUE(t.on(t.row_topic("acct_nothing")).empty());
  EXPECT_FALSE(log_lines_about(*t.proc, std::regex("acct_nothing")).empty())
      << "no start-up warning names acct_nothing:\n"
      << t.proc->stderr_text();
  for (const auto& table : {"acct_default", "acct_full", "acct_index"}) {
    EXPECT_TRUE(log_lines_about(*t.proc, std::regex(std::string(table) + "\\b")).empty())
        << table << " is capturable but a warning names it:\n"
        << t.proc->stderr_text();
  }
}

// ======================================================================== BUG-11
// Primary key update = delete (+ tombstone) of the old key and create of the new one.
void bug11(CaseCorpusTest& t) {
  t.table_lines = {row_entry(t, "customer")};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  const auto rs = t.on(t.row_topic("customer"));
  ASSERT_EQ(rs.size(), 12u) << describe(rs);
  EXPECT_EQ(ops_of(rs), "d tombstone c d tombstone c d tombstone c d tombstone c");
  const std::string k_eu1 = R"({"region":"eu","customer_no":1})";
  const std::string k_eu10 = R"({"region":"eu","customer_no":10})";
  const std::string k_eu2 = R"({"region":"eu","customer_no":2})";
  const std::string k_us2 = R"({"region":"us","customer_no":2})";
  const std::string k_eu20 = R"({"region":"eu","customer_no":20})";
  const std::string k_us10 = R"({"region":"us","customer_no":10})";
  EXPECT_EQ(keys_of(rs), k_eu1 + " " + k_eu1 + " " + k_eu10 + " " + k_eu2 + " " + k_eu2 + " " +
                             k_us2 + " " + k_eu10 + " " + k_eu10 + " " + k_eu20 + " " + k_us2 +
                             " " + k_us2 + " " + k_us10);
  const auto old_key = [](const KafkaRecord& r, const char* region, const char* no) {
    return before_null_or_key(r, {{"region", jstr(region)}, {"customer_no", no}});
  };
  EXPECT_TRUE(old_key(rs[0], "eu", "1"));
  EXPECT_TRUE(is(rs[2], "/after", R"({"region":"eu","customer_no":10,"name":"n1"})"));
  EXPECT_TRUE(old_key(rs[3], "eu", "2"));
  EXPECT_TRUE(is(rs[5], "/after", R"({"region":"us","customer_no":2,"name":"n2b"})"));
  EXPECT_TRUE(old_key(rs[6], "eu", "10"));
  EXPECT_TRUE(is(rs[8], "/after", R"({"region":"eu","customer_no":20,"name":"n1"})"));
  EXPECT_TRUE(old_key(rs[9], "us", "2"));
  EXPECT_TRUE(is(rs[11], "/after", R"({"region":"us","customer_no":10,"name":"n2b"})"));
  for (const std::size_t d : {0u, 3u, 6u, 9u}) EXPECT_TRUE(is(rs[d], "/after", "null"));
  for (const std::size_t c : {2u, 5u, 8u, 11u}) EXPECT_TRUE(is(rs[c], "/before", "null"));
  // The third transaction's four events share one txId, different from the others'.
  const std::string tx3 = raw(rs[6], "/source/txId");
  EXPECT_TRUE(is(rs[8], "/source/txId", tx3));
  EXPECT_TRUE(is(rs[9], "/source/txId", tx3));
  EXPECT_TRUE(is(rs[11], "/source/txId", tx3));
  EXPECT_NE(raw(rs[0], "/source/txId"), tx3);
  EXPECT_NE(raw(rs[3], "/source/txId"), raw(rs[0], "/source/txId"));
}

// ======================================================================== BUG-12
// Tables without a usable key.
void bug12(CaseCorpusTest& t) {
  t.table_lines = {"- name: " + yq(t.qualified("audit_log*")), row_entry(t, "seat")};
  ASSERT_NO_FATAL_FAILURE(t.run_default());
  const auto ts_ok = [](const KafkaRecord& r, const std::string& ptr) {
    return one_of(r, ptr, texts({"2024-01-01 00:00:00+00", "2024-01-01T00:00:00Z"}));
  };
  // audit_log: two identical creates, key null; UPDATE/DELETE are dropped by wal2json.
  const auto al = t.on(t.row_topic("audit_log"));
  ASSERT_EQ(al.size(), 2u) << describe(al);
  EXPECT_EQ(ops_of(al), "c c");
  EXPECT_EQ(keys_of(al), "<null key> <null key>");
  for (const auto& r : al) {
    EXPECT_TRUE(ts_ok(r, "/after/happened_at"));
    EXPECT_TRUE(is(r, "/after/actor", jstr("a1")));
    EXPECT_TRUE(is(r, "/after/detail", jstr("d1")));
  }
  // seat: the DEFERRABLE primary key is not a key.
  const auto seat = t.on(t.row_topic("seat"));
  ASSERT_EQ(seat.size(), 1u) << describe(seat);
  EXPECT_EQ(ops_of(seat), "c");
  EXPECT_EQ(keys_of(seat), "<null key>");
  EXPECT_TRUE(is(seat[0], "/after", R"({"flight":"XY1","seat_no":"1A","holder":"h1"})"));
  // audit_log_full: 2 creates, 2 updates, 2 deletes, key null (tombstones for a null key are not
  // asserted either way).
  auto full = t.on(t.row_topic("audit_log_full"));
  std::erase_if(full, [](const KafkaRecord& r) { return !r.value && !r.key; });
  ASSERT_EQ(full.size(), 6u) << describe(t.on(t.row_topic("audit_log_full")));
  EXPECT_EQ(ops_of(full), "c c u u d d");
  EXPECT_EQ(keys_of(full), "<null key> <null key> <null key> <null key> <null key> <null key>");
  for (std::size_t i = 2; i < 4; ++i) {
    EXPECT_TRUE(is(full[i], "/before/detail", jstr("d1")));
    EXPECT_TRUE(is(full[i], "/after/detail", jstr("d2")));
    EXPECT_TRUE(ts_ok(full[i], "/before/happened_at"));
    EXPECT_TRUE(is(full[i], "/before/actor", jstr("a1")));
  }
  for (std::size_t i = 4; i < 6; ++i) {
    EXPECT_TRUE(is(full[i], "/before/detail", jstr("d2")));
    EXPECT_TRUE(is(full[i], "/after", "null"));
  }
  // Start-up report: audit_log and seat cannot have their UPDATE/DELETE captured.
  EXPECT_FALSE(log_lines_about(*t.proc, std::regex("audit_log([^_a-z0-9]|$)")).empty())
      << t.proc->stderr_text();
  EXPECT_FALSE(log_lines_about(*t.proc, std::regex("seat([^_a-z0-9]|$)")).empty())
      << t.proc->stderr_text();
  // It has no key, so a null-key warning is right; nothing may say its changes are dropped.
  EXPECT_TRUE(log_lines_about(*t.proc, std::regex("audit_log_full.*(drop|cannot|NOTHING)")).empty())
      << "audit_log_full (REPLICA IDENTITY FULL) is capturable:\n"
      << t.proc->stderr_text();
}

}  // namespace walrelay::itest
