#include "pg_session.hpp"

#include "walrelay/pg/replication_stream.hpp"

namespace walrelay::reconcile {

std::expected<std::unique_ptr<PgSession>, pg::Error> PgSession::open(const std::string& conninfo,
                                                                     std::string application_name) {
  auto options = pg::pinned_startup_options(conninfo);
  if (!options)
    return std::unexpected(pg::client_error(options.error(), pg::ErrorKind::kConfiguration));
  return std::make_unique<PgSession>(conninfo, std::move(application_name), std::move(*options));
}

PgSession::PgSession(std::string conninfo, std::string application_name, std::string options)
    : conn_(io_.get_executor(), std::move(conninfo), std::move(application_name)) {
  conn_.set_startup_options(std::move(options));
}

std::expected<PgSession::Rows, pg::Error> PgSession::wait(
    const std::function<void(pg::AsyncConnection::Done)>& send) {
  std::optional<std::expected<Rows, pg::Error>> result;
  send([&](pg::AsyncConnection::Result r) {
    if (r) {
      result.emplace(std::move(*r));
    } else {
      result.emplace(std::unexpected(conn_.last_error()));
    }
  });
  io_.restart();
  while (!result) {
    if (io_.run_one() == 0) {
      return std::unexpected(pg::client_error("the PostgreSQL connection stopped answering"));
    }
  }
  return std::move(*result);
}

std::expected<PgSession::Rows, pg::Error> PgSession::query(const std::string& sql) {
  return wait([&](pg::AsyncConnection::Done done) { conn_.query(sql, {}, std::move(done)); });
}

std::expected<PgSession::Rows, pg::Error> PgSession::query(
    const std::string& sql, std::vector<std::optional<std::string>> params) {
  return wait([&](pg::AsyncConnection::Done done) {
    conn_.query_params(sql, std::move(params), {}, std::move(done));
  });
}

std::string text_array_literal(const std::vector<std::string>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (const char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

}  // namespace walrelay::reconcile
