#include "walrelay/sink/position_reader.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "walrelay/kafka/consumer.hpp"

namespace walrelay::sink {

namespace {

// No answer within the call's timeout: no broker usable yet (rd_kafka_metadata answers
// ERR__TRANSPORT when none became usable within it) or no response. A call for a slice is made
// again until the overall deadline, as one call for all of it would have waited.
bool no_answer_yet(const kafka::Error& e) {
  return e.code == RD_KAFKA_RESP_ERR__TIMED_OUT || e.code == RD_KAFKA_RESP_ERR__TRANSPORT ||
         e.code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN;
}

}  // namespace

struct PositionReader::State {
  enum class Phase : std::uint8_t { kMetadata, kOffsets, kConsume };
  kafka::Consumer consumer;
  std::string topic;
  std::string key;
  std::chrono::milliseconds timeout{0};
  std::chrono::steady_clock::time_point deadline;
  Phase phase = Phase::kMetadata;
  std::vector<std::int32_t> partitions;
  std::size_t next_partition = 0;            // kOffsets: the next partition to query
  std::set<std::int32_t> pending;            // kConsume: partitions not at their end yet
  std::map<std::int32_t, std::int64_t> end;  // high watermark at the start
  std::optional<StreamPosition> last;

  explicit State(kafka::Consumer c) : consumer(std::move(c)) {}
  /// ms left of `stop` (a slice's end) and of the deadline, at least 0.
  [[nodiscard]] std::chrono::milliseconds left(std::chrono::steady_clock::time_point stop) const {
    const auto until = std::min(stop, deadline);
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        until - std::chrono::steady_clock::now()));
  }
  [[nodiscard]] bool expired() const { return std::chrono::steady_clock::now() >= deadline; }
};

PositionReader::PositionReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
PositionReader::PositionReader(PositionReader&&) noexcept = default;
PositionReader& PositionReader::operator=(PositionReader&&) noexcept = default;
PositionReader::~PositionReader() = default;

std::expected<PositionReader, std::string> PositionReader::start(
    const config::KafkaConfig& cfg, const std::string& topic, const std::string& key,
    std::chrono::milliseconds timeout) {
  kafka::ConsumerOptions options;
  // rd_kafka_consumer_poll needs a group id (else ERR__UNKNOWN_GROUP); assign only: the group is
  // never joined and nothing is committed.
  options.group_id = "walrelay-positions-" + key;
  options.read_committed = true;
  options.partition_eof = true;
  options.log_name = "positions";
  // The end is reached with an empty fetch: do not let the broker hold it for the default 500 ms.
  options.properties = {{"fetch.wait.max.ms", "10"}};
  auto consumer = kafka::Consumer::create(cfg, options);
  if (!consumer) return std::unexpected(consumer.error().message);
  auto state = std::make_unique<State>(std::move(*consumer));
  state->topic = topic;
  state->key = key;
  state->timeout = timeout;
  state->deadline = std::chrono::steady_clock::now() + timeout;
  return PositionReader(std::move(state));
}

std::optional<std::expected<std::optional<StreamPosition>, std::string>> PositionReader::poll(
    std::chrono::milliseconds wait) {
  using Phase = State::Phase;
  using std::chrono::milliseconds;
  State& s = *state_;
  const auto stop = std::chrono::steady_clock::now() + wait;
  const std::string& topic = s.topic;
  // One librdkafka call per round, each for at most what is left of `wait`: a timed-out call is
  // made again (a new request) until the deadline.
  do {
    if (s.phase == Phase::kMetadata) {
      auto described = s.consumer.describe_topic(topic, std::max(milliseconds(1), s.left(stop)));
      if (!described && no_answer_yet(described.error()) && !s.expired()) continue;
      if (!described) {
        return std::unexpected(std::string("cannot read the metadata of ") + topic + ": " +
                               described.error().message);
      }
      if (!described->exists()) return std::optional<StreamPosition>{};
      s.partitions = std::move(described->partitions);
      s.phase = Phase::kOffsets;
    } else if (s.phase == Phase::kOffsets) {
      if (s.next_partition < s.partitions.size()) {
        const std::int32_t p = s.partitions[s.next_partition];
        auto marks = s.consumer.watermarks(topic, p, std::max(milliseconds(1), s.left(stop)));
        if (!marks && no_answer_yet(marks.error()) && !s.expired()) continue;
        if (!marks) {
          return std::unexpected(std::string("cannot read the offsets of ") + topic + ": " +
                                 marks.error().message);
        }
        ++s.next_partition;
        if (marks->high > marks->low) {
          s.end[p] = marks->high;
          s.pending.insert(p);
        }
        continue;
      }
      if (s.pending.empty()) return s.last;
      std::vector<kafka::PartitionOffset> from;
      for (const std::int32_t p : s.pending) from.push_back({topic, p, kafka::kOffsetBeginning});
      (void)s.consumer.assign(from);
      s.phase = Phase::kConsume;
    } else {
      // Up to the end: with read_committed, the end-of-partition event comes at the last stable
      // offset, after the last committed record (aborted records and control records are
      // skipped); a record at the high watermark's last offset ends a partition too (a broker
      // without control records, such as librdkafka's mock cluster).
      if (s.expired()) {
        return std::unexpected("cannot read " + topic + " to its end within " +
                               std::to_string(s.timeout.count()) +
                               " ms (a transaction of another producer may still be open)");
      }
      auto m = s.consumer.poll(std::min(s.left(stop), milliseconds(200)));
      if (!m) continue;
      if (m->end_of_partition()) {
        s.pending.erase(m->partition());
      } else if (m->is_record()) {
        if (m->key() == s.key && m->value()) {
          if (auto p = decode_position(*m->value())) {
            s.last = std::move(*p);
          } else {
            spdlog::warn("ignoring an unreadable position record in {} at offset {}", topic,
                         m->offset());
          }
        }
        if (m->offset() + 1 >= s.end[m->partition()]) s.pending.erase(m->partition());
      } else if (const kafka::Error e = m->error();
                 e.code == RD_KAFKA_RESP_ERR__UNKNOWN_GROUP || e.fatal) {
        return std::unexpected("reading " + topic + ": " + e.message);
      } else {
        spdlog::debug("reading {}: {}", topic, e.message);
      }
      if (s.pending.empty()) return s.last;
    }
  } while (std::chrono::steady_clock::now() < stop);
  return std::nullopt;
}

std::expected<std::optional<StreamPosition>, std::string> read_position(
    const config::KafkaConfig& cfg, const std::string& topic, const std::string& key,
    std::chrono::milliseconds timeout) {
  auto reader = PositionReader::start(cfg, topic, key, timeout);
  if (!reader) return std::unexpected(reader.error());
  for (;;) {
    if (auto done = reader->poll(std::chrono::milliseconds(1000))) return *done;
  }
}

}  // namespace walrelay::sink
