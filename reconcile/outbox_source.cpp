#include "outbox_source.hpp"

#include <charconv>
#include <map>
#include <set>

#include "walrelay/core/json.hpp"
#include "walrelay/decoder/change.hpp"
#include "walrelay/decoder/wal2json_value.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/router/payload_digest.hpp"

namespace walrelay::reconcile {

namespace {

std::uint32_t to_u32(const std::optional<std::string>& text) {
  std::uint32_t v = 0;
  if (text) std::from_chars(text->data(), text->data() + text->size(), v);
  return v;
}

// pg_type OIDs of the time types a row's age can be read from (PostgreSQL's pg_type.dat).
constexpr std::uint32_t kDateOid = 1082;
constexpr std::uint32_t kTimestampOid = 1114;
constexpr std::uint32_t kTimestampTzOid = 1184;

bool is_time(std::uint32_t oid) {
  return oid == kDateOid || oid == kTimestampOid || oid == kTimestampTzOid;
}

/// Poll mode: checks that `t` has its `poll` columns and sets `t.poll_time_ms_sql`.
std::expected<void, std::string> describe_poll(PgSession& session, OutboxTable& t) {
  const auto& ob = *t.outbox;
  const auto& poll = *ob.poll;
  std::vector<std::string> wanted = {poll.status, poll.attempts, poll.order_by};
  if (!poll.last_error.empty()) wanted.push_back(poll.last_error);
  if (ob.timestamp) wanted.push_back(*ob.timestamp);
  auto rows = session.query(
      "SELECT attname, atttypid FROM pg_catalog.pg_attribute WHERE attrelid = $1::regclass AND "
      "attnum > 0 AND NOT attisdropped AND attname = ANY($2::text[])",
      {t.quoted(), text_array_literal(wanted)});
  if (!rows) return std::unexpected(rows.error().message);
  std::map<std::string, std::uint32_t> have;
  for (const auto& r : *rows) {
    if (r[0]) have.emplace(*r[0], to_u32(r[1]));
  }
  const std::size_t required = poll.last_error.empty() ? 3 : 4;
  for (std::size_t i = 0; i < required; ++i) {
    if (!have.contains(wanted[i])) {
      return std::unexpected(t.name() + " has no column " + pg::quote_ident(wanted[i]) +
                             " (tables[" + std::to_string(t.config_index) + "].outbox.poll)");
    }
  }
  auto ms_of = [](const std::string& col) {
    return "(extract(epoch FROM " + pg::quote_ident(col) + ") * 1000)::bigint";
  };
  if (ob.timestamp && have.contains(*ob.timestamp) && is_time(have[*ob.timestamp])) {
    t.poll_time_ms_sql = ms_of(*ob.timestamp);
  } else if (is_time(have[poll.order_by])) {
    t.poll_time_ms_sql = ms_of(poll.order_by);
  } else {
    t.poll_time_ms_sql = "NULL::bigint";
  }
  return {};
}

std::int64_t to_i64(const std::optional<std::string>& text) {
  std::int64_t v = -1;
  if (text) std::from_chars(text->data(), text->data() + text->size(), v);
  return v;
}

}  // namespace

std::string OutboxTable::quoted() const {
  return pg::quote_ident(schema) + "." + pg::quote_ident(table);
}

std::expected<void, std::string> OutboxSource::describe(OutboxTable& t) {
  const auto& ob = *t.outbox;
  std::vector<std::string> wanted = {ob.event_id, ob.aggregate_id, ob.aggregate_type, ob.payload};
  if (ob.event_type) wanted.push_back(*ob.event_type);
  if (ob.timestamp) wanted.push_back(*ob.timestamp);
  for (const auto& a : ob.additional) wanted.push_back(a.column);
  auto rows = session_.query(
      "SELECT attname, atttypid FROM pg_catalog.pg_attribute WHERE attrelid = $1::regclass AND "
      "attnum > 0 AND NOT attisdropped AND attname = ANY($2::text[]) ORDER BY attnum",
      {t.quoted(), text_array_literal(wanted)});
  if (!rows) return std::unexpected(rows.error().message);
  t.columns.clear();
  std::set<std::string> have;
  std::vector<std::string> oids;
  for (const auto& r : *rows) {
    if (!r[0]) continue;
    t.columns.emplace_back(*r[0], to_u32(r[1]));
    have.insert(*r[0]);
    if (types_.find(to_u32(r[1])) == nullptr && r[1]) oids.push_back(*r[1]);
  }
  for (std::size_t i = 0; i < 4; ++i) {
    if (!have.contains(wanted[i])) {
      return std::unexpected(t.name() + " has no column " + pg::quote_ident(wanted[i]) +
                             " (tables[" + std::to_string(t.config_index) + "].outbox)");
    }
  }
  if (t.poll) {
    if (auto p = describe_poll(session_, t); !p) return p;
  }
  if (oids.empty()) return {};
  // Domains (and domains over domains) resolve to their base type, as the connector's registry
  // does from pg_type.
  auto types = session_.query(
      "WITH RECURSIVE chain(oid) AS (SELECT unnest($1::oid[]) UNION SELECT p.typbasetype FROM "
      "pg_catalog.pg_type p JOIN chain c ON p.oid = c.oid WHERE p.typbasetype <> 0) SELECT p.oid, "
      "format_type(p.oid, NULL), p.typcategory, p.typtype, p.typelem, p.typbasetype FROM "
      "pg_catalog.pg_type p JOIN chain c ON p.oid = c.oid",
      {text_array_literal(oids)});
  if (!types) return std::unexpected(types.error().message);
  for (const auto& r : *types) {
    router::TypeInfo info;
    info.oid = to_u32(r[0]);
    info.name = r[1].value_or("");
    info.category = r[2] && !r[2]->empty() ? (*r[2])[0] : 'U';
    info.kind = r[3] && !r[3]->empty() ? (*r[3])[0] : 'b';
    info.element = to_u32(r[4]);
    info.base = to_u32(r[5]);
    if (types_.find(info.oid) == nullptr) types_.add(std::move(info));
  }
  return {};
}

std::expected<void, pg::Error> OutboxSource::read(
    const OutboxTable& t, const std::function<void(const SourceEvent&)>& visit,
    std::uint64_t& unmappable, std::string& first_error, std::size_t batch,
    const std::vector<std::string>* only_ids) {
  std::string select = "SELECT ";
  for (std::size_t i = 0; i < t.columns.size(); ++i) {
    select += (i > 0 ? ", " : "") + pg::quote_ident(t.columns[i].first);
  }
  const bool poll = t.poll;
  if (poll) {
    const auto& pc = *t.outbox->poll;
    select += ", " + pg::quote_ident(pc.status) + "::text, " + pg::quote_ident(pc.attempts) +
              "::text, " +
              (pc.last_error.empty() ? std::string("NULL") : pg::quote_ident(pc.last_error)) +
              "::text, " + t.poll_time_ms_sql;
  }
  select += " FROM " + t.quoted();
  std::vector<std::optional<std::string>> params;
  if (only_ids != nullptr) {
    select += " WHERE " + pg::quote_ident(t.outbox->event_id) + "::text = ANY($1::text[])";
    params.emplace_back(text_array_literal(*only_ids));
  }
  // The DECLARE's parameters reach the cursor's query (PostgreSQL binds them to its portal).
  if (auto r = session_.query("DECLARE walrelay_reconcile NO SCROLL CURSOR FOR " + select,
                              std::move(params));
      !r) {
    return std::unexpected(r.error());
  }
  const std::string fetch = "FETCH " + std::to_string(batch) + " FROM walrelay_reconcile";
  std::vector<decoder::Column> row(t.columns.size());
  std::vector<std::string> names_json(t.columns.size());
  for (std::size_t i = 0; i < t.columns.size(); ++i) {
    json::append_string(names_json[i], t.columns[i].first);
  }
  const auto where = [&] { return "outbox table " + t.name(); };
  std::vector<std::size_t> ends(t.columns.size());
  const std::size_t n = t.columns.size();
  std::size_t id_column = 0;
  while (id_column < n && t.columns[id_column].first != t.outbox->event_id) ++id_column;
  for (;;) {
    auto rows = session_.query(fetch);
    if (!rows) return std::unexpected(rows.error());
    if (rows->empty()) break;
    for (const auto& r : *rows) {
      if (poll && r[n] != t.outbox->poll->sent) {
        // Not sent: not built (the relay may have failed it for what the builder refuses).
        const auto& pc = *t.outbox->poll;
        SourceEvent e;
        e.status = r[n] == pc.pending  ? RowStatus::kPending
                   : r[n] == pc.failed ? RowStatus::kFailed
                                       : RowStatus::kOther;
        if (id_column < n && r[id_column]) e.id = *r[id_column];
        if (r[n]) e.status_text = *r[n];
        e.attempts = to_i64(r[n + 1]);
        if (r[n + 2]) e.last_error = *r[n + 2];
        e.timestamp_ms = to_i64(r[n + 3]);
        visit(e);
        continue;
      }
      tokens_.clear();
      bool ok = true;
      for (std::size_t i = 0; i < t.columns.size() && ok; ++i) {
        std::optional<std::string_view> text;
        if (r[i]) text = *r[i];
        ok = decoder::append_wal2json_value(tokens_, text, t.columns[i].second,
                                            decoder::NumericTokens::kNumbers);
        ends[i] = tokens_.size();
      }
      if (!ok) {
        if (unmappable++ == 0) first_error = where() + ": a numeric value is not a number";
        continue;
      }
      std::size_t begin = 0;
      const std::string_view all(tokens_);
      for (std::size_t i = 0; i < t.columns.size(); ++i) {
        row[i] = decoder::Column{t.columns[i].first, names_json[i], t.columns[i].second,
                                 all.substr(begin, ends[i] - begin)};
        begin = ends[i];
      }
      auto built = builder_.build(*t.outbox, row, -1, where, buffer_);
      if (!built) {
        if (unmappable++ == 0) first_error = built.error().reason;
        continue;
      }
      digest_.clear();
      if (buffer_.has_value) router::append_payload_digest(digest_, buffer_.value);
      SourceEvent sent;
      sent.id = buffer_.id;
      sent.topic = buffer_.topic;
      sent.digest = digest_;
      sent.timestamp_ms = buffer_.timestamp_ms;
      sent.record = &buffer_;
      visit(sent);
    }
  }
  if (auto r = session_.query("CLOSE walrelay_reconcile"); !r) return std::unexpected(r.error());
  return {};
}

}  // namespace walrelay::reconcile
