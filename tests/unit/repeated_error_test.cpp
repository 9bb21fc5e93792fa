#include "walrelay/connector/repeated_error.hpp"

#include <gtest/gtest.h>

namespace walrelay {
namespace {

constexpr Lsn kAt{0x37C8CB8};
constexpr const char* kOom =
    "ERROR:  out of memory\nDETAIL:  Cannot enlarge string buffer containing 1073741808 bytes by "
    "32 more bytes.";

TEST(RepeatedErrorGuard, SameErrorAtTheSamePositionCountsUpToTheLimit) {
  RepeatedErrorGuard g(3);
  EXPECT_EQ(g.failed(kAt, "54000", kOom), 1);
  // The old walsender still decoding (55006) and a lost connection in between do not count and
  // do not break the series (shared/cases/CASE-02).
  EXPECT_EQ(g.failed(kAt, "55006", "replication slot is active for PID 42"), 1);
  EXPECT_EQ(g.failed(kAt, "", "server closed the connection unexpectedly"), 1);
  EXPECT_EQ(g.failed(kAt, "54000", kOom), 2);
  EXPECT_FALSE(g.exhausted());
  EXPECT_EQ(g.failed(kAt, "54000", kOom), 3);
  EXPECT_TRUE(g.exhausted());
}

TEST(RepeatedErrorGuard, ProgressAnotherPositionOrAnotherErrorStartsOver) {
  RepeatedErrorGuard g(2);
  EXPECT_EQ(g.failed(kAt, "54000", kOom), 1);
  g.progressed();
  EXPECT_EQ(g.failed(kAt, "54000", kOom), 1);
  EXPECT_EQ(g.failed(Lsn{0x37C8D00}, "54000", kOom), 1);
  EXPECT_EQ(g.failed(Lsn{0x37C8D00}, "XX000", "ERROR:  something else"), 1);
  EXPECT_FALSE(g.exhausted());
  EXPECT_FALSE(RepeatedErrorGuard::can_repeat("57P01"));  // admin shutdown
  EXPECT_FALSE(RepeatedErrorGuard::can_repeat("08006"));
  EXPECT_FALSE(RepeatedErrorGuard::can_repeat("53300"));
  EXPECT_TRUE(RepeatedErrorGuard::can_repeat("XX000"));
}

TEST(RepeatedErrorGuard, AdviceNamesTheCauseAndNeverSkipping) {
  const std::string a = RepeatedErrorGuard::advice("54000", kAt);
  EXPECT_NE(a.find("1 GB"), std::string::npos) << a;
  EXPECT_NE(a.find("never skips"), std::string::npos) << a;
  EXPECT_NE(a.find("pg_replication_slot_advance"), std::string::npos) << a;
  EXPECT_NE(a.find("0/37C8CB8"), std::string::npos) << a;
}

}  // namespace
}  // namespace walrelay
