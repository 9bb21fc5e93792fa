#include "walrelay/snapshot/snapshot_connection.hpp"

#include <boost/asio/post.hpp>

#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/client_encoding.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"

namespace walrelay::snapshot {

namespace asio = boost::asio;

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool result_ok(const PGresult* r) {
  const auto st = PQresultStatus(r);
  return st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK;
}

}  // namespace

SnapshotConnection::SnapshotConnection(asio::any_io_executor executor, std::string conninfo,
                                       std::string application_name)
    : executor_(std::move(executor)),
      conninfo_(std::move(conninfo)),
      application_name_(pg::fit_application_name(std::move(application_name))) {}

SnapshotConnection::~SnapshotConnection() {
  close();
}

std::expected<void, std::string> SnapshotConnection::connect(std::string_view extra_options) {
  auto options = pg::pinned_startup_options(conninfo_);
  if (!options) return std::unexpected(options.error());
  *options += extra_options;
  const char* keywords[] = {"dbname", "options", "application_name", nullptr};
  const char* values[] = {conninfo_.c_str(), options->c_str(), application_name_.c_str(), nullptr};
  conn_ = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  pg::route_notices_to_log(conn_);
  if (conn_ == nullptr) return std::unexpected("out of memory creating a snapshot connection");
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string msg = trim(PQerrorMessage(conn_));
    PQfinish(conn_);
    conn_ = nullptr;
    return std::unexpected("snapshot connection: " + msg);
  }
  // Row texts in UTF-8 (the server converts), or as stored in an SQL_ASCII database (checked by
  // build_row_change).
  if (auto encoded = pg::use_walrelay_client_encoding(conn_); !encoded) {
    return std::unexpected("snapshot connection: " + encoded.error());
  }
  if (PQsetnonblocking(conn_, 1) != 0)
    return std::unexpected("cannot make the connection non-blocking");
  socket_ = std::make_unique<asio::posix::stream_descriptor>(executor_, PQsocket(conn_));
  return {};
}

std::expected<ResultPtr, std::string> SnapshotConnection::exec(const std::string& sql) {
  if (conn_ == nullptr) return std::unexpected("not connected");
  ResultPtr r(PQexec(conn_, sql.c_str()));
  if (!r || !result_ok(r.get())) {
    const char* state = r ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
    sqlstate_ = state != nullptr ? state : "";
    return std::unexpected(trim(r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_)));
  }
  return r;
}

void SnapshotConnection::async_query(const std::string& sql,
                                     const std::vector<std::optional<std::string>>& params,
                                     const std::vector<unsigned int>& types, Callback done) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  pending_ = std::move(done);
  results_.clear();
  error_.reset();
  if (conn_ == nullptr || PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()),
                                            types.empty() ? nullptr : types.data(), values.data(),
                                            nullptr, nullptr, 0) == 0) {
    fail(conn_ != nullptr ? trim(PQerrorMessage(conn_)) : "not connected");
    return;
  }
  // Non-blocking mode: the query may not be written out at once.
  while (PQflush(conn_) == 1) {
  }
  wait_readable();
}

void SnapshotConnection::async_batch(const std::string& sql, BatchCallback done) {
  pending_batch_ = std::move(done);
  results_.clear();
  error_.reset();
  if (conn_ == nullptr || PQsendQuery(conn_, sql.c_str()) == 0) {
    fail(conn_ != nullptr ? trim(PQerrorMessage(conn_)) : "not connected");
    return;
  }
  while (PQflush(conn_) == 1) {
  }
  wait_readable();
}

void SnapshotConnection::wait_readable() {
  socket_->async_wait(
      asio::posix::stream_descriptor::wait_read,
      [this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
        if (alive.expired() || ec || conn_ == nullptr || (!pending_ && !pending_batch_)) return;
        if (PQconsumeInput(conn_) == 0) {
          fail(trim(PQerrorMessage(conn_)));
          return;
        }
        collect();
      });
}

void SnapshotConnection::collect() {
  while (PQisBusy(conn_) == 0) {
    PGresult* r = PQgetResult(conn_);
    if (r != nullptr) {
      // Keep every result up to the first error (nothing after it ran).
      if (error_) {
        PQclear(r);
      } else if (!result_ok(r)) {
        error_.reset(r);
      } else {
        results_.emplace_back(r);
      }
      continue;
    }
    // The query is complete.
    std::optional<std::string> error;
    if (error_) {
      const char* state = PQresultErrorField(error_.get(), PG_DIAG_SQLSTATE);
      sqlstate_ = state != nullptr ? state : "";
      error = trim(PQresultErrorMessage(error_.get()));
      error_.reset();
    } else if (results_.empty()) {
      error = "the server returned no result";
    }
    if (pending_batch_) {
      BatchCallback done = std::move(pending_batch_);
      pending_batch_ = nullptr;
      if (error && PQtransactionStatus(conn_) == PQTRANS_INERROR) {
        ResultPtr rollback(PQexec(conn_, "ROLLBACK"));  // the batch's own block, aborted
      }
      if (error) {
        done(std::unexpected(std::move(*error)));
      } else {
        done(std::move(results_));
      }
      return;
    }
    Callback done = std::move(pending_);
    pending_ = nullptr;
    if (error) {
      done(std::unexpected(std::move(*error)));
    } else {
      done(std::move(results_.back()));  // a single statement's (or the last) result
    }
    return;
  }
  wait_readable();
}

void SnapshotConnection::fail(std::string reason) {
  sqlstate_.clear();
  Callback done = std::move(pending_);
  pending_ = nullptr;
  BatchCallback batch_done = std::move(pending_batch_);
  pending_batch_ = nullptr;
  asio::post(executor_, [done = std::move(done), batch_done = std::move(batch_done),
                         reason = std::move(reason), alive = std::weak_ptr<int>(alive_)]() mutable {
    if (alive.expired()) return;
    if (done) done(std::unexpected(reason));
    if (batch_done) batch_done(std::unexpected(reason));
  });
}

void SnapshotConnection::close() {
  pending_ = nullptr;
  pending_batch_ = nullptr;
  if (socket_) {
    boost::system::error_code ec;
    socket_->cancel(ec);
    socket_->release();  // libpq owns the fd
    socket_.reset();
  }
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
}

}  // namespace walrelay::snapshot
