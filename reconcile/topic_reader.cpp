#include "topic_reader.hpp"

#include <map>
#include <utility>

#include "walrelay/core/headers.hpp"
#include "walrelay/router/payload_digest.hpp"

namespace walrelay::reconcile {

std::expected<TopicReader, kafka::Error> TopicReader::open(const config::Config& cfg,
                                                           const std::vector<std::string>& topics,
                                                           std::chrono::milliseconds timeout) {
  kafka::ConsumerOptions options;
  options.group_id = "walrelay-reconcile-" + cfg.name;  // never joined, never committed
  options.read_committed = true;
  options.partition_eof = true;
  options.log_name = "reconcile";
  // librdkafka's pre-fetch queue holds up to 64 MB per client by default (CONFIGURATION.md
  // queued.max.messages.kbytes): 8 MB keeps reconcile's memory bound small.
  options.properties["queued.max.messages.kbytes"] = "8192";
  auto consumer = kafka::Consumer::create(cfg.kafka, options);
  if (!consumer) return std::unexpected(consumer.error());
  std::vector<Range> ranges;
  for (const auto& topic : topics) {
    auto d = consumer->describe_topic(topic, timeout);
    if (!d) return std::unexpected(d.error());
    if (!d->exists()) continue;
    for (const std::int32_t p : d->partitions) {
      auto w = consumer->watermarks(topic, p, timeout);
      if (!w) return std::unexpected(w.error());
      if (w->high > w->low) ranges.push_back(Range{topic, p, w->low, w->high});
    }
  }
  return TopicReader(std::move(*consumer), std::move(ranges));
}

std::uint64_t TopicReader::span() const {
  std::uint64_t n = 0;
  for (const auto& r : ranges_) n += static_cast<std::uint64_t>(r.end - r.low);
  return n;
}

std::expected<void, kafka::Error> TopicReader::read(
    const std::function<void(const TopicEvent&)>& visit, std::chrono::milliseconds idle_timeout,
    const std::atomic<bool>* cancel) {
  if (ranges_.empty()) return {};
  std::vector<kafka::PartitionOffset> assignment;
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> open;  // partition -> end
  for (const auto& r : ranges_) {
    assignment.push_back(kafka::PartitionOffset{r.topic, r.partition, kafka::kOffsetBeginning});
    open[{r.topic, r.partition}] = r.end;
  }
  if (auto a = consumer_.assign(assignment); !a) return std::unexpected(a.error());
  auto last = std::chrono::steady_clock::now();
  while (!open.empty()) {
    if (cancel != nullptr && cancel->load()) {
      (void)consumer_.unassign();
      return std::unexpected(kafka::Error::from_code(RD_KAFKA_RESP_ERR__INTR, "stopped"));
    }
    auto m = consumer_.poll(std::chrono::milliseconds(200));
    if (!m) {
      if (std::chrono::steady_clock::now() - last > idle_timeout) {
        return std::unexpected(kafka::Error::from_code(
            RD_KAFKA_RESP_ERR__TIMED_OUT, "no record for " + std::to_string(idle_timeout.count()) +
                                              " ms while " + std::to_string(open.size()) +
                                              " partitions were not read to their end"));
      }
      continue;
    }
    last = std::chrono::steady_clock::now();
    if (!m->is_record() && !m->end_of_partition()) {
      const auto e = m->error();
      if (e.fatal) return std::unexpected(e);
      continue;  // librdkafka retries a transient error itself
    }
    const auto it = open.find({std::string(m->topic()), m->partition()});
    if (it == open.end()) continue;
    const std::int64_t end = it->second;
    if (m->end_of_partition()) {
      if (m->offset() >= end) open.erase(it);
      continue;
    }
    if (m->offset() >= end) {
      open.erase(it);
      continue;
    }
    TopicEvent ev;
    ev.id = m->header(header::kId).value_or(std::string_view{});
    const auto value = m->value();
    if (auto d = m->header(header::kPayloadDigest)) {
      ev.digest = *d;
    } else if (value) {
      digest_.clear();
      router::append_payload_digest(digest_, *value);
      ev.digest = digest_;
    }
    ev.timestamp_ms = m->timestamp_ms();
    ev.topic = m->topic();
    ev.partition = m->partition();
    ev.offset = m->offset();
    visit(ev);
    if (m->offset() + 1 >= end) open.erase(it);
  }
  // The next pass assigns again from the beginning; nothing fetched for this one is kept.
  if (auto u = consumer_.unassign(); !u) return std::unexpected(u.error());
  return {};
}

}  // namespace walrelay::reconcile
