#pragma once

#include <libpq-fe.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walrelay::snapshot {

/// A query result owned by the caller (PQclear on destruction).
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

/// One ordinary (non-replication) libpq connection that reads snapshot chunks without blocking the
/// event loop: queries are sent with PQsendQueryParams and their results collected when the socket
/// is readable (libpq docs §34.4 "Asynchronous Command Processing"). The session pins the settings
/// the replication connection pins (`pg::pinned_startup_options`), so value texts equal
/// wal2json's. Owned by the snapshotter; every call on the executor's thread.
class SnapshotConnection {
 public:
  /// The query's single result (rows or a command status), or the server's error message.
  using Callback = std::function<void(std::expected<ResultPtr, std::string>)>;

  SnapshotConnection(boost::asio::any_io_executor executor, std::string conninfo,
                     std::string application_name);
  ~SnapshotConnection();
  SnapshotConnection(const SnapshotConnection&) = delete;
  SnapshotConnection& operator=(const SnapshotConnection&) = delete;

  /// Connects (blocking: a few ms, once per connection) with the replication session's pinned
  /// settings and `extra_options` (more startup options). Errors carry libpq's message.
  std::expected<void, std::string> connect(std::string_view extra_options = {});

  /// Runs `sql` synchronously (short statements only: BEGIN, SET TRANSACTION SNAPSHOT, COMMIT).
  std::expected<ResultPtr, std::string> exec(const std::string& sql);

  /// Sends `sql` with text parameters (`params[i]` nullopt = SQL NULL; `types[i]` the parameter's
  /// type OID, 0 to let the server infer it) and calls `done` on the executor with the result.
  /// One query at a time per connection.
  void async_query(const std::string& sql, const std::vector<std::optional<std::string>>& params,
                   const std::vector<unsigned int>& types, Callback done);

  /// Every statement's result of a batch, in order, or the first error.
  using BatchCallback = std::function<void(std::expected<std::vector<ResultPtr>, std::string>)>;

  /// Sends `sql`, several statements separated by semicolons, as one simple query (one round
  /// trip: PostgreSQL docs §55.2.2.1 "Multiple Statements in a Simple Query") and calls `done`
  /// on the executor with one result per statement, or with the first error (last_sqlstate()
  /// set; the statements after it did not run). A batch leaves no transaction open: after an
  /// error inside an explicit transaction block, it is rolled back (a blocking ROLLBACK, on
  /// that error path only). One query at a time per connection.
  void async_batch(const std::string& sql, BatchCallback done);

  /// Closes the connection (PQfinish); a pending callback is never called. Idempotent.
  void close();

  /// SQLSTATE of the last error a query or exec returned (PostgreSQL docs Appendix A), e.g.
  /// 42P01 undefined_table, 42703 undefined_column; empty for connection errors.
  [[nodiscard]] const std::string& last_sqlstate() const { return sqlstate_; }

 private:
  void wait_readable();
  void collect();
  void fail(std::string reason);

  boost::asio::any_io_executor executor_;
  std::string conninfo_;
  std::string application_name_;
  PGconn* conn_ = nullptr;
  std::unique_ptr<boost::asio::posix::stream_descriptor> socket_;
  Callback pending_;  // async_query's
  BatchCallback pending_batch_;
  std::vector<ResultPtr> results_;  // every result of the query in flight
  ResultPtr error_;                 // its first error
  std::string sqlstate_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace walrelay::snapshot
