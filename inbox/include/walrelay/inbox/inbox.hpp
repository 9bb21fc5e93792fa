#pragma once

// `walrelay inbox` (docs/inbox.md): Kafka into PostgreSQL with every event decided once. A
// consumer of the group `inbox.group_id` (kafka::Consumer, subscribe) whose positions live in
// PostgreSQL: each batch of at most `inbox.batch.max_events` events (or what `batch.max_wait`
// gathered) is decided in one transaction (pg::AsyncConnection) together with the partitions'
// next offsets, and on every assignment the consumer seeks to the stored offsets (Kafka's own
// committed offsets are not read).

// <utility> first: Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>
// clang-format off
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/awaitable.hpp>
// clang-format on
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "walrelay/app/exit_code.hpp"
#include "walrelay/app/metrics/http_server.hpp"
#include "walrelay/app/supervisor.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/inbox/counts.hpp"
#include "walrelay/inbox/event.hpp"
#include "walrelay/kafka/consumer.hpp"
#include "walrelay/pg/async_connection.hpp"

namespace walrelay::inbox {

namespace detail {
class Decider;
}  // namespace detail

/// The inbox as an app::System on one io_context: polls the consumer (never blocking the loop
/// longer than a seek), decides batches, handles the group's assignments. SIGTERM (kGraceful)
/// finishes the batch in progress, commits it and ends with kOk; kNow ends at once (what is not
/// committed is read again by the next start). An unreachable database is retried with back-off
/// (100 ms doubling to 5 s), never quarantines an event; a database or handler error retrying
/// cannot help ends with kRuntimeError. Owned and called on the io_context's thread.
class Inbox final : public app::System {
 public:
  /// `cfg.inbox` must be present (load_inbox_config_file).
  Inbox(boost::asio::io_context& io, config::Config cfg);
  ~Inbox() override;
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  void start(app::Lifecycle& life) override;
  void stop(app::StopMode mode) override;

 private:
  using PartitionKey = std::pair<std::string, std::int32_t>;
  struct Partition {
    bool ready = false;      ///< seeked to its stored offset and resumed
    std::int64_t next = -1;  ///< offset of the next record expected (-1: any)
    /// The next offset stored in `offsets` (what a restart reads from); -1: none yet.
    std::int64_t committed = -1;
  };

  boost::asio::awaitable<void> main();
  boost::asio::awaitable<bool> create_schema();
  boost::asio::awaitable<bool> take_assignments();
  boost::asio::awaitable<bool> commit_batch();
  boost::asio::awaitable<void> maintenance();
  boost::asio::awaitable<void> sleep(std::chrono::milliseconds d);
  void on_rebalance(kafka::Rebalance what, const std::vector<kafka::PartitionOffset>& parts);
  /// Polls without waiting until the batch is full or nothing is there; false when nothing came.
  bool collect();
  void finish(ExitCode code);
  // The metrics and health endpoint (`metrics.listen`; metrics.cpp, docs/inbox.md "Metrics").
  void start_metrics();
  metrics::Response serve(const std::string& target);
  std::string metrics_text() const;
  std::string not_ready_reason() const;
  void log_progress(bool force);

  boost::asio::io_context& io_;
  config::Config cfg_;
  app::Lifecycle* life_ = nullptr;
  std::optional<kafka::Consumer> consumer_;
  pg::AsyncConnection conn_;
  std::unique_ptr<detail::Decider> decider_;
  std::unique_ptr<detail::Counts> total_;
  std::map<PartitionKey, Partition> partitions_;
  std::vector<PartitionKey> pending_;  ///< assigned, not yet seeked
  std::vector<Event> batch_;
  bool stopping_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point last_progress_;
  std::chrono::steady_clock::time_point last_maintenance_;
  // What /metrics and /ready show.
  std::unique_ptr<metrics::HttpServer> http_;
  std::map<std::string, detail::Counts> by_topic_;  ///< decisions committed, per topic
  std::uint64_t batches_ = 0;                       ///< committed
  double batch_seconds_ = 0;                        ///< their transactions' time, summed
  std::uint64_t retries_ = 0;                       ///< batches rolled back and decided again
  bool schema_ready_ = false;
  bool db_ok_ = false;            ///< the last statement reached the database
  bool joined_ = false;           ///< the group gave this member an assignment (maybe empty)
  double oldest_deferred_s_ = 0;  ///< from the last maintenance pass
  double oldest_quarantined_s_ = 0;
  std::uint64_t deferred_now_ = 0;
  std::uint64_t quarantined_now_ = 0;
};

/// `walrelay inbox --config F`: runs the inbox under app::run until it ends; its exit code.
ExitCode run_inbox(config::Config cfg);

}  // namespace walrelay::inbox
