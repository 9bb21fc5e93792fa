#include "walrelay/pg/replication_stream.hpp"

#include <boost/asio/post.hpp>
#include <chrono>

#include "walrelay/pg/client_encoding.hpp"
#include "walrelay/pg/notices.hpp"

namespace walrelay::pg {

namespace asio = boost::asio;

namespace {

// wal2json prints values with the walsender session's settings: pin the ones that change the text
// (PostgreSQL docs §20.11 "Client Connection Defaults"). A user's own `options` come first, so
// these win.
constexpr const char* kPinnedOptions =
    "-c DateStyle=ISO -c TimeZone=UTC -c IntervalStyle=iso_8601 -c extra_float_digits=3 "
    "-c bytea_output=hex -c lc_monetary=C";

// Replaces every "quoted" part longer than one character with "****".
std::string redact_quoted(const std::string& message) {
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    const std::size_t open = message.find('"', i);
    if (open == std::string::npos) break;
    const std::size_t close = message.find('"', open + 1);
    if (close == std::string::npos) break;
    out.append(message, i, open + 1 - i);
    out += close - open - 1 > 1 ? std::string("****") : message.substr(open + 1, close - open - 1);
    out.push_back('"');
    i = close + 1;
  }
  out.append(message, i, std::string::npos);
  return out;
}

PgEpochMicros now_pg() {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  return unix_micros_to_pg(us);
}

void notice_to_log(void* arg, const char* message);

}  // namespace

std::string quote_ident(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string quote_literal(const std::string& value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') out.push_back('\'');
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

ReplicationStream::ReplicationStream(asio::any_io_executor executor, std::string conninfo,
                                     std::string application_name)
    : executor_(std::move(executor)),
      conninfo_(std::move(conninfo)),
      application_name_(fit_application_name(std::move(application_name))) {}

ReplicationStream::~ReplicationStream() {
  close();
}

std::string ReplicationStream::last_error() const {
  return conn_ != nullptr ? trim_message(PQerrorMessage(conn_)) : std::string("not connected");
}

std::expected<std::string, std::string> pinned_startup_options(const std::string& conninfo) {
  // Keep the user's own startup options, then append the pinned ones.
  std::string options;
  char* parse_err = nullptr;
  if (PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &parse_err)) {
    for (PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
      if (std::string_view(o->keyword) == "options" && o->val != nullptr) options = o->val;
    }
    PQconninfoFree(parsed);
  } else {
    // libpq quotes the offending token, which may be (part of) a password: keep the message's
    // shape but never its quoted text.
    std::string reason = parse_err != nullptr ? redact_quoted(trim_message(parse_err)) : "invalid";
    if (parse_err != nullptr) PQfreemem(parse_err);
    return std::unexpected(
        "source.conninfo: libpq cannot parse it: " + reason +
        " (quote values with spaces in single quotes; percent-encode % in URIs)");
  }
  if (!options.empty()) options.push_back(' ');
  options += kPinnedOptions;
  return options;
}

std::expected<SystemInfo, std::string> ReplicationStream::connect() {
  failure_ = {};
  auto pinned = pinned_startup_options(conninfo_);
  if (!pinned) {
    failure_ = client_error(pinned.error(), ErrorKind::kConfiguration);
    return std::unexpected(pinned.error());
  }
  const std::string& options = *pinned;

  const char* keywords[] = {"dbname", "replication", "options", "application_name", nullptr};
  const char* values[] = {conninfo_.c_str(), "database", options.c_str(), application_name_.c_str(),
                          nullptr};
  conn_ = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  route_notices_to_log(conn_);
  if (conn_ == nullptr) {
    failure_ = client_error("out of memory creating the PostgreSQL connection");
    return std::unexpected(failure_.message);
  }
  if (PQstatus(conn_) != CONNECTION_OK) {
    failure_ = error_from_connection(conn_, conninfo_);
    PQfinish(conn_);
    conn_ = nullptr;
    return std::unexpected("cannot connect to PostgreSQL: " + failure_.message);
  }
  PQsetNoticeProcessor(conn_, &notice_to_log, nullptr);
  // SQL results on this connection (catalog names) in walrelay's encoding; the stream itself is
  // never converted (LineTranscoder does that).
  if (auto encoded = use_walrelay_client_encoding(conn_); !encoded) {
    PQfinish(conn_);
    conn_ = nullptr;
    failure_ = client_error(encoded.error());
    return std::unexpected(encoded.error());
  }

  auto rows = query("IDENTIFY_SYSTEM");
  if (!rows) return std::unexpected("IDENTIFY_SYSTEM failed: " + rows.error());
  if (rows->size() != 1 || (*rows)[0].size() < 4) {
    failure_ = client_error("IDENTIFY_SYSTEM returned an unexpected result");
    return std::unexpected(failure_.message);
  }
  const auto& r = (*rows)[0];
  SystemInfo info;
  info.system_id = r[0].value_or("");
  info.timeline = static_cast<std::uint32_t>(std::stoul(r[1].value_or("0")));
  info.xlogpos = Lsn::parse(r[2].value_or("0/0")).value_or(Lsn{});
  info.dbname = r[3].value_or("");
  info.server_version = PQserverVersion(conn_);
  return info;
}

std::expected<std::vector<ReplicationStream::Row>, std::string> ReplicationStream::query(
    const std::string& sql) {
  if (conn_ == nullptr) {
    failure_ = client_error("not connected");
    return std::unexpected(failure_.message);
  }
  PGresult* res = PQexec(conn_, sql.c_str());
  const auto status = PQresultStatus(res);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    failure_ = error_from_result(res, conn_);  // an empty message: the connection's
    PQclear(res);
    return std::unexpected(failure_.message);
  }
  std::vector<Row> rows;
  const int n = PQntuples(res);
  const int f = PQnfields(res);
  rows.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    Row row;
    row.reserve(static_cast<std::size_t>(f));
    for (int j = 0; j < f; ++j) {
      if (PQgetisnull(res, i, j)) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(
            std::string(PQgetvalue(res, i, j), static_cast<std::size_t>(PQgetlength(res, i, j))));
      }
    }
    rows.push_back(std::move(row));
  }
  PQclear(res);
  return rows;
}

std::expected<std::optional<SlotInfo>, std::string> ReplicationStream::find_slot(
    const std::string& slot) {
  auto rows = query(
      "SELECT plugin, slot_type, database, active, active_pid, confirmed_flush_lsn, wal_status "
      "FROM pg_catalog.pg_replication_slots WHERE slot_name = " +
      quote_literal(slot));
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty()) return std::optional<SlotInfo>{};
  const auto& r = (*rows)[0];
  SlotInfo s;
  s.plugin = r[0].value_or("");
  s.slot_type = r[1].value_or("");
  s.database = r[2].value_or("");
  s.active = r[3].value_or("f") == "t";
  if (r[4]) s.active_pid = std::stoi(*r[4]);
  s.confirmed_flush_lsn = Lsn::parse(r[5].value_or("0/0")).value_or(Lsn{});
  s.wal_status = r[6].value_or("");
  return std::optional<SlotInfo>{s};
}

std::expected<std::pair<Lsn, std::string>, std::string> ReplicationStream::create_slot(
    const std::string& slot, const std::string& plugin, const std::string& snapshot,
    bool temporary) {
  auto rows =
      query("CREATE_REPLICATION_SLOT " + quote_ident(slot) + (temporary ? " TEMPORARY" : "") +
            " LOGICAL " + quote_ident(plugin) + " (SNAPSHOT " + quote_literal(snapshot) + ")");
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty() || (*rows)[0].size() < 3) {
    return std::unexpected("CREATE_REPLICATION_SLOT returned an unexpected result");
  }
  const auto& r = (*rows)[0];
  return std::make_pair(Lsn::parse(r[1].value_or("0/0")).value_or(Lsn{}), r[2].value_or(""));
}

std::expected<void, std::string> ReplicationStream::start(
    const std::string& slot, Lsn start_lsn,
    const std::vector<std::pair<std::string, std::string>>& options, Handlers handlers) {
  std::string cmd =
      "START_REPLICATION SLOT " + quote_ident(slot) + " LOGICAL " + start_lsn.to_string();
  if (!options.empty()) {
    cmd += " (";
    bool first = true;
    for (const auto& [k, v] : options) {
      if (!first) cmd += ", ";
      first = false;
      cmd += quote_ident(k) + " " + quote_literal(v);
    }
    cmd += ")";
  }
  PGresult* res = PQexec(conn_, cmd.c_str());
  failure_ = {};
  if (PQresultStatus(res) != PGRES_COPY_BOTH) {
    failure_ = error_from_result(res, conn_);  // e.g. 55006: the slot is active for another PID
    PQclear(res);
    return std::unexpected(failure_.message);
  }
  PQclear(res);
  if (PQsetnonblocking(conn_, 1) != 0)
    return std::unexpected("cannot make the connection non-blocking");
  handlers_ = std::move(handlers);
  streaming_ = true;
  ended_ = false;
  // libpq owns the descriptor: the stream_descriptor only watches it and is released before
  // PQfinish (see close()).
  socket_ = std::make_unique<asio::posix::stream_descriptor>(executor_, PQsocket(conn_));
  asio::post(executor_, [this, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.expired()) drain();
  });
  return {};
}

void ReplicationStream::pause() {
  paused_ = true;
}

void ReplicationStream::resume() {
  if (!paused_) return;
  paused_ = false;
  if (streaming_)
    asio::post(executor_, [this, alive = std::weak_ptr<int>(alive_)] {
      if (!alive.expired()) drain();
    });
}

void ReplicationStream::arm_read() {
  if (reading_ || ended_ || paused_ || !socket_) return;
  reading_ = true;
  socket_->async_wait(
      asio::posix::stream_descriptor::wait_read,
      [this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
        if (alive.expired()) return;  // the stream was destroyed
        reading_ = false;
        if (ec || ended_ || conn_ == nullptr) return;
        if (PQconsumeInput(conn_) == 0) {
          end(StreamEnd::kError, last_error());
          return;
        }
        drain();
      });
}

void ReplicationStream::drain() {
  while (!paused_ && !ended_ && conn_ != nullptr) {
    char* buf = nullptr;
    const int n = PQgetCopyData(conn_, &buf, /*async=*/1);
    if (n > 0) {
      const std::span<const char> msg(buf, static_cast<std::size_t>(n));
      if (msg[0] == 'w') {
        if (auto x = parse_xlogdata(msg)) {
          handlers_.on_xlogdata(*x);
        } else {
          PQfreemem(buf);
          end(StreamEnd::kError, "malformed XLogData message");
          return;
        }
      } else if (msg[0] == 'k') {
        if (auto k = parse_keepalive(msg)) {
          handlers_.on_keepalive(*k);
        } else {
          PQfreemem(buf);
          end(StreamEnd::kError, "malformed primary keepalive message");
          return;
        }
      }
      // Other message types are ignored, as the protocol allows for forward compatibility.
      PQfreemem(buf);
      continue;
    }
    if (n == 0) {
      arm_read();
      return;
    }
    if (n == -1) {
      // The server ended the COPY: collect the final result for its reason.
      std::string reason = "server ended replication";
      while (PGresult* res = PQgetResult(conn_)) {
        const std::string msg = trim_message(PQresultErrorMessage(res));
        if (!msg.empty()) reason = msg;
        if (PQresultErrorField(res, PG_DIAG_SQLSTATE) != nullptr) {
          failure_ = error_from_result(res, conn_);
        }
        PQclear(res);
      }
      end(StreamEnd::kServerEnded, reason);
      return;
    }
    end(StreamEnd::kError, last_error());
    return;
  }
}

void ReplicationStream::send_status(Lsn write, Lsn flush, Lsn apply, bool reply_requested) {
  if (conn_ == nullptr || ended_) return;
  std::array<char, kStatusUpdateSize> buf{};
  encode_status_update(write, flush, apply, now_pg(), reply_requested, buf);
  if (PQputCopyData(conn_, buf.data(), static_cast<int>(buf.size())) != 1) {
    end(StreamEnd::kError, "cannot queue standby status update: " + last_error());
    return;
  }
  const int r = PQflush(conn_);
  if (r == 1) {
    arm_write();
  } else if (r == -1) {
    end(StreamEnd::kError, "cannot send standby status update: " + last_error());
  }
}

void ReplicationStream::arm_write() {
  if (writing_ || !socket_) return;
  writing_ = true;
  socket_->async_wait(
      asio::posix::stream_descriptor::wait_write,
      [this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
        if (alive.expired()) return;
        writing_ = false;
        if (ec || conn_ == nullptr || ended_) return;
        const int r = PQflush(conn_);
        if (r == 1) arm_write();
        if (r == -1) end(StreamEnd::kError, last_error());
      });
}

bool ReplicationStream::send_status_blocking(Lsn write, Lsn flush, Lsn apply) {
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) return false;
  std::array<char, kStatusUpdateSize> buf{};
  encode_status_update(write, flush, apply, now_pg(), false, buf);
  PQsetnonblocking(conn_, 0);
  const bool ok =
      PQputCopyData(conn_, buf.data(), static_cast<int>(buf.size())) == 1 && PQflush(conn_) == 0;
  PQsetnonblocking(conn_, 1);
  return ok;
}

void ReplicationStream::end(StreamEnd how, std::string reason) {
  if (ended_) return;
  if (how == StreamEnd::kError) failure_ = client_error(reason);  // lost, or a protocol error
  ended_ = true;
  streaming_ = false;
  if (handlers_.on_end) {
    asio::post(executor_,
               [this, alive = std::weak_ptr<int>(alive_), how, reason = std::move(reason)] {
                 if (!alive.expired()) handlers_.on_end(how, reason);
               });
  }
}

void ReplicationStream::close() {
  ended_ = true;
  streaming_ = false;
  if (socket_) {
    boost::system::error_code ec;
    socket_->cancel(ec);
    socket_->release();  // libpq owns the fd: never let Asio close it
    socket_.reset();
  }
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
}

namespace {
void notice_to_log(void* /*arg*/, const char* message);
}

}  // namespace walrelay::pg

#include <spdlog/spdlog.h>

namespace walrelay::pg {
namespace {
void notice_to_log(void* /*arg*/, const char* message) {
  std::string m(message);
  while (!m.empty() && m.back() == '\n') m.pop_back();
  spdlog::warn("postgres: {}", m);
}
}  // namespace
}  // namespace walrelay::pg
