#include "decide.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

#include "walrelay/core/bytea.hpp"
#include "walrelay/inbox/schema.hpp"

namespace walrelay::inbox::detail {

namespace {

// bytea's hex input format (core/bytea.hpp); SQL NULL stays NULL.
std::optional<std::string> bytea_hex(const std::optional<std::string>& bytes) {
  if (!bytes) return std::nullopt;
  return bytea::hex_text(*bytes);
}

std::optional<std::string> opt_int(const std::optional<std::int64_t>& v) {
  if (!v) return std::nullopt;
  return std::to_string(*v);
}

std::optional<std::string> opt_text(const std::string& s) {
  if (s.empty()) return std::nullopt;
  return s;
}

constexpr unsigned int kTextOid = 25;

}  // namespace

bool handler_matches(const config::InboxHandler& h, const Event& e) {
  return h.topic == e.topic && (h.event_type.empty() || h.event_type == e.event_type);
}

std::string reason_of(const pg::Error& error) {
  return error.sqlstate.empty() ? error.message : error.sqlstate + " " + error.primary;
}

Failure classify(const pg::Error& error) {
  const std::string_view code = error.sqlstate;
  // PostgreSQL docs Appendix A: class 22 data exception, 23 integrity constraint violation,
  // P0 PL/pgSQL error (P0001 raise_exception: RAISE EXCEPTION), 54 program limit exceeded.
  if (code.starts_with("22") || code.starts_with("23") || code.starts_with("P0") ||
      code.starts_with("54")) {
    return Failure::kEvent;
  }
  if (error.kind == pg::ErrorKind::kTransient) return Failure::kRetry;
  return Failure::kFatal;
}

Decider::Decider(pg::AsyncConnection& conn, boost::asio::any_io_executor executor,
                 const config::InboxConfig& cfg)
    : conn_(conn), executor_(std::move(executor)), cfg_(cfg), s_(cfg.schema) {
  for (const auto& h : cfg_.handlers) handler_params_.push_back(placeholder_count(h.sql));
}

boost::asio::awaitable<Answer> Decider::q(std::string sql, Params params) {
  co_return co_await query(conn_, executor_, std::move(sql), std::move(params));
}

boost::asio::awaitable<BatchResult> Decider::run(
    const std::vector<Event>& events,
    const std::map<std::pair<std::string, std::int32_t>, std::int64_t>& next_offsets,
    std::vector<std::pair<std::string, Params>> prelude) {
  BatchResult result;
  const auto fail = [&](Outcome outcome, pg::Error error) {
    result.outcome = outcome;
    result.error = std::move(error);
  };
  Answer a = co_await simple(conn_, executor_, std::string("BEGIN"));
  if (!a.ok()) {
    fail(classify(a.error) == Failure::kFatal ? Outcome::kFatal : Outcome::kRetry, a.error);
    co_return result;
  }
  for (auto& statement : prelude) {
    a = co_await q(std::move(statement.first), std::move(statement.second));
    if (!a.ok()) {
      (void)co_await simple(conn_, executor_, std::string("ROLLBACK"));
      fail(classify(a.error) == Failure::kRetry ? Outcome::kRetry : Outcome::kFatal, a.error);
      co_return result;
    }
  }
  // Every event's ledger claim and effect in a few statements when the batch allows it
  // (decide_batch.cpp); otherwise, or when one of them fails there, event by event.
  bool decided = false;
  if (batch_fits(events)) {
    pg::Error error;
    const Failure f = co_await decide_batch(events, result.by_topic, error, decided);
    if (f == Failure::kRetry || f == Failure::kFatal) {
      (void)co_await simple(conn_, executor_, std::string("ROLLBACK"));
      fail(f == Failure::kRetry ? Outcome::kRetry : Outcome::kFatal, error);
      co_return result;
    }
  }
  for (const Event& e : events) {
    if (decided) break;
    pg::Error error;
    const Failure f = co_await decide(e, result.by_topic[e.topic], error);
    if (f == Failure::kEvent) continue;  // decided (quarantined); the savepoint was released
    if (f == Failure::kRetry || f == Failure::kFatal) {
      (void)co_await simple(conn_, executor_, std::string("ROLLBACK"));
      fail(f == Failure::kRetry ? Outcome::kRetry : Outcome::kFatal, error);
      co_return result;
    }
  }
  // (No structured binding here: GCC 12 mis-compiles them in coroutines.)
  for (const auto& entry : next_offsets) {
    const auto& where = entry.first;
    const std::int64_t next = entry.second;
    a = co_await q(
        "INSERT INTO " + s_ +
            ".offsets AS o (group_id, topic, kafka_partition, next_offset) "
            "VALUES ($1, $2, $3, $4) ON CONFLICT (group_id, topic, kafka_partition) "
            "DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = now()",
        params(cfg_.group_id, where.first, std::to_string(where.second), std::to_string(next)));
    if (!a.ok()) {
      (void)co_await simple(conn_, executor_, std::string("ROLLBACK"));
      fail(classify(a.error) == Failure::kRetry ? Outcome::kRetry : Outcome::kFatal, a.error);
      co_return result;
    }
  }
  for (const auto& entry : result.by_topic) result.counts += entry.second;
  a = co_await simple(conn_, executor_, std::string("COMMIT"));
  if (!a.ok()) {
    // A lost connection here leaves the commit unknown: deciding the batch again is safe (the
    // ledger makes every event a DUPLICATE if it did commit).
    fail(classify(a.error) == Failure::kFatal ? Outcome::kFatal : Outcome::kRetry, a.error);
  }
  co_return result;
}

// Returns kRetry/kFatal (error set) when the batch must end; otherwise the event is decided and
// its savepoint released (the value is then meaningless: kEvent).
boost::asio::awaitable<Failure> Decider::decide(const Event& e, Counts& counts, pg::Error& error) {
  if (!e.value) {
    ++counts.skipped;
    co_return Failure::kEvent;
  }
  Answer a = co_await q(std::string("SAVEPOINT ev"));
  if (!a.ok()) {
    error = a.error;
    co_return Failure::kRetry;
  }
  // Any failure of a statement of this event: its own fault (quarantine it), or the batch's.
  const auto failed = [&](const Answer& answer, const std::string& what,
                          bool ledger_claimed) -> boost::asio::awaitable<Failure> {
    const Failure f = classify(answer.error);
    if (f != Failure::kEvent) {
      error = answer.error;
      co_return f;
    }
    Answer r = co_await q(std::string("ROLLBACK TO SAVEPOINT ev"));
    if (!r.ok()) {
      error = r.error;
      co_return Failure::kRetry;
    }
    ++counts.quarantined;
    co_return co_await quarantine(e, what + ": " + reason_of(answer.error), answer.error.sqlstate,
                                  ledger_claimed, error);
  };

  if (e.id.empty()) {
    // Nothing to claim a ledger row by: only the quarantine keeps it.
    ++counts.quarantined;
    co_return co_await quarantine(e, e.problem, "", false, error);
  }
  const std::string decision(e.problem.empty() ? kApplied : kQuarantined);
  a = co_await q(
      "INSERT INTO " + s_ +
          ".ledger AS l (tenant, event_id, digest, aggregate, version, event_type, topic, "
          "kafka_partition, kafka_offset, decision, reason) "
          "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
          "ON CONFLICT (tenant, event_id) DO UPDATE SET "
          "duplicates = l.duplicates + (l.digest = EXCLUDED.digest)::int, "
          "conflicts = l.conflicts + (l.digest <> EXCLUDED.digest)::int, last_seen = now() "
          "RETURNING (xmax = 0), digest, decision",
      params(e.tenant, e.id, e.digest, e.aggregate, opt_int(e.version), opt_text(e.event_type),
             e.topic, std::to_string(e.partition), std::to_string(e.offset), decision,
             opt_text(e.problem)));
  if (!a.ok()) co_return co_await failed(a, "undecodable", false);
  const auto& row = a.rows->at(0);
  const bool inserted = row[0] == "t";
  if (!inserted) {
    if (row[1] == e.digest) {
      ++counts.duplicate;
      a = co_await q(std::string("RELEASE SAVEPOINT ev"));
      if (!a.ok()) error = a.error;
      co_return a.ok() ? Failure::kEvent : Failure::kRetry;
    }
    ++counts.quarantined;
    co_return co_await quarantine(e,
                                  "conflict: event id already " + row[2].value_or("?") +
                                      " with digest " + row[1].value_or("?") + ", this one has " +
                                      e.digest,
                                  "", false, error);
  }
  if (!e.problem.empty()) {
    ++counts.quarantined;
    co_return co_await quarantine(e, e.problem, "", false, error);
  }
  // An unknown id older than what the ledger remembers may be a replay of a forgotten event.
  if (e.timestamp_ms > 0) {
    const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    if (now_ms - e.timestamp_ms > cfg_.retention.count()) {
      ++counts.quarantined;
      co_return co_await quarantine(
          e,
          "beyond the ledger's horizon: the record is older than inbox.retention and its id is "
          "not in the ledger",
          "", true, error);
    }
  }

  const bool versioned = e.version.has_value();
  std::int64_t applied_version = 0;
  if (versioned) {
    a = co_await q(
        "INSERT INTO " + s_ +
            ".versions AS v (tenant, aggregate, last_version) VALUES ($1, $2, 0) "
            "ON CONFLICT (tenant, aggregate) DO UPDATE SET last_version = v.last_version "
            "RETURNING last_version",
        params(e.tenant, e.aggregate));
    if (!a.ok()) co_return co_await failed(a, "undecodable", true);
    applied_version = std::stoll(a.rows->at(0).at(0).value_or("0"));
    const std::int64_t v = *e.version;
    if (v <= applied_version) {
      a = co_await q("UPDATE " + s_ +
                         ".ledger SET decision = 'DUPLICATE', reason = $3, decided_at = now() "
                         "WHERE tenant = $1 AND event_id = $2",
                     params(e.tenant, e.id,
                            "version " + std::to_string(v) + " is not after the applied version " +
                                std::to_string(applied_version)));
      if (!a.ok()) co_return co_await failed(a, "ledger", true);
      ++counts.duplicate;
      a = co_await q(std::string("RELEASE SAVEPOINT ev"));
      if (!a.ok()) error = a.error;
      co_return a.ok() ? Failure::kEvent : Failure::kRetry;
    }
    if (v > applied_version + 1) {
      const std::string expected = std::to_string(applied_version + 1);
      a = co_await q("UPDATE " + s_ +
                         ".ledger SET decision = 'DEFERRED', reason = $3, decided_at = now() "
                         "WHERE tenant = $1 AND event_id = $2",
                     params(e.tenant, e.id, "waits for version " + expected));
      if (!a.ok()) co_return co_await failed(a, "ledger", true);
      a = co_await q("INSERT INTO " + s_ +
                         ".deferred (tenant, event_id, aggregate, version, expected_version, "
                         "digest, event_type, topic, kafka_partition, kafka_offset, record_key, "
                         "payload, headers) "
                         "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::jsonb)",
                     params(e.tenant, e.id, e.aggregate, std::to_string(v), expected, e.digest,
                            opt_text(e.event_type), e.topic, std::to_string(e.partition),
                            std::to_string(e.offset), e.key, e.value, e.headers_json));
      if (!a.ok()) co_return co_await failed(a, "undecodable", true);
      ++counts.deferred;
      a = co_await q(std::string("RELEASE SAVEPOINT ev"));
      if (!a.ok()) error = a.error;
      co_return a.ok() ? Failure::kEvent : Failure::kRetry;
    }
  }

  a = co_await apply(e);
  // Without handlers the effect is the events table's row (its payload jsonb): a value that is
  // not JSON fails there (22P02) and is undecodable, not a handler's refusal.
  if (!a.ok()) {
    co_return co_await failed(a, cfg_.handlers.empty() ? "undecodable (events table)" : "handler",
                              true);
  }
  if (versioned) {
    a = co_await q("UPDATE " + s_ +
                       ".versions SET last_version = $3, updated_at = now() "
                       "WHERE tenant = $1 AND aggregate = $2",
                   params(e.tenant, e.aggregate, std::to_string(*e.version)));
    if (!a.ok()) co_return co_await failed(a, "versions", true);
  }
  ++counts.applied;
  a = co_await q(std::string("RELEASE SAVEPOINT ev"));
  if (!a.ok()) {
    error = a.error;
    co_return Failure::kRetry;
  }
  if (versioned) {
    co_return co_await apply_deferred(e.tenant, *e.aggregate, *e.version + 1, counts, error);
  }
  co_return Failure::kEvent;
}

boost::asio::awaitable<Answer> Decider::apply(const Event& e) {
  const auto t0 = std::chrono::steady_clock::now();
  Answer a = co_await effect(e);
  handler_seconds_.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  co_return a;
}

boost::asio::awaitable<Answer> Decider::effect(const Event& e) {
  if (cfg_.handlers.empty()) {
    co_return co_await q(
        "INSERT INTO " + s_ +
            ".events (tenant, event_id, aggregate, version, event_type, payload, digest, topic, "
            "kafka_partition, kafka_offset) "
            "VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10)",
        params(e.tenant, e.id, e.aggregate, opt_int(e.version), opt_text(e.event_type), e.value,
               e.digest, e.topic, std::to_string(e.partition), std::to_string(e.offset)));
  }
  Answer last;
  last.rows.emplace();
  for (std::size_t i = 0; i < cfg_.handlers.size(); ++i) {
    const auto& h = cfg_.handlers[i];
    if (!handler_matches(h, e)) continue;
    // $1 payload, $2 event id, $3 key, $4 headers (config/inbox.hpp), as many as the SQL uses.
    // All text (OID 25, pg_type.dat): a parameter the SQL does not use would have no type to
    // infer, and `$1::jsonb` casts text.
    Params all{e.value, e.id, e.key, e.headers_json};
    all.resize(static_cast<std::size_t>(handler_params_[i]));
    std::vector<unsigned int> types(all.size(), kTextOid);
    last = co_await query(conn_, executor_, h.sql, std::move(all), std::move(types));
    if (!last.ok()) co_return last;
  }
  co_return last;
}

boost::asio::awaitable<Failure> Decider::apply_deferred(const std::string& tenant,
                                                        const std::string& aggregate,
                                                        std::int64_t next, Counts& counts,
                                                        pg::Error& error) {
  for (;; ++next) {
    Answer a = co_await q(
        "SELECT event_id, digest, event_type, topic, kafka_partition, "
        "kafka_offset, record_key, payload, headers::text FROM " +
            s_ +
            ".deferred WHERE tenant = $1 AND aggregate = $2 AND version = $3 "
            "ORDER BY deferred_at, kafka_offset LIMIT 1",
        params(tenant, aggregate, std::to_string(next)));
    if (!a.ok()) {
      error = a.error;
      co_return classify(a.error) == Failure::kFatal ? Failure::kFatal : Failure::kRetry;
    }
    if (a.rows->empty()) co_return Failure::kEvent;
    const auto& row = a.rows->front();
    Event d;
    d.tenant = tenant;
    d.aggregate = aggregate;
    d.version = next;
    d.id = row[0].value_or("");
    d.digest = row[1].value_or("");
    d.event_type = row[2].value_or("");
    d.topic = row[3].value_or("");
    d.partition = static_cast<std::int32_t>(std::stol(row[4].value_or("0")));
    d.offset = std::stoll(row[5].value_or("0"));
    d.key = row[6];
    d.value = row[7];
    d.headers_json = row[8].value_or("{}");

    a = co_await q(std::string("SAVEPOINT ev"));
    if (!a.ok()) {
      error = a.error;
      co_return Failure::kRetry;
    }
    a = co_await apply(d);
    if (!a.ok()) {
      const Failure f = classify(a.error);
      if (f != Failure::kEvent) {
        error = a.error;
        co_return f;
      }
      Answer r = co_await q(std::string("ROLLBACK TO SAVEPOINT ev"));
      if (!r.ok()) {
        error = r.error;
        co_return Failure::kRetry;
      }
      r = co_await q("DELETE FROM " + s_ + ".deferred WHERE tenant = $1 AND event_id = $2",
                     params(tenant, d.id));
      if (!r.ok()) {
        error = r.error;
        co_return Failure::kRetry;
      }
      ++counts.quarantined;
      // Its later versions stay DEFERRED: the aggregate waits, the partition does not.
      const Failure qf =
          co_await quarantine(d, "handler: " + reason_of(a.error), a.error.sqlstate, true, error);
      co_return qf;
    }
    const std::vector<std::string> done = {
        "UPDATE " + s_ +
            ".ledger SET decision = 'APPLIED', reason = NULL, decided_at = now() "
            "WHERE tenant = $1 AND event_id = $2",
        "DELETE FROM " + s_ + ".deferred WHERE tenant = $1 AND event_id = $2",
    };
    for (const auto& sql : done) {
      a = co_await q(sql, params(tenant, d.id));
      if (!a.ok()) {
        error = a.error;
        co_return classify(a.error) == Failure::kFatal ? Failure::kFatal : Failure::kRetry;
      }
    }
    a = co_await q("UPDATE " + s_ +
                       ".versions SET last_version = $3, updated_at = now() "
                       "WHERE tenant = $1 AND aggregate = $2",
                   params(tenant, aggregate, std::to_string(next)));
    if (a.ok()) a = co_await q(std::string("RELEASE SAVEPOINT ev"));
    if (!a.ok()) {
      error = a.error;
      co_return classify(a.error) == Failure::kFatal ? Failure::kFatal : Failure::kRetry;
    }
    ++counts.applied;
  }
}

boost::asio::awaitable<Failure> Decider::quarantine(const Event& e, const std::string& reason,
                                                    const std::string& sqlstate,
                                                    bool ledger_decision, pg::Error& error) {
  spdlog::warn("inbox: QUARANTINED {} [{}] @{} id {}: {}", e.topic, e.partition, e.offset,
               e.id.empty() ? "(none)" : e.id, reason);
  const auto finish = [&](Answer a) -> boost::asio::awaitable<Failure> {
    if (a.ok()) a = co_await q(std::string("RELEASE SAVEPOINT ev"));
    if (!a.ok()) {
      error = a.error;
      co_return classify(a.error) == Failure::kFatal ? Failure::kFatal : Failure::kRetry;
    }
    co_return Failure::kEvent;
  };
  Answer a;
  a.rows.emplace();
  if (ledger_decision && !e.id.empty()) {
    // The ledger row was rolled back with the savepoint: claim it again, as QUARANTINED.
    a = co_await q(
        "INSERT INTO " + s_ +
            ".ledger AS l (tenant, event_id, digest, aggregate, version, event_type, "
            "topic, kafka_partition, kafka_offset, decision, reason) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'QUARANTINED', $10) "
            "ON CONFLICT (tenant, event_id) DO UPDATE SET decision = 'QUARANTINED', "
            "reason = EXCLUDED.reason, decided_at = now()",
        params(e.tenant, e.id, e.digest, e.aggregate, opt_int(e.version), opt_text(e.event_type),
               e.topic, std::to_string(e.partition), std::to_string(e.offset), reason));
  }
  if (a.ok()) {
    a = co_await q("INSERT INTO " + s_ +
                       ".quarantine (tenant, event_id, digest, aggregate, version, event_type, "
                       "topic, kafka_partition, kafka_offset, record_key, payload, headers, "
                       "reason, sqlstate) "
                       "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::bytea, $11::bytea, "
                       "$12::jsonb, $13, $14)",
                   params(e.tenant, opt_text(e.id), opt_text(e.digest), e.aggregate,
                          opt_int(e.version), opt_text(e.event_type), e.topic,
                          std::to_string(e.partition), std::to_string(e.offset), bytea_hex(e.key),
                          bytea_hex(e.value), e.headers_json, reason, opt_text(sqlstate)));
  }
  if (a.ok() || classify(a.error) != Failure::kEvent) co_return co_await finish(std::move(a));
  // Its fields are not even text (not UTF-8): keep where it is and why, its bytes stay in Kafka.
  Answer r = co_await q(std::string("ROLLBACK TO SAVEPOINT ev"));
  if (!r.ok()) co_return co_await finish(std::move(r));
  r = co_await q(
      "INSERT INTO " + s_ +
          ".quarantine (topic, kafka_partition, kafka_offset, payload, reason, sqlstate) "
          "VALUES ($1, $2, $3, $4::bytea, $5, $6)",
      params(e.topic, std::to_string(e.partition), std::to_string(e.offset), bytea_hex(e.value),
             reason + " (its id, key or headers are not text: " + reason_of(a.error) + ")",
             opt_text(a.error.sqlstate)));
  co_return co_await finish(std::move(r));
}

}  // namespace walrelay::inbox::detail
