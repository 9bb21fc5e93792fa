// A batch decided with a few statements for all its events (decide.hpp, Decider::decide_batch):
// the ledger claimed for every event in one INSERT … ON CONFLICT … RETURNING over arrays
// (unnest), the events table's rows in one INSERT, the handlers without a savepoint each; the same
// decisions as deciding each event under its own savepoint (Decider::decide), which it falls back
// to when an event may need more (a version, a problem found while reading it, the ledger's
// horizon) or when a statement of all the events fails for one of them.

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "decide.hpp"
#include "walrelay/inbox/schema.hpp"

namespace walrelay::inbox::detail {

namespace {

using Column = std::vector<std::optional<std::string>>;

// `items` in PostgreSQL's array input syntax (PostgreSQL docs §8.15.6, "Array Value Input"):
// each element double-quoted with `"` and `\` backslash-escaped, NULL unquoted.
std::optional<std::string> array_literal(const Column& items) {
  std::size_t size = 2;
  for (const auto& item : items) size += (item ? item->size() + 3 : 5);
  std::string out;
  out.reserve(size);
  out.push_back('{');
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.push_back(',');
    if (!items[i]) {
      out.append("NULL");
      continue;
    }
    out.push_back('"');
    for (const char c : *items[i]) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

std::optional<std::string> opt_text(const std::string& s) {
  if (s.empty()) return std::nullopt;
  return s;
}

}  // namespace

bool Decider::batch_fits(const std::vector<Event>& events) const {
  if (cfg_.version.source != config::InboxFieldSource::kNone) return false;
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  bool any = false;
  for (const Event& e : events) {
    if (!e.value) continue;  // a tombstone: skipped either way
    if (e.id.empty() || !e.problem.empty()) return false;
    if (e.timestamp_ms > 0 && now_ms - e.timestamp_ms > cfg_.retention.count()) return false;
    any = true;
  }
  return any;
}

boost::asio::awaitable<Failure> Decider::decide_batch(const std::vector<Event>& events,
                                                      std::map<std::string, Counts>& by_topic,
                                                      pg::Error& error, bool& decided) {
  decided = false;
  const auto fatal_or_retry = [&](const Answer& a) {
    error = a.error;
    return classify(a.error) == Failure::kFatal ? Failure::kFatal : Failure::kRetry;
  };
  // A statement of all the events failed because of one of them: undo the batch's statements
  // and let the caller decide each event under its own savepoint.
  const auto fall_back = [&]() -> boost::asio::awaitable<Failure> {
    Answer r = co_await q(std::string("ROLLBACK TO SAVEPOINT batch"));
    if (!r.ok()) co_return fatal_or_retry(r);
    co_return Failure::kEvent;
  };
  Answer a = co_await q(std::string("SAVEPOINT batch"));
  if (!a.ok()) co_return fatal_or_retry(a);

  // The first event of each (tenant, id) claims its ledger row; a later one of the batch is
  // decided against it, as the event-by-event path would find it.
  std::map<std::pair<std::string, std::string>, std::size_t> first;  // → index in `events`
  std::vector<std::size_t> claims;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (!events[i].value) continue;
    if (first.emplace(std::make_pair(events[i].tenant, events[i].id), i).second) {
      claims.push_back(i);
    }
  }
  Column tenant, id, digest, aggregate, type, topic, partition, offset;
  for (const std::size_t i : claims) {
    const Event& e = events[i];
    tenant.emplace_back(e.tenant);
    id.emplace_back(e.id);
    digest.emplace_back(e.digest);
    aggregate.emplace_back(e.aggregate);
    type.emplace_back(opt_text(e.event_type));
    topic.emplace_back(e.topic);
    partition.emplace_back(std::to_string(e.partition));
    offset.emplace_back(std::to_string(e.offset));
  }
  a = co_await q(
      "INSERT INTO " + s_ +
          ".ledger AS l (tenant, event_id, digest, aggregate, event_type, topic, "
          "kafka_partition, kafka_offset, decision) "
          "SELECT u.t, u.id, u.d, u.a, u.et, u.tp, u.p, u.o, 'APPLIED' FROM unnest($1::text[], "
          "$2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::integer[], "
          "$8::bigint[]) WITH ORDINALITY AS u(t, id, d, a, et, tp, p, o, n) ORDER BY u.n "
          "ON CONFLICT (tenant, event_id) DO UPDATE SET "
          "duplicates = l.duplicates + (l.digest = EXCLUDED.digest)::int, "
          "conflicts = l.conflicts + (l.digest <> EXCLUDED.digest)::int, last_seen = now() "
          "RETURNING (xmax = 0), digest, decision, tenant, event_id",
      params(array_literal(tenant), array_literal(id), array_literal(digest),
             array_literal(aggregate), array_literal(type), array_literal(topic),
             array_literal(partition), array_literal(offset)));
  if (!a.ok()) {
    if (classify(a.error) == Failure::kEvent) co_return co_await fall_back();
    co_return fatal_or_retry(a);
  }
  struct Claim {
    bool inserted = false;
    std::string digest;    // the ledger row's
    std::string decision;  // the ledger row's
  };
  std::map<std::pair<std::string, std::string>, Claim> claimed;
  for (const auto& row : *a.rows) {
    claimed[{row[3].value_or(""), row[4].value_or("")}] =
        Claim{row[0] == "t", row[1].value_or(""), row[2].value_or("")};
  }

  // What each event is: applied (its effect to run), a duplicate, or a conflict.
  std::map<std::string, Counts> counts;
  std::vector<std::size_t> to_apply;
  std::vector<std::pair<std::size_t, std::size_t>> repeats;  // (event, its first event)
  std::vector<std::size_t> conflicts;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    Counts& c = counts[e.topic];
    if (!e.value) {
      ++c.skipped;
      continue;
    }
    const std::size_t f = first.at({e.tenant, e.id});
    if (f != i) {
      repeats.emplace_back(i, f);
      continue;
    }
    const auto it = claimed.find({e.tenant, e.id});
    if (it == claimed.end()) co_return co_await fall_back();  // cannot happen: every row returns
    if (it->second.inserted) {
      to_apply.push_back(i);
    } else if (it->second.digest == e.digest) {
      ++c.duplicate;
    } else {
      conflicts.push_back(i);
    }
  }

  // The effects, in the batch's order.
  if (cfg_.handlers.empty()) {
    if (!to_apply.empty()) {
      Column t, ev, ag, et, payload, dg, tp, p, o;
      for (const std::size_t i : to_apply) {
        const Event& e = events[i];
        t.emplace_back(e.tenant);
        ev.emplace_back(e.id);
        ag.emplace_back(e.aggregate);
        et.emplace_back(opt_text(e.event_type));
        payload.emplace_back(e.value);
        dg.emplace_back(e.digest);
        tp.emplace_back(e.topic);
        p.emplace_back(std::to_string(e.partition));
        o.emplace_back(std::to_string(e.offset));
      }
      const auto t0 = std::chrono::steady_clock::now();
      a = co_await q("INSERT INTO " + s_ +
                         ".events (tenant, event_id, aggregate, event_type, payload, digest, "
                         "topic, kafka_partition, kafka_offset) "
                         "SELECT u.t, u.id, u.a, u.et, u.v::jsonb, u.d, u.tp, u.p, u.o FROM "
                         "unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], "
                         "$6::text[], $7::text[], $8::integer[], $9::bigint[]) WITH ORDINALITY "
                         "AS u(t, id, a, et, v, d, tp, p, o, n) ORDER BY u.n",
                     params(array_literal(t), array_literal(ev), array_literal(ag),
                            array_literal(et), array_literal(payload), array_literal(dg),
                            array_literal(tp), array_literal(p), array_literal(o)));
      handler_seconds_.observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!a.ok()) {
        // A payload that is not JSON: which one is for the event-by-event path to find.
        if (classify(a.error) == Failure::kEvent) co_return co_await fall_back();
        co_return fatal_or_retry(a);
      }
      for (const std::size_t i : to_apply) ++counts[events[i].topic].applied;
    }
  } else {
    // The handlers run without a savepoint each: one that refuses its event (a class that
    // quarantines it) sends the whole batch back to its savepoint and then event by event, where
    // that event alone is quarantined. A refusal costs the batch a second run; an event that
    // passes costs one statement per handler.
    for (const std::size_t i : to_apply) {
      const Event& e = events[i];
      a = co_await apply(e);
      if (!a.ok()) {
        if (classify(a.error) == Failure::kEvent) co_return co_await fall_back();
        co_return fatal_or_retry(a);
      }
      ++counts[e.topic].applied;
    }
  }

  // A later event of an id this batch already claimed: DUPLICATE (same digest) or a conflict.
  Column rt, rid, dup, conf;
  // (No structured binding: GCC 12 mis-compiles them in coroutines.)
  for (const auto& repeat : repeats) {
    const std::size_t i = repeat.first;
    const std::size_t f = repeat.second;
    const Event& e = events[i];
    const Claim& c = claimed.at({e.tenant, e.id});
    const std::string& ledger_digest = c.inserted ? events[f].digest : c.digest;
    const bool same = ledger_digest == e.digest;
    rt.emplace_back(e.tenant);
    rid.emplace_back(e.id);
    dup.emplace_back(same ? "1" : "0");
    conf.emplace_back(same ? "0" : "1");
    if (same) {
      ++counts[e.topic].duplicate;
    } else {
      conflicts.push_back(i);
    }
  }
  if (!repeats.empty()) {
    a = co_await q(
        "UPDATE " + s_ +
            ".ledger l SET duplicates = l.duplicates + u.dup, "
            "conflicts = l.conflicts + u.conf, last_seen = now() FROM (SELECT t, id, "
            "sum(dup) AS dup, sum(conf) AS conf FROM unnest($1::text[], $2::text[], "
            "$3::int[], $4::int[]) AS x(t, id, dup, conf) GROUP BY t, id) u "
            "WHERE l.tenant = u.t AND l.event_id = u.id",
        params(array_literal(rt), array_literal(rid), array_literal(dup), array_literal(conf)));
    if (!a.ok()) {
      if (classify(a.error) == Failure::kEvent) co_return co_await fall_back();
      co_return fatal_or_retry(a);
    }
  }

  // Conflicts: quarantined with the ledger row's decision and digest, as Decider::decide words it.
  for (const std::size_t i : conflicts) {
    const Event& e = events[i];
    const std::size_t f = first.at({e.tenant, e.id});
    const Claim& c = claimed.at({e.tenant, e.id});
    // A row this batch inserted is APPLIED (its effect ran) with its first event's digest.
    const std::string decision = c.inserted ? std::string(kApplied) : c.decision;
    const std::string& ledger_digest = c.inserted ? events[f].digest : c.digest;
    a = co_await q(std::string("SAVEPOINT ev"));
    if (!a.ok()) co_return fatal_or_retry(a);
    ++counts[e.topic].quarantined;
    const Failure qf =
        co_await quarantine(e,
                            "conflict: event id already " + decision + " with digest " +
                                ledger_digest + ", this one has " + e.digest,
                            "", false, error);
    if (qf != Failure::kEvent) co_return qf;
  }

  for (const auto& entry : counts) by_topic[entry.first] += entry.second;
  decided = true;
  co_return Failure::kEvent;
}

}  // namespace walrelay::inbox::detail
