#include "walrelay/router/event_router.hpp"

#include <charconv>
#include <chrono>

#include "walrelay/core/json.hpp"

namespace walrelay::router {

namespace {

bool valid_topic_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

void append_topic_part(std::string& out, std::string_view part) {
  for (char c : part) out.push_back(valid_topic_char(c) ? c : '_');
}

void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(end - buf));
}

void append_uint(std::string& out, std::uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(end - buf));
}

void append_image(std::string& out, const std::vector<decoder::Column>& cols) {
  out.push_back('{');
  bool first = true;
  for (const auto& col : cols) {
    if (!first) out.push_back(',');
    first = false;
    out.append(col.name_json);
    out.push_back(':');
    out.append(col.value);
  }
  out.push_back('}');
}

const decoder::Column* find_column(const std::vector<decoder::Column>& cols,
                                   std::string_view name) {
  for (const auto& c : cols) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

bool contains(const std::vector<std::string_view>& names, std::string_view name) {
  for (auto n : names) {
    if (n == name) return true;
  }
  return false;
}

// Appends a column value as plain text: a JSON string token unescaped, anything else (numbers,
// booleans) as its literal text.
bool append_text(std::string& out, std::string_view token) {
  if (json::is_string_token(token)) return json::unescape_string(token, out);
  out.append(token);
  return true;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int digits(std::string_view s, std::size_t pos, std::size_t n, bool& ok) {
  int v = 0;
  if (pos + n > s.size()) {
    ok = false;
    return 0;
  }
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') {
      ok = false;
      return 0;
    }
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

}  // namespace

std::optional<std::int64_t> parse_commit_timestamp_ms(std::string_view s) {
  // YYYY-MM-DD HH:MM:SS[.ffffff](+|-)HH[:MM[:SS]]
  bool ok = true;
  const int year = digits(s, 0, 4, ok);
  const int month = digits(s, 5, 2, ok);
  const int day = digits(s, 8, 2, ok);
  const int hour = digits(s, 11, 2, ok);
  const int minute = digits(s, 14, 2, ok);
  const int second = digits(s, 17, 2, ok);
  if (!ok || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  std::size_t pos = 19;
  std::int64_t millis = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int scale = 100;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      millis += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
  }
  std::int64_t offset_s = 0;
  if (pos < s.size()) {
    const char sign = s[pos];
    if (sign != '+' && sign != '-') return std::nullopt;
    const int oh = digits(s, pos + 1, 2, ok);
    pos += 3;
    int om = 0;
    if (pos < s.size() && s[pos] == ':') {
      om = digits(s, pos + 1, 2, ok);
      pos += 3;
    }
    if (!ok) return std::nullopt;
    offset_s = (oh * 3600 + om * 60) * (sign == '-' ? -1 : 1);
  }
  const std::int64_t days =
      days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const std::int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  return secs * 1000 + millis;
}

EventRouter::EventRouter(RouterSettings settings, std::vector<config::TableConfig> tables)
    : settings_(std::move(settings)), tables_(std::move(tables)) {
  key_.reserve(256);
  value_.reserve(4096);
}

std::string EventRouter::row_topic(std::string_view schema, std::string_view table) const {
  std::string t;
  append_topic_part(t, settings_.topic_prefix);
  t.push_back('.');
  append_topic_part(t, schema);
  t.push_back('.');
  append_topic_part(t, table);
  return t;
}

const EventRouter::Rule& EventRouter::rule_for(std::string_view schema, std::string_view table) {
  lookup_.assign(schema);
  lookup_.push_back('\0');
  lookup_.append(table);
  if (auto it = rules_.find(std::string_view(lookup_)); it != rules_.end()) return it->second;
  Rule rule;
  const std::string s(schema);
  const std::string t(table);
  for (const auto& tc : tables_) {
    if (config::glob_match(tc.schema_pattern, s) && config::glob_match(tc.table_pattern, t)) {
      if (tc.outbox) {
        rule.role = TableRole::kOutbox;
        rule.outbox = &*tc.outbox;
      } else {
        rule.role = TableRole::kRowChange;
        rule.topic = row_topic(schema, table);
      }
      break;
    }
  }
  return rules_.emplace(lookup_, std::move(rule)).first->second;
}

TableRole EventRouter::role_of(std::string_view schema, std::string_view table) {
  return rule_for(schema, table).role;
}

std::expected<std::span<const Record>, MappingError> EventRouter::route(const decoder::Change& c,
                                                                        const TxnInfo& txn) {
  using decoder::Action;
  if (c.action != Action::kInsert && c.action != Action::kUpdate && c.action != Action::kDelete) {
    return std::span<const Record>{};
  }
  const Rule& rule = rule_for(c.schema, c.table);
  switch (rule.role) {
    case TableRole::kIgnored:
      return std::span<const Record>{};
    case TableRole::kOutbox:
      if (c.action != Action::kInsert) return std::span<const Record>{};
      return route_outbox(c, rule);
    case TableRole::kRowChange:
      return route_row(c, txn, rule);
  }
  return std::span<const Record>{};
}

std::expected<std::span<const Record>, MappingError> EventRouter::route_row(
    const decoder::Change& c, const TxnInfo& txn, const Rule& rule) {
  using decoder::Action;
  const auto& key_image = c.action == Action::kDelete ? c.identity : c.columns;

  // Key: the primary key columns in column order, compact JSON (what Debezium's JsonConverter
  // prints with schemas disabled). A table without a primary key gets a null key.
  key_.clear();
  bool have_key = !c.pk.empty();
  if (have_key) {
    key_.push_back('{');
    bool first = true;
    for (const auto& col : key_image) {
      if (!contains(c.pk, col.name)) continue;
      if (!first) key_.push_back(',');
      first = false;
      key_.append(col.name_json);
      key_.push_back(':');
      key_.append(col.value);
    }
    key_.push_back('}');
    if (first) have_key = false;  // no key column in this image (e.g. identity USING INDEX)
  }

  value_.clear();
  value_ += "{\"before\":";
  if (c.action == Action::kInsert || c.identity.empty()) {
    value_ += "null";
  } else {
    append_image(value_, c.identity);
  }
  value_ += ",\"after\":";
  if (c.action == Action::kDelete) {
    value_ += "null";
  } else {
    append_image(value_, c.columns);
  }
  value_ += ",\"source\":{\"version\":";
  json::append_string(value_, settings_.version);
  value_ += ",\"connector\":\"postgresql\",\"name\":";
  json::append_string(value_, settings_.topic_prefix);
  value_ += ",\"ts_ms\":";
  append_int(value_, txn.commit_ts_ms);
  value_ += ",\"snapshot\":\"false\",\"db\":";
  json::append_string(value_, settings_.database);
  value_ += ",\"schema\":";
  json::append_string(value_, c.schema);
  value_ += ",\"table\":";
  json::append_string(value_, c.table);
  value_ += ",\"txId\":";
  append_uint(value_, c.xid);
  value_ += ",\"lsn\":";
  append_uint(value_, c.lsn.value());
  value_ += ",\"xmin\":null},\"op\":\"";
  value_.push_back(c.action == Action::kInsert ? 'c' : c.action == Action::kUpdate ? 'u' : 'd');
  value_ += "\",\"ts_ms\":";
  append_int(value_, now_ms());
  value_.push_back('}');

  // Deterministic event id: the transaction's commit LSN and the change's position in it.
  id_.clear();
  char buf[17];
  id_.append(buf, txn.commit_lsn.format_to(buf));
  id_.push_back(':');
  append_uint(id_, txn.position);

  headers_[0] = Header{"id", id_};
  records_[0] = Record{rule.topic, have_key ? std::optional<std::string_view>(key_) : std::nullopt,
                       std::string_view(value_), std::span<const Header>(headers_.data(), 1), 0};
  return std::span<const Record>(records_.data(), 1);
}

std::expected<std::span<const Record>, MappingError> EventRouter::route_outbox(
    const decoder::Change& c, const Rule& rule) {
  const config::OutboxConfig& ob = *rule.outbox;
  auto where = [&](std::string_view what) {
    std::string s = "outbox table ";
    s += c.schema;
    s += '.';
    s += c.table;
    s += ": ";
    s += what;
    return MappingError{std::move(s)};
  };
  const decoder::Column* id_col = find_column(c.columns, ob.event_id);
  const decoder::Column* agg_id_col = find_column(c.columns, ob.aggregate_id);
  const decoder::Column* agg_type_col = find_column(c.columns, ob.aggregate_type);
  const decoder::Column* payload_col = find_column(c.columns, ob.payload);
  if (id_col == nullptr) return std::unexpected(where("no event id column '" + ob.event_id + "'"));
  if (agg_id_col == nullptr) {
    return std::unexpected(where("no aggregate id column '" + ob.aggregate_id + "'"));
  }
  if (agg_type_col == nullptr) {
    return std::unexpected(where("no aggregate type column '" + ob.aggregate_type + "'"));
  }
  if (payload_col == nullptr) {
    return std::unexpected(where("no payload column '" + ob.payload + "'"));
  }
  if (id_col->is_null()) return std::unexpected(where("event id '" + ob.event_id + "' is NULL"));
  if (agg_id_col->is_null()) {
    return std::unexpected(where("aggregate id '" + ob.aggregate_id + "' is NULL"));
  }
  if (agg_type_col->is_null()) {
    return std::unexpected(where("aggregate type '" + ob.aggregate_type + "' is NULL"));
  }

  id_.clear();
  key_.clear();
  scratch_.clear();
  if (!append_text(id_, id_col->value) || !append_text(key_, agg_id_col->value) ||
      !append_text(scratch_, agg_type_col->value)) {
    return std::unexpected(where("malformed string value"));
  }

  topic_.clear();
  const std::string_view tmpl = ob.topic;
  constexpr std::string_view kPlaceholder = "{aggregate_type}";
  std::size_t pos = 0;
  while (pos < tmpl.size()) {
    const auto at = tmpl.find(kPlaceholder, pos);
    if (at == std::string_view::npos) {
      topic_.append(tmpl.substr(pos));
      break;
    }
    topic_.append(tmpl.substr(pos, at - pos));
    topic_.append(scratch_);
    pos = at + kPlaceholder.size();
  }
  if (topic_.empty() || topic_.size() > 249) {
    return std::unexpected(where("topic '" + topic_ + "' is empty or longer than 249 characters"));
  }
  for (char ch : topic_) {
    if (!valid_topic_char(ch)) {
      return std::unexpected(where("aggregate type gives topic '" + topic_ +
                                   "', which has characters Kafka does not allow"));
    }
  }

  std::optional<std::string_view> value;
  value_.clear();
  if (!payload_col->is_null()) {
    if (json::is_string_token(payload_col->value)) {
      // json/jsonb arrive as a JSON string holding the document's text (shared/cases/README.md
      // item 9): publish the document itself. text payloads are published as their text.
      if (!json::unescape_string(payload_col->value, value_)) {
        return std::unexpected(where("malformed payload string"));
      }
    } else {
      value_.append(payload_col->value);
    }
    value = value_;
  }

  headers_[0] = Header{"id", id_};
  records_[0] =
      Record{topic_, std::string_view(key_), value, std::span<const Header>(headers_.data(), 1), 0};
  return std::span<const Record>(records_.data(), 1);
}

}  // namespace walrelay::router
