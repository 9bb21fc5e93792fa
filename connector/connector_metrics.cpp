// The connector's metrics and health endpoint (issue "Operations"): Prometheus text exposition
// (https://prometheus.io/docs/instrumenting/exposition_formats/), units in the names, served by
// metrics::HttpServer on the connector's io_context. docs/operations.md "Metrics" lists every
// metric.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "walrelay/app/metrics/exposition.hpp"
#include "walrelay/connector/connector.hpp"

namespace walrelay {

using metrics::label;
using metrics::labelled;
using metrics::metric;
using metrics::sample;

namespace {

double now_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace

void Connector::start_metrics() {
  if (cfg_.metrics.listen.empty()) return;
  http_ = std::make_unique<metrics::HttpServer>(
      io_.get_executor(), [this](const std::string& target) { return serve(target); });
  auto bound = http_->start(cfg_.metrics.listen);
  if (!bound) {
    // The data path matters more than its window: stream without the endpoint, loudly.
    spdlog::error("metrics: {}; streaming without the metrics and health endpoint", bound.error());
    http_.reset();
    return;
  }
  const auto colon = cfg_.metrics.listen.rfind(':');
  spdlog::info("metrics and health on http://{}:{}/metrics (/live, /ready)",
               cfg_.metrics.listen.substr(0, colon), *bound);
}

void Connector::note_commit_time(Lsn next_lsn, std::int64_t commit_ts_ms) {
  // Bounded by the in-flight limits: one entry per transaction with events not yet confirmed.
  // Pruned here too, not only by a scrape: with the metrics endpoint off nothing else would.
  drop_confirmed_commit_times();
  if (commit_ts_ms > 0) pending_commits_.emplace_back(next_lsn, commit_ts_ms);
}

void Connector::drop_confirmed_commit_times() {
  // What may be confirmed: with delivery exactly_once, what a Kafka commit made visible.
  const Lsn flush = confirmable_lsn();
  while (!pending_commits_.empty() && pending_commits_.front().first <= flush) {
    pending_commits_.pop_front();
  }
}

double Connector::lag_seconds() {
  drop_confirmed_commit_times();
  if (pending_commits_.empty() || !streaming_) return 0;
  const double lag = now_seconds() - static_cast<double>(pending_commits_.front().second) / 1e3;
  return lag > 0 ? lag : 0;
}

std::string Connector::not_ready_reason() {
  if (stopping_) return "stopping";
  if (standby_) return "standing by: the slot is held by another instance";
  if (!streaming_) return "not streaming (connecting, taking a snapshot or reconnecting)";
  if (incremental_ && !incremental_->blocked().empty()) {
    return "incremental snapshot " + incremental_->blocked();
  }
  const double lag = lag_seconds();
  const double max_lag = std::chrono::duration<double>(cfg_.metrics.max_lag).count();
  if (lag > max_lag) {
    return fmt::format("lag {:.1f} s exceeds metrics.max_lag {:.1f} s", lag, max_lag);
  }
  if (tracker_.in_flight_events() > 0 &&
      std::chrono::steady_clock::now() - last_ack_ > cfg_.metrics.max_lag) {
    return "no acknowledgement from Kafka for longer than metrics.max_lag";
  }
  return {};
}

metrics::Response Connector::serve(const std::string& target) {
  return metrics::route_health(
      target, [this] { return not_ready_reason(); }, [this] { return metrics_text(); });
}

std::string Connector::metrics_text() {
  std::string out;
  out.reserve(4096);
  metric(out, "walrelay_build_info", "gauge", "walrelay's version (value 1)");
  sample(out, "walrelay_build_info", 1, "version=\"" + label(WALRELAY_VERSION) + "\"");
  metric(out, "walrelay_up", "gauge", "1 while the process runs");
  sample(out, "walrelay_up", 1);
  metric(out, "walrelay_streaming", "gauge", "1 while the slot streams");
  sample(out, "walrelay_streaming", streaming_ ? 1 : 0);
  metric(out, "walrelay_standby", "gauge", "1 while waiting for a slot another instance holds");
  sample(out, "walrelay_standby", standby_ ? 1 : 0);
  metric(out, "walrelay_events_published_total", "counter",
         "records Kafka acknowledged, by topic (dead-letter records included)");
  const sink::PublishMetrics& published = publisher_.metrics();
  published.for_each_published([&](std::string_view topic, std::string_view op, std::uint64_t n) {
    sample(out, "walrelay_events_published_total", n,
           "topic=\"" + label(topic) + "\",op=\"" + label(op) + "\"");
  });
  metric(out, "walrelay_published_bytes_total", "counter",
         "key + value bytes of the records Kafka acknowledged");
  sample(out, "walrelay_published_bytes_total", published.published_bytes());
  labelled(out, "walrelay_dead_lettered_total", "counter", "records sent to the dead-letter topic",
           "reason",
           {{"mapping", dead_lettered_mapping_},
            {"oversize", dead_lettered_oversize_},
            {"delivery", dead_lettered_delivery_}});
  metric(out, "walrelay_delivery_errors_total", "counter",
         "delivery reports with an error that could not be retried");
  sample(out, "walrelay_delivery_errors_total", published.delivery_errors());
  metric(out, "walrelay_nan_as_null_total", "counter",
         "NOT NULL numeric/float values that arrived as null (wal2json before 2.6 prints NaN and "
         "Infinity as null)");
  sample(out, "walrelay_nan_as_null_total", router_ ? router_->nan_as_null_count() : 0);
  // delivery exactly_once (0 in the default mode, served always so that dashboards need no mode).
  labelled(out, "walrelay_kafka_transactions_total", "counter",
           "Kafka transactions ended (delivery exactly_once)", "outcome",
           {{"committed", eos_commits_}, {"aborted", eos_aborts_}});
  metric(out, "walrelay_skipped_records_total", "counter",
         "records not published again because Kafka had them (the stored position)");
  sample(out, "walrelay_skipped_records_total", eos_skipped_);
  metric(out, "walrelay_flush_lsn", "gauge",
         "the position walrelay confirms (LSN): acknowledged, and with delivery exactly_once "
         "committed in Kafka");
  sample(out, "walrelay_flush_lsn", confirmable_lsn().value());
  metric(out, "walrelay_received_lsn", "gauge", "the last WAL position received (LSN)");
  sample(out, "walrelay_received_lsn", received_lsn_.value());
  metric(out, "walrelay_server_wal_end_lsn", "gauge", "the server's WAL end in its last message");
  sample(out, "walrelay_server_wal_end_lsn", server_wal_end_.value());
  metric(out, "walrelay_replication_lag_bytes", "gauge",
         "server WAL end minus the acknowledged position");
  const Lsn flush = confirmable_lsn();
  sample(out, "walrelay_replication_lag_bytes",
         server_wal_end_ > flush ? server_wal_end_.value() - flush.value() : 0);
  metric(out, "walrelay_lag_seconds", "gauge",
         "now minus the commit time of the oldest change not yet acknowledged (0: none pending)");
  sample(out, "walrelay_lag_seconds", lag_seconds());
  metric(out, "walrelay_in_flight_events", "gauge", "records handed to Kafka, not acknowledged");
  sample(out, "walrelay_in_flight_events", tracker_.in_flight_events());
  metric(out, "walrelay_in_flight_bytes", "gauge", "their key + value bytes");
  sample(out, "walrelay_in_flight_bytes", tracker_.in_flight_bytes());
  metric(out, "walrelay_backpressure_paused", "gauge", "1 while reading the slot is paused");
  sample(out, "walrelay_backpressure_paused", stream_ && stream_->paused() && !parked_ ? 1 : 0);
  metric(out, "walrelay_catalog_lookup_waiting", "gauge",
         "1 while a change waits for its catalog lookup (reading the slot is paused)");
  sample(out, "walrelay_catalog_lookup_waiting", parked_ ? 1 : 0);
  metric(out, "walrelay_reconnects_total", "counter", "replication sessions retried");
  sample(out, "walrelay_reconnects_total", reconnects_);
  metric(out, "walrelay_slot_rewinds_total", "counter",
         "sessions that found the slot's confirmed_flush_lsn behind the position walrelay had "
         "confirmed (a PostgreSQL restart without a checkpoint): its changes are decoded again");
  sample(out, "walrelay_slot_rewinds_total", slot_rewinds_);
  metric(out, "walrelay_slot_rewind_bytes_total", "counter",
         "WAL bytes between those two positions, decoded again");
  sample(out, "walrelay_slot_rewind_bytes_total", slot_rewind_bytes_);
  metric(out, "walrelay_slot_retained_wal_bytes", "gauge",
         "WAL the server keeps for the slot, from its restart_lsn (polled; -1 unknown)");
  sample(out, "walrelay_slot_retained_wal_bytes", retained_wal_bytes_);
  metric(out, "walrelay_catalog_alarms_total", "counter",
         "captured tables that stopped being fully decoded, entries that stopped matching");
  sample(out, "walrelay_catalog_alarms_total", catalog_alarms_);
  metric(out, "walrelay_outbox_updates_ignored_total", "counter",
         "UPDATEs of outbox rows (not events)");
  sample(out, "walrelay_outbox_updates_ignored_total",
         router_ ? router_->outbox_updates_ignored() : 0);
  metric(out, "walrelay_snapshot_running", "gauge",
         "1 while an initial or incremental snapshot reads tables");
  sample(out, "walrelay_snapshot_running",
         (snapshotter_ != nullptr) || (incremental_ && incremental_->busy()) ? 1 : 0);
  std::vector<snapshot::SnapshotFigures> running;
  if (snapshotter_) running.push_back(snapshotter_->figures());
  if (incremental_ && incremental_->busy()) running.push_back(incremental_->figures());
  snapshot::append_metrics(out, running);
  return out;
}

}  // namespace walrelay
