// Incremental snapshots while streaming (docs/snapshots.md "Incremental snapshots"): signals, the
// watermark window under concurrent writes, SIGKILL and resume, stops, tables added later.

#include <gtest/gtest.h>

#include <algorithm>
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

namespace walrelay::itest {
namespace {

using namespace std::chrono_literals;

// ---- incremental snapshots (while streaming) ------------------------------------------------

// A writer without pauses: many changes fall between a chunk's watermarks.
void hammer(const std::string& conninfo, const std::string& t, std::size_t initial,
            std::atomic<bool>& stop, std::atomic<std::size_t>& ops) {
  Pg pg(conninfo);
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::size_t> pick(1, initial);
  std::size_t next_id = 2'000'000;
  while (!stop.load()) {
    const std::string id = std::to_string(pick(rng));
    switch (ops.load() % 4) {
      case 0:
        pg.exec("UPDATE " + t + " SET v = v + 1, t = 'hot' WHERE id = " + id);
        break;
      case 1:
        pg.exec("UPDATE " + t + " SET id = " + std::to_string(next_id++) + " WHERE id = " + id);
        break;
      case 2:
        pg.exec("DELETE FROM " + t + " WHERE id = " + id);
        break;
      default:
        pg.exec("INSERT INTO " + t + " VALUES (" + id + ", 0, 'back') ON CONFLICT DO NOTHING");
        break;
    }
    ++ops;
  }
}

TEST_F(SnapshotTest,
       IncrementalSnapshotUnderConcurrentWritesEqualsTheTableWithoutLongTransactions) {
  constexpr std::size_t kRows = 4000;
  create_rows_table("hot", kRows);
  auto cfg = make_config({{table("hot")}});    // mode never: nothing read at start
  cfg.snapshot_lines = "  chunk_size: 100\n";  // 40 chunks: one slow chunk is a small share
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> ops{0};
  std::thread writer(hammer, env_.pg_conninfo, table("hot"), kRows, std::ref(stop), std::ref(ops));
  const std::string xid_before = pg_->value("SELECT txid_current()::text");
  WalrelayProcess signal(cfg.to_yaml(), "walrelay snapshot");
  signal.start({"snapshot", "--config", signal.config_path().string(), "--table", table("hot")});
  EXPECT_EQ(signal.wait_exit(30s), 0) << signal.logs();
  // The snapshot connection holds a snapshot only while it reads a chunk: sample its
  // transaction (pg_stat_activity.xact_start, NULL while idle) while the table is read. A
  // snapshot held for the whole read is one transaction in every sample, never idle; chunks read
  // each in their own short transaction show the session idle between them, or several
  // transactions. (Not the session's xmin age: any other session's open transaction, another
  // test's, holds every snapshot's xmin back as well.)
  bool reading = false;
  bool read = false;
  std::size_t samples = 0;
  std::set<std::string> seen;  // the sessions' xact_start in each sample, "idle" when none
  const bool done = wait_until(
      [&] {
        const std::string log = proc.stderr_text();
        if (!reading) {
          reading = log.find("incremental snapshot: reading " + table("hot")) != std::string::npos;
        }
        if (reading && !read) {
          // Every session of the snapshot reader, in one text: a sample is "idle" only when
          // all of them are.
          const auto xact = pg_->scalar(
              "SELECT string_agg(coalesce(xact_start::text, 'idle'), ',' ORDER BY "
              "coalesce(xact_start::text, 'idle')) FROM pg_stat_activity WHERE application_name "
              "LIKE " +
              sql_literal("walrelay-snapshot-" + name_.substr(0, 40) + "%"));
          if (xact) {
            seen.insert(*xact);
            ++samples;
          }
          read = log.find("incremental snapshot: " + table("hot") + " read (") != std::string::npos;
        }
        return log.find("incremental snapshot: " + table("hot") + " done") != std::string::npos;
      },
      120s, 5ms);
  stop = true;
  writer.join();
  ASSERT_TRUE(done) << proc.logs();
  const long xids = std::stol(pg_->value("SELECT (txid_current() - " + xid_before + ")::text"));
  EXPECT_GT(xids, 1000) << "the writer was too slow to test anything";
  ASSERT_GE(samples, 2u) << "the snapshot session was never seen while the table was read\n"
                         << proc.logs();
  const bool idle_seen = std::any_of(seen.begin(), seen.end(), [](const std::string& v) {
    return v.find_first_not_of("idle,") == std::string::npos;  // every session idle
  });
  EXPECT_TRUE(idle_seen || seen.size() >= 2)
      << "one snapshot transaction was held open for the whole read (" << samples
      << " samples, all in transaction " << *seen.begin() << ")";
  // Changes of keys inside a chunk between its watermarks replaced those rows of the chunk.
  std::smatch m;
  const std::string log = proc.stderr_text();
  ASSERT_TRUE(std::regex_search(log, m, std::regex("([0-9]+) rows superseded by streamed changes")))
      << proc.logs();
  EXPECT_GT(std::stoul(m[1]), 0u) << proc.logs();
  ASSERT_TRUE(wait_caught_up(name_)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  expect_topic_equals_table("hot");
  for (const auto& r : kafka_->read_all({topic("hot")}, 60s)) {
    if (r.value && json_string_at(*r.value, "/op") == "r") {
      EXPECT_EQ(json_string_at(*r.value, "/source/snapshot"), "incremental");
      break;
    }
  }
}

TEST_F(SnapshotTest, SigkillDuringAnIncrementalSnapshotResumesAtTheNextChunk) {
  constexpr std::size_t kRows = 200'000;
  create_rows_table("items", kRows);
  auto cfg = make_config({{table("items")}});
  cfg.snapshot_lines = "  chunk_size: 100\n";
  cfg.status_interval =
      "200ms";  // progress is saved when confirmed: often, so the kill lands mid-way
  const std::filesystem::path progress_file =
      std::filesystem::path(cfg.state_dir) / (cfg.slot + ".incremental");
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> ops{0};
  std::thread writer(write_until, env_.pg_conninfo, table("items"), kRows, std::ref(stop),
                     std::ref(ops));
  pg_->exec(
      "SELECT pg_logical_emit_message(true, 'walrelay-signal', "
      "'{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" +
      table("items") + "\"],\"type\":\"incremental\"}}')");
  const std::size_t done_before_kill =
      kill_and_resume(proc, progress_file, kRows / 4, kRows, stop, writer, "items");
  ASSERT_GT(done_before_kill, 0u);
  EXPECT_NE(proc.stderr_text().find("resuming " + table("items") + " after " +
                                    std::to_string(done_before_kill) + " rows"),
            std::string::npos)
      << proc.logs();
  ASSERT_TRUE(wait_caught_up(name_)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  expect_topic_equals_table("items");
  std::size_t reads = 0;
  for (const auto& r : kafka_->read_all({topic("items")}, 120s)) {
    if (r.value && json_string_at(*r.value, "/op") == "r") ++reads;
  }
  EXPECT_LT(reads, kRows + kRows / 4) << "far more reads than rows: the snapshot started over";
}

TEST_F(SnapshotTest, BadSignalsAreReportedAndChangeNothing) {
  create_rows_table("items", 10);
  pg_->exec("CREATE TABLE " + table("nokey") + " (a int, b text)");
  pg_->exec("INSERT INTO " + table("nokey") + " VALUES (1, 'x')");
  WalrelayProcess proc(make_config({{table("items")}, {table("nokey")}}).to_yaml());
  start_streaming(proc, name_);
  auto emit = [&](const std::string& json) {
    pg_->exec("SELECT pg_logical_emit_message(true, 'walrelay-signal', " + sql_literal(json) + ")");
  };
  emit("{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"public.nope\"]}}");
  emit("{\"type\":\"execute-snapshot\",\"data\":");
  emit("{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" + table("nokey") +
       "\"],\"type\":\"incremental\"}}");
  emit("{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" + table("items") +
       "\"],\"type\":\"blocking\"}}");
  EXPECT_TRUE(proc.wait_for_log("public.nope: not a captured row-change table")) << proc.logs();
  EXPECT_TRUE(proc.wait_for_log("not a JSON document")) << proc.logs();
  EXPECT_TRUE(proc.wait_for_log("has no primary key or unique index on NOT NULL columns"))
      << proc.logs();
  EXPECT_TRUE(proc.wait_for_log("`data.type` blocking is not supported")) << proc.logs();
  // Still streaming, and nothing was read.
  pg_->exec("UPDATE " + table("items") + " SET v = 99 WHERE id = 1");
  const auto recs = kafka_->read_at_least({topic("items")}, 1);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  ASSERT_EQ(recs.size(), 1u) << describe(recs);
  EXPECT_EQ(json_string_at(*recs[0].value, "/op"), "u");
  EXPECT_TRUE(kafka_->read_all({topic("nokey")}).empty());
}

// `walrelay snapshot` judges the names before it sends anything: a name that is not a captured
// row-change table (missing, excluded, an outbox table, a glob matching none) is exit 2 with the
// reason and no signal; a captured table (or a glob matching one) is sent; --stop takes any name.
TEST_F(SnapshotTest, TheSnapshotCommandRefusesNamesTheConnectorWouldNotSnapshot) {
  create_rows_table("items", 3);
  pg_->exec("CREATE TABLE " + table("ob") +
            " (id uuid PRIMARY KEY, aggregateid text, aggregatetype text, payload jsonb)");
  const std::string yaml =
      make_config({{table("items")}, {table("ob"), {"topic: \"x.{aggregate_type}\""}}}).to_yaml();
  auto command = [&](const std::vector<std::string>& args, const std::string& label) {
    WalrelayProcess proc(yaml, "walrelay snapshot (" + label + ")");
    std::vector<std::string> all = {"snapshot", "--config", proc.config_path().string()};
    all.insert(all.end(), args.begin(), args.end());
    proc.start(all);
    const int rc = proc.wait_exit(30s);
    return std::pair{rc, proc.stdout_text() + proc.stderr_text()};
  };
  const std::vector<std::pair<std::string, std::string>> refused = {
      {table("nope"), table("nope") + ": no such table"},
      {table("ob"), table("ob") + ": not a captured row-change table"},
      {schema_ + ".none_*", schema_ + ".none_*: matches no captured row-change table"},
  };
  for (const auto& [name, reason] : refused) {
    SCOPED_TRACE(name);
    const auto [rc, out] = command({"--table", table("items"), "--table", name}, name);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find(reason), std::string::npos) << out;
    EXPECT_EQ(out.find("signal sent at LSN"), std::string::npos) << out;
  }
  for (const auto& name : {table("items"), schema_ + ".it*"}) {
    const auto [rc, out] = command({"--table", name}, name);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("signal sent"), std::string::npos) << out;
  }
  const auto [rc, out] = command({"--stop", "--table", table("nope")}, "stop");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("signal sent"), std::string::npos) << out;
}

// A table the role cannot SELECT: the incremental snapshot retries every second and reads it once
// SELECT is granted; meanwhile it says so once, as an error naming the GRANT, and /ready is 503.
TEST_F(SnapshotTest, AnIncrementalSnapshotWithoutSelectIsNotReadyAndNamesTheGrantOnce) {
  const std::string role = name_ + "_nosel";
  const ScopedRole scoped_role(*pg_, role);
  create_rows_table("secret", 3);
  pg_->exec("GRANT USAGE ON SCHEMA " + schema_ + " TO " + sql_ident(role));
  pg_->exec("GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) TO " +
            sql_ident(role));
  auto cfg = make_config({{table("secret")}});  // mode never: nothing read at start
  cfg.conninfo += " user=" + role;
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  WalrelayProcess signal(cfg.to_yaml(), "walrelay snapshot");
  signal.start({"snapshot", "--config", signal.config_path().string(), "--table", table("secret")});
  ASSERT_EQ(signal.wait_exit(30s), 0) << signal.logs();
  ASSERT_TRUE(proc.wait_for_log("Run GRANT SELECT ON \"" + schema_ + "\".\"secret\""))
      << proc.logs();
  const auto port = metrics_port(proc);
  ASSERT_TRUE(port) << proc.logs();
  const HttpResult ready = http_get(*port, "/ready");
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_NE(ready.body.find("permission denied"), std::string::npos) << ready.body;
  std::this_thread::sleep_for(3s);  // a few retries
  const std::string log = proc.stderr_text();
  std::size_t said = 0;
  for (auto at = log.find("Run GRANT SELECT ON"); at != std::string::npos;
       at = log.find("Run GRANT SELECT ON", at + 1)) {
    ++said;
  }
  EXPECT_EQ(said, 1u) << log;
  EXPECT_NE(log.find(" error incremental snapshot: cannot read " + table("secret")),
            std::string::npos)
      << log;
  pg_->exec("GRANT SELECT ON " + table("secret") + " TO " + sql_ident(role));
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("secret") + " done"))
      << proc.logs();
  EXPECT_TRUE(wait_until([&] { return http_get(*port, "/ready").status == 200; }, 30s))
      << http_get(*port, "/ready").body;
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(kafka_->read_all({topic("secret")}).size(), 3u);
}

TEST_F(SnapshotTest, ARowOfTheSignalTableStartsAnIncrementalSnapshot) {
  create_rows_table("items", 30);
  pg_->exec("CREATE TABLE " + table("signals") +
            " (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))");
  auto cfg = make_config({{table("items")}});
  cfg.snapshot_lines = "  signal_table: " + table("signals") + "\n  chunk_size: 7\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  pg_->exec("INSERT INTO " + table("signals") + " VALUES ('ad-hoc-1', 'execute-snapshot', " +
            sql_literal("{\"data-collections\": [\"" + table("items") +
                        "\"], \"type\": \"incremental\"}") +
            ")");
  const auto recs = kafka_->read_at_least({topic("items")}, 30);
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("items") + " done"))
      << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(recs.size(), 30u) << describe(recs);
  EXPECT_TRUE(kafka_->read_all({topic("signals")}).empty());
}

// events.partitions: leaf: a partitioned table's changes go to its leaves' topics, and so must the
// rows of an incremental snapshot signalled for the table (Debezium users name the root): they
// are read leaf by leaf, as the initial snapshot reads them, never into a topic of the root.
TEST_F(SnapshotTest, AnIncrementalSnapshotOfAPartitionedTableGoesToItsLeafTopics) {
  create_partitioned_table("parted", "p_eu", "p_rest", 12, 3);
  auto cfg = make_config({{table("parted")}});  // mode never: nothing read at start
  cfg.snapshot_lines = "  chunk_size: 5\n";
  cfg.extra_yaml = "events:\n  partitions: leaf\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  pg_->exec("SELECT pg_logical_emit_message(true, 'walrelay-signal', " +
            sql_literal("{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" +
                        table("parted") + "\"]}}") +
            ")");
  const auto eu = kafka_->read_at_least({topic("p_eu")}, 4);
  const auto rest = kafka_->read_at_least({topic("p_rest")}, 8);
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("p_rest") + " done", 30s))
      << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(eu.size(), 4u) << describe(eu);
  EXPECT_EQ(rest.size(), 8u) << describe(rest);
  EXPECT_TRUE(kafka_->read_all({topic("parted")}, 5s).empty());
  // The start-up line names the leaves' topics, not the root's.
  EXPECT_NE(proc.stderr_text().find(table("parted") + " → the topics of its 2 leaf partition(s) (" +
                                    table("p_eu") + ", " + table("p_rest") + ")"),
            std::string::npos)
      << proc.logs();
}

// The signal table's rows are signals, never published, also when a `tables` pattern matches it:
// the initial snapshot does not read it, and its updates and deletes are not streamed either.
TEST_F(SnapshotTest, TheSignalTableIsNeverPublishedEvenWhenATablesPatternMatchesIt) {
  create_rows_table("items", 5);
  pg_->exec("CREATE TABLE " + table("signals") +
            " (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))");
  pg_->exec("INSERT INTO " + table("signals") +
            " VALUES ('old-1', 'execute-snapshot', '{\"data-collections\": []}')");
  auto cfg = snapshot_config({{schema_ + ".*"}},
                             "  signal_table: " + table("signals") + "\n  chunk_size: 2\n");
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  pg_->exec("UPDATE " + table("signals") + " SET data = data");
  pg_->exec("DELETE FROM " + table("signals"));
  pg_->exec("INSERT INTO " + table("signals") + " VALUES ('ad-hoc-1', 'execute-snapshot', " +
            sql_literal("{\"data-collections\": [\"" + table("items") + "\"]}") + ")");
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("items") + " done"))
      << proc.logs();
  ASSERT_TRUE(wait_caught_up(name_)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(kafka_->read_all({topic("items")}).size(), 10u);
  const auto signals = kafka_->read_all({topic("signals")}, 5s);
  EXPECT_TRUE(signals.empty()) << describe(signals);
}

// A table signalled again while its incremental snapshot runs starts over (README), whether or not
// one of its chunks is in flight at that moment; it is never refused.
TEST_F(SnapshotTest, ATableSignalledAgainWhileItIsReadStartsOver) {
  constexpr std::size_t kRows = 3000;
  create_rows_table("items", kRows);
  auto cfg = make_config({{table("items")}});
  cfg.snapshot_lines = "  chunk_size: 5\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  const std::string signal =
      "SELECT pg_logical_emit_message(true, 'walrelay-signal', " +
      sql_literal("{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" +
                  table("items") + "\"]}}") +
      ")";
  pg_->exec(signal);
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: reading " + table("items"))) << proc.logs();
  // Some rows of the first run in Kafka before the second signal (else the second run would
  // start over from a table nothing of which was published yet, and nothing could tell them apart).
  ASSERT_GE(kafka_->read_at_least({topic("items")}, 10, 60s).size(), 10u) << proc.logs();
  pg_->exec(signal);
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("items") + " done", 120s))
      << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  const std::string log = proc.stderr_text();
  EXPECT_EQ(log.find("its snapshot is running"), std::string::npos) << proc.logs();
  EXPECT_EQ(log.find("snapshot: " + table("items") + " read ("),
            log.rfind("snapshot: " + table("items") + " read ("))
      << "the first run was not dropped\n"
      << proc.logs();
  const auto records = kafka_->read_all({topic("items")}, 60s);
  EXPECT_EQ(replay(records).size(), kRows);
  EXPECT_GT(records.size(), kRows) << "the second signal did not start the table over";
}

// The `id` header of an incremental snapshot's rows names the read (the chunk's high watermark
// LSN), as the initial snapshot's names its consistent point: two snapshots of one table, the
// second after the first is done and after rows moved between chunks, share no id, and every id
// is that of one key (a consumer deduplicating by `id` never drops a row of the second run).
TEST_F(SnapshotTest, TwoIncrementalSnapshotsOfATableNeverShareAnId) {
  create_rows_table("items", 30);
  auto cfg = make_config({{table("items")}});  // mode never: only the signals read the table
  cfg.snapshot_lines = "  chunk_size: 7\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  const std::string signal =
      "SELECT pg_logical_emit_message(true, 'walrelay-signal', " +
      sql_literal("{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" +
                  table("items") + "\"]}}") +
      ")";
  const std::string done = "incremental snapshot: " + table("items") + " done";
  pg_->exec(signal);
  ASSERT_TRUE(proc.wait_for_log(done, 60s)) << proc.logs();
  // Every later row sits one place earlier in its chunk (and some in an earlier chunk).
  pg_->exec("DELETE FROM " + table("items") + " WHERE id <= 3");
  pg_->exec("INSERT INTO " + table("items") + " SELECT g, 1, 'new' FROM generate_series(31, 35) g");
  pg_->exec(signal);
  ASSERT_TRUE(wait_until([&] { return count_occurrences(proc.stderr_text(), done) >= 2; }, 60s))
      << proc.logs();
  ASSERT_TRUE(wait_caught_up(name_)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  const std::regex shape("[0-9A-F]+/[0-9A-F]+:r:" + schema_ + "\\.items:[0-9]+:[0-9]+");
  std::map<std::string, std::set<std::string>> keys_by_id;
  std::set<std::string> prefixes;  // "<LSN>:r:": one per chunk read
  std::size_t reads = 0;
  for (const auto& r : kafka_->read_all({topic("items")}, 60s)) {
    if (!r.value || json_string_at(*r.value, "/op") != "r") continue;
    ++reads;
    const std::string id = r.header("id");
    EXPECT_TRUE(std::regex_match(id, shape)) << r.describe();
    keys_by_id[id].insert(r.key.value_or("<null>"));
    prefixes.insert(id.substr(0, id.find(":r:")));
  }
  EXPECT_EQ(reads, 30u + 32u);
  EXPECT_EQ(keys_by_id.size(), reads) << "an id was published twice";
  for (const auto& [id, keys] : keys_by_id) {
    EXPECT_EQ(keys.size(), 1u) << id << " names " << keys.size() << " keys";
  }
  // Chunks of 7: 5 in the first run (30 rows), 5 in the second (32 rows), each its own watermark.
  EXPECT_EQ(prefixes.size(), 10u);
}

// A signal's table names may use `*` globs, as `tables` entries do: they name the captured tables
// that match (Debezium's data-collections are patterns too).
TEST_F(SnapshotTest, ASignalsGlobNamesEveryCapturedTableItMatches) {
  create_rows_table("g_one", 3);
  create_rows_table("g_two", 4);
  create_rows_table("other", 5);
  WalrelayProcess proc(
      make_config({{table("g_one")}, {table("g_two")}, {table("other")}}).to_yaml());
  start_streaming(proc, name_);
  pg_->exec("SELECT pg_logical_emit_message(true, 'walrelay-signal', " +
            sql_literal("{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" +
                        schema_ + ".g_*\", \"" + schema_ + ".none_*\"]}}") +
            ")");
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("g_two") + " done"))
      << proc.logs();
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("g_one") + " done"))
      << proc.logs();
  EXPECT_TRUE(proc.wait_for_log(schema_ + ".none_*: matches no captured table")) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(kafka_->read_all({topic("g_one")}).size(), 3u);
  EXPECT_EQ(kafka_->read_all({topic("g_two")}).size(), 4u);
  EXPECT_TRUE(kafka_->read_all({topic("other")}, 5s).empty());
}

// Watermarks are database-wide logical messages: every walrelay on the database (one per slot)
// sees the others'. Another connector's watermark must never be taken for this one's, even when
// its process has the same pid (containers run walrelay as pid 1) and started in the same
// millisecond: here such a connector's low watermark (this chunk's id, read from a test_decoding
// slot, with this slot's name swapped for another's) arrives in the chunk's window, after a
// change the chunk's SELECT did not see. Taken for this one's, it reopened the window and forgot
// the change, and the chunk's older row was published after it (a stale state).
TEST_F(SnapshotTest, AnotherConnectorsWatermarkIsNeverTakenForThisOnes) {
  create_rows_table("items", 3);
  auto cfg = make_config({{table("items")}});
  cfg.extra_yaml = "heartbeat:\n  enabled: false\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  const std::string peek = name_.substr(0, 50) + "_peek";
  pg_->exec("SELECT pg_create_logical_replication_slot(" + sql_literal(peek) +
            ", 'test_decoding')");
  struct DropSlot {
    Pg& pg;
    std::string slot;
    ~DropSlot() { drop_slot_quietly(pg, slot); }
  } drop_peek{*pg_, peek};
  pg_->exec("UPDATE " + table("items") + " SET v = v WHERE id = 1");  // the shape is cached now
  ASSERT_EQ(kafka_->read_at_least({topic("items")}, 1).size(), 1u) << proc.logs();
  Pg locker(env_.pg_conninfo);
  locker.exec("BEGIN; LOCK TABLE " + table("items") + " IN ACCESS EXCLUSIVE MODE");
  pg_->exec("SELECT pg_logical_emit_message(true, 'walrelay-signal', " +
            sql_literal("{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" +
                        table("items") + "\"]}}") +
            ")");
  // The chunk's low watermark is committed and its SELECT (its snapshot taken) waits.
  ASSERT_TRUE(wait_until(
      [&] {
        return pg_->value(
                   "SELECT count(*)::text FROM pg_stat_activity WHERE application_name = "
                   "left(" +
                   sql_literal("walrelay-snapshot-" + name_) +
                   ", 63) AND wait_event_type = 'Lock'") == "1";
      },
      30s))
      << proc.logs();
  const auto low = pg_->scalar(
      "SELECT substring(data FROM 'content:low:(.*)$') FROM pg_logical_slot_peek_changes(" +
      sql_literal(peek) +
      ", NULL, NULL) WHERE data LIKE '%prefix: walrelay-watermark%' AND position(" +
      // Only this connector's: the tests running beside this one write watermarks too.
      sql_literal("content:low:" + name_ + "-") + " IN data) > 0 LIMIT 1");
  ASSERT_TRUE(low.has_value()) << proc.logs();
  std::string foreign = *low;  // the same id of a connector of another slot
  if (foreign.rfind(name_ + "-", 0) == 0)
    foreign = "other_slot-" + foreign.substr(name_.size() + 1);
  locker.exec("UPDATE " + table("items") + " SET v = 12345, t = 'newer' WHERE id = 2");
  locker.exec("SELECT pg_logical_emit_message(true, 'walrelay-watermark', " +
              sql_literal("low:" + foreign) + ")");
  locker.exec("COMMIT");
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("items") + " done"))
      << proc.logs();
  ASSERT_TRUE(wait_caught_up(name_)) << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  expect_topic_equals_table("items");
}

TEST_F(SnapshotTest, AStoppedSnapshotStaysStoppedAndTheNextTableGoesOn) {
  create_rows_table("big", 200'000);
  create_rows_table("small", 10);
  auto cfg = make_config({{table("big")}, {table("small")}});
  cfg.snapshot_lines = "  chunk_size: 100\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  auto signal = [&](const std::string& type) {
    pg_->exec("SELECT pg_logical_emit_message(true, 'walrelay-signal', " +
              sql_literal("{\"type\":\"" + type + "\",\"data\":{\"data-collections\":[\"" +
                          table("big") + "\"" +
                          (type == "execute-snapshot" ? ",\"" + table("small") + "\"" : "") +
                          "],\"type\":\"incremental\"}}") +
              ")");
  };
  signal("execute-snapshot");
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: reading " + table("big"))) << proc.logs();
  signal("stop-snapshot");
  EXPECT_TRUE(proc.wait_for_log("incremental snapshot of " + table("big") + " stopped"))
      << proc.logs();
  EXPECT_TRUE(proc.wait_for_log("incremental snapshot: " + table("small") + " done", 60s))
      << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  WalrelayProcess again(cfg.to_yaml());
  start_streaming(again, name_);
  pg_->exec("UPDATE " + table("small") + " SET v = 5 WHERE id = 1");
  ASSERT_FALSE(kafka_->read_at_least({topic("small")}, 11).empty());
  ASSERT_TRUE(stop_gracefully(again, name_));
  EXPECT_EQ(again.stderr_text().find("resuming " + table("big")), std::string::npos)
      << again.logs();
  EXPECT_EQ(again.stderr_text().find("reading " + table("big")), std::string::npos) << again.logs();
}

TEST_F(SnapshotTest, AnIncrementalSnapshotReadsColumnsAddedSinceStartUp) {
  create_rows_table("items", 20);
  auto cfg = make_config({{table("items")}});
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  pg_->exec("UPDATE " + table("items") + " SET v = v WHERE id = 1");  // the shape is cached now
  ASSERT_EQ(kafka_->read_at_least({topic("items")}, 1).size(), 1u);
  pg_->exec("ALTER TABLE " + table("items") + " ADD COLUMN y int NOT NULL DEFAULT 9");
  pg_->exec("SELECT pg_logical_emit_message(true, 'walrelay-signal', " +
            sql_literal("{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"" +
                        table("items") + "\"]}}") +
            ")");
  const auto recs = kafka_->read_at_least({topic("items")}, 21);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  ASSERT_EQ(recs.size(), 21u) << describe(recs);
  for (const auto& r : recs) {
    if (json_string_at(*r.value, "/op") != "r") continue;
    EXPECT_EQ(json_at(*r.value, "/after/y"), "9") << *r.value;
  }
}

TEST_F(SnapshotTest, ATableAddedToTheConfigurationIsReadWhileStreaming) {
  create_rows_table("first", 5);
  auto cfg = snapshot_config({{table("first")}});
  {
    WalrelayProcess proc(cfg.to_yaml());
    start_streaming(proc, name_);
    ASSERT_EQ(kafka_->read_at_least({topic("first")}, 5).size(), 5u);
    ASSERT_TRUE(stop_gracefully(proc, name_));
  }
  create_rows_table("second", 7);
  cfg.tables.emplace_back(table("second"));
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  const auto second = kafka_->read_at_least({topic("second")}, 7);
  ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("second") + " done"))
      << proc.logs();
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(second.size(), 7u) << describe(second);
  EXPECT_EQ(kafka_->read_all({topic("first")}).size(), 5u) << "the first table was read again";
}

// A slot made by `walrelay slot create` before the first run (snapshot.mode initial): walrelay
// cannot use an exported snapshot, so it reads the rows by an incremental snapshot while streaming.
TEST_F(SnapshotTest, ASlotMadeBySlotCreateIsReadByAnIncrementalSnapshotOnTheFirstRun) {
  expect_existing_slot_is_snapshotted(true, [&](const WalrelayConfig& cfg) {
    std::string out;
    ASSERT_EQ(slot_command(cfg, {"create"}, out), 0);
    EXPECT_NE(out.find("incremental snapshot"), std::string::npos) << out;
  });
}

// The same with a slot a DBA made by SQL (and create_slot: false).
TEST_F(SnapshotTest, ASlotMadeBySqlIsReadByAnIncrementalSnapshotOnTheFirstRun) {
  expect_existing_slot_is_snapshotted(false, [&](const WalrelayConfig&) {
    pg_->exec("SELECT pg_create_logical_replication_slot(" + sql_literal(name_) + ", 'wal2json')");
  });
}

// `walrelay slot drop --yes` removes walrelay's record of the slot and its snapshot progress: the
// next run creates the slot anew (no exit 5) and takes its initial snapshot again.
TEST_F(SnapshotTest, SlotDropRemovesTheRecordAndTheNextRunSnapshotsAgain) {
  create_rows_table("items", 5);
  const auto cfg = snapshot_config({{table("items")}});
  {
    WalrelayProcess proc(cfg.to_yaml());
    start_streaming(proc, name_);
    ASSERT_EQ(kafka_->read_at_least({topic("items")}, 5).size(), 5u);
    ASSERT_TRUE(stop_gracefully(proc, name_));
  }
  const std::filesystem::path dir = cfg.state_dir;
  ASSERT_TRUE(std::filesystem::exists(dir / (name_ + ".state")));
  ASSERT_TRUE(std::filesystem::exists(dir / (name_ + ".snapshot")));
  std::string out;
  ASSERT_EQ(slot_command(cfg, {"drop", "--yes"}, out), 0);
  EXPECT_FALSE(slot_state(*pg_, name_).has_value());
  EXPECT_NE(out.find("removed " + (dir / (name_ + ".state")).string()), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / (name_ + ".state")));
  EXPECT_FALSE(std::filesystem::exists(dir / (name_ + ".snapshot")));
  EXPECT_FALSE(std::filesystem::exists(dir / (name_ + ".incremental")));

  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  const auto recs = kafka_->read_at_least({topic("items")}, 10);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  EXPECT_EQ(recs.size(), 10u) << describe(recs);
  const auto all = ops(kafka_->read_all({topic("items")}));
  EXPECT_EQ(std::count(all.begin(), all.end(), "r"), 10) << "the new slot was not snapshotted";
}

}  // namespace
}  // namespace walrelay::itest
