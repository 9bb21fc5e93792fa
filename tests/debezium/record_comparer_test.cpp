// The Debezium compatibility suite's comparison on hand-made records: it must see every kind of
// difference the suite is there to find, and ignore exactly the fields it documents as ignored.
// A unit test: no services needed.

#include "record_comparer.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace walrelay::itest {
namespace {

KafkaRecord record(std::optional<std::string> key, std::optional<std::string> value,
                   std::map<std::string, std::string> headers = {}) {
  KafkaRecord r;
  r.topic = "t";
  r.key = std::move(key);
  r.value = std::move(value);
  r.headers = std::move(headers);
  return r;
}

std::string envelope(const std::string& op, const std::string& after, const std::string& source,
                     const std::string& ts_ms = "200") {
  return R"({"before":null,"after":)" + after + R"(,"source":{"version":"v","name":"n",)" + source +
         R"(},"op":")" + op + R"(","ts_ms":)" + ts_ms + "}";
}

std::vector<std::string> paths(const KafkaRecord& d, const KafkaRecord& w) {
  Comparer cmp;
  cmp.records("t", d, w);
  std::vector<std::string> out;
  for (const auto& diff : cmp.diffs) out.push_back(diff.path);
  return out;
}

using Paths = std::vector<std::string>;

TEST(DebeziumComparison, SeesEveryKindOfDifference) {
  const std::string src = R"("ts_ms":100,"lsn":7)";
  const auto base = record(R"({"id":1})", envelope("c", R"({"id":1,"x":1.0})", src));
  EXPECT_EQ(paths(base, base), Paths{});
  // A value's exact text.
  EXPECT_EQ(paths(base, record(R"({"id":1})", envelope("c", R"({"id":1,"x":1})", src))),
            Paths{"after.x"});
  // Key bytes, also when the JSON means the same.
  EXPECT_EQ(paths(base, record(R"({"id": 1})", *base.value)), Paths{"key"});
  // Headers.
  EXPECT_EQ(paths(base, record(base.key, base.value, {{"h", "1"}})), Paths{"header.h"});
  // Tombstone on one side.
  EXPECT_EQ(paths(base, record(base.key, std::nullopt)), Paths{"value"});
  // A missing field, and the order of the fields both have.
  EXPECT_EQ(paths(base, record(base.key, envelope("c", R"({"id":1})", src))), Paths{"after.x"});
  EXPECT_EQ(paths(base, record(base.key, envelope("c", R"({"x":1.0,"id":1})", src))),
            Paths{"after{order}"});
  EXPECT_EQ(
      paths(base, record(base.key, envelope("c", R"({"id":1,"x":1.0})", R"("lsn":7,"ts_ms":100)"))),
      Paths{"source{order}"});
  // Streamed records: the source position counts; a snapshot's own position does not.
  EXPECT_EQ(
      paths(base, record(base.key, envelope("c", R"({"id":1,"x":1.0})", R"("ts_ms":100,"lsn":8)"))),
      Paths{"source.lsn"});
  const auto snap = record(base.key, envelope("r", R"({"id":1,"x":1.0})", src));
  EXPECT_EQ(
      paths(snap, record(base.key, envelope("r", R"({"id":1,"x":1.0})", R"("ts_ms":50,"lsn":8)"))),
      Paths{});
  // Processing time: any value not before source.ts_ms, but present on both.
  EXPECT_EQ(paths(base, record(base.key, envelope("c", R"({"id":1,"x":1.0})", src, "999"))),
            Paths{});
  EXPECT_EQ(paths(base, record(base.key, envelope("c", R"({"id":1,"x":1.0})", src, "99"))),
            Paths{"ts_ms(not before source.ts_ms)"});
}

TEST(DebeziumComparison, AllowedEntriesMatchPathsValuesAndOps) {
  EXPECT_TRUE(path_matches("after.p", "after.p"));
  EXPECT_TRUE(path_matches("after.p", "after.p.x"));
  EXPECT_TRUE(path_matches("*.p", "before.p{order}"));
  EXPECT_FALSE(path_matches("after.p", "after.pq"));
  EXPECT_TRUE(path_matches("header.__debezium.context.*", "header.__debezium.context.taskId"));
  const Allowed nan{Why::kNotYetFixed, "main", "floats", "*", "cud", "\"NaN\"", "", ""};
  EXPECT_TRUE(allowed_matches(nan, {"main", "floats", "", "c", "after.d", "\"NaN\"", "null"}));
  EXPECT_FALSE(allowed_matches(nan, {"main", "floats", "", "r", "after.d", "\"NaN\"", "null"}));
  EXPECT_FALSE(allowed_matches(nan, {"main", "floats", "", "c", "after.d", "1.0", "1"}));
  EXPECT_FALSE(allowed_matches(nan, {"main", "ints", "", "c", "after.d", "\"NaN\"", "null"}));
  EXPECT_FALSE(allowed_matches(nan, {"string", "floats", "", "c", "after.d", "\"NaN\"", "null"}));
  const Allowed every{Why::kIntended, "*", "*", "header.id", "", "", "", ""};
  EXPECT_TRUE(allowed_matches(every, {"string", "decimals", "", "c", "header.id", "x", "y"}));
}

TEST(DebeziumComparison, KeysPairByTheirCharactersNotTheirEscapes) {
  const auto escaped = record(R"({"k":"\uD83D\uDE00 \t"})", std::nullopt);
  const auto raw = record("{\"k\":\"\xF0\x9F\x98\x80 \\t\"}", std::nullopt);
  EXPECT_EQ(canonical_key(escaped), canonical_key(raw));
  EXPECT_NE(canonical_key(escaped), canonical_key(record(R"({"k":"x"})", std::nullopt)));
  EXPECT_EQ(paths(escaped, raw), Paths{"key"});
}

}  // namespace
}  // namespace walrelay::itest
