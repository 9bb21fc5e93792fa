#pragma once

// The fixture of the snapshot suites (initial_snapshot_test.cpp, incremental_snapshot_test.cpp):
// a table of rows, a walrelay configuration with snapshot settings, and replays of what Kafka
// holds.

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

}  // namespace walrelay::itest
