// Key placement: walrelay must put every row-change record on the partition the Java client (and
// so Debezium on Kafka Connect) would have chosen, so consumers keyed by partition see no change
// when they switch. That needs two things, both checked here end to end:
//   - the key bytes are exactly what Debezium's JsonConverter (schemas.enable=false) prints for the
//     key struct: compact JSON, primary key columns in order;
//   - the partition is toPositive(murmur2(key bytes)) % partitions, the Java client's
//     BuiltInPartitioner.partitionForKey (librdkafka's `murmur2_random` partitioner).
// The expected partitions come from an implementation of Kafka's Utils.murmur2 written here and
// checked against the Java client's own test vectors (UtilsTest.testMurmur2) and, when the Kafka
// jars fetched by tests/services/start.sh are present, against the Java client itself
// (tools/Murmur2Partition.java).

#include <librdkafka/rdkafka.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace walrelay::itest {
namespace {

// ------------------------------------------------------------------ Kafka's murmur2, independently

/// org.apache.kafka.common.utils.Utils.murmur2: MurmurHash2, seed 0x9747b28c, 4-byte blocks read
/// little-endian, tail bytes unsigned. Returns Java's signed int.
std::int32_t kafka_murmur2(std::string_view data) {
  constexpr std::uint32_t kSeed = 0x9747b28cU;
  constexpr std::uint32_t kM = 0x5bd1e995U;
  constexpr int kR = 24;
  const auto byte = [&](std::size_t i) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(data[i]));
  };
  const std::size_t length = data.size();
  std::uint32_t h = kSeed ^ static_cast<std::uint32_t>(length);
  const std::size_t blocks = length / 4;
  for (std::size_t i = 0; i < blocks; ++i) {
    const std::size_t i4 = i * 4;
    std::uint32_t k = byte(i4) | (byte(i4 + 1) << 8) | (byte(i4 + 2) << 16) | (byte(i4 + 3) << 24);
    k *= kM;
    k ^= k >> kR;
    k *= kM;
    h *= kM;
    h ^= k;
  }
  const std::size_t tail = length & ~std::size_t{3};
  switch (length % 4) {
    case 3:
      h ^= byte(tail + 2) << 16;
      [[fallthrough]];
    case 2:
      h ^= byte(tail + 1) << 8;
      [[fallthrough]];
    case 1:
      h ^= byte(tail);
      h *= kM;
      break;
    default:
      break;
  }
  h ^= h >> 13;
  h *= kM;
  h ^= h >> 15;
  return static_cast<std::int32_t>(h);
}

/// Utils.toPositive(murmur2(key)) % partitions: where the Java client puts a keyed record.
std::int32_t java_partition(std::string_view key, std::int32_t partitions) {
  const auto positive =
      static_cast<std::int32_t>(static_cast<std::uint32_t>(kafka_murmur2(key)) & 0x7fffffffU);
  return positive % partitions;
}

// ----------------------------------------------------------------- keys as Debezium prints them

/// A JSON string as Jackson (JsonConverter) writes it by default: `"` and `\` escaped, other
/// bytes (UTF-8 included) as they are. The test data has no control characters.
std::string jackson_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

/// Key of a row of `accounts (id int PRIMARY KEY, ...)`.
std::string account_key(int id) {
  return "{\"id\":" + std::to_string(id) + "}";
}

/// Key of a row of `orders (region text, customer_no int, ..., PRIMARY KEY (region, customer_no))`.
std::string order_key(std::string_view region, int customer_no) {
  return "{\"region\":" + jackson_string(region) +
         ",\"customer_no\":" + std::to_string(customer_no) + "}";
}

constexpr int kAccounts = 50;
const std::vector<std::string> kRegions = {"eu", "us", "apac"};
constexpr int kCustomersPerRegion = 8;
// Keys whose bytes need care: a non-ASCII (two-byte UTF-8) character and an escaped quote.
const std::string kUmlautRegion = "z\xc3\xbcrich";  // "zürich"
const std::string kQuoteRegion = "o\"neil";

/// Every (region, customer_no) the end-to-end test inserts into `orders`.
std::vector<std::pair<std::string, int>> order_rows() {
  std::vector<std::pair<std::string, int>> rows;
  for (const auto& region : kRegions) {
    for (int n = 1; n <= kCustomersPerRegion; ++n) rows.emplace_back(region, n);
  }
  rows.emplace_back(kUmlautRegion, 1);
  rows.emplace_back(kQuoteRegion, 2);
  return rows;
}

/// Every key the end-to-end test produces.
std::vector<std::string> all_test_keys() {
  std::vector<std::string> keys;
  for (int id = 1; id <= kAccounts; ++id) keys.push_back(account_key(id));
  for (const auto& [region, n] : order_rows()) keys.push_back(order_key(region, n));
  return keys;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

// ------------------------------------------------------------- the Java client as a second oracle

/// murmur2 hash and partition per key as computed by kafka-clients, or nullopt (with the reason in
/// `why`) when java or the jars are not available.
struct JavaPlacement {
  std::int32_t hash = 0;
  std::int32_t partition = 0;
};
std::optional<std::map<std::string, JavaPlacement>> java_placements(
    const std::vector<std::string>& keys, std::int32_t partitions, std::string& why) {
  const std::filesystem::path script = std::filesystem::path(WALRELAY_FIXTURES_DIR) / ".." /
                                       "integration" / "tools" / "java_murmur2.sh";
  std::string cmd = "bash '" + script.string() + "' " + std::to_string(partitions);
  std::map<std::string, std::string> by_hex;
  for (const auto& k : keys) {
    by_hex[to_hex(k)] = k;
    cmd += " '" + to_hex(k) + "'";  // hex: nothing for the shell or the JVM charset to change
  }
  cmd += " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + cmd);
  std::string output;
  char buf[4096];
  while (const std::size_t n = fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  const int status = pclose(pipe);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 77) {
    why = output;
    return std::nullopt;
  }
  if (code != 0) {
    throw std::runtime_error("java_murmur2.sh exited with " + std::to_string(code) + ":\n" +
                             output);
  }
  std::map<std::string, JavaPlacement> out;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    // "<hex> <hash> <partition>"; the hex of the empty key is empty, so split at the first space.
    const auto space = line.find(' ');
    if (space == std::string::npos) throw std::runtime_error("unexpected java output:\n" + output);
    JavaPlacement p;
    std::istringstream numbers(line.substr(space + 1));
    if (!(numbers >> p.hash >> p.partition)) {
      throw std::runtime_error("unexpected java output:\n" + output);
    }
    const auto it = by_hex.find(line.substr(0, space));
    if (it == by_hex.end()) throw std::runtime_error("unexpected java output:\n" + output);
    out[it->second] = p;
  }
  if (out.size() != by_hex.size()) {
    throw std::runtime_error("java_murmur2.sh did not answer for every key:\n" + output);
  }
  return out;
}

// ---------------------------------------------------------------------- topics with N partitions

using KafkaHandle = std::unique_ptr<rd_kafka_t, decltype(&rd_kafka_destroy)>;

KafkaHandle admin_client(const std::string& bootstrap) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[512];
  if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), err, sizeof err) !=
          RD_KAFKA_CONF_OK ||
      rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("librdkafka config: ") + err);
  }
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("cannot create Kafka admin client: ") + err);
  }
  return {rk, &rd_kafka_destroy};
}

/// Creates the topics with `partitions` partitions (replication factor 1) through the admin API.
/// Throws with the broker's message on any failure, including "already exists".
void create_topics(rd_kafka_t* rk, const std::vector<std::string>& names, int partitions) {
  char err[512];
  std::vector<rd_kafka_NewTopic_t*> new_topics;
  for (const auto& name : names) {
    rd_kafka_NewTopic_t* t = rd_kafka_NewTopic_new(name.c_str(), partitions, 1, err, sizeof err);
    if (t == nullptr) throw std::runtime_error("NewTopic " + name + ": " + err);
    new_topics.push_back(t);
  }
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t* opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  (void)rd_kafka_AdminOptions_set_operation_timeout(opts, 20'000, err, sizeof err);
  (void)rd_kafka_AdminOptions_set_request_timeout(opts, 30'000, err, sizeof err);
  rd_kafka_CreateTopics(rk, new_topics.data(), new_topics.size(), opts, queue);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, 40'000);
  std::string failure;
  if (ev == nullptr) {
    failure = "CreateTopics: no result within 40s";
  } else if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    failure = std::string("CreateTopics: ") + rd_kafka_event_error_string(ev);
  } else {
    const rd_kafka_CreateTopics_result_t* res = rd_kafka_event_CreateTopics_result(ev);
    std::size_t cnt = 0;
    const rd_kafka_topic_result_t** results = rd_kafka_CreateTopics_result_topics(res, &cnt);
    for (std::size_t i = 0; i < cnt; ++i) {
      if (rd_kafka_topic_result_error(results[i]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* msg = rd_kafka_topic_result_error_string(results[i]);
        failure += std::string("CreateTopics ") + rd_kafka_topic_result_name(results[i]) + ": " +
                   rd_kafka_err2str(rd_kafka_topic_result_error(results[i])) +
                   (msg ? std::string(" (") + msg + ")" : std::string()) + "\n";
      }
    }
    if (cnt != names.size()) failure += "CreateTopics: result count differs from request\n";
  }
  if (ev != nullptr) rd_kafka_event_destroy(ev);
  rd_kafka_AdminOptions_destroy(opts);
  rd_kafka_queue_destroy(queue);
  rd_kafka_NewTopic_destroy_array(new_topics.data(), new_topics.size());
  if (!failure.empty()) throw std::runtime_error(failure);
}

/// Partition count of `topic` in the cluster metadata (all topics requested, so nothing is
/// auto-created), 0 when it is not (yet) there.
int partition_count(rd_kafka_t* rk, const std::string& topic) {
  const rd_kafka_metadata_t* md = nullptr;
  if (rd_kafka_metadata(rk, 1, nullptr, &md, 10'000) != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
  int count = 0;
  for (int i = 0; i < md->topic_cnt; ++i) {
    if (topic == md->topics[i].topic && md->topics[i].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      count = md->topics[i].partition_cnt;
    }
  }
  rd_kafka_metadata_destroy(md);
  return count;
}

// =========================================================================== reference checks

// The Java client's own vectors: org.apache.kafka.common.utils.UtilsTest#testMurmur2.
TEST(KafkaMurmur2Reference, ReproducesJavaUtilsTestVectors) {
  const std::vector<std::pair<std::string, std::int32_t>> cases = {
      {"21", -973932308},
      {"foobar", -790332482},
      {"a-little-bit-long-string", -985981536},
      {"a-little-bit-longer-string", -1486304829},
      {"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
      {"abc", 479470107},
  };
  for (const auto& [input, expected] : cases) {
    EXPECT_EQ(kafka_murmur2(input), expected) << input;
    EXPECT_EQ(java_partition(input, 0x7fffffff),
              static_cast<std::int32_t>(static_cast<std::uint32_t>(expected) & 0x7fffffffU))
        << input;
  }
}

// Values printed by kafka-clients 4.1.1 (tools/Murmur2Partition.java) for keys of this test and
// for bytes >= 0x80 (which Java reads as negative bytes): murmur2 as a signed int and the
// partition among 6.
TEST(KafkaMurmur2Reference, ReproducesValuesPrintedByKafkaClients) {
  struct Case {
    std::string key;
    std::int32_t hash;
    std::int32_t partition_of_6;
  };
  const std::vector<Case> cases = {
      {"", 275646681, 3},
      {R"({"id":1})", -56768732, 0},
      {R"({"id":2})", -1705675864, 4},
      {R"({"id":50})", -1410119526, 2},
      {R"({"region":"eu","customer_no":7})", 873588085, 1},
      {"{\"region\":\"z\xc3\xbcrich\",\"customer_no\":1}", 1247560480, 4},
      {R"({"region":"o\"neil","customer_no":2})", 416015074, 4},
      {std::string("\x0c\x2a\x38\x18\x6d\x6f", 6), 274204207, 1},
      {"\xff", -311467685, 3},
      {"\x80\xfe\x7f", -1910403123, 5},
      {"\xff\xff\xff\xff\x80", -1702406959, 1},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(kafka_murmur2(c.key), c.hash) << to_hex(c.key);
    EXPECT_EQ(java_partition(c.key, 6), c.partition_of_6) << to_hex(c.key);
  }
}

// The expected keys hand-written, as JsonConverter prints them.
TEST(KafkaMurmur2Reference, TestKeysAreDebeziumCompactJson) {
  EXPECT_EQ(account_key(1), R"({"id":1})");
  EXPECT_EQ(account_key(50), R"({"id":50})");
  EXPECT_EQ(order_key("eu", 7), R"({"region":"eu","customer_no":7})");
  EXPECT_EQ(order_key(kUmlautRegion, 1), "{\"region\":\"z\xc3\xbcrich\",\"customer_no\":1}");
  EXPECT_EQ(order_key(kQuoteRegion, 2), R"({"region":"o\"neil","customer_no":2})");
}

// The Java client itself, for every key of the end-to-end test and every tail length: needs java
// and the kafka-clients jar that tests/services/start.sh fetches (skipped without them; the
// vectors above are the required reference).
TEST(KafkaMurmur2Reference, MatchesJavaClientForEveryTestKey) {
  std::vector<std::string> keys = all_test_keys();
  for (int len = 0; len <= 9; ++len)
    keys.push_back(
        std::string("\xe9\x01\x80z\xff\x7f\x00"
                    "ab",
                    len));
  for (const std::int32_t partitions : {6, 7}) {
    std::string why;
    const auto java = java_placements(keys, partitions, why);
    // CI always has the Java client (the test broker's jars): there a missing one is a failure,
    // not a reason to skip the reference check.
    if (!java && std::getenv("CI") != nullptr) FAIL() << "Java client not available in CI: " << why;
    if (!java) GTEST_SKIP() << "Java client not available: " << why;
    for (const auto& key : keys) {
      const auto& p = java->at(key);
      EXPECT_EQ(kafka_murmur2(key), p.hash) << to_hex(key);
      EXPECT_EQ(java_partition(key, partitions), p.partition) << to_hex(key) << " % " << partitions;
    }
  }
}

// ============================================================================== end to end

class PartitionPlacementTest : public IntegrationTest {};

// Rows of a table with an int primary key and of one with a composite (text, int) key go to
// pre-created 6-partition topics: every record's key is Debezium's compact JSON key and its
// partition is the Java client's murmur2 placement of those bytes.
TEST_F(PartitionPlacementTest, KeyedRecordsLandOnTheJavaClientsPartition) {
  constexpr int kPartitions = 6;
  const std::string acc = table("accounts");
  const std::string ord = table("orders");
  pg_->exec("CREATE TABLE " + acc + " (id int PRIMARY KEY, name text NOT NULL)");
  pg_->exec("CREATE TABLE " + ord +
            " (region text, customer_no int, note text, PRIMARY KEY (region, customer_no))");

  // Topics exist with 6 partitions before walrelay starts (the broker default is 3).
  const std::vector<std::string> topics = {topic("accounts"), topic("orders")};
  const KafkaHandle admin = admin_client(env_.kafka_bootstrap);
  create_topics(admin.get(), topics, kPartitions);
  for (const auto& t : topics) {
    ASSERT_TRUE(wait_until([&] { return partition_count(admin.get(), t) == kPartitions; }))
        << t << " has " << partition_count(admin.get(), t) << " partitions, not " << kPartitions;
  }

  WalrelayProcess proc(make_config({{acc}, {ord}}).to_yaml());
  start_streaming(proc, name_);

  // Expected key -> number of events with it.
  std::map<std::string, int> expected_events;
  for (int first = 1; first <= kAccounts; first += 10) {
    std::string values;
    for (int id = first; id < first + 10 && id <= kAccounts; ++id) {
      values += (values.empty() ? "" : ", ") + std::string("(") + std::to_string(id) + ", " +
                sql_literal("account " + std::to_string(id)) + ")";
      ++expected_events[account_key(id)];
    }
    pg_->commit({"INSERT INTO " + acc + " VALUES " + values});
  }
  {
    std::vector<std::string> statements;
    for (const auto& [region, n] : order_rows()) {
      statements.push_back("INSERT INTO " + ord + " VALUES (" + sql_literal(region) + ", " +
                           std::to_string(n) + ", 'new')");
      ++expected_events[order_key(region, n)];
    }
    pg_->commit(statements);
  }
  pg_->commit(
      {"UPDATE " + acc + " SET name = 'renamed' WHERE id <= 5",
       "DELETE FROM " + acc + " WHERE id >= 48",
       "UPDATE " + ord + " SET note = 'changed' WHERE region = 'eu' AND customer_no = 7",
       "UPDATE " + ord + " SET note = 'changed' WHERE region = " + sql_literal(kUmlautRegion),
       "DELETE FROM " + ord + " WHERE region = " + sql_literal(kQuoteRegion)});
  for (int id = 1; id <= 5; ++id) ++expected_events[account_key(id)];
  // A delete is a `d` event and a tombstone with the same key (tombstones_on_delete).
  for (int id = 48; id <= kAccounts; ++id) expected_events[account_key(id)] += 2;
  ++expected_events[order_key("eu", 7)];
  ++expected_events[order_key(kUmlautRegion, 1)];
  expected_events[order_key(kQuoteRegion, 2)] += 2;

  std::size_t total = 0;
  for (const auto& [key, n] : expected_events) total += static_cast<std::size_t>(n);
  const auto seen = kafka_->read_at_least(topics, total);
  ASSERT_EQ(seen.size(), total) << describe(seen);
  ASSERT_TRUE(stop_gracefully(proc, name_));
  const auto all = kafka_->read_all(topics);
  ASSERT_EQ(all.size(), total) << "exactly these changes, nothing more:\n" << describe(all);

  // Still 6 partitions: nothing re-created the topics.
  for (const auto& t : topics) EXPECT_EQ(partition_count(admin.get(), t), kPartitions) << t;

  std::map<std::string, int> seen_events;
  std::map<std::string, std::set<std::int32_t>> partitions_of_topic;
  for (const auto& r : all) {
    SCOPED_TRACE(r.describe());
    ASSERT_TRUE(r.key.has_value());
    const std::string& key = *r.key;
    ++seen_events[key];
    partitions_of_topic[r.topic].insert(r.partition);
    // The Java client's partition for these bytes (tombstones included: same key, same place).
    EXPECT_EQ(r.partition, java_partition(key, kPartitions))
        << "key " << key << " (hex " << to_hex(key) << ") murmur2 " << kafka_murmur2(key);
    if (!r.value) continue;

    // Byte-identical to the JsonConverter key of the row the event is about.
    const std::string& v = *r.value;
    const std::string image = json_string_at(v, "/op") == "d" ? "/before" : "/after";
    if (r.topic == topic("accounts")) {
      EXPECT_EQ(key, account_key(std::stoi(json_at(v, image + "/id"))));
    } else {
      EXPECT_EQ(r.topic, topic("orders"));
      EXPECT_EQ(key, order_key(json_string_at(v, image + "/region"),
                               std::stoi(json_at(v, image + "/customer_no"))));
    }
  }
  // Every expected key, with the hand-checked ones among them, and nothing else.
  EXPECT_EQ(seen_events, expected_events);
  EXPECT_EQ(seen_events.count(R"({"id":1})"), 1U);
  EXPECT_EQ(seen_events.count(R"({"region":"eu","customer_no":7})"), 1U);
  EXPECT_EQ(seen_events.count("{\"region\":\"z\xc3\xbcrich\",\"customer_no\":1}"), 1U);
  EXPECT_EQ(seen_events.count(R"({"region":"o\"neil","customer_no":2})"), 1U);

  // Not vacuous: the keys spread over all 6 partitions of each topic.
  EXPECT_EQ(partitions_of_topic[topic("accounts")].size(), static_cast<std::size_t>(kPartitions));
  EXPECT_EQ(partitions_of_topic[topic("orders")].size(), static_cast<std::size_t>(kPartitions));
}

}  // namespace
}  // namespace walrelay::itest
