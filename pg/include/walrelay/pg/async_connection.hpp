#pragma once

#include <libpq-fe.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "walrelay/pg/error.hpp"

namespace walrelay::pg {

/// One ordinary (non-replication) libpq connection driven without blocking on an Asio executor:
/// connecting with PQconnectStartParams/PQconnectPoll and queries with PQsendQuery(Params), the
/// results read as the socket becomes readable (PostgreSQL docs §34.1 "Database Connection
/// Control Functions", §34.4 "Asynchronous Command Processing"). Nothing here waits on the
/// server, so the event loop keeps serving delivery reports and standby status updates while a
/// query waits (on a lock, say).
///
/// Queries run one at a time, in the order they were queued. A query on a closed or broken
/// connection connects first (`connect_timeout` bounds the attempt). The session's client_encoding
/// is walrelay's (client_encoding.hpp) before the first query runs. Server notices go to the log.
/// Not thread-safe: every call on the executor's thread.
class AsyncConnection {
 public:
  using Row = std::vector<std::optional<std::string>>;  ///< text cells, nullopt for SQL NULL
  using Rows = std::vector<Row>;
  /// The rows of the query's last result, or the error: the server's message, or libpq's for a
  /// connection that failed (then the connection is closed and the next query connects again).
  using Result = std::expected<Rows, std::string>;
  using Done = std::function<void(Result)>;

  /// `conninfo` is the user's libpq conninfo or URI; `application_name` is shown in
  /// pg_stat_activity (cut to 63 bytes).
  AsyncConnection(boost::asio::any_io_executor executor, std::string conninfo,
                  std::string application_name,
                  std::chrono::milliseconds connect_timeout = std::chrono::seconds(10));
  /// Closes the connection; queued callbacks are never called.
  ~AsyncConnection();
  AsyncConnection(const AsyncConnection&) = delete;
  AsyncConnection& operator=(const AsyncConnection&) = delete;

  /// Queues `sql`. Without `params` it is sent as a simple query (several statements allowed,
  /// the last one's rows returned); with them as one extended-protocol statement with text
  /// parameters `$1`… `done` is called on the executor thread, never from inside this call.
  void query(std::string sql, std::vector<std::string> params, Done done);

  /// Queues `sql` as one extended-protocol statement (also without parameters) with text
  /// parameters `$1`… (`params[i]` nullopt = SQL NULL; `types[i]` the parameter's type OID, 0 or
  /// missing to let the server infer it). `done` as for query().
  void query_params(std::string sql, std::vector<std::optional<std::string>> params,
                    std::vector<unsigned int> types, Done done);

  /// Sets the `options` startup parameter (libpq's keyword: `-c name=value` settings) of the
  /// connections made from now on; empty for none.
  void set_startup_options(std::string options) { options_ = std::move(options); }

  /// The error a query's `done` was just called with, typed (error.hpp): its SQLSTATE (e.g.
  /// 42P01 undefined_table), fields and kind; a connection failure has no SQLSTATE and its kind
  /// from classify_connection_failure. Default (no SQLSTATE, kTransient) after a success. Valid
  /// inside `done`.
  [[nodiscard]] const Error& last_error() const { return last_error_; }
  /// last_error()'s SQLSTATE (PostgreSQL docs Appendix A); empty for a success or a connection
  /// failure. Valid inside `done`.
  [[nodiscard]] const std::string& last_sqlstate() const { return last_error_.sqlstate; }

  /// A notification (PostgreSQL docs §34.9 "Asynchronous Notification", LISTEN/NOTIFY): its
  /// channel and payload.
  using NotifyHandler = std::function<void(const std::string& channel, const std::string& payload)>;
  /// Calls `handler` on the executor thread for every notification the server sends on this
  /// connection (after a `LISTEN` the caller runs): read as they arrive while the connection is
  /// idle, and after each query's results. A broken idle connection is closed silently; the next
  /// query connects again (and must LISTEN again: a new session listens to nothing).
  void on_notification(NotifyHandler handler) { notify_ = std::move(handler); }

  /// True while connecting or while a query is queued or running.
  [[nodiscard]] bool busy() const;

  /// Closes the connection and drops queued queries without calling their callbacks.
  void close();

 private:
  struct Pending {
    std::string sql;
    std::vector<std::optional<std::string>> params;
    std::vector<unsigned int> types;
    bool extended = false;  // PQsendQueryParams, else PQsendQuery
    Done done;
  };
  void pump();
  void start_connect();
  void poll_connect(PostgresPollingStatusType last);
  void send_front();
  void flush_then_read();
  void read_result();
  /// Waits for the socket (re-created when libpq's descriptor changed) and calls `then` unless
  /// the connection was closed or replaced meanwhile.
  void wait(bool for_write, std::function<void()> then);
  /// The connection failed: closes it and fails the running query (or every queued one while
  /// connecting) with `error`.
  void fail(Error error);
  /// The failure libpq reports on conn_: a failed attempt while connecting, else a broken
  /// connection.
  [[nodiscard]] Error connection_error() const;
  void drop_connection();
  /// With a notification handler: waits for the idle connection's socket to read notifications.
  void arm_idle();
  void drain_notifications();

  boost::asio::any_io_executor executor_;
  std::string conninfo_;
  std::string application_name_;
  std::chrono::milliseconds connect_timeout_;
  PGconn* conn_ = nullptr;
  std::unique_ptr<boost::asio::posix::stream_descriptor> socket_;
  boost::asio::steady_timer connect_timer_;
  std::deque<Pending> queue_;
  Rows rows_;                   // the running query's last result so far
  std::optional<Error> error_;  // and its first error
  Error last_error_;            // the error `done` is called with
  std::string options_;         // startup options
  NotifyHandler notify_;
  bool idle_armed_ = false;  // arm_idle's wait is pending
  bool connecting_ = false;
  bool running_ = false;          // the queue's front has been sent
  std::uint64_t generation_ = 0;  // bumped when the connection closes: stale waits do nothing
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace walrelay::pg
