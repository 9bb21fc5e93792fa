#pragma once

// `walrelay reconcile --schedule D` (docs/reconcile.md "Schedule"): reconcile as an app::System
// that app::run runs until SIGINT/SIGTERM. Every D (from the start of a run to the start of the
// next; a run longer than D is followed by the next at once) one reconciliation runs on an
// app::BlockingWorker thread, so that the event loop keeps serving /metrics, /live, /ready
// (app/metrics's HttpServer on `metrics.listen`) and signals meanwhile. Each run writes its report
// to the output as the one-shot command does and logs one line (counts per class, the oldest
// age). A stop during a run abandons it at its next wait (the slot, a topic's records) or after
// the statement under way, and ends with kOk.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>

#include "run_once.hpp"
#include "walrelay/app/blocking_worker.hpp"
#include "walrelay/app/metrics/http_server.hpp"
#include "walrelay/app/supervisor.hpp"

namespace walrelay::reconcile {

/// The schedule. Owned by run_schedule; every call on the io_context's thread.
class ScheduledReconcile final : public app::System {
 public:
  /// `cfg`, `options` (with `schedule` set) and `out` outlive the system.
  ScheduledReconcile(boost::asio::io_context& io, const config::Config& cfg, const Options& options,
                     std::ostream& out);
  ~ScheduledReconcile() override;
  ScheduledReconcile(const ScheduledReconcile&) = delete;
  ScheduledReconcile& operator=(const ScheduledReconcile&) = delete;

  void start(app::Lifecycle& life) override;
  void stop(app::StopMode mode) override;

  /// The /metrics body (Prometheus text exposition): docs/reconcile.md "Metrics".
  [[nodiscard]] std::string metrics_text() const;

 private:
  /// Open breaks of one (table, class) at the last completed run.
  struct Open {
    std::uint64_t count = 0;
    std::int64_t oldest_first_seen_ms = -1;  ///< the earliest first_seen_ms; -1: none
  };

  void run_now();
  void on_run(std::expected<Report, Failure> result);
  void finish(ExitCode code);
  metrics::Response serve(const std::string& target) const;

  boost::asio::io_context& io_;
  const config::Config& cfg_;
  const Options& options_;
  std::ostream& out_;
  app::Lifecycle* life_ = nullptr;
  std::unique_ptr<metrics::HttpServer> http_;
  boost::asio::steady_timer timer_;
  std::atomic<bool> cancel_{false};  ///< read by the run on the worker's thread
  std::chrono::steady_clock::time_point run_started_{};
  bool stopping_ = false;
  // What /metrics shows: the last completed run's breaks, and every run's outcome.
  std::map<std::pair<std::string, std::string>, Open> open_;  ///< (table, class)
  std::uint64_t runs_clean_ = 0;
  std::uint64_t runs_breaks_ = 0;
  std::uint64_t runs_failed_ = 0;
  std::int64_t last_run_ms_ = 0;  ///< when the last run ended (ms since the epoch); 0 none
  double last_run_seconds_ = 0;   ///< how long it took
  bool last_run_ok_ = false;      ///< it produced a report
  app::BlockingWorker worker_;    ///< last: destroyed (joined) first
};

/// Runs the schedule under app::run on an io_context of its own; its exit code (command.hpp).
ExitCode run_schedule(const config::Config& cfg, const Options& options, std::ostream& out);

}  // namespace walrelay::reconcile
