// The acceptance test of "walrelay is a drop-in for Debezium": the real Debezium PostgreSQL
// connector (3.6.1.Final in a Kafka Connect 4.3.0 standalone worker, started by connect.sh) and
// walrelay (events.value_format: debezium) capture the same tables of one database into one Kafka
// broker, and their topics are compared record by record: partition by partition in offset order,
// key bytes, headers, tombstones, and every field of the value with its exact JSON text and the
// envelope's field order.
//
// Every difference fails the test unless it is in kAllowed below, which is split into what walrelay
// does on purpose (INTENDED) and walrelay bugs still open (NOT YET FIXED). An allowed entry that no
// longer matches anything is reported as a note, so the list shrinks as fixes land.
//
// Three comparisons (pairs of a Debezium connector and a walrelay instance configured alike) run
// at once, their Debezium connectors in one Connect worker:
// - main (decimal.handling.mode=precise): workload/setup.sql (one table per type family of
//   docs/events.md "Value mapping" table, keys and replica identities, TOAST, partitions; rows both
//   connectors snapshot) and workload/stream.sql (inserts, updates, key changes, deletes,
//   TRUNCATE, multi-statement transactions);
// - string and double (decimal.handling.mode / events.decimal_handling): one table of numeric,
//   money and numeric arrays in a schema of its own, workload/decimals_setup.sql and
//   workload/decimals_stream.sql.

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "record_comparer.hpp"

#ifndef WALRELAY_CONNECT_SCRIPT
#error "WALRELAY_CONNECT_SCRIPT must be defined (path of tests/debezium/connect.sh)"
#endif
#ifndef WALRELAY_DEBEZIUM_WORKLOAD_DIR
#error "WALRELAY_DEBEZIUM_WORKLOAD_DIR must be defined (path of tests/debezium/workload)"
#endif

namespace walrelay::itest {
namespace {

using namespace std::chrono_literals;

// ================================================================================ the fixture

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// The statements of a workload file: each ends with `;` at the end of a line; `--` lines are
/// comments.
std::vector<std::string> sql_statements(const std::filesystem::path& file) {
  std::istringstream in(read_text(file));
  std::vector<std::string> out;
  std::string current;
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line.compare(first, 2, "--") == 0) continue;
    current += line + "\n";
    const auto last = line.find_last_not_of(" \t\r");
    if (last != std::string::npos && line[last] == ';') {
      out.push_back(current);
      current.clear();
    }
  }
  if (current.find_first_not_of(" \t\n") != std::string::npos) out.push_back(current);
  return out;
}

/// Record counts of every topic with a prefix (high minus low watermark, summed over partitions).
std::map<std::string, std::int64_t> topic_counts(const std::string& bootstrap,
                                                 const std::string& prefix) {
  rd_kafka_t* rk = new_assign_consumer(bootstrap, {});
  std::map<std::string, std::int64_t> out;
  const rd_kafka_metadata_t* md = nullptr;
  if (rd_kafka_metadata(rk, 1, nullptr, &md, 10'000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    for (int i = 0; i < md->topic_cnt; ++i) {
      const rd_kafka_metadata_topic_t& t = md->topics[i];
      const std::string name = t.topic;
      if (!name.starts_with(prefix) || t.err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
      std::int64_t n = 0;
      for (int j = 0; j < t.partition_cnt; ++j) {
        std::int64_t lo = 0;
        std::int64_t hi = 0;
        if (rd_kafka_query_watermark_offsets(rk, t.topic, t.partitions[j].id, &lo, &hi, 10'000) ==
            RD_KAFKA_RESP_ERR_NO_ERROR) {
          n += hi - lo;
        }
      }
      out[name.substr(prefix.size())] = n;
    }
    rd_kafka_metadata_destroy(md);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return out;
}

std::string tail(const std::string& text, std::size_t lines) {
  std::size_t pos = text.size();
  for (std::size_t n = 0; n <= lines && pos != std::string::npos && pos > 0; ++n) {
    pos = text.rfind('\n', pos - 1);
  }
  return pos == std::string::npos ? text : text.substr(pos + 1);
}

/// The topics of `counts` (topic_counts()) that start with `prefix`, the prefix taken off.
std::map<std::string, std::int64_t> with_prefix(const std::map<std::string, std::int64_t>& counts,
                                                const std::string& prefix) {
  std::map<std::string, std::int64_t> out;
  for (const auto& [topic, n] : counts) {
    if (topic.starts_with(prefix)) out[topic.substr(prefix.size())] = n;
  }
  return out;
}

/// The Kafka Connect worker run by connect.sh; stopped on destruction (also after a failure).
class ConnectWorker {
 public:
  explicit ConnectWorker(std::filesystem::path dir) : dir_(std::move(dir)) {}
  ~ConnectWorker() { stop(); }
  ConnectWorker(const ConnectWorker&) = delete;
  ConnectWorker& operator=(const ConnectWorker&) = delete;

  /// Starts one worker running every connector of `connectors` (the text of each one's
  /// .properties file).
  void start(const std::string& worker_props, const std::vector<std::string>& connectors) {
    std::ofstream(dir_ / "worker.properties") << worker_props;
    std::string cmd = shell(WALRELAY_CONNECT_SCRIPT) + " start " + shell(dir_.string()) + " " +
                      shell((dir_ / "worker.properties").string());
    for (std::size_t i = 0; i < connectors.size(); ++i) {
      const auto file = dir_ / ("connector-" + std::to_string(i) + ".properties");
      std::ofstream(file) << connectors[i];
      cmd += " " + shell(file.string());
    }
    started_ = true;
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  }

  void stop() {
    if (!started_) return;
    started_ = false;
    const std::string cmd = shell(WALRELAY_CONNECT_SCRIPT) + " stop " + shell(dir_.string());
    if (std::system(cmd.c_str()) != 0) std::cerr << "[debezium] failed: " << cmd << "\n";
  }

  /// False once the JVM has exited.
  [[nodiscard]] bool running() const {
    std::ifstream in(dir_ / "connect.pid");
    pid_t pid = -1;
    in >> pid;
    return pid > 0 && ::kill(pid, 0) == 0;
  }

  [[nodiscard]] std::string log() const {
    try {
      return read_text(dir_ / "connect.log");
    } catch (const std::exception&) {
      return "";
    }
  }

 private:
  static std::string shell(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out.push_back(c);
      }
    }
    return out + "'";
  }

  std::filesystem::path dir_;
  bool started_ = false;
};

/// One comparison of the suite: a Debezium connector and the walrelay instance configured like it
/// capture the same tables, each into topics of its own prefix, and those topics are compared
/// record by record. Every pair runs at the same time: one Connect worker runs every pair's
/// Debezium connector.
struct Pair {
  std::string name;     ///< kAllowed's `pair`: "main", "string", "double"
  std::string decimal;  ///< decimal.handling.mode = events.decimal_handling
  std::string schema;   ///< the schema of its tables
  std::string dbz;      ///< Debezium's connector name, slot, publication and topic prefix
  std::string wr;       ///< walrelay's connector name, slot and topic prefix
  std::map<std::string, std::int64_t> snapshot_counts;  ///< records per table after the snapshot
  std::map<std::string, std::int64_t> final_counts;     ///< ... and after the streaming workload
  std::unique_ptr<WalrelayProcess> walrelay;
};

class DebeziumCompatTest : public IntegrationTest {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    if (HasFatalFailure()) return;
    decimals_schema_ = name_ + "_dec";
    pg_->exec("CREATE SCHEMA " + sql_ident(decimals_schema_));
    // main: every type family of README's value mapping, Debezium's default decimal.handling.mode;
    // string and double: the decimals table in those modes. Names: `<name>_dbz[_<pair>]` and
    // `<name>_wr[_<pair>]`.
    const std::tuple<std::string, std::string, std::string> specs[] = {
        {"main", "precise", schema_},
        {"string", "string", decimals_schema_},
        {"double", "double", decimals_schema_}};
    for (const auto& [pair, decimal, schema] : specs) {
      const std::string suffix = pair == "main" ? "" : "_" + pair;
      Pair p;
      p.name = pair;
      p.decimal = decimal;
      p.schema = schema;
      p.dbz = name_ + "_dbz" + suffix;
      p.wr = name_ + "_wr" + suffix;
      pairs_.push_back(std::move(p));
    }
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "walrelay-debezium-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }

  void TearDown() override {
    if (connect_) connect_->stop();
    for (auto& p : pairs_) p.walrelay.reset();  // kills it if still running; logs on a failure
    if (pg_) {
      for (const auto& p : pairs_) {
        drop_slot_quietly(*pg_, p.dbz);
        drop_slot_quietly(*pg_, p.wr);
        try {
          pg_->exec("DROP PUBLICATION IF EXISTS " + sql_ident(p.dbz));
        } catch (const std::exception& e) {
          std::cerr << "[debezium] could not drop publication " << p.dbz << ": " << e.what()
                    << "\n";
        }
      }
      try {
        pg_->exec("DROP SCHEMA IF EXISTS " + sql_ident(decimals_schema_) + " CASCADE");
      } catch (const std::exception& e) {
        std::cerr << "[debezium] could not drop schema " << decimals_schema_ << ": " << e.what()
                  << "\n";
      }
    }
    if (HasFailure()) {
      std::cerr << "[debezium] Connect files kept in " << dir_.string() << "\n";
    } else {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
    IntegrationTest::TearDown();
  }

  Pair& pair(const std::string& name) {
    for (auto& p : pairs_) {
      if (p.name == name) return p;
    }
    throw std::logic_error("no pair " + name);
  }

  /// Runs a workload file in `schema` (hstore from public), statement by statement.
  void run_sql_file(const std::string& schema, const std::string& file) {
    Pg pg(env_.pg_conninfo);
    pg.exec("SET search_path TO " + sql_ident(schema) + ", public");
    for (const auto& st :
         sql_statements(std::filesystem::path(WALRELAY_DEBEZIUM_WORKLOAD_DIR) / file)) {
      pg.exec(st);
    }
  }

  /// Row counts of the regular tables (leaf partitions included, partitioned roots not) of a
  /// schema: the records of their snapshots.
  std::map<std::string, std::int64_t> table_rows(const std::string& schema) {
    std::map<std::string, std::int64_t> out;
    for (const auto& row : pg_->query(
             "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
             "WHERE n.nspname = " +
             sql_literal(schema) + " AND c.relkind = 'r' ORDER BY 1")) {
      out[*row[0]] = std::stoll(
          pg_->value("SELECT count(*) FROM " + sql_ident(schema) + "." + sql_ident(*row[0])));
    }
    return out;
  }

  std::string worker_properties() const {
    return "bootstrap.servers=" + env_.kafka_bootstrap +
           "\n"
           "key.converter=org.apache.kafka.connect.json.JsonConverter\n"
           "value.converter=org.apache.kafka.connect.json.JsonConverter\n"
           "key.converter.schemas.enable=false\n"
           "value.converter.schemas.enable=false\n"
           "offset.storage.file.filename=" +
           (dir_ / "offsets").string() +
           "\n"
           "offset.flush.interval.ms=1000\n"
           "listeners=http://127.0.0.1:0\n";
  }

  /// A pair's Debezium configuration: the equivalent of walrelay_yaml(), property by property.
  /// `include`: table.include.list (regexes; in .properties a backslash escapes, `\\.` is `\.`);
  /// `extra`: more property lines.
  std::string connector_properties(const Pair& p, const std::string& include,
                                   const std::string& extra) const {
    // host and port from the test conninfo ("host=... port=... dbname=... user=...").
    auto conninfo_value = [&](const std::string& key) {
      std::istringstream in(env_.pg_conninfo);
      std::string word;
      while (in >> word) {
        if (word.starts_with(key + "=")) return word.substr(key.size() + 1);
      }
      return std::string();
    };
    return "name=" + p.dbz +
           "\n"
           "connector.class=io.debezium.connector.postgresql.PostgresConnector\n"
           "tasks.max=1\n"
           "database.hostname=" +
           conninfo_value("host") + "\ndatabase.port=" + conninfo_value("port") +
           "\ndatabase.user=" + conninfo_value("user") +
           "\n"
           "database.password=x\n"
           "database.dbname=" +
           conninfo_value("dbname") + "\ntopic.prefix=" + p.dbz +
           "\n"
           "plugin.name=pgoutput\n"
           "slot.name=" +
           p.dbz + "\npublication.name=" + p.dbz +
           "\n"
           "publication.autocreate.mode=filtered\n"
           "table.include.list=" +
           include +
           "\n"
           "snapshot.mode=initial\n"
           "skipped.operations=none\n"
           "tombstones.on.delete=true\n"
           // walrelay's value_format: debezium is Debezium's defaults for the last two, and
           // decimal.handling.mode is events.decimal_handling.
           "decimal.handling.mode=" +
           p.decimal +
           "\n"
           "time.precision.mode=adaptive\n"
           "binary.handling.mode=bytes\n"
           // Logical messages are database-wide: walrelay's heartbeats, watermarks and signals,
           // and other tests' message outboxes, must not become records here (walrelay publishes
           // only the message prefixes configured under `messages:`, none here).
           "message.prefix.exclude.list=.*\n" +
           extra;
  }

  /// A pair's walrelay configuration, capturing `tables` (`tables[].name` patterns, in order).
  std::string walrelay_yaml(const Pair& p, const std::vector<std::string>& tables) const {
    WalrelayConfig cfg = WalrelayConfig::for_test(env_, p.wr);
    cfg.tables.clear();
    for (const auto& t : tables) cfg.tables.emplace_back(t);
    cfg.snapshot_mode = "initial";
    cfg.extra_yaml =
        "events:\n"
        "  value_format: debezium\n"
        "  decimal_handling: " +
        p.decimal +
        "\n"
        "  operations: [c, u, d, t]\n"
        "  partitions: leaf\n"
        "heartbeat:\n"
        "  enabled: false\n";
    return cfg.to_yaml();
  }

  /// The main pair's configurations (setup.sql's tables).
  std::pair<std::string, std::string> main_configs(const Pair& p) const {
    const std::string& s = p.schema;
    // walrelay's `tables:` in the same order (keycols first, then the schema's tables sorted):
    // the order decides the snapshot markers first/last. Partitioned roots are left out:
    // Debezium snapshots a root's rows under the root and streams them under the leaves
    // (walrelay's events.partitions: leaf).
    const std::string props =
        connector_properties(p, s + "\\\\.keycols," + s + "\\\\.(?!parted$).*",
                             "message.key.columns=" + s + ".keycols:c,a\n");
    std::string yaml = walrelay_yaml(p, {s + ".keycols", s + ".*"});
    const std::string entry = "  - name: \"" + s + ".keycols\"\n";
    const auto at = yaml.find(entry);
    if (at == std::string::npos) throw std::runtime_error("no keycols entry in\n" + yaml);
    yaml.insert(at + entry.size(), "    key_columns: [c, a]\n");
    return {props, yaml};
  }

  /// A decimals pair's configurations (decimals_setup.sql's table).
  std::pair<std::string, std::string> decimals_configs(const Pair& p) const {
    return {connector_properties(p, p.schema + "\\\\.decimals", ""),
            walrelay_yaml(p, {p.schema + ".decimals"})};
  }

  /// Waits until both sides of every pair hold the expected records in each table's topic (and
  /// nothing else): the snapshot counts, or with `final` the final ones; then until the counts
  /// stay the same for a moment. Returns false (after a failure naming what is missing) on a
  /// timeout or when a connector exited.
  bool wait_for_counts(bool final, std::chrono::milliseconds timeout) {
    struct Seen {
      std::map<std::string, std::int64_t> want;
      std::map<std::string, std::int64_t> dbz;
      std::map<std::string, std::int64_t> wr;
    };
    std::vector<Seen> seen(pairs_.size());
    auto reached = [&] {
      // One metadata request for every pair: all prefixes start with `<name>_`.
      const auto all = topic_counts(env_.kafka_bootstrap, name_ + "_");
      bool ok = true;
      for (std::size_t i = 0; i < pairs_.size(); ++i) {
        const Pair& p = pairs_[i];
        Seen& s = seen[i];
        s.want.clear();
        for (const auto& [t, n] : final ? p.final_counts : p.snapshot_counts) {
          s.want[p.schema + "." + t] = n;
        }
        s.dbz = with_prefix(all, p.dbz.substr(name_.size() + 1) + ".");
        s.wr = with_prefix(all, p.wr.substr(name_.size() + 1) + ".");
        ok = ok && s.dbz == s.want && s.wr == s.want;
      }
      return ok;
    };
    auto walrelays_running = [&] {
      return std::all_of(pairs_.begin(), pairs_.end(),
                         [](Pair& p) { return p.walrelay->running(); });
    };
    const bool ok = wait_until(
        [&] { return reached() || !connect_->running() || !walrelays_running(); }, timeout, 500ms);
    if (ok && reached()) {
      std::this_thread::sleep_for(1500ms);  // nothing more arrives
      if (reached()) return true;
    }
    std::string msg = "record counts per topic (table: expected / debezium / walrelay):\n";
    for (std::size_t i = 0; i < pairs_.size(); ++i) {
      const Seen& s = seen[i];
      msg += " pair " + pairs_[i].name + ":\n";
      std::set<std::string> names;
      for (const auto& m : {s.want, s.dbz, s.wr}) {
        for (const auto& [k, v] : m) names.insert(k);
      }
      for (const auto& n : names) {
        auto get = [&](const std::map<std::string, std::int64_t>& m) {
          const auto it = m.find(n);
          return it == m.end() ? std::string("-") : std::to_string(it->second);
        };
        msg += "  " + n + ": " + get(s.want) + " / " + get(s.dbz) + " / " + get(s.wr) +
               (get(s.want) == get(s.dbz) && get(s.dbz) == get(s.wr) ? "" : "   <--") + "\n";
      }
      if (!pairs_[i].walrelay->running()) msg += "  walrelay exited\n";
    }
    ADD_FAILURE() << msg << (connect_->running() ? "" : "Kafka Connect exited\n")
                  << "tail of connect.log:\n"
                  << tail(connect_->log(), 40);
    return false;
  }

  std::string decimals_schema_;
  std::vector<Pair> pairs_;
  std::filesystem::path dir_;
  std::unique_ptr<ConnectWorker> connect_;
};

/// Records of one topic: per partition in offset order, and those with a null key apart (Kafka
/// places them on a partition of its choosing: Debezium's TRUNCATE events).
struct TopicRecords {
  std::map<std::int32_t, std::vector<KafkaRecord>> by_partition;
  std::vector<KafkaRecord> keyless;
};

std::map<std::string, TopicRecords> group(std::vector<KafkaRecord> records,
                                          const std::string& prefix) {
  sort_by_partition_order(records);
  std::map<std::string, TopicRecords> out;
  for (auto& r : records) {
    if (!r.topic.starts_with(prefix)) continue;
    const std::string suffix = r.topic.substr(prefix.size());
    if (r.key) {
      out[suffix].by_partition[r.partition].push_back(std::move(r));
    } else {
      out[suffix].keyless.push_back(std::move(r));
    }
  }
  return out;
}

/// Compares one topic's records of both sides. Normally every partition holds the same keys in the
/// same order on both sides, and records are compared pairwise in offset order. Where a key landed
/// on another partition (its bytes differ), the topic's records are paired key by key instead (in
/// offset order per key), and each key placed elsewhere is one "partition" difference.
void compare_topic(Comparer& cmp, const std::string& table, const std::string& topic,
                   const TopicRecords& d, const TopicRecords& w) {
  std::set<std::int32_t> partitions;
  for (const auto& [p, v] : d.by_partition) partitions.insert(p);
  for (const auto& [p, v] : w.by_partition) partitions.insert(p);
  static const std::vector<KafkaRecord> kNone;
  auto at = [](const TopicRecords& t, std::int32_t p) -> const std::vector<KafkaRecord>& {
    const auto it = t.by_partition.find(p);
    return it == t.by_partition.end() ? kNone : it->second;
  };
  bool aligned = true;
  for (const std::int32_t p : partitions) {
    const auto& dl = at(d, p);
    const auto& wl = at(w, p);
    aligned = aligned && dl.size() == wl.size();
    for (std::size_t i = 0; aligned && i < dl.size(); ++i) {
      aligned = canonical_key(dl[i]) == canonical_key(wl[i]);
    }
  }
  if (aligned) {
    for (const std::int32_t p : partitions) {
      const auto& dl = at(d, p);
      const auto& wl = at(w, p);
      for (std::size_t i = 0; i < dl.size(); ++i) cmp.records(table, dl[i], wl[i]);
    }
  } else {
    std::map<std::string,
             std::pair<std::vector<const KafkaRecord*>, std::vector<const KafkaRecord*>>>
        by_key;
    for (const std::int32_t p : partitions) {
      for (const auto& r : at(d, p)) by_key[canonical_key(r)].first.push_back(&r);
      for (const auto& r : at(w, p)) by_key[canonical_key(r)].second.push_back(&r);
    }
    for (const auto& [key, lists] : by_key) {
      const auto& [dl, wl] = lists;
      if (dl.size() != wl.size()) {
        cmp.report_at(table, topic + " key " + key, "(record count)", std::to_string(dl.size()),
                      std::to_string(wl.size()));
      }
      if (!dl.empty() && !wl.empty() && dl[0]->partition != wl[0]->partition) {
        cmp.report_at(table, topic + " key " + key, "partition",
                      "p" + std::to_string(dl[0]->partition) + " " + dl[0]->key.value_or(""),
                      "p" + std::to_string(wl[0]->partition) + " " + wl[0]->key.value_or(""));
      }
      for (std::size_t i = 0; i < std::min(dl.size(), wl.size()); ++i) {
        cmp.records(table, *dl[i], *wl[i]);
      }
    }
  }
  if (d.keyless.size() != w.keyless.size()) {
    cmp.report_at(table, topic + " (null keys)", "(record count)", std::to_string(d.keyless.size()),
                  std::to_string(w.keyless.size()));
  }
  for (std::size_t i = 0; i < std::min(d.keyless.size(), w.keyless.size()); ++i) {
    cmp.records(table, d.keyless[i], w.keyless[i]);
  }
}

/// Compares the topics of one pair: the same topic names on both sides, then record by record.
/// Returns the differences.
std::vector<Difference> compare_pair(const Pair& p, const std::vector<KafkaRecord>& records,
                                     const std::vector<std::string>& dbz_topics,
                                     const std::vector<std::string>& wr_topics) {
  std::set<std::string> dbz_names;
  std::set<std::string> wr_names;
  for (const auto& t : dbz_topics) dbz_names.insert(t.substr(p.dbz.size() + 1));
  for (const auto& t : wr_topics) wr_names.insert(t.substr(p.wr.size() + 1));
  EXPECT_EQ(dbz_names, wr_names) << "topics of Debezium (left) and walrelay (right), pair "
                                 << p.name;
  Comparer cmp(p.name);
  const auto dbz = group(records, p.dbz + ".");
  const auto wr = group(records, p.wr + ".");
  std::set<std::string> topics;
  for (const auto& [t, r] : dbz) topics.insert(t);
  for (const auto& [t, r] : wr) topics.insert(t);
  for (const auto& topic : topics) {
    const std::string table = topic.substr(topic.rfind('.') + 1);
    const auto di = dbz.find(topic);
    const auto wi = wr.find(topic);
    if (di == dbz.end() || wi == wr.end()) {
      cmp.report_at(table, topic, "(topic)", di == dbz.end() ? "<no topic>" : "present",
                    wi == wr.end() ? "<no topic>" : "present");
      continue;
    }
    compare_topic(cmp, table, topic, di->second, wi->second);
  }
  return std::move(cmp.diffs);
}

/// Judges one pair's differences by kAllowed: prints the allowed ones (counting each entry's
/// matches into `hits`) and fails the test with every other one.
void judge(const Pair& p, const std::vector<Difference>& diffs, std::size_t record_count,
           std::vector<std::size_t>& hits) {
  const std::string tag = "[debezium " + p.name + "] ";
  std::vector<std::size_t> own(kAllowed.size(), 0);
  std::vector<const Difference*> first(kAllowed.size(), nullptr);
  std::vector<const Difference*> unexpected;
  for (const auto& diff : diffs) {
    bool matched = false;
    for (std::size_t i = 0; i < kAllowed.size(); ++i) {
      if (allowed_matches(kAllowed[i], diff)) {
        if (own[i]++ == 0) first[i] = &diff;
        ++hits[i];
        matched = true;
        break;
      }
    }
    if (!matched) unexpected.push_back(&diff);
  }
  std::cout << tag << record_count << " records compared (decimal.handling.mode=" << p.decimal
            << "); " << diffs.size() << " differences, " << unexpected.size() << " not allowed\n";
  for (std::size_t i = 0; i < kAllowed.size(); ++i) {
    if (own[i] == 0) continue;
    const Allowed& a = kAllowed[i];
    const char* kind = a.why == Why::kIntended ? "INTENDED" : "NOT YET FIXED";
    std::cout << tag << "allowed " << kind << " " << a.table << " " << a.path << ": " << own[i]
              << "x, e.g. " << first[i]->where << " " << first[i]->path
              << " debezium=" << first[i]->debezium << " walrelay=" << first[i]->walrelay << "\n";
  }
  // Unexpected differences grouped by table and path (one line each, with up to three records),
  // then every one of them.
  std::map<std::pair<std::string, std::string>, std::vector<const Difference*>> groups;
  for (const Difference* diff : unexpected) groups[{diff->table, diff->path}].push_back(diff);
  // WALRELAY_DEBEZIUM_EXAMPLES=N shows N records per group instead of 3.
  std::size_t examples = 3;
  if (const char* e = std::getenv("WALRELAY_DEBEZIUM_EXAMPLES")) examples = std::stoul(e);
  std::string msg;
  for (const auto& [tp, list] : groups) {
    std::set<std::string> ops;
    for (const Difference* diff : list) ops.insert(diff->ops);
    std::string op_text;
    for (const auto& o : ops) op_text += o;
    msg += "  " + tp.first + " " + tp.second + " [" + op_text + "] " + std::to_string(list.size()) +
           "x:\n";
    for (std::size_t i = 0; i < list.size() && i < examples; ++i) {
      msg += "      " + list[i]->where + " [" + list[i]->ops + "] debezium=" + list[i]->debezium +
             "  walrelay=" + list[i]->walrelay + "\n";
    }
  }
  EXPECT_TRUE(unexpected.empty())
      << "pair " << p.name << " (decimal.handling.mode=" << p.decimal << "): " << unexpected.size()
      << " differences from Debezium that kAllowed does not list, by table and path [ops], each "
         "with up to "
      << examples << " records (table partition@offset [op]) of topics " << p.dbz << "." << p.schema
      << ".<table> (Debezium) and " << p.wr << "." << p.schema << ".<table> (walrelay):\n"
      << msg;
}

// Final record count of each table's topic after setup.sql's rows and stream.sql's changes (the
// same on both sides; a delete is two records: the delete and its tombstone; a key change is
// three: delete, tombstone, create). Update it with the workload.
const std::map<std::string, std::int64_t> kFinalCounts = {
    {"arrays", 6},      {"bits", 6},       {"bools", 7},     {"bytes", 6},      {"composites", 6},
    {"defaults", 8},    {"domains", 6},    {"floats", 19},   {"generated", 5},  {"geoms", 6},
    {"hstores", 6},     {"intervals", 12}, {"ints", 10},     {"jsons", 8},      {"keycols", 9},
    {"names", 5},       {"numerics", 15},  {"parted_eu", 5}, {"parted_us", 8},  {"pk_ba", 8},
    {"ri_default", 17}, {"ri_full", 13},   {"ri_index", 8},  {"text_keys", 20}, {"texts", 9},
    {"times", 13},      {"toasted", 6},    {"truncated", 4}, {"typed_keys", 9},
};
// The same for decimals_setup.sql and decimals_stream.sql: 12 snapshot rows, 13 inserts, 3
// updates, a key change, 2 deletes.
const std::map<std::string, std::int64_t> kDecimalsFinalCounts = {{"decimals", 35}};

TEST_F(DebeziumCompatTest, TopicsEqualDebeziumRecordByRecord) {
  // ---- tables and the rows each pair snapshots
  pg_->exec("CREATE EXTENSION IF NOT EXISTS hstore SCHEMA public");
  run_sql_file(schema_, "setup.sql");
  run_sql_file(decimals_schema_, "decimals_setup.sql");
  std::vector<std::string> connectors;
  for (auto& p : pairs_) {
    p.snapshot_counts = table_rows(p.schema);
    p.final_counts = p.name == "main" ? kFinalCounts : kDecimalsFinalCounts;
    for (const auto& [t, n] : p.final_counts) {
      ASSERT_TRUE(p.snapshot_counts.contains(t))
          << "the final counts of pair " << p.name << " name a table its setup lacks: " << t;
    }
    ASSERT_EQ(p.snapshot_counts.size(), p.final_counts.size())
        << "a table of pair " << p.name << " has no final count";
    const auto [props, yaml] = p.name == "main" ? main_configs(p) : decimals_configs(p);
    connectors.push_back(props);
    p.walrelay = std::make_unique<WalrelayProcess>(yaml, "walrelay " + p.name);
  }

  // ---- every connector: initial snapshot, then streaming
  const auto started = std::chrono::steady_clock::now();
  connect_ = std::make_unique<ConnectWorker>(dir_);
  connect_->start(worker_properties(), connectors);
  for (auto& p : pairs_) p.walrelay->start();
  ASSERT_TRUE(wait_for_counts(false, 120s)) << "the snapshots did not finish";
  const auto snapshotted = std::chrono::steady_clock::now();

  // ---- the streaming workloads
  // source.sequence's first element is the end of the last commit a connector streamed. Each
  // side streams from its own slot's consistent point, and the slots were created seconds apart:
  // a transaction both would count that commits in between (another walrelay's heartbeat on this
  // database, every 10 s) is streamed only from the slots created before it, and the first
  // streamed records differ (seen: debezium [null,"<lsn>"], walrelay ["<heartbeat>","<lsn>"]).
  // A heartbeat of walrelay's own kind (a transactional logical message with prefix `walrelay`,
  // which both count and neither publishes) now, when every slot exists, evens them out.
  pg_->exec("SELECT pg_catalog.pg_logical_emit_message(true, 'walrelay', 'heartbeat')");
  run_sql_file(schema_, "stream.sql");
  run_sql_file(decimals_schema_, "decimals_stream.sql");
  const bool complete = wait_for_counts(true, 60s);
  const auto streamed = std::chrono::steady_clock::now();
  auto seconds = [](auto a, auto b) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count() /
                          1000.0);
  };
  std::cout << "[debezium] snapshots " << seconds(started, snapshotted) << " s, streaming "
            << seconds(snapshotted, streamed) << " s\n";

  // ---- read every pair's topics, stop every connector
  std::map<std::string, std::pair<std::vector<std::string>, std::vector<std::string>>> topics;
  std::vector<std::string> all;
  for (const auto& p : pairs_) {
    auto& [d, w] = topics[p.name];
    d = kafka_->topics_with_prefix(p.dbz + ".");
    w = kafka_->topics_with_prefix(p.wr + ".");
    all.insert(all.end(), d.begin(), d.end());
    all.insert(all.end(), w.begin(), w.end());
  }
  const auto records = kafka_->read_all(all, 60s);
  connect_->stop();
  for (auto& p : pairs_) {
    EXPECT_EQ(p.walrelay->stop(SIGTERM), 0) << p.walrelay->logs();
  }
  if (!complete) return;  // the counts above say what is missing

  // ---- compare and judge each pair
  std::vector<std::size_t> hits(kAllowed.size(), 0);
  for (const auto& p : pairs_) {
    const auto& [d, w] = topics[p.name];
    std::size_t count = 0;
    for (const auto& r : records) {
      if (r.topic.starts_with(p.dbz + ".") || r.topic.starts_with(p.wr + ".")) ++count;
    }
    judge(p, compare_pair(p, records, d, w), count, hits);
  }
  for (std::size_t i = 0; i < kAllowed.size(); ++i) {
    if (hits[i] != 0) continue;
    const Allowed& a = kAllowed[i];
    std::cout << "[debezium] NOTE: allowed difference no longer seen (remove it from kAllowed): "
              << (a.why == Why::kIntended ? "INTENDED" : "NOT YET FIXED") << " " << a.pair << " "
              << a.table << " " << a.path << "\n";
  }
}

}  // namespace
}  // namespace walrelay::itest
