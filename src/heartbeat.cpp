#include "heartbeat.hpp"

#include <spdlog/spdlog.h>

#include "client_encoding.hpp"
#include "replication/pg_notices.hpp"

namespace walrelay {

namespace asio = boost::asio;

namespace {
std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}
}  // namespace

Heartbeat::Heartbeat(asio::any_io_executor executor, std::string conninfo,
                     std::string application_name, config::HeartbeatConfig cfg)
    : executor_(std::move(executor)),
      conninfo_(std::move(conninfo)),
      application_name_(replication::fit_application_name(std::move(application_name))),
      cfg_(std::move(cfg)),
      sql_(cfg_.query.empty()
               ? "SELECT pg_catalog.pg_logical_emit_message(true, 'walrelay', 'heartbeat')"
               : cfg_.query),
      timer_(executor_) {}

Heartbeat::~Heartbeat() {
  stop();
}

void Heartbeat::start() {
  if (!cfg_.enabled || running_) return;
  running_ = true;
  schedule();
}

void Heartbeat::stop() {
  running_ = false;
  timer_.cancel();
  close();
}

void Heartbeat::close() {
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
}

void Heartbeat::schedule() {
  if (!running_) return;
  timer_.expires_after(cfg_.interval);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !running_) return;
    fire();
  });
}

void Heartbeat::report_failure(const std::string& what) {
  if (failing_) {
    spdlog::debug("heartbeat failed again: {}", what);
  } else {
    spdlog::warn("heartbeat failed (retrying every {} ms): {}", cfg_.interval.count(), what);
  }
  failing_ = true;
  close();
  schedule();
}

void Heartbeat::fire() {
  if (conn_ == nullptr) {
    const char* keywords[] = {"dbname", "application_name", "connect_timeout", nullptr};
    const char* values[] = {conninfo_.c_str(), application_name_.c_str(), "10", nullptr};
    conn_ = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
    replication::route_notices_to_log(conn_);
    if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
      report_failure(conn_ != nullptr ? trim(PQerrorMessage(conn_)) : "out of memory");
      return;
    }
    // heartbeat.query is UTF-8 text like the rest of the configuration.
    if (auto encoded = use_walrelay_client_encoding(conn_); !encoded) {
      report_failure(encoded.error());
      return;
    }
    PQsetnonblocking(conn_, 1);
    socket_ = std::make_unique<asio::posix::stream_descriptor>(executor_, PQsocket(conn_));
  }
  if (PQsendQuery(conn_, sql_.c_str()) == 0) {
    report_failure(trim(PQerrorMessage(conn_)));
    return;
  }
  while (PQflush(conn_) == 1) {
    // A few dozen bytes: the socket buffer takes them at once in practice.
  }
  await_result();
}

void Heartbeat::await_result() {
  socket_->async_wait(asio::posix::stream_descriptor::wait_read,
                      [this](const boost::system::error_code& ec) {
                        if (ec || !running_ || conn_ == nullptr) return;
                        if (PQconsumeInput(conn_) == 0) {
                          report_failure(trim(PQerrorMessage(conn_)));
                          return;
                        }
                        if (PQisBusy(conn_) != 0) {
                          await_result();
                          return;
                        }
                        std::string error;
                        while (PGresult* res = PQgetResult(conn_)) {
                          const auto st = PQresultStatus(res);
                          if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
                            error = trim(PQresultErrorMessage(res));
                          }
                          PQclear(res);
                        }
                        if (!error.empty()) {
                          report_failure(error);
                          return;
                        }
                        if (failing_) spdlog::info("heartbeat works again");
                        failing_ = false;
                        schedule();
                      });
}

}  // namespace walrelay
