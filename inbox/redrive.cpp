#include "walrelay/inbox/redrive.hpp"

// <utility> first: Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>
// clang-format off
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
// clang-format on

#include "decide.hpp"
#include "walrelay/inbox/schema.hpp"

namespace walrelay::inbox {

namespace asio = boost::asio;
using detail::Answer;
using detail::params;

namespace {

struct Outcome {
  bool ok = false;
  std::string line;  // for out (ok) or err
};

std::optional<std::string> opt(const std::string& s) {
  if (s.empty()) return std::nullopt;
  return s;
}

asio::awaitable<Outcome> redrive_one(pg::AsyncConnection& conn, asio::any_io_executor ex,
                                     const config::InboxConfig& cfg, std::string tenant,
                                     std::string id, std::string actor) {
  const std::string& s = cfg.schema;
  Outcome o;
  // The latest quarantine row of the id, with the ledger's decision of it.
  Answer a = co_await detail::query(
      conn, ex,
      "SELECT q.id, q.digest, q.aggregate, q.version, q.event_type, q.topic, q.kafka_partition, "
      "q.kafka_offset, convert_from(q.record_key, 'UTF8'), convert_from(q.payload, 'UTF8'), "
      "coalesce(q.headers::text, '{}'), q.reason, l.decision, l.digest FROM " +
          s + ".quarantine q LEFT JOIN " + s +
          ".ledger l ON l.tenant = q.tenant AND l.event_id = q.event_id "
          "WHERE q.tenant = $1 AND q.event_id = $2 ORDER BY q.id DESC LIMIT 1",
      params(tenant, id));
  if (!a.ok()) {
    o.line = id + ": cannot read its quarantine row: " + a.error.message;
    co_return o;
  }
  Event e;
  e.tenant = tenant;
  e.id = id;
  std::vector<std::pair<std::string, detail::Params>> prelude;
  std::string earlier;
  if (!a.rows->empty()) {
    const auto& r = a.rows->front();
    if (r[12] && *r[12] != kQuarantined) {
      o.line = id + ": refused: the id was already " + *r[12] + " with digest " +
               r[13].value_or("?") + ", the quarantined record has digest " + r[1].value_or("?") +
               " (a conflict): compare both with the producer's record; redrive does not choose";
      co_return o;
    }
    e.digest = r[1].value_or("");
    e.aggregate = r[2];
    if (r[3]) e.version = std::stoll(*r[3]);
    e.event_type = r[4].value_or("");
    e.topic = r[5].value_or("");
    e.partition = static_cast<std::int32_t>(std::stol(r[6].value_or("0")));
    e.offset = std::stoll(r[7].value_or("0"));
    e.key = r[8];
    e.value = r[9];
    e.headers_json = r[10].value_or("{}");
    earlier = "QUARANTINED: " + r[11].value_or("");
    prelude.emplace_back("DELETE FROM " + s + ".quarantine WHERE id = $1", params(r[0]));
  } else {
    a = co_await detail::query(
        conn, ex,
        "SELECT digest, aggregate, version, event_type, topic, kafka_partition, kafka_offset, "
        "record_key, payload, headers::text, expected_version FROM " +
            s + ".deferred WHERE tenant = $1 AND event_id = $2",
        params(tenant, id));
    if (!a.ok() || a.rows->empty()) {
      o.line = id + ": no quarantined or deferred event with this id" +
               (tenant.empty() ? std::string() : " (tenant " + tenant + ")") +
               (a.ok() ? std::string() : ": " + a.error.message);
      co_return o;
    }
    const auto& r = a.rows->front();
    e.digest = r[0].value_or("");
    e.aggregate = r[1];
    e.version = std::stoll(r[2].value_or("0"));
    e.event_type = r[3].value_or("");
    e.topic = r[4].value_or("");
    e.partition = static_cast<std::int32_t>(std::stol(r[5].value_or("0")));
    e.offset = std::stoll(r[6].value_or("0"));
    e.key = r[7];
    e.value = r[8];
    e.headers_json = r[9].value_or("{}");
    earlier = "DEFERRED: waited for version " + r[10].value_or("?");
    prelude.emplace_back("DELETE FROM " + s + ".deferred WHERE tenant = $1 AND event_id = $2",
                         params(tenant, id));
  }
  // A redriven event is decided as it arrives, but never refused for its age: the operator asked.
  e.timestamp_ms = -1;
  std::vector<std::pair<std::string, detail::Params>> first;
  first.emplace_back("INSERT INTO " + s +
                         ".audit (actor, action, tenant, event_id, detail) "
                         "VALUES (coalesce($1, current_user), 'redrive', $2, $3, $4)",
                     params(opt(actor), tenant, id, "was " + earlier));
  first.emplace_back("DELETE FROM " + s +
                         ".ledger WHERE tenant = $1 AND event_id = $2 "
                         "AND decision IN ('QUARANTINED', 'DEFERRED')",
                     params(tenant, id));
  prelude.insert(prelude.begin(), std::make_move_iterator(first.begin()),
                 std::make_move_iterator(first.end()));
  detail::Decider decider(conn, ex, cfg);
  std::vector<Event> events;
  events.push_back(std::move(e));
  const std::map<std::pair<std::string, std::int32_t>, std::int64_t> no_offsets;
  const detail::BatchResult r = co_await decider.run(events, no_offsets, std::move(prelude));
  if (r.outcome != detail::Outcome::kCommitted) {
    o.line = id + ": not decided again (nothing changed): " + r.error.message;
    co_return o;
  }
  o.ok = true;
  if (r.counts.quarantined > 0) {
    o.line = id + ": QUARANTINED again (see walrelay inbox status)";
  } else if (r.counts.deferred > 0) {
    o.line = id + ": DEFERRED again";
  } else {
    o.line = id + ": APPLIED" +
             (r.counts.applied > 1
                  ? " (and " + std::to_string(r.counts.applied - 1) + " deferred after it)"
                  : std::string());
  }
  co_return o;
}

asio::awaitable<void> redrive_all(pg::AsyncConnection& conn, asio::any_io_executor ex,
                                  const config::InboxConfig& cfg, std::vector<std::string> ids,
                                  std::string tenant, std::string actor,
                                  std::vector<Outcome>& out) {
  for (const std::string& id : ids) {
    out.push_back(co_await redrive_one(conn, ex, cfg, tenant, id, actor));
  }
}

}  // namespace

ExitCode run_inbox_redrive(const config::Config& cfg, const std::vector<std::string>& event_ids,
                           const std::string& tenant, const std::string& actor, std::ostream& out,
                           std::ostream& err) {
  asio::io_context io(1);
  pg::AsyncConnection conn(io.get_executor(), cfg.inbox.conninfo, "walrelay inbox redrive");
  std::vector<Outcome> outcomes;
  asio::co_spawn(
      io, redrive_all(conn, io.get_executor(), cfg.inbox, event_ids, tenant, actor, outcomes),
      asio::detached);
  io.run();
  bool all = outcomes.size() == event_ids.size();
  for (const Outcome& o : outcomes) {
    (o.ok ? out : err) << (o.ok ? "" : "walrelay inbox redrive: ") << o.line << "\n";
    all = all && o.ok;
  }
  return all ? ExitCode::kOk : ExitCode::kRuntimeError;
}

}  // namespace walrelay::inbox
