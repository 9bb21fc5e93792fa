#include "walrelay/core/json.hpp"

#include <gtest/gtest.h>

namespace json = walrelay::json;

TEST(Json, EscapesPerRfc8259) {
  std::string out;
  json::append_string(out, "a\"b\\c\n\t\x01\x1f\x7f é");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f\x7f é\"");
}

TEST(Json, UnescapesEveryEscapeIncludingSurrogatePairs) {
  std::string out;
  ASSERT_TRUE(json::unescape_string(R"("q\"b\\s\/\b\f\n\r\t\u00e9\ud83d\ude00")", out));
  EXPECT_EQ(out, "q\"b\\s/\b\f\n\r\té\xF0\x9F\x98\x80");
}

TEST(Json, UnescapeRejectsNonStringsAndLoneSurrogates) {
  std::string out;
  EXPECT_FALSE(json::unescape_string("123", out));
  EXPECT_FALSE(json::unescape_string("null", out));
  EXPECT_FALSE(json::unescape_string(R"("\ud83d")", out));
  EXPECT_FALSE(json::unescape_string(R"("\x")", out));
  EXPECT_FALSE(json::unescape_string(R"("abc\")", out));
}

TEST(Json, RoundTrip) {
  const std::string text = "line1\nline2 \"quoted\" \\ \x02 ü";
  std::string token;
  json::append_string(token, text);
  std::string back;
  ASSERT_TRUE(json::unescape_string(token, back));
  EXPECT_EQ(back, text);
}
