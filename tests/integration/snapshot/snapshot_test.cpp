// Snapshots end to end (issue "Snapshots"): an initial snapshot under concurrent writes gives every
// key its latest committed state, a SIGKILL in the middle resumes instead of starting over,
// snapshot rows equal streamed rows byte for byte, and outbox / keyless / dropped tables are
// handled as documented.

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

#include "harness.hpp"

namespace walrelay::itest {
namespace {

using namespace std::chrono_literals;

class SnapshotTest : public IntegrationTest {
 protected:
  // A config that snapshots (the harness default is mode: never).
  WalrelayConfig snapshot_config(std::vector<TableEntry> tables, const std::string& lines = "") {
    auto cfg = make_config(std::move(tables));
    cfg.snapshot_mode = "initial";
    cfg.snapshot_lines = lines;
    return cfg;
  }

  // The raw text of a top-level field of a row-change value (`"after":{...}` → `{...}`), exactly
  // as walrelay wrote it.
  static std::string raw_field(const std::string& value, const std::string& field,
                               const std::string& next) {
    const std::string open = "\"" + field + "\":";
    const auto b = value.find(open);
    const auto e = value.find(",\"" + next + "\":", b);
    if (b == std::string::npos || e == std::string::npos) return "<missing " + field + ">";
    return value.substr(b + open.size(), e - b - open.size());
  }

  // Replays a topic as a consumer of a compacted topic would: per key, the last value wins; a
  // delete or a tombstone removes the key. Returns key (minified JSON) → raw `after`.
  static std::map<std::string, std::string> replay(std::vector<KafkaRecord> records) {
    sort_by_partition_order(records);
    std::map<std::string, std::string> state;
    for (const auto& r : records) {
      if (!r.key) continue;
      const std::string key = json_at(*r.key, "");
      if (!r.value) {
        state.erase(key);
        continue;
      }
      const std::string op = json_string_at(*r.value, "/op");
      if (op == "d") {
        state.erase(key);
      } else {
        state[key] = json_at(*r.value, "/after");
      }
    }
    return state;
  }

  // key → row as JSON, built by PostgreSQL itself, in walrelay's native shape for (id int, v int,
  // t text).
  std::map<std::string, std::string> table_state(const std::string& t) {
    std::map<std::string, std::string> state;
    for (const auto& row : pg_->query("SELECT json_build_object('id', id)::text, "
                                      "json_build_object('id', id, 'v', v, 't', t)::text FROM " +
                                      t)) {
      state[json_at(*row[0], "")] = json_at(*row[1], "");
    }
    return state;
  }

  // Waits until the slot has confirmed everything written so far (walrelay acknowledged it all).
  bool wait_caught_up(const std::string& slot) {
    const std::string target = pg_->value("SELECT pg_current_wal_lsn()::text");
    return wait_until(
        [&] {
          return pg_->value("SELECT coalesce(confirmed_flush_lsn >= " + sql_literal(target) +
                            "::pg_lsn, false)::text FROM pg_replication_slots WHERE slot_name = " +
                            sql_literal(slot)) == "true";
        },
        60s);
  }

  // Expects the replayed topic to equal the table, key for key and value for value.
  void expect_topic_equals_table(const std::string& table_name) {
    const auto records = kafka_->read_all({topic(table_name)}, 120s);
    const auto from_kafka = replay(records);
    const auto from_table = table_state(table(table_name));
    ASSERT_EQ(from_kafka.size(), from_table.size());
    std::size_t mismatches = 0;
    for (const auto& [key, row] : from_table) {
      auto it = from_kafka.find(key);
      if (it == from_kafka.end()) {
        if (++mismatches <= 5) ADD_FAILURE() << "key " << key << " missing from the topic";
      } else if (it->second != row) {
        if (++mismatches <= 5)
          ADD_FAILURE() << "key " << key << ": topic " << it->second << ", table " << row;
      }
    }
    for (const auto& [key, row] : from_kafka) {
      if (!from_table.contains(key) && ++mismatches <= 5) {
        ADD_FAILURE() << "deleted key " << key << " is alive in the topic: " << row;
      }
    }
    EXPECT_EQ(mismatches, 0u);
  }

  // Inserts, updates (also of the key) and deletes rows of `t` until `stop`, on its own
  // connection. Ids it inserts start at 1,000,000.
  static void write_until(const std::string& conninfo, const std::string& t, std::size_t initial,
                          std::atomic<bool>& stop, std::atomic<std::size_t>& ops) {
    Pg pg(conninfo);
    std::mt19937 rng(42);
    std::uniform_int_distribution<std::size_t> pick(1, initial);
    std::size_t next_id = 1'000'000;
    while (!stop.load()) {
      const std::size_t id = pick(rng);
      switch (ops.load() % 4) {
        case 0:
          pg.exec("INSERT INTO " + t + " VALUES (" + std::to_string(next_id++) + ", 1, 'new')");
          break;
        case 1:
          pg.exec("UPDATE " + t + " SET v = v + 1, t = 'upd' WHERE id = " + std::to_string(id));
          break;
        case 2:
          pg.exec("UPDATE " + t + " SET id = " + std::to_string(next_id++) +
                  " WHERE id = " + std::to_string(id));
          break;
        default:
          pg.exec("DELETE FROM " + t + " WHERE id = " + std::to_string(id));
          break;
      }
      ++ops;
      std::this_thread::sleep_for(2ms);
    }
  }

  // The first table's acknowledged rows in a progress file (0 while there is none).
  static std::size_t progress_rows(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    std::smatch m;
    const std::string s = text.str();
    if (std::regex_search(s, m, std::regex("rows: ([0-9]+)"))) return std::stoul(m[1]);
    return 0;
  }

  // SIGKILLs `proc` once `progress_file` shows `threshold` acknowledged rows (of `rows`), starts
  // it again and waits until the incremental snapshot of `table_name` is done; then stops the
  // writer. Returns the rows acknowledged before the kill, 0 after recording a failure.
  std::size_t kill_and_resume(WalrelayProcess& proc, const std::filesystem::path& progress_file,
                              std::size_t threshold, std::size_t rows, std::atomic<bool>& stop,
                              std::thread& writer, const std::string& table_name) {
    const bool reached =
        wait_until([&] { return progress_rows(progress_file) >= threshold; }, 120s);
    proc.kill();
    const std::size_t before = progress_rows(progress_file);
    bool completed = false;
    if (reached && before < rows) {
      proc.start();
      completed = proc.wait_for_log("incremental snapshot: " + table(table_name) + " done", 180s);
    }
    stop = true;
    writer.join();
    if (!reached || before >= rows || !completed) {
      ADD_FAILURE() << "progress " << before << " of " << rows
                    << (reached ? "" : ": never reached the kill point")
                    << (before >= rows ? ": finished before the kill" : "") << "\n"
                    << proc.logs();
      return 0;
    }
    return before;
  }

  // `yaml` with at most one chunk in flight to Kafka: the snapshot reads a chunk only once the one
  // before it is acknowledged, so reading a table takes a while (one Kafka round trip a chunk).
  static std::string one_chunk_in_flight(std::string yaml, std::size_t chunk_size) {
    const auto at = yaml.find("kafka:\n");
    if (at != std::string::npos) {
      yaml.insert(at + 7, "  max_in_flight_events: " + std::to_string(chunk_size) + "\n");
    }
    return yaml;
  }

  // `walrelay slot <args...> --config <cfg>`: its exit code; its stdout in `out`.
  int slot_command(const WalrelayConfig& cfg, std::vector<std::string> args, std::string& out) {
    WalrelayProcess cmd(cfg.to_yaml(), "walrelay slot " + args.front());
    args.insert(args.begin(), "slot");
    args.insert(args.end(), {"--config", cmd.config_path().string()});
    cmd.start(args);
    const int rc = cmd.wait_exit(60s);
    out = cmd.stdout_text();
    if (rc != 0) ADD_FAILURE() << cmd.logs();
    return rc;
  }

  // The `op` of every record, in Kafka's order per partition.
  static std::vector<std::string> ops(std::vector<KafkaRecord> records) {
    sort_by_partition_order(records);
    std::vector<std::string> out;
    for (const auto& r : records) {
      if (r.value) out.push_back(json_string_at(*r.value, "/op"));
    }
    return out;
  }

  // A slot that exists before walrelay first runs (made by `make_slot`), 10 rows in the table:
  // the first run reads every row as `r` by an incremental snapshot, saying why, then streams;
  // a second start does not read them again.
  void expect_existing_slot_is_snapshotted(
      bool create_slot, const std::function<void(const WalrelayConfig&)>& make_slot) {
    create_rows_table("items", 10);
    const auto cfg = snapshot_config({{table("items")}}, "  chunk_size: 4\n");
    make_slot(cfg);
    ASSERT_TRUE(slot_state(*pg_, name_).has_value());
    std::string yaml = cfg.to_yaml();
    if (!create_slot) {
      const auto at = yaml.find("create_slot: true");
      ASSERT_NE(at, std::string::npos) << yaml;
      yaml.replace(at, std::string("create_slot: true").size(), "create_slot: false");
    }
    WalrelayProcess proc(yaml);  // its log files are kept across both runs
    start_streaming(proc, name_);
    ASSERT_TRUE(proc.wait_for_log("slot " + name_ + " existed before walrelay")) << proc.logs();
    ASSERT_TRUE(proc.wait_for_log("incremental snapshot: " + table("items") + " done"))
        << proc.logs();
    pg_->exec("INSERT INTO " + table("items") + " VALUES (11, 11, 'new')");
    pg_->exec("UPDATE " + table("items") + " SET v = 99 WHERE id = 1");
    ASSERT_EQ(kafka_->read_at_least({topic("items")}, 12).size(), 12u);
    ASSERT_TRUE(stop_gracefully(proc, name_));
    auto records = kafka_->read_all({topic("items")});
    const auto first = ops(records);
    ASSERT_EQ(first.size(), 12u) << describe(records);
    EXPECT_EQ(std::count(first.begin(), first.end(), "r"), 10) << describe(records);
    EXPECT_EQ(std::count(first.begin(), first.end(), "c"), 1) << describe(records);
    std::erase_if(records, [](const auto& r) { return !r.key || json_at(*r.key, "/id") != "1"; });
    EXPECT_EQ(ops(records), (std::vector<std::string>{"r", "u"})) << describe(records);
    expect_topic_equals_table("items");

    start_streaming(proc, name_);
    pg_->exec("INSERT INTO " + table("items") + " VALUES (12, 12, 'newer')");
    ASSERT_EQ(kafka_->read_at_least({topic("items")}, 13).size(), 13u);
    ASSERT_TRUE(stop_gracefully(proc, name_));
    const auto second = ops(kafka_->read_all({topic("items")}));
    EXPECT_EQ(second.size(), 13u);
    EXPECT_EQ(std::count(second.begin(), second.end(), "r"), 10) << "read again on a restart";
    EXPECT_EQ(count_occurrences(proc.stderr_text(), "existed before walrelay"), 1u) << proc.logs();
  }

  void create_rows_table(const std::string& name, std::size_t rows) {
    pg_->exec("CREATE TABLE " + table(name) + " (id bigint PRIMARY KEY, v int NOT NULL, t text)");
    pg_->exec("INSERT INTO " + table(name) + " SELECT g, g % 1000, 'row ' || g FROM " +
              "generate_series(1, " + std::to_string(rows) + ") g");
    pg_->exec("ANALYZE " + table(name));
  }

  /// A table `root` (id int, region text, v int, then `extra_columns`; key (id, region))
  /// partitioned by list of region into `eu_leaf` (region 'eu') and the default `other_leaf`, with
  /// `rows` rows: id = v = 1..rows, region 'eu' when id % `eu_every` = 0 (else 'us'), and
  /// `extra_values` (SQL expressions, for `extra_columns`).
  void create_partitioned_table(const std::string& root, const std::string& eu_leaf,
                                const std::string& other_leaf, std::size_t rows,
                                std::size_t eu_every, const std::string& extra_columns = "",
                                const std::string& extra_values = "") {
    pg_->exec("CREATE TABLE " + table(root) + " (id int, region text, v int" + extra_columns +
              ", PRIMARY KEY (id, region)) PARTITION BY LIST (region)");
    pg_->exec("CREATE TABLE " + table(eu_leaf) + " PARTITION OF " + table(root) +
              " FOR VALUES IN ('eu')");
    pg_->exec("CREATE TABLE " + table(other_leaf) + " PARTITION OF " + table(root) + " DEFAULT");
    pg_->exec("INSERT INTO " + table(root) + " SELECT g, CASE WHEN g % " +
              std::to_string(eu_every) + " = 0 THEN 'eu' ELSE 'us' END, g" + extra_values +
              " FROM generate_series(1, " + std::to_string(rows) + ") g");
  }
};

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
  auto cfg = make_config({{table("hot")}});  // mode never: nothing read at start
  cfg.snapshot_lines = "  chunk_size: 250\n";
  WalrelayProcess proc(cfg.to_yaml());
  start_streaming(proc, name_);
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> ops{0};
  std::thread writer(hammer, env_.pg_conninfo, table("hot"), kRows, std::ref(stop), std::ref(ops));
  const std::string xid_before = pg_->value("SELECT txid_current()::text");
  WalrelayProcess signal(cfg.to_yaml(), "walrelay snapshot");
  signal.start({"snapshot", "--config", signal.config_path().string(), "--table", table("hot")});
  EXPECT_EQ(signal.wait_exit(30s), 0) << signal.logs();
  // The snapshot connection holds a snapshot only while it reads a chunk: sample its xmin age.
  long max_age = 0;
  const bool done = wait_until(
      [&] {
        const auto age = pg_->scalar(
            "SELECT max(age(backend_xmin))::text FROM pg_stat_activity WHERE application_name "
            "LIKE " +
            sql_literal("walrelay-snapshot-" + name_.substr(0, 40) + "%"));
        if (age) max_age = std::max(max_age, std::stol(*age));
        return proc.stderr_text().find("incremental snapshot: " + table("hot") + " done") !=
               std::string::npos;
      },
      120s);
  stop = true;
  writer.join();
  ASSERT_TRUE(done) << proc.logs();
  const long xids = std::stol(pg_->value("SELECT (txid_current() - " + xid_before + ")::text"));
  EXPECT_GT(xids, 1000) << "the writer was too slow to test anything";
  EXPECT_LT(max_age, xids / 4) << "a snapshot transaction was held open while the table was read";
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
      sql_literal(peek) + ", NULL, NULL) WHERE data LIKE '%prefix: walrelay-watermark%' LIMIT 1");
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
