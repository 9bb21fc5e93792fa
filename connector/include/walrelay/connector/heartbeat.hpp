#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <string>

#include "walrelay/config/config.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"

namespace walrelay {

/// Writes a small transaction into the watched database every `heartbeat.interval`, so that the
/// slot's confirmed position keeps up with the server's WAL on idle databases (shared/cases/
/// BUG-18.md). By default a transactional `pg_logical_emit_message(true, 'walrelay', ...)`: no
/// table and no write privilege on user tables needed, and (unlike a non-transactional message in
/// PostgreSQL 15) flushed at its commit. `heartbeat.query` replaces it for managed services.
/// The message is decoded like any other and never published (prefix `walrelay`).
///
/// Its own ordinary libpq connection, driven without blocking on the executor, connecting
/// included (pg::AsyncConnection); a failed heartbeat is logged once and retried at the next
/// interval on a new connection.
/// Not thread-safe: every call on the executor's thread.
class Heartbeat {
 public:
  Heartbeat(boost::asio::any_io_executor executor, std::string conninfo,
            std::string application_name, config::HeartbeatConfig cfg);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  /// Starts the interval timer (no-op when disabled).
  void start();
  /// Stops the timer and closes the connection.
  void stop();

 private:
  void schedule();
  void fire();
  void report_failure(const std::string& what);

  config::HeartbeatConfig cfg_;
  std::string sql_;
  pg::AsyncConnection conn_;
  boost::asio::steady_timer timer_;
  bool running_ = false;
  bool failing_ = false;  // the last heartbeat failed: log the next failure at debug only
};

}  // namespace walrelay
