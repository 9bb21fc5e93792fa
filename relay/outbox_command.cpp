#include "walrelay/relay/outbox_command.hpp"

#include <pwd.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

// <utility> first: Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>
// clang-format off
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
// clang-format on
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <set>

#include "walrelay/app/audit.hpp"
#include "walrelay/core/json.hpp"
#include "walrelay/pg/awaitable.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/relay/outbox_table.hpp"
#include "walrelay/relay/preflight.hpp"

namespace walrelay::relay {

namespace asio = boost::asio;
using pg::coro::Answer;
using pg::coro::params;

namespace {

/// A one-shot command's session: the relay's preflight, then statements run in order.
class Session {
 public:
  Session(const config::Config& cfg, const std::string& application)
      : cfg_(cfg), conn_(io_.get_executor(), cfg.source.conninfo, application) {}

  /// The tables as the preflight found them, or the exit code (the reason written on `err`).
  std::optional<ExitCode> check(const std::string& command, std::ostream& err) {
    std::optional<PreflightResult> result;
    preflight(conn_, cfg_, types_, [&](PreflightResult r) { result = std::move(r); });
    while (!result && io_.run_one() > 0) {
    }
    if (!result || result->error) {
      err << command << ": cannot read PostgreSQL: "
          << (result ? result->error->message : std::string("the connection stopped answering"))
          << "\n";
      return result && result->error->kind == pg::ErrorKind::kConfiguration
                 ? ExitCode::kConfigError
                 : ExitCode::kRuntimeError;
    }
    if (!result->problems.empty()) {
      for (const std::string& p : result->problems) err << command << ": " << p << "\n";
      return ExitCode::kConfigError;
    }
    tables = std::move(result->tables);
    return std::nullopt;
  }

  /// Runs `work` (a coroutine on this session) to its end; rethrows what it threw. False when the
  /// session had nothing more to do before `work` ended (a connection that stopped answering).
  bool run(asio::awaitable<void> work) {
    bool done = false;
    std::exception_ptr failure;
    asio::co_spawn(io_, std::move(work), [&](std::exception_ptr e) {
      failure = e;
      done = true;
    });
    // The preflight's last handler left the context without work, which stops it (asio
    // io_context::run_one): restart before running again.
    io_.restart();
    while (!done && io_.run_one() > 0) {
    }
    if (failure) std::rethrow_exception(failure);
    return done;
  }

  asio::awaitable<Answer> query(std::string sql, pg::coro::Params p = {}) {
    co_return co_await pg::coro::query(conn_, io_.get_executor(), std::move(sql), std::move(p));
  }
  asio::awaitable<Answer> simple(std::string sql) {
    co_return co_await pg::coro::simple(conn_, io_.get_executor(), std::move(sql));
  }

  std::vector<OutboxTable> tables;

 private:
  const config::Config& cfg_;
  asio::io_context io_{1};
  pg::AsyncConnection conn_;
  router::TypeRegistry types_;
};

std::string text(const std::optional<std::string>& v, const char* null = "") {
  return v ? *v : std::string(null);
}

struct TableStatus {
  pg::AsyncConnection::Rows by_type;  // type, pending, failed, oldest pending age
  pg::AsyncConnection::Rows failed;   // failed_rows_sql's columns
};

std::string pad(std::string s, std::size_t width, bool right = false) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

/// The OS user running the command (`--actor`'s default), "" when unknown.
std::string os_user() {
  if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_name != nullptr) {
    return pw->pw_name;
  }
  const char* user = std::getenv("USER");
  return user != nullptr ? user : "";
}

}  // namespace

ExitCode run_outbox_status(const config::Config& cfg, bool json, std::ostream& out,
                           std::ostream& err) {
  const std::string command = "walrelay outbox status";
  Session s(cfg, "walrelay outbox status " + cfg.name);
  if (auto code = s.check(command, err)) return *code;
  std::vector<TableStatus> status(s.tables.size());
  std::optional<pg::Error> error;
  const bool ran = s.run([&]() -> asio::awaitable<void> {
    for (std::size_t i = 0; i < s.tables.size(); ++i) {
      const OutboxTable& t = s.tables[i];
      Answer a = co_await s.query(backlog_sql(t), backlog_params(t));
      if (!a.ok()) {
        error = a.error;
        co_return;
      }
      status[i].by_type = std::move(*a.rows);
      a = co_await s.query(failed_rows_sql(t, kStatusFailedRows), params(t.poll->failed));
      if (!a.ok()) {
        error = a.error;
        co_return;
      }
      status[i].failed = std::move(*a.rows);
    }
  }());
  if (error || !ran) {
    err << command << ": "
        << (error ? error->message : std::string("the connection stopped answering")) << "\n";
    return ExitCode::kRuntimeError;
  }
  std::string o;
  if (json) {
    o = "{\"name\":";
    json::append_string(o, cfg.name);
    o += ",\"tables\":[";
  } else {
    o = "outbox status of " + cfg.name + " (source.mode poll)\n";
  }
  for (std::size_t i = 0; i < s.tables.size(); ++i) {
    const OutboxTable& t = s.tables[i];
    std::uint64_t pending = 0;
    std::uint64_t failed = 0;
    std::uint64_t claimed = 0;  // claim: lease only
    const bool lease = !t.poll->claimed.empty();
    std::optional<std::string> oldest;
    for (const auto& r : status[i].by_type) {
      pending += std::stoull(text(r[1], "0"));
      claimed += std::stoull(text(r[4], "0"));
      failed += std::stoull(text(r[2], "0"));
      if (r[3] && (!oldest || std::stoll(*r[3]) > std::stoll(*oldest))) oldest = r[3];
    }
    if (json) {
      o += i > 0 ? ",{\"table\":" : "{\"table\":";
      json::append_string(o, t.name());
      o += ",\"pending\":" + std::to_string(pending) + ",\"failed\":" + std::to_string(failed) +
           (lease ? ",\"claimed\":" + std::to_string(claimed) : std::string()) +
           ",\"oldest_pending_s\":";
      json::append_number_or_null(o, oldest);
      o += ",\"by_type\":[";
      bool first = true;
      for (const auto& r : status[i].by_type) {
        o += first ? "{\"aggregate_type\":" : ",{\"aggregate_type\":";
        first = false;
        json::append_string_or_null(o, r[0]);
        o += ",\"pending\":" + text(r[1], "0") + ",\"failed\":" + text(r[2], "0") +
             (lease ? ",\"claimed\":" + text(r[4], "0") : std::string()) + ",\"oldest_pending_s\":";
        json::append_number_or_null(o, r[3]);
        o += "}";
      }
      o += "],\"failed_rows\":[";
      first = true;
      for (const auto& r : status[i].failed) {
        o += first ? "{\"event_id\":" : ",{\"event_id\":";
        first = false;
        json::append_string_or_null(o, r[0]);
        o += ",\"aggregate_type\":";
        json::append_string_or_null(o, r[1]);
        o += ",\"aggregate_id\":";
        json::append_string_or_null(o, r[2]);
        o += ",\"attempts\":";
        json::append_number_or_null(o, r[3]);
        o += ",\"last_error\":";
        json::append_string_or_null(o, r[4]);
        o += ",\"age_s\":";
        json::append_number_or_null(o, r[5]);
        o += "}";
      }
      o += "]}";
      continue;
    }
    o += t.name() + " (tables[" + std::to_string(t.config_index) +
         "]): " + std::to_string(pending) + " pending" +
         (lease ? " (with " + t.poll->retry_wait + "), " + std::to_string(claimed) + " claimed"
                : std::string()) +
         ", oldest " + (oldest ? *oldest + " s" : "-") + "; " + std::to_string(failed) +
         " failed\n";
    if (!status[i].by_type.empty()) {
      o += "  " + pad("aggregate type", 32) + pad("pending", 10, true) +
           pad("oldest (s)", 12, true) + pad("failed", 10, true) + "\n";
    }
    for (const auto& r : status[i].by_type) {
      o += "  " + pad(text(r[0], "(null)"), 32) + pad(text(r[1], "0"), 10, true) +
           pad(text(r[3], "-"), 12, true) + pad(text(r[2], "0"), 10, true) + "\n";
    }
    if (!status[i].failed.empty()) {
      o += "  failed rows (oldest " + std::to_string(status[i].failed.size()) + " of " +
           std::to_string(failed) + "; walrelay outbox retry puts them back):\n";
    }
    for (const auto& r : status[i].failed) {
      o += "    id " + text(r[0]) + " type " + text(r[1], "(null)") + " key " +
           text(r[2], "(null)") + ", attempts " + text(r[3], "?") +
           (r[5] ? ", " + *r[5] + " s old" : std::string()) +
           (r[4] ? ": " + *r[4] : std::string()) + "\n";
    }
  }
  if (json) o += "]}\n";
  out << o;
  return ExitCode::kOk;
}

ExitCode run_outbox_retry(const config::Config& cfg, const RetryRequest& request, std::ostream& out,
                          std::ostream& err) {
  const std::string command = "walrelay outbox retry";
  Session s(cfg, "walrelay outbox retry " + cfg.name);
  if (auto code = s.check(command, err)) return *code;
  const std::string& schema = cfg.relay.schema;
  std::optional<std::string> actor;
  if (!request.actor.empty()) {
    actor = request.actor;
  } else if (std::string user = os_user(); !user.empty()) {
    actor = std::move(user);
  }
  struct Retried {
    std::string table;
    std::string id;
    std::string detail;
  };
  std::vector<Retried> retried;
  std::map<std::string, std::string> not_failed;  // id -> status
  std::string failure;
  const bool ran = s.run([&]() -> asio::awaitable<void> {
    // The audit table first, in a transaction of its own (DDL under walrelay's schema lock): the
    // schema is created only when missing, so a role without CREATE on the database can retry
    // once an owner created it.
    Answer a = co_await s.query(
        "SELECT to_regclass($1) IS NOT NULL, "
        "EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $2)",
        params(schema + ".audit", schema));
    if (!a.ok() || a.rows->empty()) {
      failure = "cannot look for " + schema + ".audit: " + a.error.message;
      co_return;
    }
    if (a.rows->front()[0] != "t") {
      // Built before the co_await: GCC 12 destroys a conditional operator's unevaluated
      // temporary when it is part of a co_await's full-expression.
      std::string ddl =
          "BEGIN;\nSET LOCAL client_min_messages = warning;\n" + app::schema_lock_sql(schema);
      if (a.rows->front()[1] != "t") ddl += "CREATE SCHEMA IF NOT EXISTS " + schema + ";\n";
      ddl += app::audit_table_sql(schema) + "COMMIT;";
      a = co_await s.simple(std::move(ddl));
      if (!a.ok()) {
        failure =
            "cannot create the audit table " + schema + ".audit (relay.schema): " + a.error.message;
        co_return;
      }
    }
    a = co_await s.simple("BEGIN");
    if (!a.ok()) {
      failure = a.error.message;
      co_return;
    }
    const std::string ids = text_array(request.event_ids);
    std::set<std::string> done;
    for (const OutboxTable& t : s.tables) {
      pg::coro::Params p = params(t.poll->failed);
      if (!request.all_failed) p.emplace_back(ids);
      a = co_await s.query(lock_failed_sql(t, !request.all_failed), std::move(p));
      if (!a.ok()) break;
      if (a.rows->empty()) continue;
      std::vector<std::string> tids;
      std::vector<Retried> here;
      for (const auto& r : *a.rows) {
        tids.push_back(text(r[0]));
        here.push_back({t.name(), text(r[1]),
                        t.name() + ": " + t.poll->failed + " -> " + t.poll->pending +
                            " (was: attempts " + text(r[2], "?") +
                            (r[3] ? ", last_error " + *r[3] : std::string()) + ")"});
      }
      a = co_await s.query(retry_sql(t), params(t.poll->pending, tid_array(tids)));
      if (!a.ok()) break;
      for (Retried& r : here) {
        a = co_await s.query(
            app::audit_insert_sql(schema),
            params(actor, std::string("outbox retry"), std::nullopt, r.id, r.detail));
        if (!a.ok()) break;
        done.insert(r.id);
        retried.push_back(std::move(r));
      }
      if (!a.ok()) break;
    }
    if (a.ok() && !request.all_failed) {
      for (const OutboxTable& t : s.tables) {
        a = co_await s.query(status_of_ids_sql(t), params(ids));
        if (!a.ok()) break;
        for (const auto& r : *a.rows) {
          if (!done.contains(text(r[0]))) not_failed[text(r[0])] = text(r[1], "NULL");
        }
      }
    }
    if (!a.ok()) {
      failure = a.error.message;
      co_await s.simple("ROLLBACK");
      co_return;
    }
    a = co_await s.simple("COMMIT");
    if (!a.ok()) failure = "COMMIT failed: " + a.error.message;
  }());
  if (!ran && failure.empty()) failure = "the connection stopped answering";
  if (!failure.empty()) {
    err << command << ": nothing changed: " << failure << "\n";
    return ExitCode::kRuntimeError;
  }
  std::map<std::string, std::vector<std::string>> by_table;
  for (const Retried& r : retried) {
    out << r.id << ": pending again (" << r.detail << ")\n";
    by_table[r.table].push_back(r.id);
  }
  const std::string who = actor.value_or("current_user");
  for (const auto& [table, ids] : by_table) {
    std::string list;
    for (const std::string& id : ids) list += (list.empty() ? "" : ", ") + id;
    spdlog::info("audit: outbox retry by {}: {} failed row(s) of {} back to pending ({}.audit): {}",
                 who, ids.size(), table, schema, list);
  }
  if (retried.empty() && request.all_failed) out << "no failed rows\n";
  bool all = true;
  std::set<std::string> done;
  for (const Retried& r : retried) done.insert(r.id);
  for (const std::string& id : request.event_ids) {
    if (done.contains(id)) continue;
    all = false;
    const auto it = not_failed.find(id);
    if (it != not_failed.end()) {
      err << command << ": " << id << ": not changed: its status is " << it->second << ", not "
          << "failed\n";
    } else {
      err << command << ": " << id << ": not changed: no row of the configured tables has this "
          << "event id\n";
    }
  }
  return all ? ExitCode::kOk : ExitCode::kRuntimeError;
}

}  // namespace walrelay::relay
