// The relay's work beside the ticks (docs/relay.md "Retention" and "Metrics and health"): the
// backlog gauges sampled every Relay::kMaintenanceInterval, the retention job, and the /metrics,
// /live and /ready endpoint (app/metrics/'s HttpServer on the relay's io_context, the Prometheus
// text exposition of app/metrics/exposition.hpp).
#include <spdlog/spdlog.h>

// <utility> first: Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>
// clang-format off
#include <algorithm>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
// clang-format on

#include "walrelay/app/metrics/exposition.hpp"
#include "walrelay/pg/awaitable.hpp"
#include "walrelay/relay/relay.hpp"

namespace walrelay::relay {

namespace asio = boost::asio;
using metrics::label;
using metrics::metric;
using metrics::sample;

namespace {

std::uint64_t to_u64(const std::optional<std::string>& v) {
  return v ? std::stoull(*v) : 0;
}

}  // namespace

void Relay::start_metrics() {
  if (cfg_.metrics.listen.empty()) return;
  http_ = std::make_unique<metrics::HttpServer>(
      io_.get_executor(), [this](const std::string& target) { return serve(target); });
  auto bound = http_->start(cfg_.metrics.listen);
  if (!bound) {
    // Relaying matters more than its window: go on without the endpoint, loudly.
    spdlog::error("metrics: {}; relaying without the metrics and health endpoint", bound.error());
    http_.reset();
    return;
  }
  const auto colon = cfg_.metrics.listen.rfind(':');
  spdlog::info("metrics and health on http://{}:{}/metrics (/live, /ready)",
               cfg_.metrics.listen.substr(0, colon), *bound);
}

asio::awaitable<void> Relay::maintain() {
  auto ex = io_.get_executor();
  std::chrono::steady_clock::time_point sampled{};
  while (life_ != nullptr && !stopping_) {
    const auto now = std::chrono::steady_clock::now();
    bool catching_up = false;
    if (sampled == std::chrono::steady_clock::time_point{} ||
        now - sampled >= kMaintenanceInterval) {
      sampled = now;
      bool ok = true;
      // Every type seen before at 0, then this sample's figures; kept only when complete.
      auto fresh = backlog_;
      for (auto& entry : fresh) entry.second = Backlog{};
      for (const OutboxTable& t : tables_) {
        pg::coro::Answer a =
            co_await pg::coro::query(maint_, ex, backlog_sql(t), backlog_params(t));
        if (life_ == nullptr || stopping_) co_return;
        if (!a.ok()) {
          ok = false;
          spdlog::warn("relay: cannot count the backlog of {}: {}", t.name(), a.error.message);
          break;
        }
        for (const auto& row : *a.rows) {
          Backlog& b = fresh[{t.name(), row[0].value_or("")}];
          b.pending += to_u64(row[1]);
          b.failed += to_u64(row[2]);
          if (row[3]) b.oldest_s = std::max<std::int64_t>(b.oldest_s, std::stoll(*row[3]));
        }
      }
      db_ok_ = ok;
      if (ok) backlog_ = std::move(fresh);
    }
    if (cfg_.relay.retention.count() > 0) {
      for (const OutboxTable& t : tables_) {
        pg::coro::Answer a = co_await pg::coro::query(
            maint_, ex, retention_sql(t, kRetentionRows),
            pg::coro::params(t.poll->sent, std::to_string(cfg_.relay.retention.count())));
        if (life_ == nullptr || stopping_) co_return;
        if (!a.ok()) {
          spdlog::warn("relay: the retention job could not delete sent rows of {}: {}", t.name(),
                       a.error.message);
          break;
        }
        const std::uint64_t n = a.rows->empty() ? 0 : to_u64(a.rows->front()[0]);
        retention_deleted_ += n;
        if (n > 0) {
          spdlog::debug("relay: retention deleted {} sent row(s) of {}", n, t.name());
        }
        if (n >= kRetentionRows) catching_up = true;
      }
    }
    maint_timer_.expires_after(catching_up ? kRetentionCatchUp : kMaintenanceInterval);
    boost::system::error_code ec;
    co_await maint_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
  }
}

std::string Relay::not_ready_reason() const {
  if (stopping_ || life_ == nullptr) return "stopping";
  if (!started_) return "the outbox tables are not checked yet (database unreachable?)";
  if (backoff_.count() > 0) {
    return "backing off for " + std::to_string(backoff_.count()) +
           " ms after a failed tick: " + last_failure_;
  }
  if (!db_ok_) return "the database did not answer the last backlog count (retrying)";
  return {};
}

metrics::Response Relay::serve(const std::string& target) {
  return metrics::route_health(
      target, [this] { return not_ready_reason(); }, [this] { return metrics_text(); });
}

std::string Relay::metrics_text() const {
  std::string out;
  out.reserve(2048);
  const auto labels = [](const std::pair<std::string, std::string>& k) {
    return "table=\"" + label(k.first) + "\",aggregate_type=\"" + label(k.second) + "\"";
  };
  metric(out, "walrelay_relay_pending_rows", "gauge",
         "pending rows by table and aggregate type (sampled every 5 s)");
  for (const auto& [k, b] : backlog_)
    sample(out, "walrelay_relay_pending_rows", b.pending, labels(k));
  metric(out, "walrelay_relay_oldest_pending_seconds", "gauge",
         "age of the oldest pending row by table and aggregate type (0: none; sampled every 5 s)");
  for (const auto& [k, b] : backlog_) {
    sample(out, "walrelay_relay_oldest_pending_seconds", b.oldest_s, labels(k));
  }
  metric(out, "walrelay_relay_failed_rows", "gauge",
         "failed rows by table and aggregate type (walrelay outbox retry; sampled every 5 s)");
  for (const auto& [k, b] : backlog_)
    sample(out, "walrelay_relay_failed_rows", b.failed, labels(k));
  metric(out, "walrelay_relay_ticks_total", "counter", "ticks run (claims of every table)");
  sample(out, "walrelay_relay_ticks_total", ticks_);
  metric(out, "walrelay_relay_claimed_batches_total", "counter", "claims that returned rows");
  sample(out, "walrelay_relay_claimed_batches_total", batches_);
  metric(out, "walrelay_relay_records_published_total", "counter",
         "records Kafka acknowledged (a row published again after a crash counts again)");
  sample(out, "walrelay_relay_records_published_total", published_);
  metric(out, "walrelay_relay_rows_sent_total", "counter", "rows marked sent");
  sample(out, "walrelay_relay_rows_sent_total", sent_);
  metric(out, "walrelay_relay_rows_failed_total", "counter", "rows marked failed");
  sample(out, "walrelay_relay_rows_failed_total", failed_);
  metric(out, "walrelay_relay_rollbacks_total", "counter",
         "ticks rolled back and backed off (Kafka unavailable, a PostgreSQL error)");
  sample(out, "walrelay_relay_rollbacks_total", rollbacks_);
  metric(out, "walrelay_relay_backing_off", "gauge", "1 while the relay backs off a failed tick");
  sample(out, "walrelay_relay_backing_off", backoff_.count() > 0 ? 1 : 0);
  metric(out, "walrelay_relay_backoff_seconds", "gauge", "the current back-off (0: none)");
  sample(out, "walrelay_relay_backoff_seconds", static_cast<double>(backoff_.count()) / 1000.0);
  metric(out, "walrelay_relay_retention_deleted_rows_total", "counter",
         "sent rows the retention job deleted (relay.retention)");
  sample(out, "walrelay_relay_retention_deleted_rows_total", retention_deleted_);
  metric(out, "walrelay_relay_ready", "gauge", "1 when /ready answers 200");
  sample(out, "walrelay_relay_ready", not_ready_reason().empty() ? 1 : 0);
  return out;
}

}  // namespace walrelay::relay
