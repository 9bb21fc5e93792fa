// Four uncoordinated relay processes over one outbox table that four writers fill while they run
// (docs/relay.md "The claim", "The lease variant"): without crashes every event is published once
// and each key's events are in order on its partition; with SIGKILLs of random instances (each
// restarted) nothing is lost, a duplicate is the same id with the same value (docs/relay.md: "a
// crash between Kafka's acknowledgement and the COMMIT publishes the rows again with the same `id`
// header"), and each key's first occurrences are in order. Kills processes and loads the machine:
// RUN_SERIAL (tests/integration/CMakeLists.txt).

#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "relay_support.hpp"

namespace walrelay::itest {
namespace {

constexpr int kRelays = 4;
constexpr int kWriters = 4;
constexpr int kKeys = 200;
constexpr int kPerKey = 50;  // 10,000 events
constexpr int kEvents = kKeys * kPerKey;

class RelayCrashTest : public RelayTest {
 protected:
  /// Runs `kRelays` relays with `relay_lines` while the writers fill the outbox; with `kills`,
  /// SIGKILLs random instances (restarting each) during the run. Checks what Kafka holds against
  /// the outbox table.
  void run(const std::string& relay_lines, bool lease, bool kills) {
    create_outbox("event_outbox");
    if (lease) {
      pg_->exec("ALTER TABLE " + table("event_outbox") +
                " ADD COLUMN claimed_by text, ADD COLUMN lease_until timestamptz");
    }
    create_topic(env_.kafka_bootstrap, topic_for("evt"), 6, {});
    const std::string yaml = poll_yaml({{table("event_outbox"), outbox_lines()}}, relay_lines);
    std::vector<std::unique_ptr<WalrelayProcess>> relays;
    for (int i = 0; i < kRelays; ++i) {
      relays.push_back(std::make_unique<WalrelayProcess>(yaml, "relay-" + std::to_string(i)));
      relays.back()->start();
    }
    // Each key has one writer (an aggregate's events are written in its own order), in
    // transactions of 1 to 3 rows; the writers run at once (as relay_order_test.cpp's). With
    // kills they pause 8 ms after each transaction, so that writing (some 10 s) spans the kills.
    std::vector<std::thread> writers;
    std::atomic<int> failures{0};
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        try {
          Pg pg(env_.pg_conninfo);
          std::map<int, int> next;
          for (int round = 0; round < kPerKey; ++round) {
            for (int k = w; k < kKeys; k += kWriters) {
              std::string values;
              const int rows = 1 + (round + k) % 3;
              for (int r = 0; r < rows && next[k] < kPerKey; ++r) {
                if (!values.empty()) values += ", ";
                values += "('key-" + std::to_string(k) +
                          "', 'evt', '{\"n\": " + std::to_string(next[k]++) + "}')";
              }
              if (values.empty()) continue;
              pg.exec("INSERT INTO " + table("event_outbox") +
                      " (subscription_id, event_type, payload) VALUES " + values);
              if (kills) std::this_thread::sleep_for(8ms);
            }
          }
        } catch (const std::exception& e) {
          ++failures;
          ADD_FAILURE() << e.what();
        }
      });
    }
    // The kills: 5 to 8 of random instances, 300 ms to 1.2 s apart, from a seed printed with
    // every failure below.
    const unsigned seed = std::random_device{}();
    std::ostringstream kill_log;
    kill_log << "seed " << seed << ", kills:";
    if (kills) {
      std::mt19937 rng(seed);
      const int n = std::uniform_int_distribution<int>(5, 8)(rng);
      for (int i = 0; i < n; ++i) {
        std::this_thread::sleep_for(
            std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 1200)(rng)));
        const int victim = std::uniform_int_distribution<int>(0, kRelays - 1)(rng);
        kill_log << " relay-" << victim << " at " << count_status("event_outbox", "sent")
                 << " sent;";
        relays[victim]->kill();
        relays[victim]->start();
      }
    }
    for (auto& t : writers) t.join();
    const std::string context = kill_log.str();
    ASSERT_EQ(failures.load(), 0) << context;
    const auto all_logs = [&] {
      std::string out = context + "\n";
      for (const auto& r : relays) out += r->logs();
      return out;
    };
    ASSERT_TRUE(
        wait_until([&] { return count_status("event_outbox", "sent") == kEvents; }, 90s, 200ms))
        << all_logs();
    for (const auto& r : relays) EXPECT_EQ(r->stop(), 0) << context << r->logs();

    // What a user checks by hand: every event_id of the table is in the topic; a repeated id
    // carries the same value; each key's events, first occurrences taken, are in order.
    std::set<std::string> table_ids;
    for (const auto& row : pg_->query("SELECT event_id FROM " + table("event_outbox"))) {
      table_ids.insert(*row[0]);
    }
    ASSERT_EQ(table_ids.size(), static_cast<std::size_t>(kEvents)) << context;
    std::vector<KafkaRecord> records = kafka_->read_all({topic_for("evt")}, 60s);
    sort_by_partition_order(records);
    std::map<std::string, std::string> value_of;    // id → value of its first occurrence
    std::map<std::string, std::vector<int>> order;  // key → n of first occurrences, in order
    std::map<std::string, std::int32_t> partition;
    std::size_t duplicates = 0;
    for (const KafkaRecord& r : records) {
      const std::string id = r.header("id");
      const std::string key = r.key.value_or("");
      const auto [it, first] = value_of.emplace(id, r.value.value_or(""));
      if (first) {
        order[key].push_back(std::stoi(json_at(r.value.value_or("{}"), "/n")));
      } else {
        ++duplicates;
        EXPECT_EQ(it->second, r.value.value_or("")) << context << " " << r.describe();
      }
      const auto [p, added] = partition.emplace(key, r.partition);
      EXPECT_EQ(p->second, r.partition) << context << " " << r.describe();
    }
    std::size_t missing = 0;
    for (const std::string& id : table_ids) missing += value_of.count(id) == 0 ? 1 : 0;
    EXPECT_EQ(missing, 0U) << context;
    EXPECT_EQ(value_of.size(), static_cast<std::size_t>(kEvents)) << context;
    if (!kills) {
      EXPECT_EQ(duplicates, 0U) << "duplicates although nothing crashed";
    }
    ASSERT_EQ(order.size(), static_cast<std::size_t>(kKeys)) << context;
    std::vector<int> expected(kPerKey);
    for (int i = 0; i < kPerKey; ++i) expected[i] = i;
    for (const auto& [key, ns] : order) EXPECT_EQ(ns, expected) << context << " " << key;
    std::cout << context << " " << records.size() << " record(s), " << duplicates
              << " duplicate(s)\n";
  }
};

TEST_F(RelayCrashTest, FourRelaysPublishEveryEventOnceAndEachKeyInOrder) {
  run("  batch: 200\n", false, false);
}

TEST_F(RelayCrashTest, FourRelaysKilledAtRandomLoseNothingAndKeepEachKeysFirstOccurrencesInOrder) {
  run("  batch: 200\n", false, true);
}

// The lease variant (relay_lease_test.cpp's settings): a killed instance's claimed rows wait for
// their 2 s lease, then another instance publishes them again.
TEST_F(RelayCrashTest,
       FourLeaseRelaysKilledAtRandomLoseNothingAndKeepEachKeysFirstOccurrencesInOrder) {
  run("  batch: 200\n  claim: lease\n  lease: 2s\n  ack_timeout: 1s\n", true, true);
}

}  // namespace
}  // namespace walrelay::itest
