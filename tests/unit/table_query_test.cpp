// build_row_change: a snapshot row as the Change a wal2json INSERT of it decodes to; in an
// SQL_ASCII database (texts as stored) every name and value must be UTF-8 (CASE-01).

#include "walrelay/snapshot/table_query.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walrelay::snapshot {
namespace {

constexpr std::uint32_t kInt4 = 23;
constexpr std::uint32_t kText = 25;

router::TableSchema note_table() {
  router::TableSchema s;
  s.schema = "public";
  s.table = "note";
  s.columns = {{"note_id", kInt4, -1, true, false}, {"body", kText, -1, false, true}};
  s.primary_key = {"note_id"};
  return s;
}

using Values = std::vector<std::optional<std::string_view>>;

TEST(BuildRowChange, Utf8RowsAreBuiltWithOrWithoutTheCheck) {
  const auto shape = note_table();
  const auto plan = make_read_plan(shape, {});
  ASSERT_TRUE(plan);
  decoder::Change change;
  std::string tokens;
  for (const bool check : {false, true}) {
    const Values row = {"1", "na\xC3\xAFve UTF-8"};
    auto built = build_row_change(*plan, row, decoder::NumericTokens::kStrings, check, Lsn{16}, 7,
                                  change, tokens);
    ASSERT_TRUE(built) << built.error();
    ASSERT_EQ(change.columns.size(), 2u);
    EXPECT_EQ(change.columns[1].value, "\"na\xC3\xAFve UTF-8\"");
  }
  const Values null_body = {"2", std::nullopt};
  EXPECT_TRUE(build_row_change(*plan, null_body, decoder::NumericTokens::kStrings, true, Lsn{16}, 7,
                               change, tokens));
}

TEST(BuildRowChange, SqlAsciiBytesThatAreNotUtf8AreAMappingError) {
  const auto shape = note_table();
  const auto plan = make_read_plan(shape, {});
  ASSERT_TRUE(plan);
  decoder::Change change;
  std::string tokens;
  const Values latin1 = {"2", "na\xEFve LATIN1"};
  auto bad = build_row_change(*plan, latin1, decoder::NumericTokens::kStrings, true, Lsn{16}, 7,
                              change, tokens);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("column body"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("0xef 0x76"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("offset 2"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("source.allow_sql_ascii"), std::string::npos) << bad.error();
  EXPECT_EQ(bad.error().find("na\xEF"), std::string::npos) << "the bytes are never quoted";
  // Without the check (any other database: the server converted the texts) it is built as is.
  EXPECT_TRUE(build_row_change(*plan, latin1, decoder::NumericTokens::kStrings, false, Lsn{16}, 7,
                               change, tokens));

  auto odd_name = note_table();
  odd_name.columns[1].name = "b\xFF";
  const auto odd_plan = make_read_plan(odd_name, {});
  ASSERT_TRUE(odd_plan);
  const Values fine = {"3", "ok"};
  auto named = build_row_change(*odd_plan, fine, decoder::NumericTokens::kStrings, true, Lsn{16}, 7,
                                change, tokens);
  ASSERT_FALSE(named);
  EXPECT_NE(named.error().find("column's name"), std::string::npos) << named.error();
}

// Keyset chunks: a chunk of the initial snapshot is one simple-query batch, so the last key read
// is written into the SQL as literals.
router::TableSchema shape() {
  router::TableSchema s;
  s.schema = "public";
  s.table = "it's";
  s.columns = {router::ColumnInfo{"a$1", 25, -1, true, true},
               router::ColumnInfo{"b", 20, -1, true, false},
               router::ColumnInfo{"v", 25, -1, false, true}};
  s.primary_key = {"a$1", "b"};
  return s;
}

TEST(TableQuery, TheFirstChunkHasNoLowerBound) {
  const auto s = shape();
  const auto plan = make_read_plan(s, {});
  ASSERT_TRUE(plan);
  EXPECT_EQ(chunk_query_literal(*plan, nullptr, 8193),
            R"(SELECT "a$1", "b", "v" FROM ONLY "public"."it's" ORDER BY "a$1", "b" LIMIT 8193)");
}

TEST(TableQuery, LaterChunksStartAfterTheLastKeyAsQuotedLiterals) {
  const auto s = shape();
  const auto plan = make_read_plan(s, {});
  ASSERT_TRUE(plan);
  const KeyText after = {std::string("o'brien $2 \\x"), std::string("42")};
  EXPECT_EQ(chunk_query_literal(*plan, &after, 10),
            R"(SELECT "a$1", "b", "v" FROM ONLY "public"."it's" WHERE ("a$1", "b") > )"
            R"((E'o''brien $2 \\x', '42') ORDER BY "a$1", "b" LIMIT 10)");
  // The parameter form of the same query, for the incremental snapshot's typed parameters.
  EXPECT_EQ(chunk_query(*plan, true, 10),
            R"(SELECT "a$1", "b", "v" FROM ONLY "public"."it's" WHERE ("a$1", "b") > ($1, $2) )"
            R"(ORDER BY "a$1", "b" LIMIT 10)");
}

}  // namespace
}  // namespace walrelay::snapshot
