#include "walrelay/relay/preflight.hpp"

#include <charconv>
#include <memory>
#include <set>

#include "walrelay/pg/replication_stream.hpp"

namespace walrelay::relay {

namespace {

std::uint32_t to_u32(const std::optional<std::string>& text) {
  std::uint32_t v = 0;
  if (text) std::from_chars(text->data(), text->data() + text->size(), v);
  return v;
}

/// The checks as a chain of queries, one table after another; owns itself until `done`.
class Preflight : public std::enable_shared_from_this<Preflight> {
 public:
  Preflight(pg::AsyncConnection& conn, const config::Config& cfg, router::TypeRegistry& types,
            std::function<void(PreflightResult)> done)
      : conn_(conn), cfg_(cfg), types_(types), done_(std::move(done)) {}

  void next() {
    if (index_ == cfg_.tables.size()) {
      resolve_types();
      return;
    }
    const config::TableConfig& entry = cfg_.tables[index_];
    OutboxTable t;
    t.config_index = index_;
    t.schema = entry.schema_pattern;
    t.table = entry.table_pattern;
    t.outbox = &*entry.outbox;
    t.poll = &*entry.outbox->poll;
    // Built before the call: the callback below takes `t` (argument order is unspecified).
    std::vector<std::optional<std::string>> params{t.schema, t.table};
    // One row per column (none: the table is missing), with the privileges and the count of
    // partial indexes (pg_index.indpred) on the table.
    conn_.query_params(
        "SELECT a.attname, a.atttypid, has_table_privilege(c.oid, 'SELECT'), "
        "has_table_privilege(c.oid, 'UPDATE'), (SELECT count(*) FROM pg_catalog.pg_index i "
        "WHERE i.indrelid = c.oid AND i.indpred IS NOT NULL), a.attnotnull, "
        "format_type(a.atttypid, a.atttypmod), (SELECT string_agg('(' || "
        "pg_catalog.pg_get_expr(k.conbin, k.conrelid) || ') IS NOT FALSE', ' AND ') FROM "
        "pg_catalog.pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'c' AND k.conkey = "
        "ARRAY[a.attnum]), has_table_privilege(c.oid, 'DELETE') FROM pg_catalog.pg_class c JOIN "
        "pg_catalog.pg_namespace n ON n.oid = c.relnamespace JOIN pg_catalog.pg_attribute a ON "
        "a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped WHERE n.nspname = $1 AND "
        "c.relname = $2 AND c.relkind IN ('r', 'p') ORDER BY a.attnum",
        std::move(params), {},
        [self = shared_from_this(), t = std::move(t)](pg::AsyncConnection::Result r) mutable {
          self->on_columns(std::move(t), std::move(r));
        });
  }

 private:
  void on_columns(OutboxTable t, pg::AsyncConnection::Result r) {
    if (!r) {
      result_.error = conn_.last_error();
      finish();
      return;
    }
    const std::string entry = "tables[" + std::to_string(index_) + "]";
    if (r->empty()) {
      result_.problems.push_back(entry + ".name: table " + t.name() +
                                 " does not exist (or is not a table this role can see)");
      ++index_;
      next();
      return;
    }
    std::map<std::string, std::uint32_t> have;
    std::set<std::string> nullable;
    std::string status_type;
    std::string status_checks;
    for (const auto& row : *r) {
      if (!row[0]) continue;
      have.emplace(*row[0], to_u32(row[1]));
      if (row[5] && *row[5] != "t") nullable.insert(*row[0]);
      if (*row[0] == t.poll->status) {
        status_type = row[6].value_or("text");
        status_checks = row[7].value_or("");
      }
    }
    const auto& front = r->front();
    const bool can_select = front[2] && *front[2] == "t";
    const bool can_update = front[3] && *front[3] == "t";
    const bool partial_index = front[4] && *front[4] != "0";
    const config::OutboxConfig& ob = *t.outbox;
    const config::OutboxPollConfig& p = *t.poll;
    const auto need = [&](const std::string& key, const std::string& column) {
      if (!column.empty() && !have.contains(column)) {
        result_.problems.push_back(entry + "." + key + ": " + t.name() + " has no column " +
                                   pg::quote_ident(column));
      }
    };
    need("outbox.event_id", ob.event_id);
    need("outbox.aggregate_id", ob.aggregate_id);
    need("outbox.aggregate_type", ob.aggregate_type);
    need("outbox.payload", ob.payload);
    if (ob.event_type) need("outbox.event_type", *ob.event_type);
    if (ob.timestamp) need("outbox.timestamp", *ob.timestamp);
    for (const auto& a : ob.additional) need("outbox.additional." + a.column, a.column);
    need("outbox.poll.status", p.status);
    need("outbox.poll.attempts", p.attempts);
    need("outbox.poll.sent_at", p.sent_at);
    need("outbox.poll.order_by", p.order_by);
    need("outbox.poll.last_error", p.last_error);
    need("outbox.poll.owner", p.owner);  // "" unless claim: lease
    need("outbox.poll.lease_until", p.lease_until);
    // The lease variant writes a uuid-shaped token to owner and now() + lease to lease_until
    // (text, varchar, uuid: 25, 1043, 2950; timestamptz 1184, timestamp 1114: pg_type.dat).
    if (const auto it = have.find(p.owner); !p.owner.empty() && it != have.end() &&
                                            it->second != 25 && it->second != 1043 &&
                                            it->second != 2950) {
      result_.problems.push_back(entry + ".outbox.poll.owner: column " + pg::quote_ident(p.owner) +
                                 " of " + t.name() +
                                 " must be text, varchar or uuid (it holds the relay's token)");
    }
    if (const auto it = have.find(p.lease_until);
        !p.lease_until.empty() && it != have.end() && it->second != 1184 && it->second != 1114) {
      result_.problems.push_back(entry + ".outbox.poll.lease_until: column " +
                                 pg::quote_ident(p.lease_until) + " of " + t.name() +
                                 " must be timestamptz (it holds the end of a claim's lease)");
    }
    if (have.contains(p.order_by) && nullable.contains(p.order_by)) {
      // The claim orders each key's rows by (order_by, event_id) and a NULL sorts last: a row
      // whose order_by is NULL would be published after the key's later rows.
      result_.problems.push_back(entry + ".outbox.poll.order_by: column " +
                                 pg::quote_ident(p.order_by) + " of " + t.name() +
                                 " may be NULL, and a row without it breaks its key's order "
                                 "(ALTER TABLE " +
                                 t.quoted() + " ALTER COLUMN " + pg::quote_ident(p.order_by) +
                                 " SET NOT NULL)");
    }
    if (!can_select || !can_update) {
      result_.problems.push_back(entry + ".name: the role may not " +
                                 std::string(!can_select ? "SELECT" : "UPDATE") + " " + t.name() +
                                 " (GRANT SELECT, UPDATE ON " + t.quoted() + " TO <role>)");
    }
    if (cfg_.relay.retention.count() > 0 && !(front[8] && *front[8] == "t")) {
      result_.problems.push_back("relay.retention: the role may not DELETE from " + t.name() +
                                 ", which the retention job does (GRANT DELETE ON " + t.quoted() +
                                 " TO <role>, or retention: 0)");
    }
    if (!partial_index) {
      result_.warnings.push_back(t.name() +
                                 " has no partial index: every claim scans the sent rows too "
                                 "(docs/relay.md \"Set-up\"; `walrelay check` prints it)");
    }
    // The builder's columns, in a fixed order (the claim's result columns follow it).
    std::vector<std::string> wanted = {ob.event_id, ob.aggregate_id, ob.aggregate_type, ob.payload};
    if (ob.event_type) wanted.push_back(*ob.event_type);
    if (ob.timestamp) wanted.push_back(*ob.timestamp);
    for (const auto& a : ob.additional) wanted.push_back(a.column);
    std::set<std::string> added;
    for (const std::string& c : wanted) {
      const auto it = have.find(c);
      if (it == have.end() || !added.insert(c).second) continue;
      if (c == ob.aggregate_id) t.key_column = t.columns.size();
      t.columns.emplace_back(c, it->second);
      if (types_.find(it->second) == nullptr) oids_.insert(std::to_string(it->second));
    }
    // Ages of pending rows (status, metrics): the record's timestamp column, else order_by when it
    // holds a time (timestamptz 1184, timestamp 1114, date 1082: pg_type.dat).
    if (ob.timestamp && have.contains(*ob.timestamp)) {
      t.age_column = *ob.timestamp;
    } else if (const auto it = have.find(p.order_by);
               it != have.end() &&
               (it->second == 1184 || it->second == 1114 || it->second == 1082)) {
      t.age_column = p.order_by;
    }
    const bool check_statuses = have.contains(p.status);
    result_.tables.push_back(std::move(t));
    if (check_statuses) {
      check_status(0, status_type, status_checks);
      return;
    }
    ++index_;
    next();
  }

  // Whether the status column holds each configured status, as the claim writes it: its type
  // (an enum's labels, a domain's constraints, a varchar's length) and its single-column CHECK
  // constraints (PostgreSQL docs §5.4.1), each evaluated on the value. A status it cannot hold
  // would fail the statement that records it, and with it the batch's other rows, at every tick.
  void check_status(std::size_t which, std::string type, std::string checks) {
    const OutboxTable& t = result_.tables.back();
    const config::OutboxPollConfig& p = *t.poll;
    std::vector<std::pair<const char*, const std::string*>> statuses = {
        {"pending", &p.pending}, {"sent", &p.sent}, {"failed", &p.failed}};
    if (!p.claimed.empty()) {  // claim: lease
      statuses.emplace_back("claimed", &p.claimed);
      statuses.emplace_back("retry_wait", &p.retry_wait);
    }
    if (which == statuses.size()) {
      ++index_;
      next();
      return;
    }
    const auto [key, value] = statuses[which];
    std::string sql = "SELECT (s." + pg::quote_ident(p.status) + ")::text = $1, " +
                      (checks.empty() ? std::string("true") : checks) +
                      " FROM (SELECT $1::" + type + " AS " + pg::quote_ident(p.status) + ") AS s";
    conn_.query_params(
        std::move(sql), {*value}, {},
        [self = shared_from_this(), which, key, value, type,
         checks](pg::AsyncConnection::Result r) mutable {
          const OutboxTable& table = self->result_.tables.back();
          const std::string problem = "tables[" + std::to_string(self->index_) +
                                      "].outbox.poll.statuses." + key + ": column " +
                                      pg::quote_ident(table.poll->status) + " of " + table.name() +
                                      " (" + type + ") cannot hold " + pg::quote_literal(*value);
          if (!r) {
            const pg::Error e = self->conn_.last_error();
            // Class 22 (data exception: an enum without the label, a value too long) and 23
            // (a domain's CHECK) are the column's answer; anything else is a failed check.
            if (e.sqlstate.starts_with("22") || e.sqlstate.starts_with("23")) {
              self->result_.problems.push_back(problem + ": " +
                                               (e.primary.empty() ? e.message : e.primary));
            } else {
              self->result_.error = e;
              self->finish();
              return;
            }
          } else if (r->size() != 1 || r->front().size() != 2 || r->front()[0] != "t") {
            self->result_.problems.push_back(problem + " (it reads back as another text)");
          } else if (r->front()[1] != "t") {
            self->result_.problems.push_back(problem + ": a CHECK constraint refuses it");
          }
          self->check_status(which + 1, std::move(type), std::move(checks));
        });
  }

  void resolve_types() {
    if (oids_.empty() || !result_.problems.empty()) {
      finish();
      return;
    }
    std::string array = "{";
    for (const std::string& o : oids_) array += (array.size() > 1 ? "," : "") + o;
    array += "}";
    // Domains (and domains over domains) resolve to their base type, as the connector's registry
    // does from pg_type.
    conn_.query_params(
        "WITH RECURSIVE chain(oid) AS (SELECT unnest($1::oid[]) UNION SELECT p.typbasetype FROM "
        "pg_catalog.pg_type p JOIN chain c ON p.oid = c.oid WHERE p.typbasetype <> 0) SELECT "
        "p.oid, format_type(p.oid, NULL), p.typcategory, p.typtype, p.typelem, p.typbasetype "
        "FROM pg_catalog.pg_type p JOIN chain c ON p.oid = c.oid",
        {array}, {}, [self = shared_from_this()](pg::AsyncConnection::Result r) {
          if (!r) {
            self->result_.error = self->conn_.last_error();
          } else {
            for (const auto& row : *r) {
              router::TypeInfo info;
              info.oid = to_u32(row[0]);
              info.name = row[1].value_or("");
              info.category = row[2] && !row[2]->empty() ? (*row[2])[0] : 'U';
              info.kind = row[3] && !row[3]->empty() ? (*row[3])[0] : 'b';
              info.element = to_u32(row[4]);
              info.base = to_u32(row[5]);
              if (self->types_.find(info.oid) == nullptr) self->types_.add(std::move(info));
            }
          }
          self->finish();
        });
  }

  void finish() {
    auto done = std::move(done_);
    done(std::move(result_));
  }

  pg::AsyncConnection& conn_;
  const config::Config& cfg_;
  router::TypeRegistry& types_;
  std::function<void(PreflightResult)> done_;
  PreflightResult result_;
  std::size_t index_ = 0;
  std::set<std::string> oids_;
};

}  // namespace

void preflight(pg::AsyncConnection& conn, const config::Config& cfg, router::TypeRegistry& types,
               std::function<void(PreflightResult)> done) {
  std::make_shared<Preflight>(conn, cfg, types, std::move(done))->next();
}

std::string setup_sql(const OutboxTable& t, const std::string& channel, bool retention) {
  using pg::quote_ident;
  const config::OutboxPollConfig& p = *t.poll;
  // Under a lease the claim's scan also reads retry_wait rows and claimed ones (expired leases).
  const std::string pending = p.claimed.empty() ? " = " + pg::quote_literal(p.pending)
                                                : " IN (" + pg::quote_literal(p.pending) + ", " +
                                                      pg::quote_literal(p.retry_wait) + ", " +
                                                      pg::quote_literal(p.claimed) + ")";
  const std::string base = t.table.size() > 40 ? t.table.substr(0, 40) : t.table;
  std::string sql = "-- the claim's scan (oldest pending first) and its head-of-key check\n";
  sql += "CREATE INDEX IF NOT EXISTS " + quote_ident(base + "_pending") + " ON " + t.quoted() +
         " (" + quote_ident(p.order_by) + ", " + quote_ident(t.outbox->event_id) + ") WHERE " +
         quote_ident(p.status) + pending + ";\n";
  sql += "CREATE INDEX IF NOT EXISTS " + quote_ident(base + "_pending_key") + " ON " + t.quoted() +
         " (" + quote_ident(t.outbox->aggregate_id) + ", " + quote_ident(p.order_by) + ") WHERE " +
         quote_ident(p.status) + " <> " + pg::quote_literal(p.sent) + ";\n";
  if (retention) {
    sql += "-- the retention job's scan (relay.retention: the oldest sent rows)\n";
    sql += "CREATE INDEX IF NOT EXISTS " + quote_ident(base + "_sent_at") + " ON " + t.quoted() +
           " (" + quote_ident(p.sent_at) + ") WHERE " + quote_ident(p.status) + " = " +
           pg::quote_literal(p.sent) + ";\n";
  }
  if (channel.empty()) return sql;
  const std::string fn = quote_ident(t.schema) + "." + quote_ident(base + "_notify");
  sql +=
      "-- wakes the relay at each commit that inserted rows (NOTIFY is sent at COMMIT, one per\n";
  sql += "-- distinct payload: an empty payload coalesces a transaction's rows)\n";
  sql += "CREATE OR REPLACE FUNCTION " + fn +
         "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify(" +
         pg::quote_literal(channel) + ", ''); RETURN NULL; END $$;\n";
  sql += "CREATE OR REPLACE TRIGGER " + quote_ident(base + "_notify") + " AFTER INSERT ON " +
         t.quoted() + " FOR EACH STATEMENT EXECUTE FUNCTION " + fn + "();\n";
  return sql;
}

}  // namespace walrelay::relay
