// Per-key order with several uncoordinated relay instances (docs/relay.md "The claim"): two
// relay processes drain one outbox table while four writers fill it; every event is published,
// once, and each key's events are in order on its partition.

#include <atomic>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "relay_support.hpp"

namespace walrelay::itest {
namespace {

TEST_F(RelayTest, TwoRelaysPublishEveryEventOnceAndEachKeyInOrder) {
  constexpr int kKeys = 50;
  constexpr int kPerKey = 40;  // 2,000 events
  constexpr int kWriters = 4;
  create_outbox("event_outbox");
  create_topic(env_.kafka_bootstrap, topic_for("evt"), 6, {});
  const std::string yaml = poll_yaml({{table("event_outbox"), outbox_lines()}}, "  batch: 50\n");
  WalrelayProcess a(yaml, "relay-a");
  WalrelayProcess b(yaml, "relay-b");
  a.start();
  b.start();
  // Each key has one writer (an aggregate's events are written in its own order, as a row lock
  // on the aggregate does), in transactions of 1 to 3 rows; the writers run at once.
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
          }
        }
      } catch (const std::exception& e) {
        ++failures;
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& t : writers) t.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_TRUE(wait_until([&] { return count_status("event_outbox", "sent") == kKeys * kPerKey; },
                         120s, 200ms))
      << a.logs() << b.logs();
  const auto records = kafka_->read_at_least({topic_for("evt")}, kKeys * kPerKey, 60s);
  std::vector<KafkaRecord> sorted = records;
  sort_by_partition_order(sorted);
  std::set<std::string> ids;
  std::map<std::string, std::vector<int>> order;  // key → n in partition order
  std::map<std::string, std::int32_t> partition;
  for (const KafkaRecord& r : sorted) {
    ids.insert(r.header("id"));
    const std::string key = r.key.value_or("");
    order[key].push_back(std::stoi(json_at(r.value.value_or("{}"), "/n")));
    const auto [it, added] = partition.emplace(key, r.partition);
    EXPECT_EQ(it->second, r.partition) << key;
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kKeys * kPerKey));
  EXPECT_EQ(records.size(), static_cast<std::size_t>(kKeys * kPerKey))
      << "duplicates although nothing crashed";
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kKeys));
  for (const auto& [key, ns] : order) {
    std::vector<int> expected(kPerKey);
    for (int i = 0; i < kPerKey; ++i) expected[i] = i;
    EXPECT_EQ(ns, expected) << key;
  }
  EXPECT_EQ(a.stop(), 0) << a.logs();
  EXPECT_EQ(b.stop(), 0) << b.logs();
  // Each instance's share, from its last log line ("N record(s) published, M row(s) marked sent").
  for (const WalrelayProcess* p : {&a, &b}) {
    const std::string log = p->stderr_text();
    const std::size_t at = log.rfind(" record(s) published");
    std::size_t begin = at;
    while (begin > 0 && log[begin - 1] >= '0' && log[begin - 1] <= '9') --begin;
    std::cout << "relay share: " << log.substr(begin, at - begin) << " record(s)\n";
  }
}

}  // namespace
}  // namespace walrelay::itest
