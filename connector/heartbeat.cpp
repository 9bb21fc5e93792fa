#include "walrelay/connector/heartbeat.hpp"

#include <spdlog/spdlog.h>

namespace walrelay {

namespace asio = boost::asio;

Heartbeat::Heartbeat(asio::any_io_executor executor, std::string conninfo,
                     std::string application_name, config::HeartbeatConfig cfg)
    : cfg_(std::move(cfg)),
      sql_(cfg_.query.empty()
               ? "SELECT pg_catalog.pg_logical_emit_message(true, 'walrelay', 'heartbeat')"
               : cfg_.query),
      conn_(executor, std::move(conninfo), std::move(application_name)),
      timer_(executor) {}

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
  conn_.close();
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
  conn_.close();  // the next heartbeat connects again
  schedule();
}

void Heartbeat::fire() {
  // heartbeat.query is UTF-8 text like the rest of the configuration: the connection's
  // client_encoding is walrelay's. Sent as a simple query (several statements allowed).
  conn_.query(sql_, {}, [this](const pg::AsyncConnection::Result& r) {
    if (!running_) return;
    if (!r) {
      report_failure(r.error());
      return;
    }
    if (failing_) spdlog::info("heartbeat works again");
    failing_ = false;
    schedule();
  });
}

}  // namespace walrelay
