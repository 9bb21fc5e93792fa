#include "walrelay/decoder/wal2json_value.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>

using walrelay::decoder::append_wal2json_value;
using walrelay::decoder::NumericTokens;

namespace {

// The token wal2json 2.5 prints (expected values written from wal2json.c's pg_decode_write_value
// and the shared/cases outputs, e.g. BUG-05.wal2json-2.5.out).
std::string token(std::optional<std::string> text, std::uint32_t oid,
                  NumericTokens mode = NumericTokens::kNumbers) {
  std::string out;
  if (!append_wal2json_value(out, text, oid, mode)) return "<error>";
  return out;
}

}  // namespace

TEST(Wal2JsonValue, SqlNullIsJsonNull) {
  EXPECT_EQ(token(std::nullopt, 23), "null");
  EXPECT_EQ(token(std::nullopt, 25), "null");
}

TEST(Wal2JsonValue, NumbersKeepTheirDigits) {
  EXPECT_EQ(token("42", 23), "42");
  EXPECT_EQ(token("-9223372036854775808", 20), "-9223372036854775808");
  EXPECT_EQ(token("12345678901234567890.123456789", 1700), "12345678901234567890.123456789");
  EXPECT_EQ(token("1.5e-07", 701), "1.5e-07");
  EXPECT_EQ(token("-0", 701), "-0");
}

TEST(Wal2JsonValue, NanAndInfinityAreNullUnlessNumericsAreStrings) {
  EXPECT_EQ(token("NaN", 1700), "null");
  EXPECT_EQ(token("Infinity", 701), "null");
  EXPECT_EQ(token("-Infinity", 700), "null");
  EXPECT_EQ(token("NaN", 1700, NumericTokens::kStrings), "\"NaN\"");
  EXPECT_EQ(token("12.30", 1700, NumericTokens::kStrings), "\"12.30\"");
}

TEST(Wal2JsonValue, NotANumberIsAnError) {
  EXPECT_EQ(token("12 apples", 1700), "<error>");
}

TEST(Wal2JsonValue, BooleansAndBytea) {
  EXPECT_EQ(token("t", 16), "true");
  EXPECT_EQ(token("f", 16), "false");
  EXPECT_EQ(token("\\xdeadbeef", 17), "\"deadbeef\"");
  EXPECT_EQ(token("\\x", 17), "\"\"");
}

TEST(Wal2JsonValue, OtherTypesAreEscapedStrings) {
  EXPECT_EQ(token("a\"b\\c\n\x01", 25), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(token("Café", 1043), "\"Café\"");
  EXPECT_EQ(token("{1,2,NULL}", 1007), "\"{1,2,NULL}\"");
  // A domain over integer has its own OID: wal2json quotes it.
  EXPECT_EQ(token("7", 90001), "\"7\"");
}
