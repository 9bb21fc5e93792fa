#include "walrelay/inbox/status.hpp"

// <utility> first: Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>
// clang-format off
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
// clang-format on
#include <string>
#include <vector>

#include "db.hpp"
#include "walrelay/core/json.hpp"

namespace walrelay::inbox {

namespace asio = boost::asio;

namespace {

using Rows = pg::AsyncConnection::Rows;

struct Read {
  std::vector<Rows> results;
  std::optional<pg::Error> error;
};

asio::awaitable<void> read_all(pg::AsyncConnection& conn, asio::any_io_executor ex,
                               std::vector<std::pair<std::string, detail::Params>> queries,
                               Read& out) {
  for (auto& [sql, params] : queries) {
    detail::Answer a = co_await detail::query(conn, ex, sql, params);
    if (!a.ok()) {
      out.error = a.error;
      co_return;
    }
    out.results.push_back(std::move(*a.rows));
  }
}

std::string text(const std::optional<std::string>& v) {
  return v.value_or("");
}

}  // namespace

ExitCode run_inbox_status(const config::Config& cfg, bool json, std::ostream& out,
                          std::ostream& err) {
  const std::string& s = cfg.inbox.schema;
  asio::io_context io(1);
  pg::AsyncConnection conn(io.get_executor(), cfg.inbox.conninfo, "walrelay inbox status");
  std::vector<std::pair<std::string, detail::Params>> queries = {
      {"SELECT (SELECT count(*) FROM " + s +
           ".ledger WHERE decision = 'APPLIED'), "
           "(SELECT coalesce(sum(duplicates), 0) + count(*) FILTER (WHERE decision = 'DUPLICATE') "
           "FROM " +
           s + ".ledger), (SELECT count(*) FROM " + s +
           ".deferred), "
           "(SELECT count(*) FROM " +
           s + ".quarantine)",
       {}},
      {"SELECT topic, kafka_partition, next_offset FROM " + s +
           ".offsets WHERE group_id = $1 ORDER BY topic, kafka_partition",
       {cfg.inbox.group_id}},
      {"SELECT tenant, event_id, aggregate, version, (SELECT v.last_version + 1 FROM " + s +
           ".versions v WHERE v.tenant = d.tenant AND v.aggregate = d.aggregate), topic, "
           "kafka_partition, kafka_offset, floor(extract(epoch FROM now() - deferred_at))::bigint "
           "FROM " +
           s + ".deferred d ORDER BY deferred_at, kafka_offset LIMIT 100",
       {}},
      {"SELECT tenant, event_id, topic, kafka_partition, kafka_offset, reason, sqlstate, "
       "floor(extract(epoch FROM now() - quarantined_at))::bigint FROM " +
           s + ".quarantine ORDER BY id LIMIT 100",
       {}},
  };
  Read read;
  asio::co_spawn(io, read_all(conn, io.get_executor(), std::move(queries), read), asio::detached);
  io.run();
  if (read.error || read.results.size() != 4) {
    err << "walrelay inbox status: cannot read the inbox tables in schema " << s << ": "
        << (read.error ? read.error->message : std::string("no answer"))
        << (read.error && read.error->is("42P01")
                ? " (the tables are made by `walrelay inbox --config` at its first start: has it "
                  "run with this inbox.schema?)"
                : "")
        << "\n";
    return ExitCode::kRuntimeError;
  }
  const auto& counts = read.results[0].at(0);
  const char* names[] = {"APPLIED", "DUPLICATE", "DEFERRED", "QUARANTINED"};
  if (json) {
    std::string o = "{\"group_id\":";
    json::append_string(o, cfg.inbox.group_id);
    o += ",\"schema\":";
    json::append_string(o, s);
    o += ",\"decisions\":{";
    for (int i = 0; i < 4; ++i) {
      if (i > 0) o += ',';
      o += '"' + std::string(names[i]) + "\":" + text(counts[static_cast<std::size_t>(i)]);
    }
    o += "},\"offsets\":[";
    bool first = true;
    for (const auto& r : read.results[1]) {
      o += first ? "{" : ",{";
      first = false;
      o += "\"topic\":";
      json::append_string_or_null(o, r[0]);
      o += ",\"partition\":" + text(r[1]) + ",\"next_offset\":" + text(r[2]) + "}";
    }
    o += "],\"deferred\":[";
    first = true;
    for (const auto& r : read.results[2]) {
      o += first ? "{" : ",{";
      first = false;
      o += "\"tenant\":";
      json::append_string_or_null(o, r[0]);
      o += ",\"event_id\":";
      json::append_string_or_null(o, r[1]);
      o += ",\"aggregate\":";
      json::append_string_or_null(o, r[2]);
      o += ",\"version\":";
      json::append_number_or_null(o, r[3]);
      o += ",\"waits_for\":";
      json::append_number_or_null(o, r[4]);
      o += ",\"topic\":";
      json::append_string_or_null(o, r[5]);
      o += ",\"partition\":" + text(r[6]) + ",\"offset\":" + text(r[7]) +
           ",\"age_s\":" + text(r[8]) + "}";
    }
    o += "],\"quarantined\":[";
    first = true;
    for (const auto& r : read.results[3]) {
      o += first ? "{" : ",{";
      first = false;
      o += "\"tenant\":";
      json::append_string_or_null(o, r[0]);
      o += ",\"event_id\":";
      json::append_string_or_null(o, r[1]);
      o += ",\"topic\":";
      json::append_string_or_null(o, r[2]);
      o += ",\"partition\":" + text(r[3]) + ",\"offset\":" + text(r[4]) + ",\"reason\":";
      json::append_string_or_null(o, r[5]);
      o += ",\"sqlstate\":";
      json::append_string_or_null(o, r[6]);
      o += ",\"age_s\":" + text(r[7]) + "}";
    }
    o += "]}\n";
    out << o;
    return ExitCode::kOk;
  }
  out << "inbox group " << cfg.inbox.group_id << " (schema " << s << ")\n";
  for (int i = 0; i < 4; ++i) {
    std::string name = names[i];
    name.resize(13, ' ');
    out << "  " << name << text(counts[static_cast<std::size_t>(i)]) << "\n";
  }
  out << "offsets (next to read):" << (read.results[1].empty() ? " none stored" : "") << "\n";
  for (const auto& r : read.results[1]) {
    out << "  " << text(r[0]) << " [" << text(r[1]) << "] " << text(r[2]) << "\n";
  }
  out << "deferred:" << (read.results[2].empty() ? " none" : "") << "\n";
  for (const auto& r : read.results[2]) {
    out << "  id " << text(r[1]) << (r[0] && !r[0]->empty() ? " tenant " + *r[0] : "")
        << " aggregate " << text(r[2]) << " version " << text(r[3]) << " (waits for " << text(r[4])
        << ") " << text(r[5]) << " [" << text(r[6]) << "] @" << text(r[7]) << ", " << text(r[8])
        << " s old\n";
  }
  out << "quarantined:" << (read.results[3].empty() ? " none" : "") << "\n";
  for (const auto& r : read.results[3]) {
    out << "  id " << (r[1] ? *r[1] : std::string("(none)"))
        << (r[0] && !r[0]->empty() ? " tenant " + *r[0] : "") << " " << text(r[2]) << " ["
        << text(r[3]) << "] @" << text(r[4]) << ", " << text(r[7]) << " s old: " << text(r[5])
        << "\n";
  }
  return ExitCode::kOk;
}

}  // namespace walrelay::inbox
