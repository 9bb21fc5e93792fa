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

TEST(Json, UnescapeAppendsToWhatIsThereAndKeepsEveryByte) {
  // Every byte value, escapes at both ends, runs of every length between them, and \u escapes of
  // 1-, 2-, 3- and 4-byte characters, appended after existing text.
  std::string text;
  for (int c = 0; c < 256; ++c) text += std::string(static_cast<std::size_t>(c % 7), 'x') + char(c);
  text += "\"\\";
  std::string token;
  json::append_string(token, text);
  std::string back = "prefix:";
  ASSERT_TRUE(json::unescape_string(token, back));
  EXPECT_EQ(back, "prefix:" + text);
  back = "p";
  ASSERT_TRUE(json::unescape_string(R"("\u0041\u00e9\u20ac\ud83d\ude00\"")", back));
  EXPECT_EQ(back, "pA\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"");
  back = "p";
  ASSERT_TRUE(json::unescape_string(R"("")", back));
  EXPECT_EQ(back, "p");
}

TEST(Json, EscapesCharactersOutsideTheBmpAsJacksonDoes) {
  // U+1F600 (F0 9F 98 80) is the surrogate pair D83D DE00; U+10348 (F0 90 8D 88) is D800 DF48.
  std::string s = "{\"k\":\"\xC3\xA9\xF0\x9F\x98\x80 \xF0\x90\x8D\x88\"}";
  walrelay::json::escape_supplementary(s);
  EXPECT_EQ(s, "{\"k\":\"\xC3\xA9\\uD83D\\uDE00 \\uD800\\uDF48\"}");
  // Nothing to do: unchanged (BMP characters stay as UTF-8, as Jackson writes them).
  std::string plain = "{\"k\":\"\xC3\xA9\xE2\x82\xAC\"}";
  const std::string before = plain;
  walrelay::json::escape_supplementary(plain);
  EXPECT_EQ(plain, before);
  // Only from the given offset; a truncated sequence is left alone.
  std::string tail = "\xF0\x9F\x98\x80|\xF0\x9F\x98\x80|\xF0\x9F";
  walrelay::json::escape_supplementary(tail, 5);
  EXPECT_EQ(tail, "\xF0\x9F\x98\x80|\\uD83D\\uDE00|\xF0\x9F");
}

TEST(Json, EscapeSupplementaryFindsEveryLeadByteInLongText) {
  // The scan reads sixteen bytes a step: a 4-byte sequence at every offset of a long text, next
  // to 2- and 3-byte characters (left as they are), must be found whatever its alignment.
  const std::string emoji = "\xF0\x9F\x98\x80";
  const std::string bmp = "\xC3\xA9\xE2\x82\xAC\xEF\xBF\xBF";  // é € U+FFFF
  for (std::size_t at = 0; at < 40; ++at) {
    std::string s = std::string(at, 'a') + bmp + emoji + std::string(40 - at, 'b');
    json::escape_supplementary(s);
    EXPECT_EQ(s, std::string(at, 'a') + bmp + "\\uD83D\\uDE00" + std::string(40 - at, 'b'))
        << "at " << at;
  }
  // Bytes >= 0xF0 that do not start a valid sequence are found but left as they are.
  std::string odd = std::string(20, 'x') + "\xF8\xFF\xF5\x80\x80\x80" + std::string(20, 'y');
  const std::string before = odd;
  json::escape_supplementary(odd);
  EXPECT_EQ(odd, before);
  // An offset past the end changes nothing.
  std::string short_text = emoji;
  json::escape_supplementary(short_text, 10);
  EXPECT_EQ(short_text, emoji);
}

TEST(Json, EscapesEveryByteAtEveryOffsetOfItsEightByteStep) {
  // The escape scan looks at eight bytes a step: every byte value at each offset of a step, after
  // and before runs of plain ASCII and of bytes >= 0x80 (never escaped), is escaped exactly as a
  // byte-by-byte reference does.
  const auto reference = [](std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = "\"";
    for (const char ch : text) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"') {
        out += "\\\"";
      } else if (c == '\\') {
        out += "\\\\";
      } else if (c == '\b') {
        out += "\\b";
      } else if (c == '\f') {
        out += "\\f";
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c < 0x20) {
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xF]);
      } else {
        out.push_back(ch);
      }
    }
    return out + "\"";
  };
  for (const char fill : {'a', '\xC3', '\x7F', '!'}) {
    for (int b = 0; b < 256; ++b) {
      for (std::size_t at = 0; at < 19; ++at) {
        std::string text(19, fill);
        text[at] = static_cast<char>(b);
        std::string out = "prefix";
        json::append_string(out, text);
        ASSERT_EQ(out, "prefix" + reference(text)) << "byte " << b << " at " << at;
      }
    }
  }
}
