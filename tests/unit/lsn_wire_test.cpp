#include <gtest/gtest.h>

#include <array>

#include "walrelay/core/lsn.hpp"
#include "walrelay/pg/wire.hpp"

using walrelay::Lsn;
namespace rep = walrelay::pg;

TEST(Lsn, ParsesAndPrintsPostgresForm) {
  auto lsn = Lsn::parse("16/B374D848");
  ASSERT_TRUE(lsn);
  EXPECT_EQ(lsn->value(), 0x16B374D848ull);
  EXPECT_EQ(lsn->to_string(), "16/B374D848");
  EXPECT_EQ(Lsn::parse("0/0")->value(), 0u);
  EXPECT_EQ(Lsn(0).to_string(), "0/0");
  EXPECT_EQ(Lsn::parse("ffffffff/ffffffff")->to_string(), "FFFFFFFF/FFFFFFFF");
  EXPECT_EQ(Lsn::parse("0/26b3d938")->to_string(), "0/26B3D938");
}

TEST(Lsn, RejectsMalformedText) {
  for (const char* bad :
       {"", "/", "16", "16/", "/B3", "16/B374D848x", "1/123456789", "g/1", "1//2", " 1/2"}) {
    EXPECT_FALSE(Lsn::parse(bad)) << bad;
  }
}

TEST(Lsn, OrdersByPosition) {
  EXPECT_LT(*Lsn::parse("0/FFFFFFFF"), *Lsn::parse("1/0"));
  EXPECT_EQ(*Lsn::parse("1/0"), Lsn(0x100000000ull));
}

namespace {
std::string be64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i) {
    s[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xFF);
    v >>= 8;
  }
  return s;
}
}  // namespace

TEST(Wire, ParsesXLogData) {
  const std::string msg =
      "w" + be64(0x16B374D848ull) + be64(0x16B374D900ull) + be64(12345) + R"({"action":"B"})";
  auto x = rep::parse_xlogdata(msg);
  ASSERT_TRUE(x);
  EXPECT_EQ(x->data_start.to_string(), "16/B374D848");
  EXPECT_EQ(x->wal_end.to_string(), "16/B374D900");
  EXPECT_EQ(x->send_time, 12345);
  EXPECT_EQ(x->data, R"({"action":"B"})");
}

TEST(Wire, XLogDataWithEmptyPayloadAndTruncatedHeader) {
  const std::string empty = "w" + be64(1) + be64(2) + be64(3);
  auto x = rep::parse_xlogdata(empty);
  ASSERT_TRUE(x);
  EXPECT_TRUE(x->data.empty());
  EXPECT_FALSE(rep::parse_xlogdata(empty.substr(0, 24)));
  EXPECT_FALSE(rep::parse_xlogdata(std::string_view("k")));
  EXPECT_FALSE(rep::parse_xlogdata(std::string_view{}));
}

TEST(Wire, ParsesKeepalive) {
  const std::string msg = "k" + be64(0x1000) + be64(99) + std::string(1, '\1');
  auto k = rep::parse_keepalive(msg);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->wal_end, Lsn(0x1000));
  EXPECT_EQ(k->send_time, 99);
  EXPECT_TRUE(k->reply_requested);
  const std::string no_reply = "k" + be64(0x1000) + be64(99) + std::string(1, '\0');
  EXPECT_FALSE(rep::parse_keepalive(no_reply)->reply_requested);
  EXPECT_FALSE(rep::parse_keepalive(msg.substr(0, 17)));
  EXPECT_FALSE(rep::parse_keepalive(msg + "x"));
}

TEST(Wire, EncodesStandbyStatusUpdate) {
  std::array<char, rep::kStatusUpdateSize> out{};
  rep::encode_status_update(*Lsn::parse("16/B374D848"), *Lsn::parse("16/B374D000"),
                            *Lsn::parse("16/B374D000"), 0x0102030405060708LL, true, out);
  const std::string got(out.data(), out.size());
  const std::string want = "r" + be64(0x16B374D848ull) + be64(0x16B374D000ull) +
                           be64(0x16B374D000ull) + be64(0x0102030405060708ull) +
                           std::string(1, '\1');
  EXPECT_EQ(got, want);
}

TEST(Wire, ClockIsMicrosecondsSince2000) {
  // 2000-01-01T00:00:00Z is 946684800 s after the Unix epoch.
  EXPECT_EQ(rep::unix_micros_to_pg(946'684'800'000'000LL), 0);
  EXPECT_EQ(rep::unix_micros_to_pg(946'684'801'000'000LL), 1'000'000);
}
