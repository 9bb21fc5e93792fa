#include "walrelay/inbox/redrive.hpp"

// <utility> first: Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>
// clang-format off
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
// clang-format on

#include "decide.hpp"
#include "walrelay/app/audit.hpp"
#include "walrelay/core/bytea.hpp"
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

// The stored record of a quarantined or deferred event (its place in Kafka, key, value and
// headers), decoded again by the arrival's own step (decode_event): a redrive decides exactly what
// arrival would, with today's configuration.
std::optional<Event> stored_record(const pg::AsyncConnection::Row& r, bool key_value_bytea,
                                   const config::InboxConfig& cfg, std::string& why) {
  Event raw;
  raw.topic = r[0].value_or("");
  raw.partition = static_cast<std::int32_t>(std::stol(r[1].value_or("0")));
  raw.offset = std::stoll(r[2].value_or("0"));
  // Never refused for its age: the operator asked.
  raw.timestamp_ms = -1;
  if (key_value_bytea) {
    // As the server prints bytea (bytea_output hex): the stored bytes, exactly.
    for (auto [cell, field] : {std::pair{&r[3], &raw.key}, std::pair{&r[4], &raw.value}}) {
      if (!*cell) continue;
      field->emplace();
      if (!bytea::append_bytes(**field, **cell)) {
        why = "its stored key or value is not bytea in the hex format";
        return std::nullopt;
      }
    }
  } else {
    raw.key = r[3];
    raw.value = r[4];
  }
  const auto headers = headers_from_json(r[5].value_or("{}"));
  if (!headers) {
    why = "its stored headers are not an object of strings";
    return std::nullopt;
  }
  return decode_event(std::move(raw), *headers, cfg);
}

asio::awaitable<Outcome> redrive_one(pg::AsyncConnection& conn, asio::any_io_executor ex,
                                     const config::InboxConfig& cfg, std::string tenant,
                                     std::string id, std::string actor) {
  const std::string& s = cfg.schema;
  Outcome o;
  // The latest quarantine row of the id, with the ledger's decision of it and how many other
  // quarantined records of the id differ from it.
  Answer a = co_await detail::query(
      conn, ex,
      "SELECT q.topic, q.kafka_partition, q.kafka_offset, q.record_key, q.payload, "
      "coalesce(q.headers::text, '{}'), q.reason, l.decision, l.digest, q.digest, "
      "(SELECT string_agg(o.id::text || ' (digest ' || coalesce(o.digest, 'none') || ')', ', ' "
      "ORDER BY o.id) FROM " +
          s +
          ".quarantine o WHERE o.tenant = q.tenant AND o.event_id = q.event_id "
          "AND o.digest IS DISTINCT FROM q.digest) FROM " +
          s + ".quarantine q LEFT JOIN " + s +
          ".ledger l ON l.tenant = q.tenant AND l.event_id = q.event_id "
          "WHERE q.tenant = $1 AND q.event_id = $2 ORDER BY q.id DESC LIMIT 1",
      params(tenant, id));
  if (!a.ok()) {
    o.line = id + ": cannot read its quarantine row: " + a.error.message;
    co_return o;
  }
  std::optional<Event> decoded;
  std::vector<std::pair<std::string, detail::Params>> prelude;
  std::string earlier;
  std::string why;
  if (!a.rows->empty()) {
    const auto& r = a.rows->front();
    if (r[7] && *r[7] != kQuarantined) {
      o.line = id + ": refused: the id was already " + *r[7] + " with digest " +
               r[8].value_or("?") + ", the quarantined record has digest " + r[9].value_or("?") +
               " (a conflict): compare both with the producer's record; redrive does not choose";
      co_return o;
    }
    if (r[10]) {
      o.line = id + ": refused: the id has quarantined records of other contents (" + s +
               ".quarantine ids " + *r[10] + ", and the latest with digest " +
               r[9].value_or("none") +
               "): at most one of them is the event; remove the others from " + s +
               ".quarantine, then redrive";
      co_return o;
    }
    decoded = stored_record(r, true, cfg, why);
    earlier = "QUARANTINED: " + r[6].value_or("");
    // Every quarantined copy of the record goes: they have the same contents.
    prelude.emplace_back("DELETE FROM " + s + ".quarantine WHERE tenant = $1 AND event_id = $2",
                         params(tenant, id));
  } else {
    a = co_await detail::query(conn, ex,
                               "SELECT topic, kafka_partition, kafka_offset, record_key, payload, "
                               "headers::text, expected_version FROM " +
                                   s + ".deferred WHERE tenant = $1 AND event_id = $2",
                               params(tenant, id));
    if (!a.ok() || a.rows->empty()) {
      o.line = id + ": no quarantined or deferred event with this id" +
               (tenant.empty() ? std::string() : " (tenant " + tenant + ")") +
               (a.ok() ? std::string() : ": " + a.error.message) +
               (tenant.empty() && cfg.tenant.source != config::InboxFieldSource::kNone
                    ? " (inbox.tenant is set: name the event's tenant with --tenant)"
                    : std::string());
      co_return o;
    }
    const auto& r = a.rows->front();
    decoded = stored_record(r, false, cfg, why);
    earlier = "DEFERRED: waited for version " + r[6].value_or("?");
    prelude.emplace_back("DELETE FROM " + s + ".deferred WHERE tenant = $1 AND event_id = $2",
                         params(tenant, id));
  }
  if (!decoded) {
    o.line = id + ": not decided again (nothing changed): " + why;
    co_return o;
  }
  Event e = std::move(*decoded);
  if (e.problem.empty() && (e.tenant != tenant || e.id != id)) {
    // Today's configuration reads another id or tenant from the record: decided under those, the
    // stored row would stay behind.
    o.line = id + ": refused: under today's configuration the record is event " + e.id +
             (e.tenant.empty() ? std::string() : " of tenant " + e.tenant) +
             " (inbox.event_id or inbox.tenant changed since it was stored)";
    co_return o;
  }
  std::vector<std::pair<std::string, detail::Params>> first;
  first.emplace_back(app::audit_insert_sql(s),
                     params(opt(actor), "redrive", tenant, id, "was " + earlier));
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
