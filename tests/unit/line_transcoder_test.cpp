// LineTranscoder: wal2json lines in a database's encoding → UTF-8
// (shared/cases/CASE-01.md).

#include "walrelay/decoder/line_transcoder.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "walrelay/decoder/utf8.hpp"

namespace walrelay::decoder {
namespace {

LineTranscoder make(std::string_view encoding) {
  auto t = LineTranscoder::for_server_encoding(encoding);
  EXPECT_TRUE(t) << encoding << ": " << (t ? "" : t.error());
  return t ? std::move(*t) : LineTranscoder{};
}

std::string hex(std::string_view s) {
  return hex_bytes(s, 0, s.size());
}

TEST(IconvName, ServerEncodingsMapToGlibcNames) {
  EXPECT_EQ(iconv_name_of("LATIN1"), "ISO-8859-1");
  EXPECT_EQ(iconv_name_of("LATIN5"), "ISO-8859-9");
  EXPECT_EQ(iconv_name_of("LATIN9"), "ISO-8859-15");
  EXPECT_EQ(iconv_name_of("latin10"), "ISO-8859-16");
  EXPECT_EQ(iconv_name_of("WIN1252"), "CP1252");
  EXPECT_EQ(iconv_name_of("WIN866"), "CP866");
  EXPECT_EQ(iconv_name_of("EUC_JP"), "EUC-JP");
  EXPECT_EQ(iconv_name_of("EUC_JIS_2004"), "EUC-JISX0213");
  EXPECT_EQ(iconv_name_of("KOI8R"), "KOI8-R");
  EXPECT_EQ(iconv_name_of("ISO_8859_5"), "ISO-8859-5");
  EXPECT_FALSE(iconv_name_of("UTF8"));
  EXPECT_FALSE(iconv_name_of("SQL_ASCII"));
  EXPECT_FALSE(iconv_name_of("MULE_INTERNAL"));
  EXPECT_FALSE(iconv_name_of("SJIS"));  // a client-only encoding
}

TEST(LineTranscoder, EveryMappedServerEncodingOpensWithGlibc) {
  for (const char* e :
       {"EUC_CN",     "EUC_JP",     "EUC_JIS_2004", "EUC_KR",  "EUC_TW",  "ISO_8859_5",
        "ISO_8859_6", "ISO_8859_7", "ISO_8859_8",   "KOI8R",   "KOI8U",   "LATIN1",
        "LATIN2",     "LATIN3",     "LATIN4",       "LATIN5",  "LATIN6",  "LATIN7",
        "LATIN8",     "LATIN9",     "LATIN10",      "WIN866",  "WIN874",  "WIN1250",
        "WIN1251",    "WIN1252",    "WIN1253",      "WIN1254", "WIN1255", "WIN1256",
        "WIN1257",    "WIN1258"}) {
    auto t = LineTranscoder::for_server_encoding(e);
    ASSERT_TRUE(t) << e << ": " << t.error();
    EXPECT_EQ(t->mode(), TranscodeMode::kTranscode) << e;
    EXPECT_EQ(t->server_encoding(), e);
    EXPECT_FALSE(t->iconv_name().empty());
  }
}

TEST(LineTranscoder, Utf8PassesThroughUntouched) {
  auto t = make("UTF8");
  EXPECT_EQ(t.mode(), TranscodeMode::kPassThrough);
  const std::string line = "{\"value\":\"Caf\xC3\xA9\"}";
  auto r = t.to_utf8(line);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data(), line.data());  // no copy
  EXPECT_EQ(LineTranscoder{}.mode(), TranscodeMode::kPassThrough);
}

TEST(LineTranscoder, Latin1ByteBecomesTwoUtf8Bytes) {
  auto t = make("LATIN1");
  EXPECT_EQ(t.iconv_name(), "ISO-8859-1");
  // CASE-01: "Café Müller & Söhne" as wal2json writes it in a LATIN1 database.
  const std::string line = "{\"name\":\"trade_name\",\"value\":\"Caf\xE9 M\xFCller & S\xF6hne\"}";
  auto r = t.to_utf8(line);
  ASSERT_TRUE(r) << r.error().reason;
  EXPECT_EQ(*r, "{\"name\":\"trade_name\",\"value\":\"Caf\xC3\xA9 M\xC3\xBCller & S\xC3\xB6hne\"}");
  auto e = t.to_utf8("\xE9");
  ASSERT_TRUE(e);
  EXPECT_EQ(hex(*e), "0xc3 0xa9");
  // Every LATIN1 byte has a character: 0xFF is ÿ.
  EXPECT_EQ(hex(*t.to_utf8("\xFF")), "0xc3 0xbf");
}

TEST(LineTranscoder, Win1252EuroSignBecomesThreeBytes) {
  auto t = make("WIN1252");
  auto r = t.to_utf8("{\"price\":\"12 \x80\"}");
  ASSERT_TRUE(r) << r.error().reason;
  EXPECT_EQ(*r, "{\"price\":\"12 \xE2\x82\xAC\"}");
}

TEST(LineTranscoder, Win1252ByteWithoutACharacterIsAnError) {
  auto t = make("WIN1252");
  auto r = t.to_utf8("{\"v\":\"a\x81z\"}");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().offset, 7u);
  EXPECT_NE(r.error().reason.find("0x81"), std::string::npos) << r.error().reason;
  EXPECT_NE(r.error().reason.find("WIN1252"), std::string::npos) << r.error().reason;
}

TEST(LineTranscoder, EucJpConvertsAndRejectsInvalidSequences) {
  auto t = make("EUC_JP");
  auto ok = t.to_utf8("{\"v\":\"\xC6\xFC\xCB\xDC\"}");  // 日本
  ASSERT_TRUE(ok) << ok.error().reason;
  EXPECT_EQ(*ok, "{\"v\":\"\xE6\x97\xA5\xE6\x9C\xAC\"}");
  // A lead byte followed by a byte that cannot continue it (here the closing quote).
  auto bad = t.to_utf8("{\"v\":\"ab\xA4\"}");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().offset, 8u);
  EXPECT_NE(bad.error().reason.find("0xa4 0x22"), std::string::npos) << bad.error().reason;
  EXPECT_NE(bad.error().reason.find("EUC_JP"), std::string::npos) << bad.error().reason;
  // Cut off at the end of the line.
  auto cut = t.to_utf8("ab\xA4");
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().offset, 2u);
  EXPECT_NE(cut.error().reason.find("incomplete"), std::string::npos) << cut.error().reason;
  // The transcoder is usable after an error.
  auto again = t.to_utf8("\xC6\xFC");
  ASSERT_TRUE(again);
  EXPECT_EQ(hex(*again), "0xe6 0x97 0xa5");
}

TEST(LineTranscoder, StatefulDecoderIsFlushedAtTheEndOfEachLine) {
  // glibc's EUC-JISX0213 holds back か (0xA4AB) until it knows no combining mark follows.
  auto t = make("EUC_JIS_2004");
  auto r = t.to_utf8("\xA4\xAB");
  ASSERT_TRUE(r) << r.error().reason;
  EXPECT_EQ(hex(*r), "0xe3 0x81 0x8b");
  auto combined = t.to_utf8("\"\xA4\xF7\"");  // か゚: two code points
  ASSERT_TRUE(combined) << combined.error().reason;
  EXPECT_EQ(hex(*combined), "0x22 0xe3 0x81 0x8b 0xe3 0x82 0x9a 0x22");
}

TEST(LineTranscoder, AsciiLinesAreNotCopied) {
  auto t = make("LATIN1");
  const std::string line = "{\"action\":\"B\",\"xid\":1}";
  auto r = t.to_utf8(line);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data(), line.data());
}

TEST(LineTranscoder, ANonAsciiByteAnywhereIsConverted) {
  auto t = make("LATIN1");
  for (std::size_t at = 0; at < 21; ++at) {
    std::string line(21, 'a');
    line[at] = '\xE9';
    auto r = t.to_utf8(line);
    ASSERT_TRUE(r) << at;
    ASSERT_EQ(r->size(), 22u) << at;
    EXPECT_EQ(r->substr(at, 2), "\xC3\xA9") << at;
  }
}

TEST(LineTranscoder, OneBufferIsReused) {
  auto t = make("LATIN1");
  const std::string big(10000, '\xE9');
  auto first = t.to_utf8(big);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->size(), 20000u);
  const char* buffer = first->data();
  auto second = t.to_utf8("x\xE9y");
  ASSERT_TRUE(second);
  EXPECT_EQ(*second, "x\xC3\xA9y");
  EXPECT_EQ(second->data(), buffer) << "a smaller line must reuse the buffer";
  auto third = t.to_utf8(big);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->data(), buffer);
  for (std::size_t i = 0; i < third->size(); i += 2) {
    ASSERT_EQ(hex(third->substr(i, 2)), "0xc3 0xa9") << i;
  }
}

TEST(LineTranscoder, WorstCaseExpansionFits) {
  // WIN1252 0x80 → 3 bytes each: the largest expansion of any server encoding.
  auto t = make("WIN1252");
  const std::string euros(4096, '\x80');
  auto r = t.to_utf8(euros);
  ASSERT_TRUE(r) << r.error().reason;
  EXPECT_EQ(r->size(), 3u * 4096u);
  EXPECT_EQ(r->substr(r->size() - 3), "\xE2\x82\xAC");
}

TEST(LineTranscoder, SqlAsciiValidatesUtf8) {
  auto t = make("SQL_ASCII");
  EXPECT_EQ(t.mode(), TranscodeMode::kValidate);
  const std::string utf8 = "{\"body\":\"na\xC3\xAFve UTF-8\"}";
  auto ok = t.to_utf8(utf8);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->data(), utf8.data());
  auto latin1 = t.to_utf8("{\"body\":\"na\xEFve LATIN1\"}");
  ASSERT_FALSE(latin1);
  EXPECT_EQ(latin1.error().offset, 11u);
  EXPECT_NE(latin1.error().reason.find("not valid UTF-8"), std::string::npos);
  auto ff = t.to_utf8("{\"body\":\"raw \xFF byte\"}");
  ASSERT_FALSE(ff);
  EXPECT_EQ(ff.error().offset, 13u);
  EXPECT_NE(ff.error().reason.find("0xff"), std::string::npos) << ff.error().reason;
}

TEST(LineTranscoder, EncodingsWithoutAConversionAreRefused) {
  auto mule = LineTranscoder::for_server_encoding("MULE_INTERNAL");
  ASSERT_FALSE(mule);
  EXPECT_NE(mule.error().find("MULE_INTERNAL"), std::string::npos) << mule.error();
  EXPECT_FALSE(LineTranscoder::for_server_encoding("NOT_AN_ENCODING"));
}

TEST(LineTranscoder, MovedTranscoderKeepsWorking) {
  auto a = make("LATIN1");
  LineTranscoder b(std::move(a));
  EXPECT_EQ(hex(*b.to_utf8("\xE9")), "0xc3 0xa9");
  LineTranscoder c;
  c = std::move(b);
  EXPECT_EQ(c.mode(), TranscodeMode::kTranscode);
  EXPECT_EQ(hex(*c.to_utf8("\xFC")), "0xc3 0xbc");
}

}  // namespace
}  // namespace walrelay::decoder
