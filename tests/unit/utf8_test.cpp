// UTF-8 validation and message helpers (RFC 3629 §4).

#include "walrelay/decoder/utf8.hpp"

#include <gtest/gtest.h>

namespace walrelay::decoder {
namespace {

TEST(Utf8, FirstInvalidByte) {
  EXPECT_FALSE(first_invalid_utf8(""));
  EXPECT_FALSE(first_invalid_utf8("plain"));
  EXPECT_FALSE(first_invalid_utf8("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_EQ(first_invalid_utf8("ab\xC0\x80"), 2u);                           // overlong NUL
  EXPECT_EQ(first_invalid_utf8("a\xE0\x80\x80"), 1u);                        // overlong
  EXPECT_EQ(first_invalid_utf8("a\xED\xA0\x80"), 1u);                        // surrogate
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);                     // > U+10FFFF
  EXPECT_EQ(first_invalid_utf8("ok\xE2\x82"), 2u);                           // cut off
  EXPECT_EQ(first_invalid_utf8("\xC3\xA9\x80"), 2u);                         // stray continuation
  EXPECT_EQ(first_invalid_utf8("raw \xFF byte"), 4u);
}

TEST(Utf8, MessagesReplaceOnlyInvalidBytes) {
  EXPECT_EQ(utf8_for_message("caf\xC3\xA9 \xFF!"), "caf\xC3\xA9 \xEF\xBF\xBD!");
  EXPECT_EQ(utf8_for_message("na\xEFve"), "na\xEF\xBF\xBDve");
  EXPECT_FALSE(first_invalid_utf8(utf8_for_message("\xE2\x82 \xF5\xC0")));
  EXPECT_EQ(hex_bytes("\xE9\x20\x4D", 0), "0xe9 0x20 0x4d");
  EXPECT_EQ(hex_bytes("abcdef", 1, 2), "0x62 0x63");
  EXPECT_EQ(hex_bytes("ab", 5), "");
}

}  // namespace
}  // namespace walrelay::decoder
