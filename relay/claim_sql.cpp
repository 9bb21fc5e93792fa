#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/relay/outbox_table.hpp"

namespace walrelay::relay {

namespace {

using pg::quote_ident;

std::string col(const std::string& alias, const std::string& name) {
  return alias + "." + quote_ident(name);
}

}  // namespace

std::string OutboxTable::quoted() const {
  return quote_ident(schema) + "." + quote_ident(table);
}

std::string claim_sql(const OutboxTable& t, std::size_t batch, bool failed_blocks_key) {
  const config::OutboxPollConfig& p = *t.poll;
  const std::string table = t.quoted();
  const std::string& key = t.outbox->aggregate_id;
  const std::string& id = t.outbox->event_id;
  // (order_by, event_id): a total order both instances agree on, ties of order_by (now() is
  // the same for every row of one transaction) broken by the event id.
  const auto older = [&](const std::string& a, const std::string& b_ord, const std::string& b_id) {
    return "(" + col(a, p.order_by) + ", " + col(a, id) + ") < (" + b_ord + ", " + b_id + ")";
  };
  std::string sql = "WITH c AS MATERIALIZED (SELECT o.ctid AS walrelay_tid, " + col("o", key) +
                    " AS walrelay_key, " + col("o", p.order_by) + " AS walrelay_ord, " +
                    col("o", id) + " AS walrelay_id, " + col("o", p.attempts) +
                    " AS walrelay_attempts";
  for (std::size_t i = 0; i < t.columns.size(); ++i) {
    sql += ", " + col("o", t.columns[i].first) + " AS walrelay_c" + std::to_string(i);
  }
  sql += " FROM " + table + " o WHERE " + col("o", p.status) + " = $1";
  if (failed_blocks_key) {
    sql += " AND NOT EXISTS (SELECT 1 FROM " + table + " f WHERE " + col("f", p.status) +
           " = $2 AND " + col("f", key) + " = " + col("o", key) + " AND " +
           older("f", col("o", p.order_by), col("o", id)) + ")";
  }
  sql += " ORDER BY " + col("o", p.order_by) + ", " + col("o", id) + " LIMIT " +
         std::to_string(batch) + " FOR UPDATE OF o SKIP LOCKED)";
  sql += " SELECT c.walrelay_tid, c.walrelay_attempts";
  for (std::size_t i = 0; i < t.columns.size(); ++i) sql += ", c.walrelay_c" + std::to_string(i);
  // The head-of-key rule: an older row of the key that is still pending (or failed and
  // blocking) and not locked here is another instance's, or not visible to the lock: publishing
  // this row now could overtake it.
  sql += " FROM c WHERE NOT EXISTS (SELECT 1 FROM " + table + " q WHERE " + col("q", key) +
         " = c.walrelay_key AND " + col("q", p.status) +
         (failed_blocks_key ? " IN ($1, $2)" : " = $1") + " AND " +
         older("q", "c.walrelay_ord", "c.walrelay_id") +
         " AND NOT EXISTS (SELECT 1 FROM c c2 WHERE c2.walrelay_id = " + col("q", id) + "))";
  sql += " ORDER BY c.walrelay_ord, c.walrelay_id";
  return sql;
}

std::string lease_claim_sql(const OutboxTable& t, std::size_t batch, bool failed_blocks_key) {
  const config::OutboxPollConfig& p = *t.poll;
  const std::string table = t.quoted();
  const std::string& key = t.outbox->aggregate_id;
  const std::string& id = t.outbox->event_id;
  const auto older = [&](const std::string& a, const std::string& b_ord, const std::string& b_id) {
    return "(" + col(a, p.order_by) + ", " + col(a, id) + ") < (" + b_ord + ", " + b_id + ")";
  };
  // Claimable: pending, retry_wait, or claimed with a lease that has passed (its owner died or
  // hung: the row is taken over without counting an attempt).
  std::string sql = "WITH c AS MATERIALIZED (SELECT o.ctid AS walrelay_tid, " + col("o", key) +
                    " AS walrelay_key, " + col("o", p.order_by) + " AS walrelay_ord, " +
                    col("o", id) + " AS walrelay_id, " + col("o", p.attempts) +
                    " AS walrelay_attempts";
  for (std::size_t i = 0; i < t.columns.size(); ++i) {
    sql += ", " + col("o", t.columns[i].first) + " AS walrelay_c" + std::to_string(i);
  }
  sql += " FROM " + table + " o WHERE (" + col("o", p.status) + " IN ($1, $2) OR (" +
         col("o", p.status) + " = $3 AND " + col("o", p.lease_until) + " < now()))";
  if (failed_blocks_key) {
    sql += " AND NOT EXISTS (SELECT 1 FROM " + table + " f WHERE " + col("f", p.status) +
           " = $6 AND " + col("f", key) + " = " + col("o", key) + " AND " +
           older("f", col("o", p.order_by), col("o", id)) + ")";
  }
  sql += " ORDER BY " + col("o", p.order_by) + ", " + col("o", id) + " LIMIT " +
         std::to_string(batch) + " FOR UPDATE OF o SKIP LOCKED)";
  // The head-of-key rule as in claim_sql, over every status still to be published: a claimed
  // row outside the locked set (its lease live, or locked by another claim) holds its key back.
  sql += ", h AS (SELECT * FROM c WHERE NOT EXISTS (SELECT 1 FROM " + table + " q WHERE " +
         col("q", key) + " = c.walrelay_key AND " + col("q", p.status) +
         (failed_blocks_key ? " IN ($1, $2, $3, $6)" : " IN ($1, $2, $3)") + " AND " +
         older("q", "c.walrelay_ord", "c.walrelay_id") +
         " AND NOT EXISTS (SELECT 1 FROM c c2 WHERE c2.walrelay_id = " + col("q", id) + ")))";
  sql += ", u AS (UPDATE " + table + " o SET " + quote_ident(p.status) + " = $3, " +
         quote_ident(p.owner) + " = $4, " + quote_ident(p.lease_until) +
         " = now() + make_interval(secs => $5::bigint / 1000.0) FROM h WHERE o.ctid = "
         "h.walrelay_tid RETURNING o.ctid AS walrelay_new_tid, h.*)";
  sql += " SELECT u.walrelay_new_tid, u.walrelay_attempts";
  for (std::size_t i = 0; i < t.columns.size(); ++i) sql += ", u.walrelay_c" + std::to_string(i);
  sql += " FROM u ORDER BY u.walrelay_ord, u.walrelay_id";
  return sql;
}

namespace {

/// The lease variant's guard: only rows this owner token still holds as claimed.
std::string still_owned(const config::OutboxPollConfig& p, int token, int claimed) {
  return " AND " + quote_ident(p.owner) + " = $" + std::to_string(token) + " AND " +
         quote_ident(p.status) + " = $" + std::to_string(claimed);
}

std::string lease_cleared(const config::OutboxPollConfig& p) {
  return ", " + quote_ident(p.owner) + " = NULL, " + quote_ident(p.lease_until) + " = NULL";
}

}  // namespace

std::string lease_mark_sent_sql(const OutboxTable& t) {
  const config::OutboxPollConfig& p = *t.poll;
  return "UPDATE " + t.quoted() + " SET " + quote_ident(p.status) + " = $1, " +
         quote_ident(p.sent_at) + " = now()" + lease_cleared(p) + " WHERE ctid = ANY($2::tid[])" +
         still_owned(p, 3, 4) + " RETURNING 1";
}

std::string lease_mark_failure_sql(const OutboxTable& t) {
  const config::OutboxPollConfig& p = *t.poll;
  std::string sql = "UPDATE " + t.quoted() + " SET " + quote_ident(p.attempts) + " = " +
                    quote_ident(p.attempts) + " + $1::int, " + quote_ident(p.status) + " = $2" +
                    lease_cleared(p);
  if (!p.last_error.empty()) sql += ", " + quote_ident(p.last_error) + " = $6";
  return sql + " WHERE ctid = $3::tid" + still_owned(p, 4, 5) + " RETURNING 1";
}

std::string lease_release_sql(const OutboxTable& t) {
  const config::OutboxPollConfig& p = *t.poll;
  return "UPDATE " + t.quoted() + " SET " + quote_ident(p.status) + " = $1" + lease_cleared(p) +
         " WHERE ctid = ANY($2::tid[])" + still_owned(p, 3, 4) + " RETURNING 1";
}

std::string mark_sent_sql(const OutboxTable& t) {
  const config::OutboxPollConfig& p = *t.poll;
  return "UPDATE " + t.quoted() + " SET " + quote_ident(p.status) + " = $1, " +
         quote_ident(p.sent_at) + " = now() WHERE ctid = ANY($2::tid[])";
}

std::string mark_failure_sql(const OutboxTable& t) {
  const config::OutboxPollConfig& p = *t.poll;
  std::string sql = "UPDATE " + t.quoted() + " SET " + quote_ident(p.attempts) + " = " +
                    quote_ident(p.attempts) + " + $1::int, " + quote_ident(p.status) + " = $2";
  if (!p.last_error.empty()) sql += ", " + quote_ident(p.last_error) + " = $4";
  return sql + " WHERE ctid = $3::tid";
}

std::string backlog_sql(const OutboxTable& t) {
  const config::OutboxPollConfig& p = *t.poll;
  const std::string status = col("o", p.status);
  // Under a lease, retry_wait rows are backlog like pending ones; claimed rows are counted apart
  // and their age counts (they are not sent yet).
  const bool lease = !p.claimed.empty();
  const std::string waiting = lease ? status + " IN ($1, $3)" : status + " = $1";
  const std::string unsent = lease ? status + " IN ($1, $3, $4)" : status + " = $1";
  const std::string age = t.age_column.empty()
                              ? std::string("NULL::bigint")
                              : "floor(extract(epoch FROM now() - min(" + col("o", t.age_column) +
                                    ") FILTER (WHERE " + unsent + ")))::bigint";
  return "SELECT " + col("o", t.outbox->aggregate_type) + "::text, count(*) FILTER (WHERE " +
         waiting + "), count(*) FILTER (WHERE " + status + " = $2), " + age + ", " +
         (lease ? "count(*) FILTER (WHERE " + status + " = $4)" : std::string("0::bigint")) +
         " FROM " + t.quoted() + " o WHERE " + status +
         (lease ? " IN ($1, $2, $3, $4)" : " IN ($1, $2)") + " GROUP BY 1 ORDER BY 1";
}

std::vector<std::optional<std::string>> backlog_params(const OutboxTable& t) {
  std::vector<std::optional<std::string>> params{t.poll->pending, t.poll->failed};
  if (!t.poll->claimed.empty()) {
    params.emplace_back(t.poll->retry_wait);
    params.emplace_back(t.poll->claimed);
  }
  return params;
}

std::string failed_rows_sql(const OutboxTable& t, std::size_t limit) {
  const config::OutboxPollConfig& p = *t.poll;
  const config::OutboxConfig& ob = *t.outbox;
  return "SELECT " + col("o", ob.event_id) + "::text, " + col("o", ob.aggregate_type) + "::text, " +
         col("o", ob.aggregate_id) + "::text, " + col("o", p.attempts) + ", " +
         (p.last_error.empty() ? std::string("NULL") : col("o", p.last_error) + "::text") + ", " +
         (t.age_column.empty()
              ? std::string("NULL::bigint")
              : "floor(extract(epoch FROM now() - " + col("o", t.age_column) + "))::bigint") +
         " FROM " + t.quoted() + " o WHERE " + col("o", p.status) + " = $1 ORDER BY " +
         col("o", p.order_by) + ", " + col("o", ob.event_id) + " LIMIT " + std::to_string(limit);
}

std::string retention_sql(const OutboxTable& t, std::size_t limit) {
  const config::OutboxPollConfig& p = *t.poll;
  const auto old = [&](const std::string& alias) {
    return col(alias, p.status) + " = $1 AND " + col(alias, p.sent_at) +
           " < now() - make_interval(secs => $2::bigint / 1000.0)";
  };
  // The outer condition is evaluated again on the row the DELETE finds (PostgreSQL docs §13.2.1:
  // READ COMMITTED re-checks an updated row), so only a row still sent and old goes.
  return "WITH d AS (DELETE FROM " + t.quoted() + " o WHERE o.ctid IN (SELECT r.ctid FROM " +
         t.quoted() + " r WHERE " + old("r") + " LIMIT " + std::to_string(limit) + ") AND " +
         old("o") + " RETURNING 1) SELECT count(*) FROM d";
}

std::string lock_failed_sql(const OutboxTable& t, bool by_id) {
  const config::OutboxPollConfig& p = *t.poll;
  std::string sql =
      "SELECT o.ctid, " + col("o", t.outbox->event_id) + "::text, " + col("o", p.attempts) + ", " +
      (p.last_error.empty() ? std::string("NULL") : col("o", p.last_error) + "::text") + " FROM " +
      t.quoted() + " o WHERE " + col("o", p.status) + " = $1";
  if (by_id) sql += " AND " + col("o", t.outbox->event_id) + "::text = ANY($2::text[])";
  return sql + " ORDER BY " + col("o", p.order_by) + ", " + col("o", t.outbox->event_id) +
         " FOR UPDATE OF o";
}

std::string retry_sql(const OutboxTable& t) {
  const config::OutboxPollConfig& p = *t.poll;
  std::string sql = "UPDATE " + t.quoted() + " SET " + quote_ident(p.status) + " = $1, " +
                    quote_ident(p.attempts) + " = 0";
  if (!p.last_error.empty()) sql += ", " + quote_ident(p.last_error) + " = NULL";
  return sql + " WHERE ctid = ANY($2::tid[])";
}

std::string status_of_ids_sql(const OutboxTable& t) {
  return "SELECT " + col("o", t.outbox->event_id) + "::text, " + col("o", t.poll->status) +
         "::text FROM " + t.quoted() + " o WHERE " + col("o", t.outbox->event_id) +
         "::text = ANY($1::text[])";
}

std::string text_array(const std::vector<std::string>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::string tid_array(const std::vector<std::string>& tids) {
  std::string out = "{";
  for (std::size_t i = 0; i < tids.size(); ++i) {
    if (i > 0) out += ',';
    out += '"' + tids[i] + '"';
  }
  return out + "}";
}

}  // namespace walrelay::relay
