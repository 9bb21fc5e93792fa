#include "schedule.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

#include "walrelay/app/metrics/exposition.hpp"

namespace walrelay::reconcile {

namespace {

using metrics::label;
using metrics::metric;
using metrics::sample;

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ScheduledReconcile::ScheduledReconcile(boost::asio::io_context& io, const config::Config& cfg,
                                       const Options& options, std::ostream& out)
    : io_(io), cfg_(cfg), options_(options), out_(out), timer_(io), worker_(io.get_executor()) {}

ScheduledReconcile::~ScheduledReconcile() {
  cancel_ = true;  // a run still under way ends at its next wait; the worker joins it
  if (http_) http_->stop();
}

void ScheduledReconcile::start(app::Lifecycle& life) {
  life_ = &life;
  if (!cfg_.metrics.listen.empty()) {
    http_ = std::make_unique<metrics::HttpServer>(
        io_.get_executor(), [this](const std::string& target) { return serve(target); });
    auto bound = http_->start(cfg_.metrics.listen);
    if (!bound) {
      // The schedule's results are its metrics: without the endpoint it has no purpose.
      spdlog::error("metrics.listen: {}: reconcile --schedule serves its results there",
                    bound.error());
      http_.reset();
      finish(ExitCode::kConfigError);
      return;
    }
    const auto colon = cfg_.metrics.listen.rfind(':');
    spdlog::info("metrics and health on http://{}:{}/metrics (/live, /ready)",
                 cfg_.metrics.listen.substr(0, colon), *bound);
  } else {
    spdlog::warn("reconcile --schedule: metrics.listen is empty: results in the log only");
  }
  spdlog::info("reconcile: one run every {} ms", options_.schedule->count());
  run_now();
}

void ScheduledReconcile::run_now() {
  if (stopping_ || worker_.busy()) return;
  run_started_ = std::chrono::steady_clock::now();
  worker_.run([this] { return reconcile_once(cfg_, options_, cancel_); },
              [this](std::expected<Report, Failure> result) { on_run(std::move(result)); });
}

void ScheduledReconcile::on_run(std::expected<Report, Failure> result) {
  const auto took = std::chrono::steady_clock::now() - run_started_;
  if (stopping_) {
    finish(ExitCode::kOk);
    return;
  }
  last_run_ms_ = now_ms();
  last_run_seconds_ = std::chrono::duration<double>(took).count();
  last_run_ok_ = static_cast<bool>(result);
  if (!result) {
    ++runs_failed_;
    spdlog::error("reconcile: run failed: {}", result.error().message);
    if (result.error().code == ExitCode::kConfigError ||
        result.error().code == ExitCode::kKafkaAuthFailed) {
      finish(result.error().code);  // retrying cannot help
      return;
    }
  } else {
    const Report& report = *result;
    open_.clear();
    std::string counts;
    std::int64_t oldest_age = -1;
    std::uint64_t total = 0;
    for (const auto& t : report.tables) {
      for (const BreakClass cls : kBreakClasses) open_[{t.table, std::string(to_string(cls))}];
      for (const auto& b : t.found.breaks) {
        Open& o = open_[{t.table, std::string(to_string(b.cls))}];
        ++o.count;
        if (b.first_seen_ms >= 0 &&
            (o.oldest_first_seen_ms < 0 || b.first_seen_ms < o.oldest_first_seen_ms)) {
          o.oldest_first_seen_ms = b.first_seen_ms;
        }
        oldest_age = std::max(oldest_age, break_age_ms(b, report.now_ms));
      }
      total += t.found.breaks.size();
    }
    for (const BreakClass cls : kBreakClasses) {
      std::uint64_t n = 0;
      for (const auto& [key, o] : open_) n += key.second == to_string(cls) ? o.count : 0;
      // The classes of poll mode and --inbox only when there are some (docs/reconcile.md).
      if (n == 0 && cls > BreakClass::kInFlight) continue;
      counts +=
          (counts.empty() ? "" : ", ") + std::string(to_string(cls)) + " " + std::to_string(n);
    }
    if (total > 0) {
      ++runs_breaks_;
    } else {
      ++runs_clean_;
    }
    spdlog::info("reconcile: run done in {:.1f} s: {} breaks ({}), oldest {}", last_run_seconds_,
                 total, counts, format_age(oldest_age));
    if (options_.json) {
      write_json(out_, report);
    } else {
      write_summary(out_, report);
    }
    out_.flush();
  }
  const auto next = run_started_ + *options_.schedule;
  timer_.expires_at(next);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) run_now();
  });
}

void ScheduledReconcile::stop(app::StopMode mode) {
  stopping_ = true;
  cancel_ = true;
  timer_.cancel();
  // A run under way ends at its next wait (its answer then finishes); kNow does not wait for it.
  if (worker_.busy() && mode == app::StopMode::kGraceful) return;
  finish(ExitCode::kOk);
}

void ScheduledReconcile::finish(ExitCode code) {
  if (life_ == nullptr) return;
  timer_.cancel();
  if (http_) http_->stop();
  spdlog::info("reconcile: stopped after {} run(s) ({} clean, {} with breaks, {} failed)",
               runs_clean_ + runs_breaks_ + runs_failed_, runs_clean_, runs_breaks_, runs_failed_);
  app::Lifecycle* life = life_;
  life_ = nullptr;
  life->done(code);
}

metrics::Response ScheduledReconcile::serve(const std::string& target) const {
  const auto not_ready_reason = [this]() -> std::string {
    if (last_run_ok_) return {};
    return last_run_ms_ == 0 ? "the first run has not ended yet"
                             : "the last run could not read a side (see the log)";
  };
  return metrics::route_health(target, not_ready_reason, [this] { return metrics_text(); });
}

std::string ScheduledReconcile::metrics_text() const {
  std::string out;
  out.reserve(1024);
  const std::int64_t now = now_ms();
  metric(out, "walrelay_reconcile_open_breaks", "gauge",
         "breaks found by the last completed run, by table and class");
  for (const auto& [key, o] : open_) {
    sample(out, "walrelay_reconcile_open_breaks", o.count,
           "table=\"" + label(key.first) + "\",class=\"" + label(key.second) + "\"");
  }
  metric(out, "walrelay_reconcile_oldest_break_age_seconds", "gauge",
         "age now of the oldest of those breaks, from its first-seen time (0: none)");
  for (const auto& [key, o] : open_) {
    const double age =
        o.oldest_first_seen_ms < 0 ? 0.0 : static_cast<double>(now - o.oldest_first_seen_ms) / 1e3;
    sample(out, "walrelay_reconcile_oldest_break_age_seconds", age < 0 ? 0.0 : age,
           "table=\"" + label(key.first) + "\",class=\"" + label(key.second) + "\"");
  }
  metrics::labelled(out, "walrelay_reconcile_runs_total", "counter",
                    "runs ended, by result (clean, breaks, failed: a side could not be read)",
                    "result",
                    {{"clean", runs_clean_}, {"breaks", runs_breaks_}, {"failed", runs_failed_}});
  metric(out, "walrelay_reconcile_last_run_timestamp_seconds", "gauge",
         "when the last run ended (seconds since the epoch; 0: none yet)");
  sample(out, "walrelay_reconcile_last_run_timestamp_seconds",
         static_cast<double>(last_run_ms_) / 1e3);
  metric(out, "walrelay_reconcile_last_run_duration_seconds", "gauge",
         "how long the last run took");
  sample(out, "walrelay_reconcile_last_run_duration_seconds", last_run_seconds_);
  metric(out, "walrelay_reconcile_last_run_success", "gauge",
         "1 when the last run read both sides (its breaks are the ones above)");
  sample(out, "walrelay_reconcile_last_run_success", last_run_ok_ ? 1 : 0);
  return out;
}

ExitCode run_schedule(const config::Config& cfg, const Options& options, std::ostream& out) {
  boost::asio::io_context io(1);
  ScheduledReconcile system(io, cfg, options, out);
  return app::run(io, system);
}

}  // namespace walrelay::reconcile
