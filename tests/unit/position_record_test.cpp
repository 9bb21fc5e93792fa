// The position record's value (sink::encode_position / decode_position) with and without the
// snapshot progress it carries in delivery exactly_once, and how that progress is reconciled with
// the local progress file (snapshot::reconcile_progress).

#include "walrelay/sink/position_record.hpp"

#include <gtest/gtest.h>

#include <string>

#include "walrelay/snapshot/snapshot_progress.hpp"

namespace walrelay {
namespace {

using sink::decode_position;
using sink::encode_position;
using sink::StreamPosition;
using snapshot::SnapshotProgress;
using snapshot::TableProgress;

TableProgress table(const std::string& name, std::uint64_t rows, std::uint64_t chunks,
                    std::optional<snapshot::KeyText> key, bool done = false) {
  TableProgress t = snapshot::table_progress("public", name, done);
  t.rows = rows;
  t.chunks = chunks;
  t.last_key = std::move(key);
  return t;
}

SnapshotProgress progress(std::vector<TableProgress> tables, Lsn lsn = Lsn(0x16B3000)) {
  SnapshotProgress p;
  p.slot = "walrelay_app";
  p.lsn = lsn;
  p.xid = 741;
  p.tables = std::move(tables);
  return p;
}

TEST(PositionRecord, WithoutSnapshotProgressKeepsTheOlderForm) {
  const StreamPosition p{"7312345678901234567", 1, Lsn(0x16B3748), -1, {}, {}};
  const std::string text = encode_position(p);
  EXPECT_EQ(text,
            R"({"system_id":"7312345678901234567","timeline":1,"lsn":"0/16B3748","index":-1})");
  EXPECT_EQ(decode_position(text), p);
}

TEST(PositionRecord, OlderRecordsStillParse) {
  // As walrelay wrote them before the snapshot progress was added (and with members in another
  // order, or unknown ones: a later walrelay's).
  const auto old = decode_position(R"({"system_id":"42","timeline":3,"lsn":"1/A0","index":17})");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->system_id, "42");
  EXPECT_EQ(old->timeline, 3u);
  EXPECT_EQ(old->lsn, Lsn(0x1000000A0));
  EXPECT_EQ(old->index, 17);
  EXPECT_FALSE(old->snapshot.has_value());
  EXPECT_FALSE(old->incremental.has_value());
  const auto reordered = decode_position(
      R"({"index":-1,"lsn":"0/10","later":{"x":[1]},"timeline":1,"system_id":"1"})");
  ASSERT_TRUE(reordered.has_value());
  EXPECT_EQ(reordered->lsn, Lsn(0x10));
}

TEST(PositionRecord, SnapshotProgressRoundTrips) {
  StreamPosition p{"7312345678901234567", 2, Lsn(0x16B3748), 41, {}, {}};
  p.snapshot =
      progress({table("orders", 16384, 2, snapshot::KeyText{"16384"}),
                table("done", 3, 1, snapshot::KeyText{"a \"quoted\"\\ key", std::nullopt}, true),
                table("keyless", 0, 0, std::nullopt)});
  p.snapshot->resumed = true;
  p.incremental = progress({table("late", 700, 1, snapshot::KeyText{"700", "x\ny"})}, Lsn{});
  p.incremental->xid = 0;
  const std::string text = encode_position(p);
  EXPECT_NE(text.find(R"("snapshot":{"slot":"walrelay_app","lsn":"0/16B3000","xid":741,)"
                      R"("resumed":true,"tables":[{"schema":"public","table":"orders",)"
                      R"("done":false,"rows":16384,"chunks":2,"last_key":["16384"]})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("last_key":["a \"quoted\"\\ key",null])"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("incremental":{"slot":"walrelay_app","lsn":"0/0","xid":0,)"),
            std::string::npos)
      << text;
  const auto back = decode_position(text);
  ASSERT_TRUE(back.has_value()) << text;
  EXPECT_EQ(*back, p);
  EXPECT_FALSE(back->snapshot->tables[2].last_key.has_value());
}

TEST(PositionRecord, MalformedValuesAreRejected) {
  EXPECT_FALSE(decode_position("{}"));
  EXPECT_FALSE(decode_position("not json"));
  EXPECT_FALSE(decode_position(R"({"system_id":"1","timeline":1,"lsn":"x","index":-1})"));
  EXPECT_FALSE(decode_position(R"({"system_id":"1","timeline":1,"lsn":"0/10","index":-2})"));
  EXPECT_FALSE(decode_position(R"({"system_id":1,"timeline":1,"lsn":"0/10","index":-1})"));
  EXPECT_FALSE(
      decode_position(R"({"system_id":"1","timeline":4294967296,"lsn":"0/10","index":-1})"));
  const std::string head = R"({"system_id":"1","timeline":1,"lsn":"0/10","index":-1,)";
  EXPECT_FALSE(decode_position(head + R"("snapshot":{"slot":"s"}})"));
  EXPECT_FALSE(decode_position(
      head + R"("snapshot":{"slot":"s","lsn":"0/1","xid":1,"resumed":false,"tables":[)"
             R"({"schema":"p","table":"t","done":false,"rows":1,"chunks":1,"last_key":[1]}]}})"));
  EXPECT_TRUE(decode_position(
      head + R"("snapshot":{"slot":"s","lsn":"0/1","xid":1,"resumed":false,"tables":[]}})"));
}

TEST(ReconcileProgress, KafkaWinsForTheTablesItLists) {
  // The local file lags (a crash between the Kafka commit and the local save) for `orders`, is
  // ahead for `items` (Kafka lost it), and lists `queued`, which Kafka has not seen yet.
  const SnapshotProgress local = progress({table("orders", 700, 1, snapshot::KeyText{"700"}),
                                           table("items", 2100, 3, snapshot::KeyText{"2100"}),
                                           table("queued", 0, 0, std::nullopt)});
  const SnapshotProgress kafka = progress({table("orders", 1750, 3, snapshot::KeyText{"1750"}),
                                           table("items", 1400, 2, snapshot::KeyText{"1400"})});
  std::vector<std::string> changed;
  const SnapshotProgress merged = snapshot::reconcile_progress(local, kafka, &changed);
  ASSERT_EQ(merged.tables.size(), 3u);
  EXPECT_EQ(merged.tables[0], kafka.tables[0]);
  EXPECT_EQ(merged.tables[1], kafka.tables[1]);
  EXPECT_EQ(merged.tables[2], local.tables[2]);
  EXPECT_EQ(changed, (std::vector<std::string>{"public.orders", "public.items"}));
  // Equal entries are no change.
  changed.clear();
  EXPECT_EQ(snapshot::reconcile_progress(merged, kafka, &changed), merged);
  EXPECT_TRUE(changed.empty());
}

TEST(ReconcileProgress, WithoutALocalFileKafkasIsTaken) {
  SnapshotProgress kafka = progress({table("orders", 10, 1, snapshot::KeyText{"10"}, true)});
  kafka.resumed = true;
  std::vector<std::string> changed;
  EXPECT_EQ(snapshot::reconcile_progress(std::nullopt, kafka, &changed), kafka);
  EXPECT_EQ(changed.size(), 1u);
}

}  // namespace
}  // namespace walrelay
