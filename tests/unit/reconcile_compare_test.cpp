// reconcile's comparison core (reconcile/buckets.hpp, classify.hpp, report.hpp): bucket sums,
// which buckets are expanded and in how many rounds, and the classes of breaks.

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "walrelay/reconcile/buckets.hpp"
#include "walrelay/reconcile/classify.hpp"
#include "walrelay/reconcile/report.hpp"

namespace walrelay::reconcile {
namespace {

const std::string kDigestA(64, 'a');
const std::string kDigestB(64, 'b');

Entry row(std::string id, std::string digest = kDigestA, std::int64_t ts = -1) {
  return Entry{std::move(id), std::move(digest), ts, ""};
}
Entry record(std::string id, std::string digest = kDigestA, std::string where = "t/0@1") {
  return Entry{std::move(id), std::move(digest), 1000, std::move(where)};
}

TEST(ReconcileBuckets, IdenticalSidesHaveNoDifferingBucket) {
  BucketSums a(64);
  BucketSums b(64);
  for (int i = 0; i < 1000; ++i) a.add("id-" + std::to_string(i), kDigestA);
  // The other side in another order: sums do not depend on it.
  for (int i = 999; i >= 0; --i) b.add("id-" + std::to_string(i), kDigestA);
  EXPECT_TRUE(differing_buckets(a, b).empty());
  EXPECT_EQ(a.total(), 1000u);
}

TEST(ReconcileBuckets, OneMissingOneConflictOneDuplicateEachMarkTheirBucket) {
  BucketSums src(1024);
  BucketSums kaf(1024);
  for (int i = 0; i < 100; ++i) {
    const std::string id = "e" + std::to_string(i);
    src.add(id, kDigestA);
    if (i == 7) continue;                        // missing
    kaf.add(id, i == 11 ? kDigestB : kDigestA);  // conflict
    if (i == 13) kaf.add(id, kDigestA);          // duplicate
  }
  const auto diff = differing_buckets(src, kaf);
  std::vector<std::uint32_t> expected = {src.bucket_of("e7"), src.bucket_of("e11"),
                                         src.bucket_of("e13")};
  std::ranges::sort(expected);
  expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
  EXPECT_EQ(diff, expected);
}

TEST(ReconcileBuckets, TombstoneDiffersFromAnyDigest) {
  EXPECT_NE(entry_hash("x", ""), entry_hash("x", std::string(64, '0')));
  EXPECT_NE(entry_hash("x", kDigestA), entry_hash("y", kDigestA));
  EXPECT_EQ(id_hash("abc"), id_hash("abc"));
}

TEST(ReconcileBuckets, RoundsKeepTheirEntriesUnderTheBound) {
  BucketSums a(16);
  BucketSums b(16);
  for (int i = 0; i < 400; ++i) a.add("k" + std::to_string(i), kDigestA);
  std::vector<std::uint32_t> all;
  for (std::uint32_t i = 0; i < 16; ++i) all.push_back(i);
  const auto rounds = plan_rounds(all, a, b, 60);
  std::size_t buckets = 0;
  for (const auto& r : rounds) {
    std::uint64_t entries = 0;
    for (auto x : r) entries += a.count(x) + b.count(x);
    // Each bucket holds ~25 entries: two fit, three do not.
    EXPECT_TRUE(entries <= 60 || r.size() == 1);
    buckets += r.size();
  }
  EXPECT_EQ(buckets, 16u);
  EXPECT_GT(rounds.size(), 4u);
  // A bucket larger than the bound is a round of its own.
  const auto big = plan_rounds({0, 1}, a, b, 3);
  ASSERT_EQ(big.size(), 2u);
  BucketSet set(16, rounds.front());
  EXPECT_TRUE(set.contains(rounds.front().front()));
}

TEST(ReconcileClassify, EachClassWithItsId) {
  std::vector<Entry> src = {row("m", kDigestA, 500), row("c"), row("d"), row("ok")};
  std::vector<Entry> kaf = {record("ok"), record("c", kDigestB, "t/1@9"), record("d"),
                            record("d", kDigestA, "t/0@4"), record("p", kDigestA, "t/2@3")};
  Classification out;
  classify_bucket(src, kaf, /*delivered=*/true, out);
  ASSERT_EQ(out.breaks.size(), 3u);
  // Sorted by id: c, m, p.
  EXPECT_EQ(out.breaks[0].cls, BreakClass::kConflict);
  EXPECT_EQ(out.breaks[0].id, "c");
  EXPECT_NE(out.breaks[0].detail.find("t/1@9"), std::string::npos);
  EXPECT_EQ(out.breaks[1].cls, BreakClass::kMissing);
  EXPECT_EQ(out.breaks[1].id, "m");
  EXPECT_EQ(out.breaks[1].since_ms, 500);
  EXPECT_EQ(out.breaks[2].cls, BreakClass::kPhantom);
  EXPECT_EQ(out.breaks[2].id, "p");
  EXPECT_EQ(out.duplicates, 1u);
  EXPECT_EQ(out.duplicate_ids, std::vector<std::string>{"d"});
}

TEST(ReconcileClassify, MissingIsInFlightWhileThePipelineHasNotPassedTheSnapshot) {
  std::vector<Entry> src = {row("a")};
  std::vector<Entry> kaf;
  Classification out;
  classify_bucket(src, kaf, /*delivered=*/false, out);
  ASSERT_EQ(out.breaks.size(), 1u);
  EXPECT_EQ(out.breaks[0].cls, BreakClass::kInFlight);
}

TEST(ReconcileClassify, DuplicateWithAnotherPayloadIsAConflict) {
  std::vector<Entry> src = {row("a")};
  std::vector<Entry> kaf = {record("a"), record("a", kDigestB, "t/0@2")};
  Classification out;
  classify_bucket(src, kaf, true, out);
  ASSERT_EQ(out.breaks.size(), 1u);
  EXPECT_EQ(out.breaks[0].cls, BreakClass::kConflict);
  EXPECT_EQ(out.duplicates, 0u);
}

TEST(ReconcileClassify, PhantomsOfRowsCommittedAfterTheSnapshotAreDropped) {
  std::vector<Entry> src;
  std::vector<Entry> kaf = {record("new"), record("ghost")};
  Classification out;
  classify_bucket(src, kaf, true, out);
  EXPECT_EQ(phantom_ids(out), (std::vector<std::string>{"ghost", "new"}));
  EXPECT_EQ(resolve_phantoms(out, {"new"}), 1u);
  ASSERT_EQ(out.breaks.size(), 1u);
  EXPECT_EQ(out.breaks[0].id, "ghost");
}

TEST(ReconcileReport, SummaryAndJsonNameEveryBreak) {
  Report r;
  r.now_ms = 3'600'000 + 5000;
  TableReport t;
  t.table = "public.outbox";
  t.topics = {"outbox.event.order"};
  t.source_rows = 10;
  t.kafka_records = 10;
  t.snapshot_lsn = "0/16B3748";
  t.delivered = true;
  t.found.breaks.push_back(Break{BreakClass::kMissing, "e\"1", 5000, ""});
  t.found.duplicates = 2;
  t.found.duplicate_ids = {"e9"};
  r.tables.push_back(t);
  EXPECT_TRUE(r.has_breaks());
  std::ostringstream summary;
  write_summary(summary, r);
  EXPECT_NE(summary.str().find("missing"), std::string::npos) << summary.str();
  EXPECT_NE(summary.str().find("1h0m"), std::string::npos) << summary.str();
  EXPECT_NE(summary.str().find("(not a break)"), std::string::npos) << summary.str();
  std::ostringstream json;
  write_json(json, r);
  EXPECT_NE(json.str().find(R"({"class":"missing","id":"e\"1","since_ms":5000,"age_s":3600)"),
            std::string::npos)
      << json.str();
  EXPECT_NE(json.str().find(R"("breaks":1,)"), std::string::npos) << json.str();
  EXPECT_EQ(format_age(-1), "-");
  EXPECT_EQ(format_age(90'061'000), "1d1h");
}

TEST(ReconcileReport, PollModeNamesFailedRowsAndRowsInFlight) {
  Report r;
  r.now_ms = 120'000;
  TableReport t;
  t.table = "public.event_outbox";
  t.delivered = true;
  t.poll = true;
  t.in_flight_rows = 2;
  t.found.breaks.push_back(
      Break{BreakClass::kFailed, "f-1", 60'000, "attempts 8, last_error: MSG_SIZE_TOO_LARGE"});
  r.tables.push_back(t);
  EXPECT_EQ(to_string(BreakClass::kFailed), "failed");
  EXPECT_EQ(to_string(BreakClass::kNotInInbox), "not_in_inbox");
  EXPECT_EQ(to_string(BreakClass::kPhantomInInbox), "phantom_in_inbox");
  EXPECT_EQ(to_string(BreakClass::kQuarantined), "quarantined");
  EXPECT_EQ(to_string(BreakClass::kDeferred), "deferred");
  std::ostringstream summary;
  write_summary(summary, r);
  EXPECT_NE(summary.str().find("poll mode, 2 pending rows in flight"), std::string::npos)
      << summary.str();
  EXPECT_NE(summary.str().find("failed"), std::string::npos) << summary.str();
  std::ostringstream json;
  write_json(json, r);
  EXPECT_NE(json.str().find(R"("mode":"poll","in_flight_rows":2)"), std::string::npos)
      << json.str();
  EXPECT_NE(json.str().find(R"({"class":"failed","id":"f-1","since_ms":60000,"age_s":60)"),
            std::string::npos)
      << json.str();
}

}  // namespace
}  // namespace walrelay::reconcile
