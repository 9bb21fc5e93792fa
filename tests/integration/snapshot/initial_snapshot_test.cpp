// Initial snapshots end to end: under concurrent writes every key ends at its latest committed
// state, a SIGKILL in the middle resumes instead of starting over, snapshot rows equal streamed
// rows byte for byte, and outbox / keyless / dropped / rewritten tables are handled as documented.

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "snapshot_fixture.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/kafka/admin.hpp"

namespace walrelay::itest {
namespace {

using namespace std::chrono_literals;

TEST_F(SnapshotTest, InitialSnapshotUnderConcurrentWritesEqualsTheTable) {
  constexpr std::size_t kRows = 200'000;
  create_rows_table("items", kRows);
  WalrelayProcess proc(snapshot_config({{table("items")}}, "  chunk_size: 4000\n").to_yaml());
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> ops{0};
  proc.start();
  std::thread writer(write_until, env_.pg_conninfo, table("items"), kRows, std::ref(stop),
                     std::ref(ops));
  const bool completed = proc.wait_for_log("snapshot: complete", 180s);
  const std::size_t ops_during_snapshot = ops.load();
  std::this_thread::sleep_for(1s);  // and some more while streaming
  stop = true;
  writer.join();
  ASSERT_TRUE(completed) << proc.logs();
  EXPECT_GT(ops_during_snapshot, 0u);
  ASSERT_TRUE(wait_slot_active(*pg_, name_)) << proc.logs();
  ASSERT_TRUE(wait_caught_up(name_)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  expect_topic_equals_table("items");
  // Every snapshot row is an `r` event with Debezium's markers: one first, one last.
  const auto records = kafka_->read_all({topic("items")}, 120s);
  std::map<std::string, std::size_t> markers;
  std::set<std::string> times;  // source.ts_us of the `r` events
  std::size_t reads = 0;
  for (const auto& r : records) {
    if (!r.value || json_string_at(*r.value, "/op") != "r") continue;
    ++reads;
    ++markers[json_string_at(*r.value, "/source/snapshot")];
    times.insert(json_at(*r.value, "/source/ts_us"));
    EXPECT_EQ(raw_field(*r.value, "before", "after"), "null");
  }
  // One time for every row read on the exported snapshot (its transaction's now(), as Debezium's
  // CURRENT_TIMESTAMP), not one per chunk: 50 chunks here.
  EXPECT_EQ(times.size(), 1u);
  EXPECT_EQ(markers["first"], 1u);
  EXPECT_EQ(markers["last"], 1u);
  EXPECT_EQ(markers["false"], 0u);
  EXPECT_GE(reads, kRows - ops_during_snapshot);  // rows deleted before the read are not read
  EXPECT_LE(reads, kRows + ops_during_snapshot);
}

TEST_F(SnapshotTest, SigkillDuringTheSnapshotResumesAtTheNextChunk) {
  constexpr std::size_t kRows = 200'000;
  create_rows_table("items", kRows);
  const auto cfg = snapshot_config({{table("items")}}, "  chunk_size: 1000\n");
  const std::filesystem::path progress_file =
      std::filesystem::path(cfg.state_dir) / (cfg.slot + ".snapshot");
  WalrelayProcess proc(cfg.to_yaml());
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> ops{0};
  proc.start();
  std::thread writer(write_until, env_.pg_conninfo, table("items"), kRows, std::ref(stop),
                     std::ref(ops));
  // Kill at about half. The rest is read as an incremental snapshot while streaming, from the
  // next chunk on.
  const std::size_t done_before_kill =
      kill_and_resume(proc, progress_file, kRows / 2, kRows, stop, writer, "items");
  ASSERT_GT(done_before_kill, 0u);
  EXPECT_NE(proc.stderr_text().find("resuming an interrupted snapshot"), std::string::npos)
      << proc.logs();
  EXPECT_NE(proc.stderr_text().find("resuming " + table("items") + " after " +
                                    std::to_string(done_before_kill) + " rows"),
            std::string::npos)
      << proc.logs();
  ASSERT_TRUE(wait_slot_active(*pg_, name_)) << proc.logs();
  ASSERT_TRUE(wait_caught_up(name_)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  expect_topic_equals_table("items");
  // It did not start over: the first chunk was published by the first run only (a chunk read
  // again is the one in flight at the kill, never one already acknowledged).
  const auto records = kafka_->read_all({topic("items")}, 120s);
  std::size_t first_chunk_first_row = 0;
  std::size_t reads = 0;
  for (const auto& r : records) {
    const std::string id = r.header("id");
    if (id.find(":r:") == std::string::npos) continue;
    ++reads;
    if (id.ends_with(":0:0")) ++first_chunk_first_row;
  }
  EXPECT_EQ(first_chunk_first_row, 1u);
  EXPECT_LT(reads, kRows + kRows / 4) << "far more reads than rows: the snapshot started over";
}

// Every type family of the value mapping, in both value formats: the row read by the snapshot
// and the same row streamed afterwards give the same bytes (apart from the id column).
TEST_F(SnapshotTest, SnapshotRowsAndStreamedRowsAreByteIdentical) {
  pg_->exec("CREATE TYPE " + table("mood") + " AS ENUM ('sad', 'happy')");
  pg_->exec("CREATE DOMAIN " + table("posint") + " AS int CHECK (VALUE > 0)");
  const std::string columns =
      "id int PRIMARY KEY, i2 smallint, i4 int, i8 bigint, n numeric(12,3), nu numeric, "
      "r real, d double precision, m money, b boolean, t text, vc varchar(10), c char(3), "
      "ba bytea, dt date, tm time, tmp time(3), tz timetz, ts timestamp, ts3 timestamp(3), "
      "tstz timestamptz, iv interval, u uuid, j json, jb jsonb, ia int[], ta text[], "
      "ip inet, cidr cidr, mac macaddr, pt point, e " +
      table("mood") + ", dom " + table("posint") +
      ", bits bit(3), vb varbit, rng int4range, x xml, tsv tsvector, n0 numeric, nul text";
  const std::string values =
      "-7, 2147483647, 9223372036854775807, 123456789.125, 0.000000000000000000001, 1.5, "
      "-0.1234567890123, 1234.5, true, 'tab\there \"q\" é 😀', 'abc', 'x', '\\x00ff10', "
      "'2024-02-29', '23:59:59.999999', '12:00:00.123', '06:30:00+05:30', "
      "'2024-03-10 06:30:00.123456', '2024-03-10 06:30:00.5', '2024-03-10 06:30:00+02', "
      "'1 year 2 mons 3 days 04:05:06.5', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
      "'{\"k\": [1, 2.50, null]}', '{\"k\": [1, 2.50, null]}', '{1,NULL,3}', "
      "'{\"a b\",NULL,\"c,d\"}', '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', "
      "'(1.5,-2)', 'happy', 5, B'101', B'11', '[1,5)', '<a>x</a>', 'fat cat', "
      "'-12.50', NULL";
  for (const std::string format : {"native", "debezium"}) {
    SCOPED_TRACE(format);
    const std::string name = "types_" + format;
    pg_->exec("CREATE TABLE " + table(name) + " (" + columns + ")");
    pg_->exec("INSERT INTO " + table(name) + " VALUES (1, " + values + ")");
    auto cfg = snapshot_config({{table(name)}});
    cfg.name = cfg.slot = cfg.prefix = name_ + "_" + format;
    cfg.extra_yaml = "events:\n  value_format: " + format + "\n";
    const std::string topic_name = cfg.prefix + "." + schema_ + "." + name;
    WalrelayProcess proc(cfg.to_yaml());
    start_streaming(proc, cfg.slot);
    pg_->exec("INSERT INTO " + table(name) + " VALUES (2, " + values + ")");
    const auto records = kafka_->read_at_least({topic_name}, 2);
    ASSERT_TRUE(stop_gracefully(proc, cfg.slot));
    drop_slot_quietly(*pg_, cfg.slot);
    ASSERT_EQ(records.size(), 2u) << describe(records) << proc.logs();
    std::map<std::string, std::string> after_of;  // op → after without its id
    for (const auto& r : records) {
      ASSERT_TRUE(r.value);
      const std::string op = json_string_at(*r.value, "/op");
      std::string after = raw_field(*r.value, "after", "source");
      const auto comma = after.find(',');
      ASSERT_NE(comma, std::string::npos) << after;
      after_of[op] = after.substr(comma);
    }
    ASSERT_TRUE(after_of.contains("r")) << describe(records);
    ASSERT_TRUE(after_of.contains("c")) << describe(records);
    EXPECT_EQ(after_of["r"], after_of["c"]);
  }
}

TEST_F(SnapshotTest, OutboxTablesAreNotReadKeylessTablesAreReadWhole) {
  const std::string ob = table("outbox");
  pg_->exec("CREATE TABLE " + ob +
            " (id uuid PRIMARY KEY, aggregateid text NOT NULL, aggregatetype text NOT NULL, "
            "payload jsonb)");
  pg_->exec("INSERT INTO " + ob +
            " VALUES ('11111111-1111-1111-1111-111111111111', 'o-1', 'Order', '{}')");
  pg_->exec("CREATE TABLE " + table("log") + " (id int, v int, t text)");  // no key
  // 300 rows in chunks of 100: the last FETCH is empty, and the last row still gets its marker.
  pg_->exec("INSERT INTO " + table("log") + " SELECT g, g, 'x' FROM generate_series(1, 300) g");
  create_rows_table("keyed", 0);
  auto cfg = snapshot_config(
      {{ob, {"topic: \"" + name_ + ".{aggregate_type}\""}}, {table("log")}, {table("keyed")}},
      "  chunk_size: 100\n");
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  const auto log_records = kafka_->read_at_least({topic("log")}, 300);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(log_records.size(), 300u);
  std::size_t last_markers = 0;
  for (const auto& r : log_records) {
    if (r.value && json_string_at(*r.value, "/source/snapshot").starts_with("last")) ++last_markers;
  }
  EXPECT_EQ(last_markers, 1u) << describe(log_records);
  EXPECT_NE(
      proc.stderr_text().find("has no key (no primary key or unique index on NOT NULL columns)"),
      std::string::npos)
      << proc.logs();
  // The outbox's existing row is an event that was already published (or never will be): a
  // snapshot must not publish it again.
  EXPECT_TRUE(kafka_->read_all({name_ + ".Order"}).empty());
  // An empty table completes the snapshot without records.
  EXPECT_TRUE(kafka_->read_all({topic("keyed")}).empty());
  // A restart does not read anything again.
  WalrelayProcess again(cfg.to_yaml());
  start_streaming(again, name_);
  ASSERT_TRUE(stop_gracefully(again, name_));
  EXPECT_EQ(again.stderr_text().find("snapshot:"), std::string::npos) << again.logs();
  EXPECT_EQ(kafka_->read_all({topic("log")}).size(), 300u);
}

TEST_F(SnapshotTest, ModeNeverPublishesNoRowsAndInitialOnlyKeepsNoSlot) {
  create_rows_table("items", 10);
  {
    auto cfg = make_config({{table("items")}});
    cfg.name = cfg.slot = cfg.prefix = name_ + "_never";
    WalrelayProcess proc(cfg.to_yaml());
    start_streaming(proc, cfg.slot);
    pg_->exec("UPDATE " + table("items") + " SET v = 7 WHERE id = 3");
    const auto recs = kafka_->read_at_least({cfg.prefix + "." + schema_ + ".items"}, 1);
    ASSERT_TRUE(stop_gracefully(proc, cfg.slot));
    drop_slot_quietly(*pg_, cfg.slot);
    ASSERT_EQ(recs.size(), 1u) << describe(recs);
    EXPECT_EQ(json_string_at(*recs[0].value, "/op"), "u");
  }
  auto cfg = snapshot_config({{table("items")}});
  cfg.snapshot_mode = "initial_only";
  cfg.name = cfg.slot = cfg.prefix = name_ + "_once";
  WalrelayProcess proc(cfg.to_yaml());
  proc.start();
  EXPECT_EQ(proc.wait_exit(60s), 0) << proc.logs();
  const auto recs = kafka_->read_all({cfg.prefix + "." + schema_ + ".items"});
  EXPECT_EQ(recs.size(), 10u) << describe(recs);
  EXPECT_FALSE(slot_state(*pg_, cfg.slot).has_value());
  EXPECT_EQ(pg_->value("SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE "
                       "'walrelay_snapshot_%'"),
            "0");
}

TEST_F(SnapshotTest, ATableDroppedDuringTheSnapshotIsSkippedAndDdlIsNotBlocked) {
  create_rows_table("doomed", 500'000);
  create_rows_table("kept", 3'000);
  const auto cfg = snapshot_config({{table("doomed")}, {table("kept")}}, "  chunk_size: 200\n");
  const std::filesystem::path progress_file =
      std::filesystem::path(cfg.state_dir) / (cfg.slot + ".snapshot");
  WalrelayProcess proc(cfg.to_yaml());
  proc.start();
  auto progress_text = [&] {
    std::ifstream in(progress_file);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  ASSERT_TRUE(wait_until(
      [&] { return std::regex_search(progress_text(), std::regex("rows: [1-9][0-9]{4}")); }, 120s))
      << proc.logs();
  // The table was read within the snapshot: DROP TABLE must not wait for the whole snapshot.
  pg_->exec("SET lock_timeout = '5s'");
  pg_->exec("DROP TABLE " + table("doomed"));
  EXPECT_TRUE(proc.wait_for_log("snapshot: complete", 120s)) << proc.logs();
  EXPECT_NE(proc.stderr_text().find("was dropped while it was read"), std::string::npos)
      << proc.logs();
  ASSERT_TRUE(wait_slot_active(*pg_, name_)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(kafka_->read_all({topic("kept")}, 60s).size(), 3'000u);
}

// A keyset chunk starts after the last key read, written into its SQL as a literal: quotes,
// backslashes, `$n`, spaces and non-ASCII keys page exactly (each row once), also for a
// composite key with typed (enum, numeric) columns.
TEST_F(SnapshotTest, KeysWithQuotesAndBackslashesPageExactly) {
  pg_->exec("CREATE TYPE " + table("tier") + " AS ENUM ('low', 'mid', 'high')");
  pg_->exec("CREATE TABLE " + table("odd") + " (k text, t " + table("tier") +
            ", n numeric, v int, PRIMARY KEY (k, t, n))");
  pg_->exec(
      "INSERT INTO " + table("odd") +
      " SELECT k, t, n, row_number() OVER () FROM unnest(ARRAY["
      R"('a''b', E'a\\b', E'a\\''b', 'ü', '$1', ' x', 'E''x''', '', '"q"', 'a''b'' OR ''1''=''1')"
      "]) k, unnest(ARRAY['low', 'high']::" +
      table("tier") + "[]) t, unnest(ARRAY[1.5, -2]) n");
  const auto cfg = snapshot_config({{table("odd")}}, "  chunk_size: 3\n");
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  const auto records = kafka_->read_at_least({topic("odd")}, 40);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  std::map<std::string, int> reads;
  for (const auto& r : records) ++reads[r.key.value_or("<null>")];
  EXPECT_EQ(reads.size(), 40u) << describe(records);
  for (const auto& [key, n] : reads) EXPECT_EQ(n, 1) << key;
}

// Debezium's source.sequence is ["<end of the last commit streamed>","<change LSN>"], with null
// first on a new slot's first transaction after its snapshot, also when walrelay's first session
// restarted before it (the wal2json option fallback restarts it on wal2json < 2.6).
TEST_F(SnapshotTest, ANewSlotsFirstStreamedTransactionHasNoLastCommit) {
  create_rows_table("items", 3);
  WalrelayProcess proc(snapshot_config({{table("items")}}).to_yaml());
  start_streaming(proc, name_);
  pg_->exec("INSERT INTO " + table("items") + " (id, v) VALUES (100, 1)");
  pg_->exec("INSERT INTO " + table("items") + " (id, v) VALUES (101, 1)");
  const auto records = kafka_->read_at_least({topic("items")}, 5);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  std::vector<std::string> sequences;
  std::string consistent_point;  // source.lsn of the snapshot rows
  for (const auto& r : records) {
    if (!r.value) continue;
    const std::string op = json_string_at(*r.value, "/op");
    if (op == "c") sequences.push_back(json_string_at(*r.value, "/source/sequence"));
    if (op == "r") consistent_point = json_at(*r.value, "/source/lsn");
  }
  ASSERT_EQ(sequences.size(), 2u) << describe(records);
  ASSERT_FALSE(consistent_point.empty()) << describe(records);
  // null, unless another connector's heartbeat (a logical message every slot decodes, as
  // pgoutput's messages=true sends them to Debezium) committed first (tests run in parallel):
  // never the slot's consistent point, which is no commit.
  EXPECT_FALSE(sequences[0].starts_with("[\"" + consistent_point + "\"")) << sequences[0];
  if (!sequences[0].starts_with("[null,\"")) {
    std::cout << "[sequence] another heartbeat came first: " << sequences[0] << std::endl;
  }
  EXPECT_TRUE(sequences[1].starts_with("[\"")) << sequences[1];
}

TEST_F(SnapshotTest, ChunksUseOnlyKeysThatIdentifyEveryRow) {
  // key_columns over a nullable unique index, and non-unique key_columns: neither may page.
  pg_->exec("CREATE TABLE " + table("nk") + " (a int, b int, v text)");
  pg_->exec("CREATE UNIQUE INDEX ON " + table("nk") + " (a, b)");
  pg_->exec("INSERT INTO " + table("nk") +
            " SELECT g % 5, CASE WHEN g % 3 = 0 THEN NULL ELSE g END, 'x' FROM "
            "generate_series(1, 50) g");
  pg_->exec("CREATE TABLE " + table("orders") + " (order_no int, customer int NOT NULL, v int)");
  pg_->exec("INSERT INTO " + table("orders") + " SELECT g, g % 4, g FROM generate_series(1, 40) g");
  auto cfg = snapshot_config({}, "  chunk_size: 3\n");
  cfg.tables.clear();
  cfg.extra_yaml = "";
  WalrelayConfig c = cfg;
  c.tables = {{table("nk")}, {table("orders")}};
  std::string yaml = c.to_yaml();
  // key_columns for both tables, spliced under their entries.
  for (const auto& [t, keys] : {std::pair{table("nk"), std::string("[a, b]")},
                                std::pair{table("orders"), std::string("[customer]")}}) {
    const std::string entry = "  - name: \"" + t + "\"\n";
    const auto at = yaml.find(entry);
    ASSERT_NE(at, std::string::npos) << yaml;
    yaml.insert(at + entry.size(), "    key_columns: " + keys + "\n");
  }
  WalrelayProcess proc(yaml);
  start_streaming(proc, name_);
  const auto nk = kafka_->read_at_least({topic("nk")}, 50);
  const auto orders = kafka_->read_at_least({topic("orders")}, 40);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(nk.size(), 50u);
  EXPECT_EQ(orders.size(), 40u);
}

// A unique index with a collation of its own (COLLATE "C") over a column whose collation is
// nondeterministic (case-insensitive): 'a' and 'A' are distinct for the index but equal for the
// column's order and comparisons, so keyset chunks on it would skip one of them. It is no key to
// page on: the table is read whole.
TEST_F(SnapshotTest, AUniqueIndexWhoseCollationDiffersFromANondeterministicColumnIsNoChunkKey) {
  pg_->exec("CREATE COLLATION " + table("ci") +
            " (provider = icu, locale = 'und-u-ks-level2', deterministic = false)");
  pg_->exec("CREATE TABLE " + table("names") + " (name text COLLATE " + table("ci") +
            " NOT NULL, v int)");
  pg_->exec("CREATE UNIQUE INDEX ON " + table("names") + " (name COLLATE \"C\")");
  pg_->exec("INSERT INTO " + table("names") +
            " VALUES ('a', 1), ('A', 2), ('b', 3), ('B', 4), ('c', 5), ('C', 6)");
  auto cfg = snapshot_config({{table("names")}}, "  chunk_size: 1\n");
  cfg.snapshot_mode = "initial_only";
  WalrelayProcess proc(cfg.to_yaml());
  proc.start();
  EXPECT_EQ(proc.wait_exit(60s), 0) << proc.logs();
  EXPECT_EQ(kafka_->read_all({topic("names")}, 30s).size(), 6u) << proc.logs();
}

TEST_F(SnapshotTest, RewrittenOrReshapedTablesAreStillReadWhole) {
  create_rows_table("a_big", 300'000);
  create_rows_table("b_small", 1'000);
  pg_->exec("ALTER TABLE " + table("a_big") + " ADD COLUMN x int DEFAULT 7");
  auto cfg = snapshot_config({{table("a_big")}, {table("b_small")}}, "  chunk_size: 200\n");
  const std::filesystem::path progress_file =
      std::filesystem::path(cfg.state_dir) / (cfg.slot + ".snapshot");
  WalrelayProcess proc(cfg.to_yaml());
  proc.start();
  ASSERT_TRUE(wait_until([&] { return progress_rows(progress_file) >= 5'000; }, 120s))
      << proc.logs();
  // While a_big is read: one of its columns goes, and b_small (not read yet) is rewritten.
  pg_->exec("ALTER TABLE " + table("a_big") + " DROP COLUMN x");
  pg_->exec("ALTER TABLE " + table("b_small") + " ALTER COLUMN v TYPE bigint");
  EXPECT_TRUE(proc.wait_for_log("incremental snapshot: " + table("b_small") + " done", 120s))
      << proc.logs();
  EXPECT_NE(proc.stderr_text().find("was rewritten after the slot's consistent point"),
            std::string::npos)
      << proc.logs();
  EXPECT_EQ(proc.stderr_text().find("was dropped while it was read"), std::string::npos)
      << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(replay(kafka_->read_all({topic("a_big")}, 120s)).size(), 300'000u);
  EXPECT_EQ(replay(kafka_->read_all({topic("b_small")}, 60s)).size(), 1'000u);
}

// Tables rewritten after the slot's consistent point but before the snapshot reads them (their new
// files are empty in the exported snapshot's view) are still read whole:
// - a partitioned table (events.partitions: root, read through its root) has no file of its own
//   to compare: every leaf is checked, and it is finished by an incremental snapshot;
// - a table without a key cannot be handed over: it is read at its current state (as after a
//   restart; the stream from the consistent point follows).
// walrelay is stopped (SIGSTOP) while it reads the first table (one chunk in flight at a time),
// so the rewrites land between the consistent point and the other tables' reads.
TEST_F(SnapshotTest, TablesRewrittenBeforeTheyAreReadAreStillReadWhole) {
  create_rows_table("a_first", 600);
  create_partitioned_table("b_parted", "b_eu", "b_other", 30, 2, ", t text", ", 'x'");
  pg_->exec("CREATE TABLE " + table("c_keyless") + " (id int, v int)");
  pg_->exec("INSERT INTO " + table("c_keyless") + " SELECT g, g FROM generate_series(1, 20) g");
  WalrelayProcess proc(one_chunk_in_flight(
      snapshot_config({{table("a_first")}, {table("b_parted")}, {table("c_keyless")}},
                      "  chunk_size: 3\n")
          .to_yaml(),
      3));
  proc.start();
  ASSERT_TRUE(proc.wait_for_log("snapshot: reading " + table("a_first"))) << proc.logs();
  ::kill(proc.pid(), SIGSTOP);
  const bool too_late =
      proc.stderr_text().find("snapshot: reading " + table("b_parted")) != std::string::npos;
  pg_->exec("ALTER TABLE " + table("b_parted") + " ALTER COLUMN v TYPE bigint");
  pg_->exec("ALTER TABLE " + table("c_keyless") + " ALTER COLUMN v TYPE bigint");
  ::kill(proc.pid(), SIGCONT);
  ASSERT_FALSE(too_late) << "the first table was read before walrelay could be paused\n"
                         << proc.logs();
  EXPECT_TRUE(proc.wait_for_log("incremental snapshot: " + table("b_parted") + " done", 60s))
      << proc.logs();
  EXPECT_TRUE(proc.wait_for_log("snapshot: complete", 60s)) << proc.logs();
  EXPECT_NE(proc.stderr_text().find(table("b_parted") + " was rewritten after the slot's"),
            std::string::npos)
      << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(replay(kafka_->read_all({topic("b_parted")}, 30s)).size(), 30u);
  EXPECT_EQ(kafka_->read_all({topic("c_keyless")}, 30s).size(), 20u);
}

// snapshot.mode initial_only has no stream to finish a table rewritten after the temporary
// slot's consistent point (its new file is empty to the exported snapshot): the table is still
// read whole, at its current state, before walrelay exits 0.
TEST_F(SnapshotTest, InitialOnlyReadsATableRewrittenDuringTheSnapshotWhole) {
  create_rows_table("a_first", 600);
  create_rows_table("b_rewritten", 30);
  auto cfg = snapshot_config({{table("a_first")}, {table("b_rewritten")}}, "  chunk_size: 3\n");
  cfg.snapshot_mode = "initial_only";
  WalrelayProcess proc(one_chunk_in_flight(cfg.to_yaml(), 3));
  proc.start();
  ASSERT_TRUE(proc.wait_for_log("snapshot: reading " + table("a_first"))) << proc.logs();
  ::kill(proc.pid(), SIGSTOP);
  const bool too_late =
      proc.stderr_text().find("snapshot: reading " + table("b_rewritten")) != std::string::npos;
  pg_->exec("ALTER TABLE " + table("b_rewritten") + " ALTER COLUMN v TYPE bigint");
  ::kill(proc.pid(), SIGCONT);
  ASSERT_FALSE(too_late) << "the first table was read before walrelay could be paused\n"
                         << proc.logs();
  EXPECT_EQ(proc.wait_exit(60s), 0) << proc.logs();
  EXPECT_EQ(replay(kafka_->read_all({topic("b_rewritten")}, 30s)).size(), 30u) << proc.logs();
  EXPECT_EQ(replay(kafka_->read_all({topic("a_first")}, 30s)).size(), 600u);
}

// Row-level security: a role without BYPASSRLS sees only the rows the table's policies show it,
// while logical decoding streams every row. A snapshot read must not silently leave the others
// out (as pg_dump, it reads with row_security off, which makes such a read an error): walrelay
// reports it and retries, and reads every row once the role may.
TEST_F(SnapshotTest, RowLevelSecurityNeverHidesRowsFromTheSnapshot) {
  const std::string role = name_ + "_rls";
  const ScopedRole scoped_role(*pg_, role);
  pg_->exec("CREATE TABLE " + table("tenants") + " (id int PRIMARY KEY, tenant text, v int)");
  pg_->exec(
      "INSERT INTO " + table("tenants") +
      " SELECT g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, g FROM generate_series(1, 10) g");
  pg_->exec("ALTER TABLE " + table("tenants") + " ENABLE ROW LEVEL SECURITY");
  pg_->exec("CREATE POLICY only_a ON " + table("tenants") + " USING (tenant = 'a')");
  pg_->exec("GRANT USAGE ON SCHEMA " + schema_ + " TO " + sql_ident(role));
  pg_->exec("GRANT SELECT ON " + table("tenants") + " TO " + sql_ident(role));
  auto cfg = snapshot_config({{table("tenants")}}, "  chunk_size: 3\n");
  cfg.snapshot_mode = "initial_only";
  cfg.conninfo += " user=" + role;
  WalrelayProcess proc(cfg.to_yaml());
  proc.start();
  EXPECT_TRUE(proc.wait_for_log("row-level security")) << proc.logs();
  EXPECT_TRUE(proc.running()) << proc.logs();
  pg_->exec("ALTER ROLE " + sql_ident(role) + " BYPASSRLS");
  EXPECT_EQ(proc.wait_exit(60s), 0) << proc.logs();
  EXPECT_EQ(kafka_->read_all({topic("tenants")}, 30s).size(), 10u) << proc.logs();
  // Also 42501 insufficient_privilege, but a GRANT SELECT would not help: not advised.
  EXPECT_EQ(proc.stderr_text().find("Run GRANT SELECT"), std::string::npos) << proc.logs();
  // snapshot.row_security: true: the operator vouches for the policies, which apply.
  pg_->exec("ALTER ROLE " + sql_ident(role) + " NOBYPASSRLS");
  auto with_policies = cfg;
  with_policies.name = with_policies.slot = with_policies.prefix = name_ + "_p";
  with_policies.snapshot_lines += "  row_security: true\n";
  WalrelayProcess again(with_policies.to_yaml());
  again.start();
  EXPECT_EQ(again.wait_exit(60s), 0) << again.logs();
  EXPECT_EQ(kafka_->read_all({name_ + "_p." + schema_ + ".tenants"}, 30s).size(), 5u)
      << again.logs();
}

// A table the role cannot SELECT (42501 insufficient_privilege) during the initial snapshot:
// retried with backoff until granted, and the fix said once, as an error.
TEST_F(SnapshotTest, AnInitialSnapshotWithoutSelectNamesTheGrantOnce) {
  const std::string role = name_ + "_nosel";
  const ScopedRole scoped_role(*pg_, role);
  create_rows_table("secret", 3);
  pg_->exec("GRANT USAGE ON SCHEMA " + schema_ + " TO " + sql_ident(role));
  auto cfg = snapshot_config({{table("secret")}});
  cfg.snapshot_mode = "initial_only";
  cfg.conninfo += " user=" + role;
  WalrelayProcess proc(cfg.to_yaml());
  proc.start();
  const std::string advice =
      "the role of source.conninfo cannot read it. Run GRANT SELECT ON the table TO that role";
  ASSERT_TRUE(proc.wait_for_log(advice)) << proc.logs();
  EXPECT_NE(proc.stderr_text().find("permission denied"), std::string::npos) << proc.logs();
  EXPECT_TRUE(proc.running()) << proc.logs();
  pg_->exec("GRANT SELECT ON " + table("secret") + " TO " + sql_ident(role));
  EXPECT_EQ(proc.wait_exit(60s), 0) << proc.logs();
  EXPECT_EQ(kafka_->read_all({topic("secret")}, 30s).size(), 3u) << proc.logs();
  const std::string log = proc.stderr_text();
  std::size_t said = 0;
  for (auto at = log.find(advice); at != std::string::npos; at = log.find(advice, at + 1)) ++said;
  EXPECT_EQ(said, 1u) << log;
}

// Table inheritance (INHERITS, not declarative partitioning): a child's rows are the child's, and
// wal2json streams their changes under the child's name. A snapshot of the parent reads the
// parent's own rows only (FROM ONLY), for the initial and the incremental snapshot alike;
// otherwise the parent's topic holds copies of the child's rows that no change ever updates.
TEST_F(SnapshotTest, AnInheritanceParentIsReadWithoutItsChildrensRows) {
  pg_->exec("CREATE TABLE " + table("parent") + " (id int PRIMARY KEY, v int, t text)");
  pg_->exec("CREATE TABLE " + table("child") + " (extra int) INHERITS (" + table("parent") + ")");
  pg_->exec("INSERT INTO " + table("parent") + " VALUES (1, 1, 'parent')");
  pg_->exec("INSERT INTO " + table("child") + " VALUES (2, 2, 'child', 7)");
  WalrelayProcess proc(snapshot_config({{table("parent")}}).to_yaml());
  start_streaming(proc, name_);
  pg_->exec("SELECT pg_logical_emit_message(true, 'walrelay-signal', " +
            sql_literal("{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" +
                        table("parent") + "\"]}}") +
            ")");
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("parent") + " done"))
      << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  const auto records = kafka_->read_all({topic("parent")});
  EXPECT_EQ(records.size(), 2u) << describe(records);  // row 1: initial and incremental
  for (const auto& r : records) EXPECT_EQ(r.key.value_or(""), "{\"id\":1}") << r.describe();
}

TEST_F(SnapshotTest, ASecondInstanceWaitsWhileTheFirstTakesTheSnapshot) {
  create_rows_table("items", 60'000);
  const auto cfg = snapshot_config({{table("items")}}, "  chunk_size: 200\n");
  const std::filesystem::path progress_file =
      std::filesystem::path(cfg.state_dir) / (cfg.slot + ".snapshot");
  WalrelayProcess first(cfg.to_yaml(), "first");
  WalrelayProcess second(cfg.to_yaml(), "second");
  first.start();
  ASSERT_TRUE(wait_until([&] { return progress_rows(progress_file) > 0; }, 120s)) << first.logs();
  second.start();
  EXPECT_TRUE(second.wait_for_log("in use by another walrelay")) << second.logs();
  EXPECT_TRUE(first.wait_for_log("snapshot: complete", 120s)) << first.logs();
  ASSERT_TRUE(stop_gracefully(first, name_));
  EXPECT_TRUE(second.wait_for_log("streaming:", 60s)) << second.logs();
  ASSERT_TRUE(stop_gracefully(second, name_));
  EXPECT_EQ(second.stderr_text().find("snapshot:"), std::string::npos) << second.logs();
  EXPECT_EQ(kafka_->read_all({topic("items")}, 60s).size(), 60'000u);
}

TEST_F(SnapshotTest, AnOversizeRowIsDeadLetteredUnderTheDeadLetterPolicy) {
  pg_->exec("CREATE TABLE " + table("docs") + " (id int PRIMARY KEY, body text)");
  pg_->exec("INSERT INTO " + table("docs") +
            " SELECT g, CASE WHEN g = 2 THEN repeat(md5(g::text), 70000) ELSE 'small' END "
            "FROM generate_series(1, 3) g");
  auto cfg = snapshot_config({{table("docs")}});
  cfg.extra_yaml = "errors:\n  policy: dead_letter\n  dead_letter_topic: \"" + name_ + ".dlq\"\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  const auto rows = kafka_->read_at_least({topic("docs")}, 2);
  const auto dlq = kafka_->read_at_least({name_ + ".dlq"}, 1);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  ASSERT_EQ(rows.size(), 2u) << describe(rows);
  ASSERT_EQ(dlq.size(), 1u) << describe(dlq);
  EXPECT_EQ(dlq[0].header("walrelay.error.kind"), "oversize");
  EXPECT_EQ(dlq[0].header("walrelay.source"), table("docs"));
  EXPECT_EQ(dlq[0].key.value_or(""), "{\"id\":2}");
}

// A record the broker refuses in its delivery report (here: larger than its topic's
// max.message.bytes, which the producer's own message.max.bytes does not catch) under the
// dead_letter policy: the snapshot goes on, the row's dead letter carries the same headers as
// the stream's (kind "delivery", reason, source, LSN) and its key, the other table's rows are
// published and the snapshot completes. (One row alone in its topic: the broker refuses a whole
// batch, so rows batched with it would share its fate; see docs/delivery.md.)
TEST_F(SnapshotTest, ARowTheBrokerRefusesIsDeadLetteredAndTheSnapshotCompletes) {
  pg_->exec("CREATE TABLE " + table("docs") + " (id int PRIMARY KEY, body text)");
  // 32 kB of random hex: larger than 4096 bytes after the producer's compression too.
  pg_->exec("INSERT INTO " + table("docs") +
            " SELECT 2, string_agg(md5(random()::text || i), '') FROM generate_series(1, 1000) i");
  pg_->exec("CREATE TABLE " + table("other") + " (id int PRIMARY KEY, body text)");
  pg_->exec("INSERT INTO " + table("other") + " SELECT g, 'small' FROM generate_series(1, 3) g");
  config::KafkaConfig kafka;
  kafka.bootstrap_servers = env_.kafka_bootstrap;
  auto admin = kafka::TopicAdmin::connect(kafka);
  ASSERT_TRUE(admin.has_value()) << admin.error().describe();
  const auto created = kafka::create_topic(
      *admin, {topic("docs"), 1, -1, {{"max.message.bytes", "4096"}}}, std::chrono::seconds(30));
  ASSERT_TRUE(created.has_value()) << created.error().describe();

  auto cfg = snapshot_config({{table("docs")}, {table("other")}});
  cfg.extra_yaml = "errors:\n  policy: dead_letter\n  dead_letter_topic: \"" + name_ + ".dlq\"\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  const auto rows = kafka_->read_at_least({topic("other")}, 3);
  const auto dlq = kafka_->read_at_least({name_ + ".dlq"}, 1);
  EXPECT_TRUE(proc.wait_for_log("snapshot: complete")) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(rows.size(), 3u) << describe(rows);
  EXPECT_TRUE(kafka_->read_all({topic("docs")}, std::chrono::seconds(2)).empty());
  ASSERT_EQ(dlq.size(), 1u) << describe(dlq);
  EXPECT_EQ(dlq[0].header("walrelay.error.kind"), "delivery") << dlq[0].describe();
  EXPECT_NE(dlq[0].header("walrelay.error.reason").find(topic("docs")), std::string::npos)
      << dlq[0].describe();
  EXPECT_EQ(dlq[0].header("walrelay.source"), topic("docs")) << dlq[0].describe();
  EXPECT_FALSE(dlq[0].header("walrelay.lsn").empty()) << dlq[0].describe();
  EXPECT_EQ(dlq[0].key.value_or(""), "{\"id\":2}");
}

// Issue "Debezium drop-in" item 1: keys in the key's declaration order (primary key constraint,
// REPLICA IDENTITY index), for snapshot rows and streamed rows alike.
TEST_F(SnapshotTest, CompositeKeysFollowTheKeysDeclarationOrder) {
  pg_->exec("CREATE TABLE " + table("pk_ba") + " (a int, b text, v text, PRIMARY KEY (b, a))");
  pg_->exec("CREATE TABLE " + table("ri_ba") + " (a int NOT NULL, b text NOT NULL, v text)");
  pg_->exec("CREATE UNIQUE INDEX ri_ba_idx ON " + table("ri_ba") + " (b, a)");
  pg_->exec("ALTER TABLE " + table("ri_ba") + " REPLICA IDENTITY USING INDEX ri_ba_idx");
  for (const auto& t : {table("pk_ba"), table("ri_ba")}) {
    pg_->exec("INSERT INTO " + t + " VALUES (1, 'x', 'read')");
  }
  WalrelayProcess proc(snapshot_config({{table("pk_ba")}, {table("ri_ba")}}).to_yaml());
  start_streaming(proc, name_);
  for (const auto& t : {table("pk_ba"), table("ri_ba")}) {
    pg_->exec("INSERT INTO " + t + " VALUES (2, 'y', 'streamed')");
  }
  const auto recs = kafka_->read_at_least({topic("pk_ba"), topic("ri_ba")}, 4);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  ASSERT_EQ(recs.size(), 4u) << describe(recs);
  for (const auto& r : recs) {
    const std::string op = json_string_at(*r.value, "/op");
    EXPECT_EQ(r.key.value_or(""), op == "r" ? R"({"b":"x","a":1})" : R"({"b":"y","a":2})")
        << r.describe();
  }
}

}  // namespace
}  // namespace walrelay::itest
