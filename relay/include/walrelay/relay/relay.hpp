#pragma once

// The polling outbox relay (`source.mode: poll`, docs/relay.md) as a system app::run runs: it
// drains outbox tables with an ordinary session (no REPLICATION, no slot) and publishes their rows
// through the shared pipeline (router::OutboxRecordBuilder, sink::Publisher), so that a consumer
// cannot tell a polled event from one the WAL mode read.
//
// One tick, per table (claim: transaction, the seed article's "claim and mark in one
// transaction"): BEGIN; the claim (claim_sql: FOR UPDATE SKIP LOCKED plus the head-of-key rule);
// each row becomes its record (columns rendered as wal2json format-version 2 prints them,
// decoder::append_wal2json_value, in a session with the replication session's pinned settings)
// and is published; when every delivery report came (or `relay.ack_timeout` passed), the rows are
// marked (decide: sent per key up to its first failure, failures counted or failed) and the
// transaction COMMITs. A crash before the COMMIT leaves the rows pending: published again with the
// same `id`, never lost. Whole-batch failure: ROLLBACK and back off the whole tick.
//
// claim: lease (docs/relay.md "The lease variant"): the claim is one statement on its own
// (lease_claim_sql: the same selection over pending, retry_wait and expired claims, setting
// claimed + this process's owner token + lease_until), committed before anything is published;
// the marks run afterwards in a second short transaction, each guarded by the token (the lease_*
// statements), rows behind a key's first failure going back to pending; a whole-batch failure
// gives the batch back to pending (release_all) and backs off. A crash leaves the batch claimed
// until its lease passes; then any instance takes it over.
//
// Wake-up: LISTEN on relay.notify_channel (a second session; notifications coalesce into one
// tick), relay.poll_interval as the backstop, and at once again after a full batch.
//
// Test seam (docs/relay.md "Test seam"): WALRELAY_RELAY_TEST_CRASH_AFTER_ACK=<event id>, read
// only here, makes the process exit (code 86, no clean-up) once Kafka acknowledged that event and
// before the claim transaction COMMITs (claim: lease: before the marks): what a crash at the
// worst moment does.
//
// Beside the ticks, on a session of its own (so that neither waits for the other): every
// kMaintenanceInterval the backlog gauges of /metrics (backlog_sql) and, with relay.retention,
// one retention statement per table (retention_sql, at most kRetentionRows rows; again after
// kRetentionCatchUp while a statement deletes that many). /metrics, /live and /ready on
// metrics.listen (app/metrics/'s server on this io_context; docs/relay.md "Metrics and health").
//
// Owned by main; every call on the io_context's thread.

// <utility> first: Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>
// clang-format off
#include <boost/asio/awaitable.hpp>
// clang-format on
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "walrelay/app/metrics/http_server.hpp"
#include "walrelay/app/supervisor.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/kafka/producer.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/relay/batch_outcome.hpp"
#include "walrelay/relay/outbox_table.hpp"
#include "walrelay/relay/preflight.hpp"
#include "walrelay/router/outbox_record.hpp"
#include "walrelay/router/type_registry.hpp"
#include "walrelay/sink/publisher.hpp"

namespace walrelay::relay {

class Relay : public app::System {
 public:
  /// The backlog gauges' and the retention job's period.
  static constexpr std::chrono::seconds kMaintenanceInterval{5};
  /// Rows one retention statement deletes at most (per table).
  static constexpr std::size_t kRetentionRows = 1000;
  /// The retention job's next statement while the last one deleted kRetentionRows (catching up).
  static constexpr std::chrono::seconds kRetentionCatchUp{1};

  /// `cfg` must be a poll-mode configuration (the loader's rules passed).
  Relay(boost::asio::io_context& io, config::Config cfg);
  ~Relay() override;

  void start(app::Lifecycle& life) override;
  void stop(app::StopMode mode) override;

 private:
  struct Row {
    std::string tid;       ///< ctid
    std::string event_id;  ///< for the test seam and logs
    RowOutcome outcome;
  };

  void on_preflight(PreflightResult result);
  void listen();
  void schedule(std::chrono::milliseconds delay);
  void tick();
  void claim_next_table();
  void on_claimed(pg::AsyncConnection::Result result);
  void publish_rows(const pg::AsyncConnection::Rows& rows);
  void on_delivery(const kafka::DeliveryReport& report);
  void reports_done();
  void write_back(const BatchDecision& decision);
  void mark_sent(const std::shared_ptr<BatchDecision>& decision);
  void write_failures(std::shared_ptr<BatchDecision> decision, std::size_t next);
  /// claim: lease: the batch's rows neither sent nor failed go back to pending (no attempt), then
  /// the COMMIT; claim: transaction: the COMMIT alone (they stayed pending).
  void release_rest(const std::shared_ptr<BatchDecision>& decision);
  /// claim: lease, Kafka acknowledged nothing: the whole batch back to pending (no attempt), then
  /// fail_tick(why) backs off.
  void release_all(std::string why);
  /// claim: lease: logs rows a mark found no longer claimed by this token (the lease passed).
  void lease_lost(std::size_t rows);
  void commit();
  /// The tick failed (a server or connection error, a whole-batch Kafka failure): drops the
  /// transaction and backs off. `kind` kStatement (the table refused a statement the relay
  /// writes: a CHECK, a trigger, a changed column; pg/error.hpp) stops the relay instead
  /// (ExitCode::kRuntimeError): retrying would publish the same batch again at every tick.
  void fail_tick(const std::string& why, bool rollback,
                 pg::ErrorKind kind = pg::ErrorKind::kTransient);
  void end_tick();
  void finish(ExitCode code);

  // relay/maintenance.cpp: the backlog gauges, the retention job, /metrics and /ready.
  void start_metrics();
  boost::asio::awaitable<void> maintain();
  [[nodiscard]] std::string not_ready_reason() const;
  metrics::Response serve(const std::string& target);
  [[nodiscard]] std::string metrics_text() const;

  boost::asio::io_context& io_;
  config::Config cfg_;
  app::Lifecycle* life_ = nullptr;
  pg::AsyncConnection conn_;      ///< the claim transactions
  pg::AsyncConnection listener_;  ///< LISTEN notify_channel
  std::unique_ptr<kafka::Producer> producer_;
  sink::Publisher publisher_;
  router::TypeRegistry types_;
  router::OutboxRecordBuilder builder_{types_};
  router::RecordBuffer buffer_;
  std::vector<OutboxTable> tables_;
  std::vector<std::string> claim_sql_;
  boost::asio::steady_timer tick_timer_;
  boost::asio::steady_timer ack_timer_;

  bool started_ = false;            ///< preflight passed
  bool preflight_running_ = false;  ///< its queries are under way
  bool stopping_ = false;
  bool in_tick_ = false;
  bool tick_again_ = false;      ///< a notification came during a tick
  bool full_batch_ = false;      ///< some table gave a full batch this tick: tick again at once
  std::size_t table_ = 0;        ///< the table being claimed
  std::uint64_t batch_seq_ = 0;  ///< units of the current batch carry it (reports of an earlier
                                 ///< batch are ignored)
  std::vector<Row> rows_;
  std::size_t waiting_ = 0;  ///< delivery reports outstanding for the batch
  bool awaiting_reports_ = false;
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point listened_at_{};  ///< the last LISTEN sent
  std::string crash_after_ack_;                          ///< the test seam's event id ("" = off)
  std::uint64_t published_ = 0;
  std::uint64_t sent_ = 0;

  // Metrics (relay/maintenance.cpp).
  struct Backlog {
    std::uint64_t pending = 0;
    std::uint64_t failed = 0;
    std::int64_t oldest_s = 0;  ///< the oldest pending row's age (0: none, or no age column)
  };
  pg::AsyncConnection maint_;  ///< the backlog gauges and the retention job
  boost::asio::steady_timer maint_timer_;
  std::unique_ptr<metrics::HttpServer> http_;
  /// Per (table, aggregate type) at the last sample; a type seen once stays (at 0).
  std::map<std::pair<std::string, std::string>, Backlog> backlog_;
  bool db_ok_ = false;           ///< the last maintenance statement reached the database
  std::string last_failure_;     ///< why the last tick failed (while backing off)
  std::uint64_t ticks_ = 0;      ///< ticks run
  std::uint64_t batches_ = 0;    ///< claims that returned rows
  std::uint64_t failed_ = 0;     ///< rows marked failed
  std::uint64_t rollbacks_ = 0;  ///< ticks that failed (rolled back, backed off)
  std::uint64_t retention_deleted_ = 0;

  bool txn_open_ = false;  ///< a BEGIN on conn_ not yet committed or rolled back
  const bool lease_;       ///< relay.claim: lease
  /// claim: lease: this process's owner token (a random uuid per start) written to poll.owner.
  const std::string owner_token_;
};

}  // namespace walrelay::relay
