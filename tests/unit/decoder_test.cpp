#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "walrelay/decoder/plugin_options.hpp"
#include "walrelay/decoder/wal2json_decoder.hpp"

using walrelay::Lsn;
using walrelay::decoder::Action;
using walrelay::decoder::Change;
using walrelay::decoder::Wal2JsonDecoder;

namespace {

std::vector<std::string> fixture(const std::string& name) {
  std::ifstream in(std::string(WALRELAY_FIXTURES_DIR) + "/wal2json/" + name);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  EXPECT_FALSE(lines.empty()) << name;
  return lines;
}

const Change& decode_ok(Wal2JsonDecoder& d, const std::string& line) {
  auto r = d.decode(line);
  if (!r) ADD_FAILURE() << r.error().reason << "\nline: " << line;
  static Change empty;
  return r ? **r : empty;
}

}  // namespace

TEST(Decoder, BeginAndCommitCarryLsnAndNextLsn) {
  Wal2JsonDecoder d;
  const auto lines = fixture("BUG-01.jsonl");
  const Change& b = decode_ok(d, lines[0]);
  EXPECT_EQ(b.action, Action::kBegin);
  EXPECT_EQ(b.xid, 1031u);
  EXPECT_EQ(b.lsn.to_string(), "0/26B3D938");
  EXPECT_EQ(b.next_lsn.to_string(), "0/26B3D968");
  EXPECT_EQ(b.timestamp, "2026-11-30 00:14:37.104367+00");
  const Change& c = decode_ok(d, lines[2]);
  EXPECT_EQ(c.action, Action::kCommit);
  EXPECT_EQ(c.next_lsn.to_string(), "0/26B3D968");
}

// BUG-01: numeric and bigint digits must survive: never through double or int64.
TEST(Decoder, NumericKeepsEveryDigit) {
  Wal2JsonDecoder d;
  const auto lines = fixture("BUG-01.jsonl");
  const Change& i = decode_ok(d, lines[1]);
  ASSERT_EQ(i.action, Action::kInsert);
  EXPECT_EQ(i.schema, "public");
  EXPECT_EQ(i.table, "ledger_entry");
  ASSERT_EQ(i.columns.size(), 4u);
  EXPECT_EQ(i.columns[0].name, "entry_id");
  EXPECT_EQ(i.columns[0].type_oid, 20u);
  EXPECT_EQ(i.columns[0].value, "9007199254740993");
  EXPECT_EQ(i.columns[1].value, "12345678901234567890.123456789");
  EXPECT_EQ(i.columns[1].type_oid, 1700u);
  EXPECT_EQ(i.columns[2].value, "1500.000000000");
  ASSERT_EQ(i.pk.size(), 1u);
  EXPECT_EQ(i.pk[0], "entry_id");

  const Change& big = decode_ok(d, lines[4]);  // 30-digit integer beyond 64 bits
  EXPECT_EQ(big.columns[1].value, "123456789012345678901234567890");
  EXPECT_EQ(big.columns[3].value, "9223372036854775807");

  const Change& tiny = decode_ok(d, lines[7]);  // 1e-400 printed with ~400 digits
  EXPECT_EQ(tiny.columns[1].value.size(), 402u);
  EXPECT_EQ(tiny.columns[2].value, "-99999999999999999999999999999.999999999");
  EXPECT_EQ(tiny.columns[3].value, "-9223372036854775808");

  const Change& u = decode_ok(d, lines[10]);
  EXPECT_EQ(u.action, Action::kUpdate);
  EXPECT_EQ(u.columns[1].value, "12345678901234567891.123456789");
  ASSERT_EQ(u.identity.size(), 1u);
  EXPECT_EQ(u.identity[0].value, "9007199254740993");
}

// BUG-05: strings stay raw JSON tokens, escapes included; SQL NULL is `null`, the JSON null
// document is the string token "null".
TEST(Decoder, StringsStayRawTokensWithUnicodeEscapes) {
  Wal2JsonDecoder d;
  const auto lines = fixture("BUG-05.jsonl");
  bool saw_control_escape = false;
  bool saw_sql_null = false;
  bool saw_json_null_document = false;
  for (const auto& line : lines) {
    const Change& c = decode_ok(d, line);
    for (const auto& col : c.columns) {
      if (col.value.find("\\u0001") != std::string_view::npos) {
        saw_control_escape = true;
        EXPECT_EQ(col.value.front(), '"');
        EXPECT_EQ(col.value.back(), '"');
      }
      if (col.is_null()) saw_sql_null = true;
      if (col.value == "\"null\"") {
        saw_json_null_document = true;
        EXPECT_FALSE(col.is_null());
      }
    }
  }
  EXPECT_TRUE(saw_control_escape);
  EXPECT_TRUE(saw_sql_null);
  EXPECT_TRUE(saw_json_null_document);
}

TEST(Decoder, DeleteWithOnlyIdentityColumnsAndNoTypeNames) {
  // include-types=0, include-type-oids=1: what walrelay asks wal2json for.
  Wal2JsonDecoder d;
  const Change& c = decode_ok(
      d,
      R"({"action":"D","xid":1108,"timestamp":"2026-11-30 00:14:39.165958+00","lsn":"0/290FAF28","schema":"public","table":"acct_default","identity":[{"name":"acct_id","typeoid":23,"value":1}],"pk":[{"name":"acct_id","typeoid":23}]})");
  EXPECT_EQ(c.action, Action::kDelete);
  EXPECT_TRUE(c.columns.empty());
  ASSERT_EQ(c.identity.size(), 1u);
  EXPECT_EQ(c.identity[0].name, "acct_id");
  EXPECT_EQ(c.identity[0].name_json, "\"acct_id\"");
  EXPECT_EQ(c.identity[0].value, "1");
  EXPECT_EQ(c.pk.size(), 1u);
}

TEST(Decoder, NullColumnAndQuotedNames) {
  Wal2JsonDecoder d;
  const Change& c = decode_ok(
      d,
      R"({"action":"I","xid":7,"lsn":"0/10","schema":"my.schema","table":"We\"ird T","columns":[{"name":"id","typeoid":23,"value":1},{"name":"Na\"me","typeoid":25,"value":null}],"pk":[{"name":"id","typeoid":23}]})");
  EXPECT_EQ(c.schema, "my.schema");
  EXPECT_EQ(c.table, "We\"ird T");
  ASSERT_EQ(c.columns.size(), 2u);
  EXPECT_EQ(c.columns[1].name, "Na\"me");
  EXPECT_EQ(c.columns[1].name_json, R"("Na\"me")");
  EXPECT_TRUE(c.columns[1].is_null());
}

TEST(Decoder, MessagesTransactionalAndNot) {
  Wal2JsonDecoder d;
  const auto lines = fixture("BUG-17.jsonl");
  const Change& m = decode_ok(d, lines[0]);
  EXPECT_EQ(m.action, Action::kMessage);
  EXPECT_FALSE(m.transactional);
  EXPECT_EQ(m.xid, 0u);
  EXPECT_TRUE(m.timestamp.empty());
  EXPECT_EQ(m.prefix, "audit");
  EXPECT_EQ(m.content, "packed 1 (non-transactional)");
  EXPECT_EQ(m.lsn.to_string(), "0/39D43A70");
  const Change& t = decode_ok(d, lines[3]);
  EXPECT_TRUE(t.transactional);
  EXPECT_EQ(t.xid, 1176u);
  EXPECT_EQ(t.content, R"({"type":"ShipmentPacked","id":1})");
}

TEST(Decoder, TruncateLine) {
  Wal2JsonDecoder d;
  const Change& c =
      decode_ok(d, R"({"action":"T","xid":9,"lsn":"0/20","schema":"public","table":"t"})");
  EXPECT_EQ(c.action, Action::kTruncate);
  EXPECT_EQ(c.table, "t");
}

TEST(Decoder, ErrorsNameTheProblem) {
  Wal2JsonDecoder d;
  EXPECT_FALSE(d.decode("not json"));
  EXPECT_FALSE(d.decode("[1,2]"));
  auto no_action = d.decode(R"({"xid":1})");
  ASSERT_FALSE(no_action);
  EXPECT_NE(no_action.error().reason.find("action"), std::string::npos);
  auto bad_action = d.decode(R"({"action":"X"})");
  ASSERT_FALSE(bad_action);
  EXPECT_NE(bad_action.error().reason.find("X"), std::string::npos);
  auto bad_lsn = d.decode(R"({"action":"B","lsn":"zz"})");
  ASSERT_FALSE(bad_lsn);
  EXPECT_NE(bad_lsn.error().reason.find("lsn"), std::string::npos);
  // The decoder is still usable after errors.
  EXPECT_TRUE(d.decode(R"({"action":"C","lsn":"0/1","nextlsn":"0/2"})"));
}

TEST(Decoder, ReusedBuffersDoNotLeakPreviousLine) {
  Wal2JsonDecoder d;
  decode_ok(
      d,
      R"({"action":"I","xid":1,"lsn":"0/1","schema":"s","table":"t","columns":[{"name":"a","typeoid":23,"value":1},{"name":"b","typeoid":23,"value":2}]})");
  const Change& c = decode_ok(d, R"({"action":"T","xid":2,"lsn":"0/2","schema":"s","table":"u"})");
  EXPECT_TRUE(c.columns.empty());
  EXPECT_TRUE(c.pk.empty());
}

TEST(PluginOptions, AsksForFormat2WithOidsAndAddTables) {
  auto opts = walrelay::decoder::wal2json_options(
      std::vector<walrelay::decoder::TableFilter>{{"public", "invoices"}, {"my schema", "*"}},
      {"outbox", "audit"});
  auto find = [&](const std::string& k) -> std::string {
    for (auto& [name, value] : opts) {
      if (name == k) return value;
    }
    return "<absent>";
  };
  EXPECT_EQ(find("format-version"), "2");
  EXPECT_EQ(find("include-type-oids"), "1");
  EXPECT_EQ(find("include-types"), "0");
  EXPECT_EQ(find("include-lsn"), "1");
  EXPECT_EQ(find("include-xids"), "1");
  EXPECT_EQ(find("include-pk"), "1");
  EXPECT_EQ(find("include-transaction"), "1");
  EXPECT_EQ(find("add-tables"), "public.invoices,my\\ schema.*");
  EXPECT_EQ(walrelay::decoder::escape_add_tables_name("a.b,c*'d"), "a\\.b\\,c\\*\\'d");
  EXPECT_EQ(find("add-msg-prefixes"), "walrelay,outbox,audit");
  EXPECT_EQ(find("nonexistent"), "<absent>");
  auto unfiltered = walrelay::decoder::wal2json_options(std::nullopt);
  for (auto& [name, value] : unfiltered) {
    EXPECT_NE(name, "add-tables");
    EXPECT_NE(name, "filter-tables");
  }
  auto no_tables =
      walrelay::decoder::wal2json_options(std::vector<walrelay::decoder::TableFilter>{}, {"o"});
  bool filters_all = false;
  for (auto& [name, value] : no_tables) filters_all |= name == "filter-tables" && value == "*.*";
  EXPECT_TRUE(filters_all);
}

// ---- the fast path and simdjson agree ----------------------------------------------------------

namespace {

std::string describe(const std::expected<const Change*, walrelay::decoder::DecodeError>& r) {
  if (!r) return "error: " + r.error().reason;
  const Change& c = **r;
  std::string out = "action " + std::string(1, static_cast<char>(c.action)) + " xid " +
                    std::to_string(c.xid) + " lsn " + c.lsn.to_string() + " next " +
                    c.next_lsn.to_string() + " ts [" + std::string(c.timestamp) + "] " +
                    std::string(c.schema) + "." + std::string(c.table) + " tx " +
                    std::to_string(c.transactional) + " prefix [" + std::string(c.prefix) +
                    "] content [" + std::string(c.content) + "]";
  for (const auto* list : {&c.columns, &c.identity}) {
    out += " |";
    for (const auto& col : *list) {
      out += " [" + std::string(col.name) + "|" + std::string(col.name_json) + "|" +
             std::to_string(col.type_oid) + "|" + std::string(col.value) + "]";
    }
  }
  out += " | pk";
  for (const auto& k : c.pk) out += " " + std::string(k);
  return out;
}

void expect_same(Wal2JsonDecoder& fast, Wal2JsonDecoder& slow, const std::string& line) {
  const std::string a = describe(fast.decode(line));
  const std::string b = describe(slow.decode(line));
  EXPECT_EQ(a, b) << "line: " << line;
}

std::vector<std::string> corpus_lines() {
  std::vector<std::string> lines;
  for (const char* f : {"BUG-01.jsonl", "BUG-03.jsonl", "BUG-05.jsonl", "BUG-17.jsonl"}) {
    for (auto& l : fixture(f)) lines.push_back(l);
  }
  // The decoder fuzzer's corpus: every odd line found so far.
  const std::string dir = std::string(WALRELAY_FIXTURES_DIR) + "/../fuzz/corpus/decoder";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    lines.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return lines;
}

}  // namespace

TEST(Decoder, FastPathAndSimdjsonAgreeOnEveryLine) {
  Wal2JsonDecoder fast;
  Wal2JsonDecoder slow(false);
  const std::vector<std::string> odd = {
      // The shapes wal2json prints, and near misses the fast path must leave to simdjson.
      R"({"action":"I","xid":5,"lsn":"0/10","schema":"public","table":"t","columns":[{"name":"a","type":"integer","typeoid":23,"value":1,"optional":false}],"pk":[{"name":"a","type":"integer","typeoid":23}]})",
      R"({"action":"I","xid":5,"schema":"public","table":"t","columns":[]})",
      R"({"action":"I","xid":5,"schema":"public","table":"t","columns":[{"name":"a\"b","typeoid":25,"value":"x"}]})",
      R"({"action":"I","xid":5,"schema":"pub\u006cic","table":"t","columns":[{"name":"a","typeoid":25,"value":"x\\y\"z\u00e9\ud83d\ude00"}]})",
      R"({"action":"I", "xid":5,"schema":"public","table":"t","columns":[{"name":"a","typeoid":25,"value":"x"}]})",
      R"({"action":"I","xid":5,"schema":"public","table":"t","columns":[{"name":"a","typeoid":25,"value":"x"}]} )",
      R"({"action":"I","xid":5,"schema":"public","table":"t","columns":[{"name":"a","typeoid":25,"value":"x"}],"extra":1})",
      R"({"action":"I","xid":05,"schema":"public","table":"t","columns":[]})",
      R"({"action":"I","xid":18446744073709551615,"schema":"public","table":"t","columns":[]})",
      R"({"action":"I","xid":18446744073709551616,"schema":"public","table":"t","columns":[]})",
      R"({"action":"I","xid":-1,"schema":"public","table":"t","columns":[]})",
      R"({"action":"I","xid":1.0,"schema":"public","table":"t","columns":[]})",
      R"({"action":"I","xid":null,"lsn":null,"timestamp":null,"schema":"public","table":"t","columns":[]})",
      R"({"action":"I","xid":5,"lsn":"0/XYZ","schema":"public","table":"t","columns":[]})",
      R"({"action":"I","xid":5,"lsn":"0/10","lsn":"0/20","schema":"public","table":"t","columns":[{"name":"a","typeoid":23,"value":1}],"columns":[{"name":"b","typeoid":23,"value":2}]})",
      R"({"action":"I","xid":5,"schema":"public","table":"t","columns":[{"name":"a","typeoid":23}]})",
      R"({"action":"I","xid":5,"schema":"public","table":"t","columns":[{"typeoid":23,"value":1}]})",
      R"({"action":"I","xid":5,"schema":"public","table":"t","columns":[{"name":"a","typeoid":4294967319,"value":12a3}]})",
      R"({"action":"I","xid":5,"schema":"public","table":"t","columns":[{"name":"a","typeoid":3802,"value":{"k":1}}]})",
      R"({"action":"I","xid":5,"schema":"public","table":"t","columns":[{"name":"a","typeoid":23,"value":-1.5e+10},{"name":"b","typeoid":16,"value":true},{"name":"c","typeoid":25,"value":null}]})",
      R"({"action":"X","xid":5})",
      R"({"action":"IU","xid":5})",
      R"({"xid":5})",
      R"({"action":"M","transactional":false,"prefix":"wal\\relay","content":"{\"a\":1}","lsn":"0/10"})",
      R"({"action":"M","xid":7,"transactional":true,"prefix":"walrelay","content":"plain","lsn":"0/10"})",
      R"({"action":"M","transactional":tru,"prefix":"p","content":"c"})",
      R"({"action":"B","xid":9,"timestamp":"2026-11-30 00:14:37.104367+00","lsn":"0/26B3D938","nextlsn":"0/26B3D968"})",
      R"({"action":"T","xid":9,"schema":"public","table":"t"})",
      "{\"action\":\"I\",\"xid\":5,\"schema\":\"public\",\"table\":\"t\x01\",\"columns\":[]}",
      // A control character after a backslash is unescaped too (found by the fuzzer).
      "{\"action\":\"I\",\"xid\":5,\"schema\":\"public\",\"table\":\"t\",\"columns\":[{\"name\":"
      "\"a\",\"typeoid\":25,\"value\":\"x\\\x1b\"}]}",
      "{\"action\":\"I\",\"xid\":5,\"schema\":\"public\",\"table\":\"t\xC3\xA9\",\"columns\":[]}",
      "{\"action\":\"I\",\"xid\":5,\"schema\":\"public\",\"table\":\"t\xC3\",\"columns\":[]}",
      "{\"action\":\"I\",\"xid\":5,\"schema\":\"public\",\"table\":\"t\xED\xA0\x80\",\"columns\":[]"
      "}",
      "",
      "[]",
      "{}",
      "null",
  };
  std::vector<std::string> lines = corpus_lines();
  lines.insert(lines.end(), odd.begin(), odd.end());
  for (const auto& line : lines) expect_same(fast, slow, line);

  // Every prefix of some lines, and every byte of them replaced by a character that matters to
  // JSON: both paths must still agree (mostly on an error).
  const std::string mutations = std::string("\"\\ ,:{}[]0-ax\x01\x80\xC3", 17);
  for (std::size_t k = 0; k < lines.size(); k += 7) {
    const std::string& line = lines[k];
    for (std::size_t n = 0; n < line.size(); ++n) {
      expect_same(fast, slow, line.substr(0, n));
      for (char m : mutations) {
        std::string changed = line;
        changed[n] = m;
        expect_same(fast, slow, changed);
      }
    }
  }
}
