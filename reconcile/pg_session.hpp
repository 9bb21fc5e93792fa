#pragma once

// A blocking session over pg::AsyncConnection for a command that has nothing else to serve
// while it waits: each call runs the connection's own io_context until the query's answer came.
// The session pins the settings the replication session pins (pg::pinned_startup_options), so a
// value's text is the text wal2json prints whatever the server's TimeZone or DateStyle. Owned by
// one thread.

#include <boost/asio/io_context.hpp>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"

namespace walrelay::reconcile {

class PgSession {
 public:
  using Rows = pg::AsyncConnection::Rows;

  /// No I/O yet. Error: `conninfo` cannot be parsed (kConfiguration).
  static std::expected<std::unique_ptr<PgSession>, pg::Error> open(const std::string& conninfo,
                                                                   std::string application_name);

  /// Runs `sql` as a simple query (several statements allowed; the last one's rows). Error: the
  /// server's (typed by SQLSTATE) or the connection's.
  std::expected<Rows, pg::Error> query(const std::string& sql);
  /// Runs one statement with text parameters `$1`… (nullopt: NULL).
  std::expected<Rows, pg::Error> query(const std::string& sql,
                                       std::vector<std::optional<std::string>> params);

  PgSession(std::string conninfo, std::string application_name, std::string options);

 private:
  std::expected<Rows, pg::Error> wait(const std::function<void(pg::AsyncConnection::Done)>& send);

  boost::asio::io_context io_;
  pg::AsyncConnection conn_;
};

/// `{"a","b\"c"}`: a PostgreSQL array literal of text elements (PostgreSQL docs §8.15.2 "Array
/// Value Input": each element double-quoted, `"` and `\` escaped with a backslash).
std::string text_array_literal(const std::vector<std::string>& items);

}  // namespace walrelay::reconcile
