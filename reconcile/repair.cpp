#include "repair.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <charconv>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "walrelay/kafka/producer.hpp"
#include "walrelay/sink/publisher.hpp"

namespace walrelay::reconcile {

namespace {

constexpr const char* kMessageTimeout = "message.timeout.ms";
constexpr std::int64_t kDefaultMessageTimeoutMs = 30'000;
constexpr auto kReportGrace = std::chrono::seconds(5);

/// The repair's producer: the configured one (walrelay's defaults, then kafka.properties), with
/// message.timeout.ms bounded (librdkafka CONFIGURATION.md) unless the configuration sets it, so
/// that a record Kafka does not take ends in a failed delivery report instead of a wait without
/// end (the connector's default, 0, never times out).
config::KafkaConfig repair_kafka(const config::Config& cfg) {
  config::KafkaConfig k = cfg.kafka;
  k.properties.try_emplace(kMessageTimeout, std::to_string(kDefaultMessageTimeoutMs));
  return k;
}

std::chrono::milliseconds message_timeout(const config::KafkaConfig& k) {
  std::int64_t ms = kDefaultMessageTimeoutMs;
  if (auto it = k.properties.find(kMessageTimeout); it != k.properties.end()) {
    std::from_chars(it->second.data(), it->second.data() + it->second.size(), ms);
  }
  // 0 means "never" to librdkafka: then wait as long as the default bound.
  return std::chrono::milliseconds(ms > 0 ? ms : kDefaultMessageTimeoutMs);
}

}  // namespace

void repair_missing(const config::Config& cfg, OutboxSource& source, const OutboxTable& t,
                    const std::vector<std::string>& ids, TableReport& report) {
  if (ids.empty()) return;
  auto fail_all = [&](const std::string& reason) {
    for (const auto& id : ids) report.repair_failed.emplace_back(id, reason);
  };
  boost::asio::io_context io;
  const config::KafkaConfig kafka_cfg = repair_kafka(cfg);
  std::vector<std::string> units;  // a published record's unit is its index here: its event id
  std::unordered_map<std::uint64_t, std::string> failed;
  std::unordered_set<std::uint64_t> acked;
  std::optional<kafka::Error> fatal;
  sink::Publisher publisher;
  std::unique_ptr<kafka::Producer> producer;
  try {
    producer = std::make_unique<kafka::Producer>(
        io.get_executor(), kafka_cfg, "walrelay-reconcile-repair-" + cfg.name,
        [&](const kafka::DeliveryReport& r) { publisher.on_delivery(r); },
        [&](const kafka::Error& e) { fatal = e; });
  } catch (const std::exception& e) {
    fail_all(std::string("cannot create the Kafka producer: ") + e.what());
    return;
  }
  publisher.attach(producer.get());
  // A row re-emitted from a SELECT is what the polling relay publishes: its source's slot.
  publisher.listen(sink::RecordSource::kRelay, [&](const kafka::DeliveryReport& r) {
    if (r.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      acked.insert(r.opaque);
    } else {
      failed.emplace(r.opaque, r.error().describe());
    }
  });
  producer->start();

  std::unordered_set<std::string> seen;
  std::uint64_t unmappable = 0;
  std::string first_error;
  auto read = source.read(
      t,
      [&](const SourceEvent& e) {
        if (fatal || e.record == nullptr || !seen.emplace(e.id).second) return;
        Record record = e.record->record();
        // Without a timestamp column the connector's record carries the commit time, which a
        // SELECT cannot know: the producer's time, as the polling relay does (docs/relay.md).
        if (record.timestamp_ms < 0) record.timestamp_ms = 0;
        const std::uint64_t unit = units.size();
        units.emplace_back(e.id);
        for (;;) {
          const sink::PublishResult pub =
              publisher.publish(sink::RecordSource::kRelay, record, unit);
          if (pub.queued()) return;
          if (pub.status != sink::PublishStatus::kQueueFull) {
            failed.emplace(unit, std::string("Kafka refused the record: ") + pub.error());
            return;
          }
          // librdkafka's queue is full: serve delivery reports until there is room.
          io.restart();
          io.run_for(std::chrono::milliseconds(50));
        }
      },
      unmappable, first_error, 100, &ids);
  if (!read) {
    spdlog::error("reconcile --repair: {}: reading the missing rows again: {}", t.name(),
                  read.error().message);
  }
  // Every delivery report, or the deadline: a record still unreported then counts as failed.
  const auto deadline =
      std::chrono::steady_clock::now() + message_timeout(kafka_cfg) + kReportGrace;
  while (!fatal && acked.size() + failed.size() < units.size() &&
         std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(100));
  }
  for (std::uint64_t u = 0; u < units.size(); ++u) {
    if (acked.contains(u)) {
      report.repaired.push_back(units[u]);
    } else if (auto it = failed.find(u); it != failed.end()) {
      report.repair_failed.emplace_back(units[u], it->second);
    } else {
      report.repair_failed.emplace_back(
          units[u], fatal ? "the Kafka producer failed: " + fatal->describe()
                          : std::string("no acknowledgement from Kafka in time"));
    }
  }
  for (const auto& id : ids) {
    if (seen.contains(id)) continue;
    report.repair_failed.emplace_back(
        id, !read ? "cannot read the row again: " + read.error().message
                  : (unmappable > 0 ? first_error
                                    : std::string("the row is not in the table's snapshot")));
  }
  producer->purge();
  producer->stop();
  spdlog::info("reconcile --repair: {}: {} missing event(s) re-emitted and acknowledged, {} not",
               t.name(), report.repaired.size(), report.repair_failed.size());
}

}  // namespace walrelay::reconcile
