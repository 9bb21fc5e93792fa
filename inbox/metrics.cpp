// The inbox's metrics and health endpoint (docs/inbox.md "Metrics and health"): app/metrics's
// HttpServer on the inbox's own io_context, the Prometheus text exposition of app/metrics.
#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "decide.hpp"
#include "walrelay/app/metrics/exposition.hpp"
#include "walrelay/inbox/inbox.hpp"

namespace walrelay::inbox {

using metrics::label;
using metrics::metric;
using metrics::sample;

void Inbox::start_metrics() {
  if (cfg_.metrics.listen.empty()) return;
  http_ = std::make_unique<metrics::HttpServer>(
      io_.get_executor(), [this](const std::string& target) { return serve(target); });
  auto bound = http_->start(cfg_.metrics.listen);
  if (!bound) {
    // Deciding events matters more than its window: go on without the endpoint, loudly.
    spdlog::error("metrics: {}; consuming without the metrics and health endpoint", bound.error());
    http_.reset();
    return;
  }
  const auto colon = cfg_.metrics.listen.rfind(':');
  spdlog::info("metrics and health on http://{}:{}/metrics (/live, /ready)",
               cfg_.metrics.listen.substr(0, colon), *bound);
}

std::string Inbox::not_ready_reason() const {
  if (stopping_ || finished_) return "stopping";
  if (!schema_ready_) return "the inbox schema is not created yet (database unreachable?)";
  if (!db_ok_) return "the database did not answer the last statement (retrying)";
  if (!joined_) return "no assignment from the consumer group yet";
  if (!pending_.empty()) return "seeking assigned partitions to their stored offsets";
  return {};
}

metrics::Response Inbox::serve(const std::string& target) {
  return metrics::route_health(
      target, [this] { return not_ready_reason(); }, [this] { return metrics_text(); });
}

std::string Inbox::metrics_text() const {
  std::string out;
  out.reserve(2048);
  metric(out, "walrelay_inbox_decisions_total", "counter",
         "events decided and committed, by topic and decision (tombstones: SKIPPED)");
  for (const auto& [topic, c] : by_topic_) {
    const std::string t = "topic=\"" + label(topic) + "\",decision=\"";
    sample(out, "walrelay_inbox_decisions_total", c.applied, t + "APPLIED\"");
    sample(out, "walrelay_inbox_decisions_total", c.duplicate, t + "DUPLICATE\"");
    sample(out, "walrelay_inbox_decisions_total", c.deferred, t + "DEFERRED\"");
    sample(out, "walrelay_inbox_decisions_total", c.quarantined, t + "QUARANTINED\"");
    sample(out, "walrelay_inbox_decisions_total", c.skipped, t + "SKIPPED\"");
  }
  metric(out, "walrelay_inbox_batch_seconds", "summary",
         "time of each committed batch's transaction (decisions, handlers, offsets, commit)");
  sample(out, "walrelay_inbox_batch_seconds_sum", batch_seconds_);
  sample(out, "walrelay_inbox_batch_seconds_count", batches_);
  decider_->handler_seconds().write(
      out, "walrelay_inbox_handler_seconds",
      "time of each event's effect (its handlers' statements, or the events table's insert), "
      "round trips to PostgreSQL included");
  metric(out, "walrelay_inbox_batch_retries_total", "counter",
         "batches rolled back on a transient error (serialization, deadlock, lost connection) and "
         "decided again");
  sample(out, "walrelay_inbox_batch_retries_total", retries_);
  metric(out, "walrelay_inbox_deferred_events", "gauge",
         "events waiting for a prior version (at the last check, every 10 s)");
  sample(out, "walrelay_inbox_deferred_events", deferred_now_);
  metric(out, "walrelay_inbox_oldest_deferred_seconds", "gauge",
         "age of the oldest deferred event (0: none)");
  sample(out, "walrelay_inbox_oldest_deferred_seconds", oldest_deferred_s_);
  metric(out, "walrelay_inbox_quarantined_events", "gauge", "rows of the quarantine table");
  sample(out, "walrelay_inbox_quarantined_events", quarantined_now_);
  metric(out, "walrelay_inbox_oldest_quarantined_seconds", "gauge",
         "age of the oldest quarantined event (0: none)");
  sample(out, "walrelay_inbox_oldest_quarantined_seconds", oldest_quarantined_s_);
  std::size_t ready = 0;
  for (const auto& entry : partitions_) ready += entry.second.ready ? 1 : 0;
  metric(out, "walrelay_inbox_assigned_partitions", "gauge",
         "partitions this member consumes (seeked to their stored offsets)");
  sample(out, "walrelay_inbox_assigned_partitions", ready);
  metric(out, "walrelay_inbox_consumer_lag", "gauge",
         "records of an assigned partition not decided and committed yet: its end offset as "
         "librdkafka last fetched it minus the next offset stored in the offsets table");
  for (const auto& [key, part] : partitions_) {
    if (!part.ready || !consumer_) continue;
    // The watermarks librdkafka caches from its fetch responses (rdkafka.h,
    // rd_kafka_get_watermark_offsets: no request, the high one is updated by every fetch); under
    // read_committed the high one is the last stable offset. Unknown before the first fetch.
    std::int64_t low = RD_KAFKA_OFFSET_INVALID;
    std::int64_t high = RD_KAFKA_OFFSET_INVALID;
    if (rd_kafka_get_watermark_offsets(consumer_->handle(), key.first.c_str(), key.second, &low,
                                       &high) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        high < 0) {
      continue;
    }
    // Nothing stored yet (read from the beginning): from the log's start as last known.
    const std::int64_t position =
        part.committed >= 0 ? part.committed : std::max<std::int64_t>(low, 0);
    sample(out, "walrelay_inbox_consumer_lag", std::max<std::int64_t>(high - position, 0),
           "topic=\"" + label(key.first) + "\",partition=\"" + std::to_string(key.second) + "\"");
  }
  metric(out, "walrelay_inbox_ready", "gauge", "1 when /ready answers 200");
  sample(out, "walrelay_inbox_ready", not_ready_reason().empty() ? 1 : 0);
  return out;
}

}  // namespace walrelay::inbox
