#include "walrelay/pg/async_connection.hpp"

#include <boost/asio/post.hpp>

#include "walrelay/pg/client_encoding.hpp"
#include "walrelay/pg/notices.hpp"

namespace walrelay::pg {

namespace asio = boost::asio;

namespace {

std::string error_of(PGconn* conn) {
  return conn != nullptr ? trim_message(PQerrorMessage(conn)) : std::string("out of memory");
}

}  // namespace

Error AsyncConnection::connection_error() const {
  // While connecting the attempt failed (its kind from libpq's flags and message); afterwards an
  // established connection broke: a transient failure of the running query.
  return connecting_ ? error_from_connection(conn_, conninfo_) : client_error(error_of(conn_));
}

AsyncConnection::AsyncConnection(asio::any_io_executor executor, std::string conninfo,
                                 std::string application_name,
                                 std::chrono::milliseconds connect_timeout)
    : executor_(std::move(executor)),
      conninfo_(std::move(conninfo)),
      application_name_(fit_application_name(std::move(application_name))),
      connect_timeout_(connect_timeout),
      connect_timer_(executor_) {}

AsyncConnection::~AsyncConnection() {
  close();
}

bool AsyncConnection::busy() const {
  return connecting_ || running_ || !queue_.empty();
}

void AsyncConnection::drop_connection() {
  ++generation_;
  connect_timer_.cancel();
  if (socket_) {
    boost::system::error_code ec;
    socket_->cancel(ec);
    socket_->release();  // libpq owns the descriptor
    socket_.reset();
  }
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
  connecting_ = false;
  running_ = false;
  idle_armed_ = false;
}

void AsyncConnection::close() {
  drop_connection();
  queue_.clear();
}

void AsyncConnection::query(std::string sql, std::vector<std::string> params, Done done) {
  Pending p{std::move(sql), {}, {}, !params.empty(), std::move(done)};
  p.params.reserve(params.size());
  for (auto& v : params) p.params.emplace_back(std::move(v));
  queue_.push_back(std::move(p));
  pump();
}

void AsyncConnection::query_params(std::string sql, std::vector<std::optional<std::string>> params,
                                   std::vector<unsigned int> types, Done done) {
  queue_.push_back(
      Pending{std::move(sql), std::move(params), std::move(types), true, std::move(done)});
  pump();
}

void AsyncConnection::pump() {
  if (connecting_ || running_) return;
  if (queue_.empty()) {
    arm_idle();
    return;
  }
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    start_connect();
    return;
  }
  send_front();
}

void AsyncConnection::arm_idle() {
  if (!notify_ || idle_armed_ || conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) return;
  idle_armed_ = true;
  wait(false, [this] {
    idle_armed_ = false;
    if (connecting_ || running_) return;  // a query's own reads take the notifications now
    if (PQconsumeInput(conn_) == 0) {
      fail(connection_error());
      return;
    }
    drain_notifications();
    pump();
  });
}

void AsyncConnection::drain_notifications() {
  while (PGnotify* n = PQnotifies(conn_)) {
    if (notify_) {
      asio::post(executor_,
                 [this, alive = std::weak_ptr<int>(alive_), channel = std::string(n->relname),
                  payload = std::string(n->extra != nullptr ? n->extra : "")] {
                   if (!alive.expired() && notify_) notify_(channel, payload);
                 });
    }
    PQfreemem(n);
  }
}

void AsyncConnection::fail(Error error) {
  // While connecting every queued query fails (none can run); otherwise the running one.
  std::deque<Pending> failed;
  if (connecting_) {
    failed.swap(queue_);
  } else if (running_ && !queue_.empty()) {
    failed.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  drop_connection();
  for (auto& p : failed) {
    asio::post(executor_,
               [this, alive = std::weak_ptr<int>(alive_), done = std::move(p.done), error] {
                 if (alive.expired()) return;
                 last_error_ = error;
                 done(std::unexpected(error.message));
               });
  }
  // The rest connects again, after the callbacks above (they may close or queue more).
  asio::post(executor_, [this, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.expired()) pump();
  });
}

void AsyncConnection::start_connect() {
  drop_connection();
  const char* keywords[] = {"dbname", "application_name", "options", nullptr};
  const char* values[] = {conninfo_.c_str(), application_name_.c_str(), options_.c_str(), nullptr};
  if (options_.empty()) keywords[2] = nullptr;  // the conninfo's own options, if any
  conn_ = PQconnectStartParams(keywords, values, /*expand_dbname=*/1);
  connecting_ = true;
  if (conn_ == nullptr || PQstatus(conn_) == CONNECTION_BAD) {
    fail(connection_error());
    return;
  }
  route_notices_to_log(conn_);
  // libpq's connect_timeout is not applied to PQconnectPoll: the caller bounds the attempt.
  connect_timer_.expires_after(connect_timeout_);
  connect_timer_.async_wait([this, alive = std::weak_ptr<int>(alive_),
                             gen = generation_](const boost::system::error_code& ec) {
    if (ec || alive.expired() || gen != generation_ || !connecting_) return;
    fail(client_error("timeout expired while connecting"));
  });
  // Before the first PQconnectPoll, behave as if it had returned PGRES_POLLING_WRITING.
  poll_connect(PGRES_POLLING_WRITING);
}

void AsyncConnection::poll_connect(PostgresPollingStatusType last) {
  switch (last) {
    case PGRES_POLLING_READING:
    case PGRES_POLLING_WRITING:
      // libpq may have closed its socket and opened another (another host or address, an SSL
      // fallback), possibly under the same number: watch the descriptor anew at every step.
      if (socket_) {
        boost::system::error_code ec;
        socket_->cancel(ec);
        socket_->release();
        socket_.reset();
      }
      wait(last == PGRES_POLLING_WRITING, [this] { poll_connect(PQconnectPoll(conn_)); });
      return;
    case PGRES_POLLING_OK: {
      connecting_ = false;
      connect_timer_.cancel();
      PQsetnonblocking(conn_, 1);
      if (std::string set = walrelay_client_encoding_sql(conn_); !set.empty()) {
        // Runs before anything queued; a refusal fails the connection (and what waits for it).
        queue_.push_front(Pending{std::move(set), {}, {}, false, [this](const Result& r) {
                                    if (!r) {
                                      connecting_ = true;  // fail every queued query
                                      fail(
                                          client_error("cannot set client_encoding: " + r.error()));
                                    }
                                  }});
      }
      pump();
      return;
    }
    default:
      fail(connection_error());
      return;
  }
}

void AsyncConnection::wait(bool for_write, std::function<void()> then) {
  const int fd = PQsocket(conn_);
  if (fd < 0) {
    fail(connection_error());
    return;
  }
  if (!socket_ || socket_->native_handle() != fd) {
    if (socket_) {
      boost::system::error_code ec;
      socket_->cancel(ec);
      socket_->release();
    }
    socket_ = std::make_unique<asio::posix::stream_descriptor>(executor_, fd);
  }
  socket_->async_wait(for_write ? asio::posix::stream_descriptor::wait_write
                                : asio::posix::stream_descriptor::wait_read,
                      [this, alive = std::weak_ptr<int>(alive_), gen = generation_,
                       then = std::move(then)](const boost::system::error_code& ec) {
                        if (alive.expired() || gen != generation_) return;
                        if (ec) {
                          if (ec != asio::error::operation_aborted) {
                            fail(client_error(ec.message()));
                          }
                          return;
                        }
                        then();
                      });
}

void AsyncConnection::send_front() {
  const Pending& p = queue_.front();
  rows_.clear();
  error_.reset();
  int sent = 0;
  if (!p.extended) {
    sent = PQsendQuery(conn_, p.sql.c_str());
  } else {
    std::vector<const char*> values;
    values.reserve(p.params.size());
    for (const auto& v : p.params) values.push_back(v ? v->c_str() : nullptr);
    std::vector<unsigned int> types = p.types;
    types.resize(p.params.size(), 0);
    sent = PQsendQueryParams(conn_, p.sql.c_str(), static_cast<int>(values.size()),
                             types.empty() ? nullptr : types.data(), values.data(), nullptr,
                             nullptr, 0);
  }
  running_ = true;
  if (sent == 0) {
    fail(connection_error());
    return;
  }
  flush_then_read();
}

void AsyncConnection::flush_then_read() {
  const int r = PQflush(conn_);
  if (r == -1) {
    fail(connection_error());
    return;
  }
  if (r == 1) {  // the socket's buffer is full: wait until it takes more
    wait(true, [this] { flush_then_read(); });
    return;
  }
  wait(false, [this] { read_result(); });
}

void AsyncConnection::read_result() {
  if (PQconsumeInput(conn_) == 0) {
    fail(connection_error());
    return;
  }
  // PQgetResult blocks while the next result has not arrived (libpq docs §34.4): take results
  // only while PQisBusy says one is complete; a simple query of several statements has several.
  while (true) {
    if (PQisBusy(conn_) != 0) {
      wait(false, [this] { read_result(); });
      return;
    }
    PGresult* res = PQgetResult(conn_);
    if (res == nullptr) break;  // the query is complete
    const auto st = PQresultStatus(res);
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
      rows_.clear();
      const int n = PQntuples(res);
      const int cols = PQnfields(res);
      rows_.reserve(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) {
        auto& row = rows_.emplace_back();
        row.reserve(static_cast<std::size_t>(cols));
        for (int c = 0; c < cols; ++c) {
          row.push_back(PQgetisnull(res, i, c) != 0
                            ? std::nullopt
                            : std::optional<std::string>(PQgetvalue(res, i, c)));
        }
      }
    } else if (!error_) {
      error_ = error_from_result(res, nullptr);  // an empty message: the status name
    }
    PQclear(res);
  }
  drain_notifications();
  Rows rows = std::move(rows_);
  Error error = error_ ? std::move(*error_) : Error{};
  const bool failed = error_.has_value();
  rows_.clear();
  error_.reset();
  Pending done = std::move(queue_.front());
  queue_.pop_front();
  running_ = false;
  Result result = failed ? Result(std::unexpected(error.message)) : Result(std::move(rows));
  asio::post(executor_, [this, alive = std::weak_ptr<int>(alive_), done = std::move(done.done),
                         result = std::move(result), error = std::move(error)]() mutable {
    if (alive.expired()) return;
    last_error_ = std::move(error);
    done(std::move(result));
  });
  if (PQstatus(conn_) != CONNECTION_OK) {
    fail(connection_error());  // nothing runs now: only closes; the next query connects again
    return;
  }
  pump();
}

}  // namespace walrelay::pg
