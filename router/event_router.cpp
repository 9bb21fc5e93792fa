#include "walrelay/router/event_router.hpp"

#include <openssl/evp.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <ctime>

#include "walrelay/core/headers.hpp"
#include "walrelay/core/json.hpp"

namespace walrelay::router {

using namespace std::string_view_literals;

namespace {

bool valid_topic_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
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

// Processing time for the envelope's ts_ms/ts_us/ts_ns, in ns since the Unix epoch (one vDSO
// clock read per event; ms, µs and ns come from the same reading, as Debezium's from one Instant).
std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Monotonic time for rate limits where a few ms do not matter: CLOCK_MONOTONIC_COARSE is the
// kernel's last tick, read without the hardware clock.
std::chrono::nanoseconds coarse_monotonic() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Rounds toward negative infinity (times before 1970 stay ordered).
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

const decoder::Column* find_column(const std::vector<decoder::Column>& cols,
                                   std::string_view name) {
  for (const auto& c : cols) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

template <typename Names>
bool contains(const Names& names, std::string_view name) {
  for (const auto& n : names) {
    if (n == name) return true;
  }
  return false;
}

// Names joined with ", ".
template <typename Names>
std::string join_names(const Names& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out.append(n);
  }
  return out;
}

// A column value as plain text: a JSON string token unescaped, anything else (numbers, booleans,
// documents) as its literal text.
bool append_text(std::string& out, std::string_view token) {
  if (json::is_string_token(token)) return json::unescape_string(token, out);
  out.append(token);
  return true;
}

void append_hex(std::string& out, const unsigned char* data, std::size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(kHex[data[i] >> 4]);
    out.push_back(kHex[data[i] & 0xF]);
  }
}

// Lower-case hex SHA-256 of the concatenation of `a` and `b` (OpenSSL EVP).
void append_sha256_hex(std::string& out, std::string_view a, std::string_view b) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, a.data(), a.size());
  EVP_DigestUpdate(ctx, b.data(), b.size());
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  append_hex(out, md, len);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// bytea text with bytea_output=hex → the bytes. wal2json prints the hex digits without the
// `\x` that byteaout puts in front; both forms are accepted.
bool append_bytea(std::string& out, std::string_view text) {
  if (text.size() >= 2 && text[0] == '\\' && text[1] == 'x') text.remove_prefix(2);
  if (text.size() % 2 != 0) return false;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    const int hi = hex_value(text[i]);
    const int lo = hex_value(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>((hi << 4) | lo));
  }
  return true;
}

// Validates a JSON document without converting numbers (so 30-digit numbers and 1e400 pass, as
// PostgreSQL's json type accepts them): structure and string escapes via simdjson on-demand.
bool validate_value(simdjson::ondemand::value v, int depth) {
  namespace od = simdjson::ondemand;
  if (depth > 256) return false;
  od::json_type t;
  if (v.type().get(t)) return false;
  switch (t) {
    case od::json_type::object: {
      od::object obj;
      if (v.get_object().get(obj)) return false;
      for (auto field : obj) {
        std::string_view key;
        if (field.unescaped_key().get(key)) return false;
        od::value fv;
        if (field.value().get(fv)) return false;
        if (!validate_value(fv, depth + 1)) return false;
      }
      return true;
    }
    case od::json_type::array: {
      od::array arr;
      if (v.get_array().get(arr)) return false;
      for (auto element : arr) {
        od::value ev;
        if (element.get(ev)) return false;
        if (!validate_value(ev, depth + 1)) return false;
      }
      return true;
    }
    case od::json_type::string: {
      std::string_view s;
      return !v.get_string().get(s);
    }
    case od::json_type::number: {
      // RFC 8259 §6 number grammar on the raw token.
      std::string_view n = v.raw_json_token();
      while (!n.empty() &&
             (n.back() == ' ' || n.back() == '\n' || n.back() == '\t' || n.back() == '\r')) {
        n.remove_suffix(1);
      }
      std::size_t i = 0;
      if (i < n.size() && n[i] == '-') ++i;
      if (i >= n.size()) return false;
      if (n[i] == '0') {
        ++i;
      } else if (n[i] >= '1' && n[i] <= '9') {
        while (i < n.size() && n[i] >= '0' && n[i] <= '9') ++i;
      } else {
        return false;
      }
      if (i < n.size() && n[i] == '.') {
        ++i;
        const std::size_t start = i;
        while (i < n.size() && n[i] >= '0' && n[i] <= '9') ++i;
        if (i == start) return false;
      }
      if (i < n.size() && (n[i] == 'e' || n[i] == 'E')) {
        ++i;
        if (i < n.size() && (n[i] == '+' || n[i] == '-')) ++i;
        const std::size_t start = i;
        while (i < n.size() && n[i] >= '0' && n[i] <= '9') ++i;
        if (i == start) return false;
      }
      return i == n.size();
    }
    case od::json_type::boolean: {
      bool b = false;
      return !v.get_bool().get(b);
    }
    case od::json_type::null: {
      // A token that only starts like null (`name`) is an error, not a throw (found by the
      // fuzzer: simdjson_result<bool> converted to bool throws on error).
      bool is_null = false;
      return !v.is_null().get(is_null) && is_null;
    }
  }
  return false;
}

// True when nothing but whitespace follows the root value (simdjson 3.0.1 has no at_end() on a
// document: current_location() reports OUT_OF_BOUNDS there).
bool at_document_end(simdjson::ondemand::document& doc) {
  const char* loc = nullptr;
  return doc.current_location().get(loc) == simdjson::OUT_OF_BOUNDS;
}

bool is_valid_json(std::string_view text, std::string& padded) {
  namespace od = simdjson::ondemand;
  static thread_local od::parser parser;
  padded.assign(text);
  padded.append(simdjson::SIMDJSON_PADDING, '\0');
  od::document doc;
  if (parser.iterate(padded.data(), text.size(), padded.size()).get(doc)) return false;
  od::value root;
  // A scalar document (a bare number or string) is valid JSON too.
  bool scalar = false;
  if (doc.is_scalar().get(scalar)) return false;
  if (scalar) {
    od::json_type t;
    if (doc.type().get(t)) return false;
    if (t == od::json_type::string) {
      std::string_view s;
      if (doc.get_string().get(s)) return false;
    } else if (t == od::json_type::number) {
      std::string_view raw;
      if (doc.raw_json_token().get(raw)) return false;
    } else if (t == od::json_type::boolean) {
      bool b = false;
      if (doc.get_bool().get(b)) return false;
    } else {
      bool n = false;
      if (doc.is_null().get(n) || !n) return false;
    }
    return true;  // scalar documents are checked for trailing content by their getters
  }
  if (doc.get_value().get(root)) return false;
  if (!validate_value(root, 0)) return false;
  return at_document_end(doc);
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

std::optional<std::chrono::microseconds> parse_commit_timestamp(std::string_view s) {
  // YYYY-MM-DD HH:MM:SS[.ffffff][(+|-)HH[:MM]]
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
  std::int64_t micros = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int scale = 100'000;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      micros += (s[pos] - '0') * scale;
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
    if (!ok || pos < s.size()) return std::nullopt;
    offset_s = (oh * 3600 + om * 60) * (sign == '-' ? -1 : 1);
  }
  const std::int64_t days =
      days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const std::int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  return std::chrono::microseconds(secs * 1'000'000 + micros);
}

std::optional<std::int64_t> parse_commit_timestamp_ms(std::string_view s) {
  const auto t = parse_commit_timestamp(s);
  if (!t) return std::nullopt;
  return floor_div(t->count(), 1000);
}

struct EventRouter::Rule {
  TableRole role = TableRole::kIgnored;
  std::string topic;
  std::string source_schema;
  std::string source_table;
  std::string data_collection;  // "schema.table" for transaction metadata
  // source's `<schema>,"table":<table>,"txId":` (JSON), written once: append_source's middle.
  std::string source_names;
  bool outbox_update_warned = false;
  const config::OutboxConfig* outbox = nullptr;
  config::Operations ops;
  bool tombstones = true;
  std::vector<std::string> key_columns;  // configured (key_columns of the tables entry)
  bool identity_key_warned = false;      // a change keyed by its identity (see select_key)
  bool kind_warned = false;              // a name that is now a relation of another kind
  // catalog_epoch_ when `schema` was last read: a table keyed by its replica identity is read
  // again at its next change after a transaction without changes (DDL).
  std::uint64_t identity_epoch = 0;
  // Last shape check of a partial UPDATE or DELETE (coarse_monotonic); none yet: nullopt.
  std::optional<std::chrono::nanoseconds> shape_verified;
  // The JSON tokens of `names_json_of`'s column names (a debezium DELETE's padded `before`).
  const TableSchema* names_json_of = nullptr;
  std::vector<std::string> names_json;
  std::string line_shape;  // a table the catalog does not know: its last INSERT's pk | columns
  std::vector<std::string> exclude;
  std::vector<std::string> mask;
  std::string leaf_schema;
  std::string leaf_table;
  const TableSchema* schema = nullptr;
  std::string collision;  // set: the table cannot be published (topic clash or invalid topic)
  // The types of the columns by their position in a change (see column_type): looked up in the
  // type registry once per table shape, not per value.
  mutable std::vector<ResolvedType> column_types;
};

struct EventRouter::Slot {
  std::string topic;
  std::string key;
  std::string header_key;  // a row-change key as the key-change headers show it (see emit)
  std::string value;
  std::string id;
  bool has_key = false;
  bool has_value = true;
  std::int64_t timestamp_ms = 0;
  std::vector<std::string> header_values;  // owned header values, parallel to header_names
  std::vector<std::string_view> header_names;
  std::vector<Header> headers;
};

EventRouter::EventRouter(RouterSettings settings, const config::Config& cfg,
                         SchemaProvider* schemas, const TypeRegistry& types)
    : settings_(std::move(settings)),
      tables_(cfg.tables),
      exclude_(cfg.exclude),
      messages_(cfg.messages),
      schemas_(schemas),
      types_(types) {
  if (!cfg.snapshot.signal_table.empty()) {
    // The signal table's rows are signals (its INSERTs are consumed before routing), never
    // published: not read by a snapshot, its updates and deletes not streamed, also when a
    // `tables` pattern matches it.
    config::TableConfig signals;
    signals.name = cfg.snapshot.signal_table;
    signals.schema_pattern = cfg.snapshot.signal_table_schema;
    signals.table_pattern = cfg.snapshot.signal_table_name;
    exclude_.push_back(std::move(signals));
  }
  value_opts_.format = settings_.events.value_format;
  value_opts_.json_as_document = settings_.events.json_as_document;
  value_opts_.decimal = settings_.events.decimal_handling;
}

EventRouter::~EventRouter() = default;

void EventRouter::append_topic_part(std::string& out, std::string_view part) {
  for (char c : part) out.push_back(valid_topic_char(c) ? c : '_');
}

EventRouter::Rule EventRouter::make_rule(std::string_view schema, std::string_view table) {
  Rule r;
  r.leaf_schema = std::string(schema);
  r.leaf_table = std::string(table);
  r.schema = schemas_ != nullptr ? schemas_->table(schema, table, false) : nullptr;
  r.identity_epoch = catalog_epoch_;
  if (r.schema != nullptr && !r.schema->captured_kind()) {
    // wal2json decodes a materialized view's rows (its creation, REFRESH ... CONCURRENTLY): such
    // a relation is never published, also when it appeared after start-up (test:
    // CatalogIdentityTest.MaterializedViewsNeverPublishWheneverTheyAppeared).
    spdlog::info(
        "skipping {}.{} ({}): only ordinary and partitioned tables are captured, its changes are "
        "not published",
        schema, table, r.schema->kind_name());
    return r;
  }
  const bool is_leaf = r.schema != nullptr && (r.schema->root_schema != r.leaf_schema ||
                                               r.schema->root_table != r.leaf_table);
  struct Name {
    std::string schema, table;
  };
  std::vector<Name> candidates;
  // wal2json reports a partition's changes under the leaf's name (shared/cases/README.md item
  // 10): a rule written for the partitioned root applies to its leaves.
  if (is_leaf) candidates.push_back({r.schema->root_schema, r.schema->root_table});
  candidates.push_back({r.leaf_schema, r.leaf_table});

  const config::TableConfig* tc = nullptr;
  bool matched_root = false;
  for (std::size_t i = 0; i < candidates.size() && tc == nullptr; ++i) {
    const auto& cand = candidates[i];
    for (const auto& ex : exclude_) {
      if (config::glob_match(ex.schema_pattern, cand.schema) &&
          config::glob_match(ex.table_pattern, cand.table)) {
        return r;  // excluded
      }
    }
    for (const auto& t : tables_) {
      if (config::glob_match(t.schema_pattern, cand.schema) &&
          config::glob_match(t.table_pattern, cand.table)) {
        tc = &t;
        matched_root = is_leaf && i == 0;
        break;
      }
    }
  }
  if (tc == nullptr) return r;
  if (tc->outbox) {
    r.role = TableRole::kOutbox;
    r.outbox = &*tc->outbox;
    return r;
  }
  r.role = TableRole::kRowChange;
  const bool use_root =
      is_leaf && (matched_root || settings_.events.partitions == config::Partitions::kRoot) &&
      settings_.events.partitions == config::Partitions::kRoot;
  r.source_schema = use_root ? r.schema->root_schema : r.leaf_schema;
  r.source_table = use_root ? r.schema->root_table : r.leaf_table;
  r.data_collection = r.source_schema + "." + r.source_table;
  json::append_string(r.source_names, r.source_schema);
  r.source_names += ",\"table\":";
  json::append_string(r.source_names, r.source_table);
  r.source_names += ",\"txId\":";
  const std::string tmpl = tc->topic.value_or("{prefix}.{schema}.{table}");
  for (std::size_t pos = 0; pos < tmpl.size();) {
    if (tmpl.compare(pos, 8, "{prefix}") == 0) {
      append_topic_part(r.topic, settings_.topic_prefix);
      pos += 8;
    } else if (tmpl.compare(pos, 8, "{schema}") == 0) {
      append_topic_part(r.topic, r.source_schema);
      pos += 8;
    } else if (tmpl.compare(pos, 7, "{table}") == 0) {
      append_topic_part(r.topic, r.source_table);
      pos += 7;
    } else {
      r.topic.push_back(valid_topic_char(tmpl[pos]) ? tmpl[pos] : '_');
      ++pos;
    }
  }
  // Two tables whose names map to one topic would mix their events: refuse the later one (the
  // connector also checks the tables that exist at start-up).
  // Kafka treats '.' and '_' alike in topic names (their metric names collide): the broker
  // refuses the second of two such topics, so they count as one here.
  std::string clash_key = r.topic;
  std::replace(clash_key.begin(), clash_key.end(), '.', '_');
  if (auto [it, inserted] = topic_owner_.emplace(clash_key, r.data_collection);
      !inserted && it->second != r.data_collection) {
    r.collision = "tables " + it->second + " and " + r.data_collection +
                  " would both publish to topic '" + r.topic +
                  "' (names are mapped to Kafka's [A-Za-z0-9._-], and Kafka treats '.' and '_' "
                  "alike); give one of them its own topic";
  }
  if (r.topic.size() > 249) {
    r.collision = "topic '" + r.topic + "' is longer than Kafka's 249 characters";
  }
  r.ops = tc->operations.value_or(settings_.events.operations);
  r.tombstones = tc->tombstones_on_delete.value_or(settings_.events.tombstones_on_delete);
  r.key_columns = tc->key_columns;
  r.exclude = tc->exclude_columns;
  r.mask = tc->mask_columns;
  const bool glob = tc->schema_pattern.find('*') != std::string::npos ||
                    tc->table_pattern.find('*') != std::string::npos;
  if (r.schema != nullptr && !glob) {
    // `run` and `check` refuse this at start-up (preflight.hpp); `tail` says it once. (A glob's
    // mask columns need only exist in some of its tables.)
    std::vector<std::string_view> unknown;
    for (const auto& m : r.mask) {
      if (r.schema->column(m) == nullptr) unknown.push_back(m);
    }
    if (!unknown.empty()) {
      spdlog::warn("table {}.{} has no column {} named in mask_columns: nothing is masked for it",
                   schema, table, join_names(unknown));
    }
  }
  if (schemas_ != nullptr && r.schema == nullptr) {
    spdlog::warn(
        "table {}.{} is not in the catalog (dropped or renamed since its changes were written): "
        "they are mapped from their own content (key from each change, no TOAST fill-in)",
        schema, table);
  }
  return r;
}

EventRouter::Rule& EventRouter::rule_for(std::string_view schema, std::string_view table) {
  // Consecutive changes are mostly of one table: two comparisons instead of a hash lookup.
  if (last_rule_ != nullptr && last_rule_->leaf_table == table &&
      last_rule_->leaf_schema == schema) {
    return *last_rule_;
  }
  last_rule_ = &rule_lookup(schema, table);
  return *last_rule_;
}

EventRouter::Rule& EventRouter::rule_lookup(std::string_view schema, std::string_view table) {
  lookup_.assign(schema);
  lookup_.push_back('\0');
  lookup_.append(table);
  if (auto it = rules_.find(std::string_view(lookup_)); it != rules_.end()) return *it->second;
  rule_storage_.push_back(std::make_unique<Rule>(make_rule(schema, table)));
  Rule* r = rule_storage_.back().get();
  rules_.emplace(lookup_, r);
  return *r;
}

TableRole EventRouter::role_of(std::string_view schema, std::string_view table) {
  return rule_for(schema, table).role;
}

std::optional<std::string> EventRouter::outbox_event_id(const decoder::Change& c) {
  if (c.action != decoder::Action::kInsert) return std::nullopt;
  const Rule& rule = rule_for(c.schema, c.table);
  if (rule.role != TableRole::kOutbox) return std::nullopt;
  const decoder::Column* col = find_column(c.columns, rule.outbox->event_id);
  std::string id;
  if (col == nullptr || col->is_null() || !append_text(id, col->value)) return std::nullopt;
  return id;
}

namespace {

// The names of `wanted` that `shape` has no column of, in their order.
std::vector<std::string> absent_columns(const TableSchema& shape,
                                        const std::vector<std::string>& wanted) {
  std::vector<std::string> missing;
  for (const auto& w : wanted) {
    if (shape.column(w) == nullptr) missing.push_back(w);
  }
  return missing;
}

}  // namespace

std::vector<std::string> EventRouter::missing_outbox_columns(std::string_view schema,
                                                             std::string_view table) {
  const Rule& rule = rule_for(schema, table);
  if (rule.role != TableRole::kOutbox || rule.schema == nullptr) return {};
  const config::OutboxConfig& ob = *rule.outbox;
  std::vector<std::string> wanted = {ob.event_id, ob.aggregate_id, ob.aggregate_type, ob.payload};
  if (ob.event_type) wanted.push_back(*ob.event_type);
  if (ob.timestamp) wanted.push_back(*ob.timestamp);
  for (const auto& a : ob.additional) wanted.push_back(a.column);
  return absent_columns(*rule.schema, wanted);
}

std::vector<std::string> EventRouter::missing_key_columns(std::string_view schema,
                                                          std::string_view table) {
  const Rule& rule = rule_for(schema, table);
  if (rule.role != TableRole::kRowChange || rule.schema == nullptr) return {};
  return absent_columns(*rule.schema, rule.key_columns);
}

std::vector<std::string> EventRouter::nullable_key_columns(std::string_view schema,
                                                           std::string_view table) {
  const Rule& rule = rule_for(schema, table);
  if (rule.role != TableRole::kRowChange || rule.schema == nullptr || rule.key_columns.empty()) {
    return {};
  }
  const TableSchema& shape = *rule.schema;
  const auto within_key = [&](const std::vector<std::string>& unique) {
    return !unique.empty() && std::all_of(unique.begin(), unique.end(), [&](const auto& c) {
      return contains(rule.key_columns, c);
    });
  };
  // A primary key or a unique index on NOT NULL columns among the key columns: no two rows share
  // the key, whatever the other key columns hold.
  if (within_key(shape.primary_key) ||
      std::any_of(shape.unique_keys.begin(), shape.unique_keys.end(), within_key)) {
    return {};
  }
  std::vector<std::string> nullable;
  for (const auto& k : rule.key_columns) {
    const ColumnInfo* col = shape.column(k);
    if (col != nullptr && !col->not_null) nullable.push_back(k);
  }
  return nullable;
}

std::vector<std::string> EventRouter::missing_mask_columns(std::string_view schema,
                                                           std::string_view table) {
  const Rule& rule = rule_for(schema, table);
  if (rule.role != TableRole::kRowChange || rule.schema == nullptr) return {};
  return absent_columns(*rule.schema, rule.mask);
}

std::string EventRouter::topic_of(std::string_view schema, std::string_view table) {
  const Rule& r = rule_for(schema, table);
  return r.role == TableRole::kRowChange ? r.topic : std::string();
}

void EventRouter::begin(std::uint64_t xid, Lsn commit_lsn, std::chrono::microseconds commit_time) {
  xid_ = xid;
  commit_lsn_ = commit_lsn;
  commit_ts_us_ = commit_time.count();
  commit_ts_ms_ = floor_div(commit_ts_us_, 1000);
  txn_counts_for_sequence_ = false;
  txn_first_lsn_ = Lsn{};
  txn_changes_ = 0;
  record_index_ = 0;
  event_count_ = 0;
  begin_emitted_ = false;
  collection_counts_.clear();
  truncated_.clear();
}

EventRouter::Slot& EventRouter::next_slot() {
  if (used_slots_ == slots_.size()) slots_.push_back(std::make_unique<Slot>());
  Slot& s = *slots_[used_slots_++];
  s.topic.clear();
  s.key.clear();
  s.value.clear();
  s.id.clear();
  s.has_key = false;
  s.has_value = true;
  s.timestamp_ms = 0;
  s.header_values.clear();
  s.header_names.clear();
  if (snapshot_ != nullptr) {
    s.id = snapshot_->id;
    return s;
  }
  // Row-change ids: the transaction's commit LSN and the record's index in the transaction
  // ("<commit LSN>:" formatted once per transaction).
  if (id_prefix_.empty() || id_prefix_lsn_ != commit_lsn_) {
    char buf[17];
    id_prefix_.assign(buf, commit_lsn_.format_to(buf));
    id_prefix_.push_back(':');
    id_prefix_lsn_ = commit_lsn_;
  }
  char index[12];
  s.id.append(id_prefix_);
  s.id.append(index, static_cast<std::size_t>(
                         std::to_chars(index, index + sizeof index, record_index_++).ptr - index));
  return s;
}

void EventRouter::set_txn_id(Lsn lsn) {
  txn_id_.clear();
  append_uint(txn_id_, xid_);
  txn_id_.push_back(':');
  append_uint(txn_id_, lsn.value());
}

EventRouter::Slot& EventRouter::transaction_record(std::string_view status) {
  // Debezium transaction metadata: `<prefix>.transaction`, keyed by {"id":"<txId>:<LSN>"}. As
  // Debezium 3.6 writes it, the LSN is the position the record describes (BEGIN: the first change
  // pgoutput sends; END: the end of the commit record), so BEGIN and END need not share a
  // partition: group by the txId before the colon.
  Slot& s = next_slot();
  append_topic_part(s.topic, settings_.topic_prefix);
  s.topic += ".transaction";
  s.has_key = true;
  s.key = "{\"id\":";
  json::append_string(s.key, txn_id_);
  s.key.push_back('}');
  s.value = "{\"status\":\"";
  s.value += status;
  s.value += "\",\"id\":";
  json::append_string(s.value, txn_id_);
  return s;
}

void EventRouter::begin_metadata_if_needed() {
  if (!settings_.events.transaction_metadata || begin_emitted_) return;
  begin_emitted_ = true;
  // Debezium transaction metadata: BEGIN before the first event, id "<txId>:<LSN of the first
  // change pgoutput would send>" (PostgreSQL 15's pgoutput sends BEGIN lazily with that LSN).
  set_txn_id(txn_first_lsn_.value() != 0 ? txn_first_lsn_ : commit_lsn_);
  Slot& s = transaction_record("BEGIN");
  s.value += ",\"event_count\":null,\"data_collections\":null,\"ts_ms\":";
  append_int(s.value, commit_ts_ms_);
  s.value.push_back('}');
  s.timestamp_ms = commit_ts_ms_;
}

void EventRouter::set_stream_start(Lsn start) {
  last_commit_end_ = start;
}

void EventRouter::count_for_sequence(Lsn change_lsn) {
  if (!txn_counts_for_sequence_) txn_first_lsn_ = change_lsn;
  txn_counts_for_sequence_ = true;
}

void EventRouter::note_message(const decoder::Change& message) {
  // pgoutput (messages=true, as Debezium asks for on PostgreSQL 14+) sends every logical message:
  // a transactional one makes its transaction non-empty; a non-transactional one is its own unit.
  ++txn_changes_;
  if (message.transactional) {
    count_for_sequence(message.lsn);
  } else {
    last_commit_end_ = message.lsn;
  }
}

std::span<const Record> EventRouter::commit(Lsn end_lsn) {
  used_slots_ = 0;
  records_.clear();
  if (txn_counts_for_sequence_) last_commit_end_ = end_lsn;
  // A transaction without changes is DDL (or changes wal2json filtered out): a replica identity
  // may have moved, so tables keyed by it verify their shape at their next change.
  if (txn_changes_ == 0) ++catalog_epoch_;
  txn_changes_ = 0;
  txn_counts_for_sequence_ = false;
  txn_first_lsn_ = Lsn{};
  if (!begin_emitted_) return {};
  set_txn_id(end_lsn);  // Debezium 3.6: END's id carries the commit's end LSN
  Slot& s = transaction_record("END");
  s.value += ",\"event_count\":";
  append_uint(s.value, event_count_);
  s.value += ",\"data_collections\":[";
  bool first = true;
  for (const auto& [name, count] : collection_counts_) {
    if (!first) s.value.push_back(',');
    first = false;
    s.value += "{\"data_collection\":";
    json::append_string(s.value, name);
    s.value += ",\"event_count\":";
    append_uint(s.value, count);
    s.value.push_back('}');
  }
  s.value += "],\"ts_ms\":";
  append_int(s.value, commit_ts_ms_);
  s.value.push_back('}');
  s.timestamp_ms = commit_ts_ms_;
  s.headers.clear();
  s.headers.push_back(Header{header::kId, s.id});
  records_.push_back(Record{s.topic, std::string_view(s.key), std::string_view(s.value),
                            std::span<const Header>(s.headers), s.timestamp_ms});
  begin_emitted_ = false;
  return records_;
}

std::expected<std::span<const Record>, MappingError> EventRouter::route(const decoder::Change& c) {
  using decoder::Action;
  used_slots_ = 0;
  change_lsn_ = c.lsn;
  ++txn_changes_;
  std::expected<void, MappingError> result;
  switch (c.action) {
    case Action::kInsert:
    case Action::kUpdate:
    case Action::kDelete:
    case Action::kTruncate: {
      Rule& rule = rule_for(c.schema, c.table);
      if (rule.role != TableRole::kIgnored) count_for_sequence(c.lsn);
      if (rule.role == TableRole::kRowChange) {
        result = route_row(c, rule);
      } else if (rule.role == TableRole::kOutbox && c.action == Action::kInsert) {
        // UPDATE and DELETE of an outbox row publish nothing: rows may be deleted right after
        // the insert, even in the same transaction (Debezium outbox event router).
        result = route_outbox_row(c, rule);
      } else if (rule.role == TableRole::kOutbox && c.action == Action::kUpdate) {
        // An UPDATE (an upsert's second write, say) is not a new event: dropped, but not silently
        // (shared/cases/CASE-09): a warning once per table, and counted.
        ++outbox_updates_ignored_;
        if (!rule.outbox_update_warned) {
          rule.outbox_update_warned = true;
          spdlog::warn(
              "an UPDATE of outbox table {} publishes nothing (only INSERTs are events; an upsert "
              "that updates an existing row sends no new event). Said once per table; counted "
              "in the progress line",
              std::string(c.schema) + "." + std::string(c.table));
        }
      }
      break;
    }
    case Action::kMessage:
      result = route_message(c);
      // After routing: a non-transactional message's records carry the sequence before it.
      note_message(c);
      break;
    default:
      break;
  }
  if (!result) {
    used_slots_ = 0;
    return std::unexpected(std::move(result.error()));
  }
  return collect_records();
}

std::vector<std::string> EventRouter::key_columns_of(std::string_view schema,
                                                     std::string_view table) {
  const Rule& rule = rule_for(schema, table);
  if (rule.key_columns.empty() && rule.schema != nullptr && rule.schema->primary_key.empty() &&
      rule.schema->replica_identity == 'i') {
    return rule.schema->replica_identity_index;  // a table without a primary key
  }
  if (rule.role != TableRole::kRowChange) return {};
  return rule.key_columns;
}

std::span<const Record> EventRouter::collect_records() {
  records_.clear();
  for (std::size_t i = 0; i < used_slots_; ++i) {
    Slot& s = *slots_[i];
    s.headers.clear();
    s.headers.push_back(Header{header::kId, s.id});
    for (std::size_t h = 0; h < s.header_names.size(); ++h) {
      s.headers.push_back(Header{s.header_names[h], s.header_values[h]});
    }
    records_.push_back(Record{s.topic,
                              s.has_key ? std::optional<std::string_view>(s.key) : std::nullopt,
                              s.has_value ? std::optional<std::string_view>(s.value) : std::nullopt,
                              std::span<const Header>(s.headers), s.timestamp_ms});
  }
  return std::span<const Record>(records_);
}

std::expected<std::span<const Record>, MappingError> EventRouter::route_snapshot(
    const decoder::Change& row, const SnapshotRead& read) {
  used_slots_ = 0;
  Rule& rule = rule_for(row.schema, row.table);
  if (rule.role != TableRole::kRowChange) return collect_records();
  // The snapshot's row is described by its own position and time; the streaming transaction
  // that may be open around it keeps its own.
  const Lsn saved_commit_lsn = commit_lsn_;
  const std::int64_t saved_ts_ms = commit_ts_ms_;
  const std::int64_t saved_ts_us = commit_ts_us_;
  commit_lsn_ = row.lsn;
  commit_ts_us_ = read.read_time.count();
  commit_ts_ms_ = floor_div(commit_ts_us_, 1000);
  snapshot_ = &read;
  auto result = route_row(row, rule);
  snapshot_ = nullptr;
  commit_lsn_ = saved_commit_lsn;
  commit_ts_ms_ = saved_ts_ms;
  commit_ts_us_ = saved_ts_us;
  if (!result) {
    used_slots_ = 0;
    return std::unexpected(std::move(result.error()));
  }
  return collect_records();
}

// ---- row changes ---------------------------------------------------------------------------

void EventRouter::append_image(std::string& out, const std::vector<decoder::Column>& cols,
                               const Rule& rule, std::string& err, bool padded) {
  out.push_back('{');
  bool first = true;
  const auto* schema = rule.schema;
  for (std::size_t i = 0; i < cols.size() && err.empty(); ++i) {
    const auto& col = cols[i];
    if (!rule.exclude.empty() && contains(rule.exclude, col.name)) continue;
    if (!first) out.push_back(',');
    first = false;
    out.append(col.name_json);
    out.push_back(':');
    if (!rule.mask.empty() && contains(rule.mask, col.name) && !col.is_null()) {
      // column.mask.hash.SHA-256.with.salt: hex SHA-256 of salt + the value's text.
      scratch2_.clear();
      append_text(scratch2_, col.value);
      out.push_back('"');
      append_sha256_hex(out, settings_.events.mask_salt, scratch2_);
      out.push_back('"');
      continue;
    }
    std::int32_t typmod = -1;
    if (schema != nullptr) {
      const ColumnInfo* ci = i < schema->columns.size() && schema->columns[i].name == col.name
                                 ? &schema->columns[i]
                                 : schema->column(col.name);
      if (ci != nullptr) {
        typmod = ci->typmod;
        if (ci->not_null && col.is_null() && !padded) note_nan_as_null(rule, col);
      }
    }
    if (!append_value(out, col.value, column_type(rule, i, col.type_oid, typmod), types_,
                      value_opts_, err)) {
      err = "column " + std::string(col.name) + ": " + err;
    }
  }
  out.push_back('}');
}

const ResolvedType& EventRouter::column_type(const Rule& rule, std::size_t position,
                                             std::uint32_t type_oid, std::int32_t typmod) {
  auto& cache = rule.column_types;
  if (position >= cache.size()) cache.resize(position + 1);
  ResolvedType& t = cache[position];
  if (!resolved_for(t, type_oid, typmod, types_)) t = resolve_type(type_oid, typmod, types_);
  return t;
}

void EventRouter::note_nan_as_null(const Rule& rule, const decoder::Column& col) {
  // A NOT NULL column cannot hold SQL NULL: wal2json < 2.6 prints NaN and ±Infinity of numeric,
  // real and double precision as `null` (shared/cases/README.md item 6). Count it and say so once
  // per column; the value cannot be recovered from this plugin version.
  const std::uint32_t type = types_.resolve_domain(col.type_oid);
  if (type != oid::kNumeric && type != oid::kFloat4 && type != oid::kFloat8) return;
  ++nan_as_null_;
  std::string key = rule.data_collection + "." + std::string(col.name);
  if (nan_warned_.insert(key).second) {
    spdlog::warn(
        "column {} is NOT NULL but arrived as null: wal2json before 2.6 prints NaN and "
        "Infinity of numeric/float columns as null, so the event carries null (counted; warned "
        "once per column). Upgrade wal2json to 2.6+ to receive them as strings",
        key);
  }
}

bool EventRouter::append_after_image(std::string& out, const decoder::Change& c, const Rule& rule,
                                     std::string& err) {
  const auto* schema = rule.schema;
  if (c.action != decoder::Action::kUpdate || schema == nullptr ||
      (c.columns.size() == schema->columns.size() &&
       std::equal(
           c.columns.begin(), c.columns.end(), schema->columns.begin(),
           [](const decoder::Column& a, const ColumnInfo& b) { return a.name == b.name; }))) {
    append_image(out, c.columns, rule, err);
    return err.empty();
  }
  // An UPDATE leaves out unchanged TOASTed columns (wal2json skips unchanged external datums).
  // Never publish them as null: take the old value under REPLICA IDENTITY FULL, otherwise the
  // placeholder (Debezium unavailable.value.placeholder). The change's own columns are its shape
  // (a backlog is decoded after later DDL; test EventSemanticsTest.
  // UnchangedToastInABacklogKeepsTheShapeItWasWrittenWith): each is published with its value,
  // also one the catalog no longer has (dropped since); a catalog column it lacks gets the
  // placeholder only if it existed when the change was written (never one added since). Both
  // lists are in attnum order: the catalog's columns are placed among the change's by name.
  const std::size_t last_existing = columns_existing_at(*schema, c.xid);
  out.push_back('{');
  bool first = true;
  std::size_t next = 0;  // the next catalog position not yet placed
  // A catalog column the change lacks: its old value, the placeholder, or nothing.
  const auto append_absent = [&](std::size_t position) {
    const ColumnInfo& sc = schema->columns[position];
    if (find_column(c.columns, sc.name) != nullptr) return true;  // placed by the change
    const decoder::Column* old = find_column(c.identity, sc.name);
    if (old == nullptr && (!sc.toastable || position >= last_existing)) return true;
    if (!rule.exclude.empty() && contains(rule.exclude, sc.name)) return true;
    if (!first) out.push_back(',');
    first = false;
    json::append_string(out, sc.name);
    out.push_back(':');
    if (old == nullptr) {
      json::append_string(out, settings_.events.toast_placeholder);
      return true;
    }
    return append_column(out, *old, rule, position, &sc, err);
  };
  // One of the change's columns; `at`: its catalog position (npos: the catalog lacks it).
  const auto append_own = [&](std::size_t i, std::size_t at) {
    const decoder::Column& col = c.columns[i];
    if (!rule.exclude.empty() && contains(rule.exclude, col.name)) return true;
    if (!first) out.push_back(',');
    first = false;
    out.append(col.name_json);
    out.push_back(':');
    // A column the catalog lacks (dropped since) is typed by the change alone.
    const bool known = at != std::string::npos;
    return append_column(out, col, rule, known ? at : schema->columns.size() + i,
                         known ? &schema->columns[at] : nullptr, err);
  };
  // Change columns the catalog lacks wait for the next one it has: the catalog's columns of the
  // gap are placed before them (their attnums are not in the change).
  std::size_t pending = 0;
  for (std::size_t i = 0; i < c.columns.size(); ++i) {
    const decoder::Column& col = c.columns[i];
    std::size_t at = next < schema->columns.size() && schema->columns[next].name == col.name
                         ? next
                         : std::string::npos;
    for (std::size_t p = 0; at == std::string::npos && p < schema->columns.size(); ++p) {
      if (schema->columns[p].name == col.name) at = p;
    }
    if (at == std::string::npos) continue;
    for (; next < at; ++next) {
      if (!append_absent(next)) return false;
    }
    if (next == at) ++next;
    for (; pending < i; ++pending) {
      if (!append_own(pending, std::string::npos)) return false;
    }
    if (!append_own(i, at)) return false;
    pending = i + 1;
  }
  for (; next < schema->columns.size(); ++next) {
    if (!append_absent(next)) return false;
  }
  for (; pending < c.columns.size(); ++pending) {
    if (!append_own(pending, std::string::npos)) return false;
  }
  out.push_back('}');
  return true;
}

bool EventRouter::append_column(std::string& out, const decoder::Column& col, const Rule& rule,
                                std::size_t position, const ColumnInfo* sc, std::string& err) {
  if (!rule.mask.empty() && contains(rule.mask, col.name) && !col.is_null()) {
    scratch2_.clear();
    append_text(scratch2_, col.value);
    out.push_back('"');
    append_sha256_hex(out, settings_.events.mask_salt, scratch2_);
    out.push_back('"');
    return true;
  }
  // The catalog's typmod, when the column still has the change's type.
  const bool same_type = sc != nullptr && sc->type_oid == col.type_oid;
  if (same_type && sc->not_null && col.is_null()) note_nan_as_null(rule, col);
  const std::int32_t typmod = same_type ? sc->typmod : -1;
  if (!append_value(out, col.value, column_type(rule, position, col.type_oid, typmod), types_,
                    value_opts_, err)) {
    err = "column " + std::string(col.name) + ": " + err;
    return false;
  }
  return true;
}

void EventRouter::note_shape_change(const Rule& rule, const TableSchema* before) {
  // A captured name whose key or columns changed is worth a warning: consumers and schema
  // registries see another shape on the same topic (shared/cases/CASE-06).
  const TableSchema* after = rule.schema;
  if (after == before) return;
  const auto names = [](const TableSchema* t) {
    std::string out;
    if (t == nullptr) return std::string("<none>");
    for (const auto& col : t->columns) out += (out.empty() ? "" : ", ") + col.name;
    return out;
  };
  const auto key = [](const TableSchema* t) {
    std::string out;
    if (t == nullptr) return out;
    for (const auto& k : t->primary_key) out += (out.empty() ? "" : ", ") + k;
    return out;
  };
  if (after == nullptr) {
    spdlog::warn(
        "table {} no longer exists: its remaining changes are mapped from their own content "
        "(no TOAST fill-in, key from each change)",
        rule.data_collection);
    return;
  }
  if (before != nullptr && names(before) == names(after) && key(before) == key(after)) return;
  spdlog::warn("table {} changed shape: columns ({}) -> ({}), primary key ({}) -> ({})",
               rule.data_collection, names(before), names(after), key(before), key(after));
}

bool EventRouter::select_key(const decoder::Change& c, const Rule& rule, std::string& err) {
  // The columns an event is keyed by, from the change itself (shared/cases/CASE-05: a key never
  // depends on when walrelay last read the catalog): the tables entry's key_columns; else the
  // line's own `pk` (wal2json's primary key of the row as written), in the constraint's order
  // when the catalog's primary key names the same columns (Debezium keys in the key's declaration
  // order); else, for a table without a primary key, its REPLICA IDENTITY index as written.
  key_order_.clear();
  if (!rule.key_columns.empty()) {
    for (const auto& k : rule.key_columns) key_order_.emplace_back(k);
    return true;
  }
  if (!c.pk.empty()) {
    const bool catalog_agrees =
        rule.schema != nullptr && rule.schema->primary_key.size() == c.pk.size() &&
        std::all_of(c.pk.begin(), c.pk.end(),
                    [&](std::string_view k) { return contains(rule.schema->primary_key, k); });
    if (catalog_agrees) {
      for (const auto& k : rule.schema->primary_key) key_order_.emplace_back(k);
    } else {
      key_order_.assign(c.pk.begin(), c.pk.end());
    }
    return true;
  }
  if (rule.schema == nullptr) return true;  // no catalog shape: null key, as before
  return select_identity_key(c, *rule.schema, err);
}

bool EventRouter::select_identity_key(const decoder::Change& c, const TableSchema& shape,
                                      std::string& err) {
  // A row without a primary key is keyed by its REPLICA IDENTITY USING INDEX columns (FULL,
  // DEFAULT and NOTHING give a null key). An UPDATE or DELETE names the identity it was written
  // under (wal2json's `identity`: the index's columns, or the whole old row under FULL); an
  // INSERT carries none, so the catalog (read again after DDL, shape_refresh_due) tells, and an
  // INSERT without the catalog's index columns (renamed or dropped since) cannot be decided.
  using decoder::Action;
  const bool catalog_index = shape.replica_identity == 'i' && !shape.replica_identity_index.empty();
  const auto use_catalog_index = [&] {
    for (const auto& k : shape.replica_identity_index) key_order_.emplace_back(k);
  };
  const bool identity_image =
      (c.action == Action::kUpdate || c.action == Action::kDelete) && !c.identity.empty();
  if (!identity_image) {
    if (!catalog_index) return true;
    std::vector<std::string_view> absent;
    for (const auto& k : shape.replica_identity_index) {
      if (find_column(c.columns, k) == nullptr) absent.push_back(k);
    }
    if (c.action == Action::kInsert && !absent.empty()) {
      err = "cannot tell the REPLICA IDENTITY this INSERT was written under: it has no column " +
            join_names(absent) + " of the identity index (" +
            join_names(std::vector<std::string_view>(shape.replica_identity_index.begin(),
                                                     shape.replica_identity_index.end())) +
            ") the catalog has now (renamed or dropped since?); not published with another key";
      return false;
    }
    use_catalog_index();
    return true;
  }
  const bool agrees =
      catalog_index && c.identity.size() == shape.replica_identity_index.size() &&
      std::all_of(c.identity.begin(), c.identity.end(), [&](const decoder::Column& k) {
        return contains(shape.replica_identity_index, k.name);
      });
  if (agrees) {
    use_catalog_index();  // the index's own column order
    return true;
  }
  // The identity as written differs from the catalog's: USING INDEX (only the index's columns)
  // or FULL (the whole old row, a null key)?
  bool index = false;
  if (c.action == Action::kUpdate) {
    // FULL's old row has every column, the new one may lack only unchanged TOASTed ones.
    if (c.identity.size() < c.columns.size()) {
      index = true;
    } else if (c.identity.size() == c.columns.size()) {
      index = std::any_of(shape.columns.begin(), shape.columns.end(), [&](const ColumnInfo& col) {
        return find_column(c.columns, col.name) == nullptr;
      });
    }
  } else {
    std::vector<std::string_view> unknown;
    for (const auto& k : c.identity) {
      if (shape.column(k.name) == nullptr) unknown.push_back(k.name);
    }
    if (!unknown.empty()) {
      err =
          "cannot tell the REPLICA IDENTITY this DELETE was written under (an index or FULL): "
          "its identity names column " +
          join_names(unknown) +
          ", which the table does not have now (renamed or dropped since?); not published "
          "with another key";
      return false;
    }
    index = c.identity.size() < shape.columns.size();
  }
  if (index) {
    for (const auto& k : c.identity) key_order_.push_back(k.name);
  }
  return true;
}

bool EventRouter::append_key(std::string& out, const std::vector<decoder::Column>& image,
                             const Rule& rule, std::string& err, std::string* header) {
  // Key columns (select_key's order), compact JSON: what Debezium's JsonConverter prints with
  // schemas disabled, so murmur2 places the key where Debezium did.
  out.push_back('{');
  if (header != nullptr) header->assign("{");
  bool any = false;
  for (std::string_view name : key_order_) {
    const decoder::Column* col = find_column(image, name);
    if (col == nullptr) continue;
    if (any) out.push_back(',');
    if (any && header != nullptr) header->push_back(',');
    any = true;
    out.append(col->name_json);
    out.push_back(':');
    std::int32_t typmod = -1;
    if (rule.schema != nullptr) {
      if (const ColumnInfo* ci = rule.schema->column(col->name)) typmod = ci->typmod;
    }
    const std::size_t at = out.size();
    const ResolvedType& type =
        column_type(rule, static_cast<std::size_t>(col - image.data()), col->type_oid, typmod);
    if (!append_value(out, col->value, type, types_, value_opts_, err)) {
      err = "key column " + std::string(col->name) + ": " + err;
      return false;
    }
    if (header != nullptr) {
      append_connect_header_string(*header, col->name);
      header->push_back(':');
      append_connect_header_value(*header, std::string_view(out).substr(at), *col, type);
    }
  }
  out.push_back('}');
  if (header != nullptr) header->push_back('}');
  return any;
}

void EventRouter::append_connect_header_string(std::string& out, std::string_view text) {
  // Kafka Connect's Values#append of an embedded String: quoted, only `\` and `"` escaped.
  out.push_back('"');
  for (char ch : text) {
    if (ch == '\\' || ch == '"') out.push_back('\\');
    out.push_back(ch);
  }
  out.push_back('"');
}

void EventRouter::append_connect_header_value(std::string& out, std::string_view json_value,
                                              const decoder::Column& col,
                                              const ResolvedType& type) {
  // What Connect's SimpleHeaderConverter (Values#append) prints for the key field Debezium put in
  // the header: a Decimal (numeric(p,s)) as BigDecimal#toString, a string with only `\` and `"`
  // escaped (control and non-BMP characters raw), everything else as its JSON.
  const std::uint32_t base = type.base_oid;
  const std::int32_t typmod = type.value_typmod;  // a domain's when the column has none
  if (debezium_format() && value_opts_.decimal == DecimalHandling::kPrecise &&
      base == oid::kNumeric && typmod >= 4 && json_value.starts_with('"')) {
    scratch2_.clear();
    if (json::is_string_token(col.value)) {
      json::unescape_string(col.value, scratch2_);
    } else {
      scratch2_.assign(col.value);
    }
    append_big_decimal_text(out, scratch2_);
    return;
  }
  if (json::is_string_token(json_value)) {
    scratch2_.clear();
    if (json::unescape_string(json_value, scratch2_)) {
      append_connect_header_string(out, scratch2_);
      return;
    }
  }
  out.append(json_value);
}

void EventRouter::append_big_decimal_text(std::string& out, std::string_view text) {
  // java.math.BigDecimal#toString of PostgreSQL's numeric text (which has the column's scale):
  // plain when the adjusted exponent is at least -6, else `d.dddE-n`.
  const bool negative = text.starts_with('-');
  const std::string_view body = negative ? text.substr(1) : text;
  const auto dot = body.find('.');
  const std::size_t scale = dot == std::string_view::npos ? 0 : body.size() - dot - 1;
  std::string unscaled;
  for (char ch : body) {
    if (ch != '.') unscaled.push_back(ch);
  }
  const auto first = unscaled.find_first_not_of('0');
  unscaled = first == std::string::npos ? "0" : unscaled.substr(first);
  const long adjusted = static_cast<long>(unscaled.size()) - 1 - static_cast<long>(scale);
  if (adjusted >= -6 || unscaled == "0") {
    out.append(text);
    return;
  }
  if (negative) out.push_back('-');
  out.push_back(unscaled[0]);
  if (unscaled.size() > 1) {
    out.push_back('.');
    out.append(unscaled, 1);
  }
  out += "E" + std::to_string(adjusted);
}

void EventRouter::append_source(std::string& out, const decoder::Change& c, const Rule& rule) {
  // What only changes with the transaction (or the snapshot row's read time and marker) is
  // written once into source_head_/source_mid_ and copied; the change's LSN is formatted once
  // for its two places.
  const std::string_view marker = snapshot_ != nullptr ? snapshot_->marker : "false";
  const std::uint64_t last_commit =
      snapshot_ != nullptr ? 0 : last_commit_end_.value();  // 0: null (see commit())
  if (!source_cache_valid_ || source_ts_ms_ != commit_ts_ms_ || source_marker_ != marker ||
      source_last_commit_ != last_commit) {
    source_cache_valid_ = true;
    source_ts_ms_ = commit_ts_ms_;
    source_marker_.assign(marker);
    source_last_commit_ = last_commit;
    std::string& h = source_head_;
    h = "\"source\":{\"version\":";
    json::append_string(h, settings_.version);
    h += ",\"connector\":\"postgresql\",\"name\":";
    json::append_string(h, settings_.topic_prefix);
    h += ",\"ts_ms\":";
    append_int(h, commit_ts_ms_);
    h += ",\"snapshot\":\"";
    h += marker;
    h += "\",\"db\":";
    json::append_string(h, settings_.database);
    // sequence: ["<last commit>","<change LSN>"] as a JSON string (see commit()); Debezium's
    // snapshot records have no last commit: [null,"<snapshot LSN>"].
    if (last_commit == 0) {
      h += ",\"sequence\":\"[null,\\\"";
    } else {
      h += ",\"sequence\":\"[\\\"";
      append_uint(h, last_commit);
      h += "\\\",\\\"";
    }
  }
  if (source_mid_ts_us_ != commit_ts_us_ || source_mid_.empty()) {
    // source.ts_us/ts_ns (Debezium 3): the same instant in µs and ns.
    source_mid_ts_us_ = commit_ts_us_;
    source_mid_ = "\\\"]\",\"ts_us\":";
    append_int(source_mid_, commit_ts_us_);
    source_mid_ += ",\"ts_ns\":";
    append_int(source_mid_, commit_ts_us_);
    source_mid_ += "000,\"schema\":";
  }
  char lsn[24];
  const auto lsn_len =
      static_cast<std::size_t>(std::to_chars(lsn, lsn + sizeof lsn, c.lsn.value()).ptr - lsn);
  out += source_head_;
  out.append(lsn, lsn_len);
  out += source_mid_;
  out += rule.source_names;
  // txId, lsn, and origin/origin_lsn: the replication origin of a transaction replayed by a
  // subscriber; wal2json does not report it, so null (docs/events.md: where walrelay differs
  // from Debezium).
  constexpr std::string_view kLsn = ",\"lsn\":";
  constexpr std::string_view kEnd = ",\"xmin\":null,\"origin\":null,\"origin_lsn\":null}";
  char buf[24 + kLsn.size() + sizeof lsn + kEnd.size()];
  char* p = std::to_chars(buf, buf + 24, c.xid).ptr;
  p = std::copy(kLsn.begin(), kLsn.end(), p);
  p = std::copy(lsn, lsn + lsn_len, p);
  p = std::copy(kEnd.begin(), kEnd.end(), p);
  out.append(buf, static_cast<std::size_t>(p - buf));
}

void EventRouter::finish_row_record(Slot& s, const Rule& rule, bool has_key, char op) {
  s.topic = rule.topic;
  s.has_key = has_key;
  // Debezium 3's envelope order: ..., source, transaction, op, ts_ms, ts_us, ts_ns.
  if (settings_.events.transaction_metadata && snapshot_ == nullptr) {
    ++event_count_;
    std::uint32_t* per_table = nullptr;
    for (auto& [name, count] : collection_counts_) {
      if (name == rule.data_collection) per_table = &count;
    }
    if (per_table == nullptr) {
      collection_counts_.emplace_back(rule.data_collection, 0);
      per_table = &collection_counts_.back().second;
    }
    ++*per_table;
    // Debezium 3.6: each event's id is "<txId>:<the event's LSN>".
    s.value += ",\"transaction\":{\"id\":\"";
    append_uint(s.value, xid_);
    s.value.push_back(':');
    append_uint(s.value, change_lsn_.value());
    s.value += "\",\"total_order\":";
    append_uint(s.value, event_count_);
    s.value += ",\"data_collection_order\":";
    append_uint(s.value, *per_table);
    s.value.push_back('}');
  } else {
    s.value.append(",\"transaction\":null"sv);
  }
  // `,"op":"c","ts_ms":…,"ts_us":…,"ts_ns":…}`: processing time, one reading in ms, µs and ns,
  // never before the source's time. The ns digits are formatted once: ms and µs are their
  // prefixes (floor division of a positive number by 10^6 and 10^3).
  const std::int64_t ns = std::max(now_ns(), commit_ts_us_ * 1000);
  char digits[24];
  const auto n =
      static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, ns).ptr - digits);
  if (ns < 1'000'000) {
    s.value += ",\"op\":\"";
    s.value.push_back(op);
    s.value += "\",\"ts_ms\":";
    append_int(s.value, floor_div(ns, 1'000'000));
    s.value += ",\"ts_us\":";
    append_int(s.value, floor_div(ns, 1000));
    s.value += ",\"ts_ns\":";
    s.value.append(digits, n);
    s.value.push_back('}');
  } else {
    constexpr std::string_view kOp = ",\"op\":\"";
    constexpr std::string_view kMs = "\",\"ts_ms\":";
    constexpr std::string_view kUs = ",\"ts_us\":";
    constexpr std::string_view kNs = ",\"ts_ns\":";
    char buf[kOp.size() + 1 + kMs.size() + kUs.size() + kNs.size() + 3 * sizeof digits + 1];
    char* p = std::copy(kOp.begin(), kOp.end(), buf);
    *p++ = op;
    p = std::copy(kMs.begin(), kMs.end(), p);
    p = std::copy(digits, digits + n - 6, p);
    p = std::copy(kUs.begin(), kUs.end(), p);
    p = std::copy(digits, digits + n - 3, p);
    p = std::copy(kNs.begin(), kNs.end(), p);
    p = std::copy(digits, digits + n, p);
    *p++ = '}';
    s.value.append(buf, static_cast<std::size_t>(p - buf));
  }
  s.timestamp_ms = commit_ts_ms_;
}

void EventRouter::add_tombstone(const Slot& of) {
  // Debezium tombstones.on.delete: same key, null value, so compaction can drop the key. Slots
  // are allocated one by one, so `of` stays valid while another is added.
  Slot& t = next_slot();
  t.topic = of.topic;
  t.key = of.key;
  t.has_key = of.has_key;
  t.has_value = false;
  t.timestamp_ms = commit_ts_ms_;
}

bool EventRouter::shape_mismatch(const decoder::Change& c, const Rule& rule) const {
  bool refresh = false;
  for (std::size_t i = 0; i < c.columns.size() && !refresh; ++i) {
    const auto& name = c.columns[i].name;
    refresh = !((i < rule.schema->columns.size() && rule.schema->columns[i].name == name) ||
                rule.schema->column(name) != nullptr);  // a column added since
  }
  // An INSERT carries every column: fewer means columns were dropped (or the name re-created).
  if (!refresh && c.action == decoder::Action::kInsert &&
      c.columns.size() != rule.schema->columns.size()) {
    refresh = true;
  }
  return refresh;
}

bool EventRouter::shape_refresh_due(const decoder::Change& c, const Rule& rule) const {
  if (shape_mismatch(c, rule)) return true;
  // A change without a primary key whose key comes from the replica identity (an INSERT carries
  // none, so the catalog tells): read again after DDL, so the identity a change was written under
  // keys it from the first change after a switch (PostgreSQL docs, ALTER TABLE "REPLICA IDENTITY").
  if (rule.key_columns.empty() && c.pk.empty() && rule.identity_epoch != catalog_epoch_ &&
      (c.action == decoder::Action::kInsert || c.action == decoder::Action::kUpdate ||
       c.action == decoder::Action::kDelete)) {
    return true;
  }
  // An UPDATE leaves out unchanged TOASTed columns, or a column was dropped: the line cannot
  // tell, so verify the shape, at most once a second per table (a dropped column is never
  // filled with the TOAST placeholder for longer).
  // The same for a debezium-format DELETE, whose key-only `before` lists the shape's columns.
  const bool partial =
      (c.action == decoder::Action::kUpdate && c.columns.size() < rule.schema->columns.size()) ||
      (c.action == decoder::Action::kDelete && debezium_format() &&
       c.identity.size() < rule.schema->columns.size());
  return partial && (!rule.shape_verified ||
                     coarse_monotonic() - *rule.shape_verified >= std::chrono::seconds(1));
}

std::optional<SchemaLookup> EventRouter::lookup_needed(const decoder::Change& c) {
  using decoder::Action;
  if (schemas_ == nullptr) return std::nullopt;
  if (c.action != Action::kInsert && c.action != Action::kUpdate && c.action != Action::kDelete &&
      c.action != Action::kTruncate) {
    return std::nullopt;
  }
  const Rule* rule = nullptr;
  if (last_rule_ != nullptr && last_rule_->leaf_table == c.table &&
      last_rule_->leaf_schema == c.schema) {
    rule = last_rule_;
  } else {
    lookup_.assign(c.schema);
    lookup_.push_back('\0');
    lookup_.append(c.table);
    if (auto it = rules_.find(std::string_view(lookup_)); it != rules_.end()) rule = it->second;
  }
  if (rule == nullptr) return SchemaLookup{std::string(c.schema), std::string(c.table), false};
  if (rule->role == TableRole::kRowChange && rule->collision.empty() && rule->schema != nullptr &&
      shape_refresh_due(c, *rule)) {
    return SchemaLookup{rule->leaf_schema, rule->leaf_table, true};
  }
  return std::nullopt;
}

std::expected<void, MappingError> EventRouter::route_row(const decoder::Change& c, Rule& rule) {
  using decoder::Action;
  if (!rule.collision.empty()) return std::unexpected(MappingError{rule.collision});
  // DDL can change a table's columns between two rows of one transaction, and a name can be
  // dropped and re-created with another shape (shared/cases/CASE-06): map each line by its own
  // column list, and re-read the catalog when the line's columns disagree with the cached shape.
  if (rule.schema != nullptr && schemas_ != nullptr && snapshot_ == nullptr) {
    bool refresh = shape_refresh_due(c, rule);
    if (refresh && !shape_mismatch(c, rule)) rule.shape_verified = coarse_monotonic();
    if (refresh) {
      const TableSchema* before = rule.schema;
      rule.schema = schemas_->table(rule.leaf_schema, rule.leaf_table, true);
      rule.identity_epoch = catalog_epoch_;
      note_shape_change(rule, before);
    }
    if (rule.schema != nullptr && !rule.schema->captured_kind()) {
      // The name was dropped and made again as another kind (a materialized view): not published.
      if (!rule.kind_warned) {
        rule.kind_warned = true;
        spdlog::warn("table {} is now {}: its changes are not published", rule.data_collection,
                     rule.schema->kind_name());
      }
      return {};
    }
  } else if (rule.schema == nullptr && c.action == decoder::Action::kInsert &&
             snapshot_ == nullptr) {
    // No catalog shape (dropped or renamed since): watch the changes' own shape, so a name that
    // comes back with another key or columns is still noticed.
    std::string shape;
    for (const auto& k : c.pk) shape.append(k).push_back(',');
    shape.push_back('|');
    for (const auto& col : c.columns) shape.append(col.name).push_back(',');
    if (!rule.line_shape.empty() && rule.line_shape != shape) {
      spdlog::warn("changes of table {} changed shape: primary key, columns ({}) -> ({})",
                   rule.data_collection, rule.line_shape, shape);
    }
    rule.line_shape = std::move(shape);
  }
  const auto& ops = rule.ops;
  auto fail = [&](const std::string& why) {
    return std::unexpected(MappingError{"table " + rule.data_collection + ": " + why});
  };
  if (!rule.key_columns.empty() && c.action != Action::kTruncate) {
    // A configured key column the table does not have (a typo, a column dropped, a table a glob
    // matched later): never key its events by other columns (the whole row), which would change
    // the key with every UPDATE. An INSERT carries every column, so without a catalog shape it
    // tells.
    for (const auto& k : rule.key_columns) {
      const bool absent = rule.schema != nullptr
                              ? rule.schema->column(k) == nullptr
                              : c.action == Action::kInsert && find_column(c.columns, k) == nullptr;
      if (absent) {
        return fail("key column '" + k +
                    "' (key_columns) does not exist in the table: its events are not published "
                    "with another key. Fix key_columns, or add the column");
      }
    }
  }
  std::string err;
  if (!select_key(c, rule, err)) return fail(err);

  auto emit = [&](char op, const std::vector<decoder::Column>* key_image,
                  const std::vector<decoder::Column>* before, bool after) -> bool {
    if (snapshot_ == nullptr) begin_metadata_if_needed();
    Slot& s = next_slot();
    bool has_key = false;
    // The key-change headers need the key as Connect's header converter prints it (debezium
    // format) or as the key's JSON (native); only an UPDATE can change a key.
    std::string* header =
        c.action == decoder::Action::kUpdate && debezium_format() ? &s.header_key : nullptr;
    if (key_image != nullptr) {
      const bool complete = std::all_of(key_order_.begin(), key_order_.end(), [&](auto k) {
        return find_column(*key_image, k) != nullptr;
      });
      if (complete) {
        has_key = append_key(s.key, *key_image, rule, err, header);
      } else if (key_image != &c.identity) {
        // A new row image without a key column (dropped or renamed since the shape was read):
        // keying it by its other columns (the whole row) would publish it under another key.
        std::vector<std::string_view> absent;
        for (std::string_view k : key_order_) {
          if (find_column(*key_image, k) == nullptr) absent.push_back(k);
        }
        err = "the change does not carry key column(s) " + join_names(absent) +
              (rule.key_columns.empty() ? "" : " (key_columns)") +
              ": not published with another key";
        return false;
      } else {
        // The change carries another identity than its key: a DELETE written under REPLICA
        // IDENTITY USING INDEX of a table with a primary key has only the index's columns, one
        // written under DEFAULT (before a switch to an index that key_columns names) only the
        // primary key. Key it by them (never a key of nulls), and say why
        // once per table.
        if (!rule.identity_key_warned) {
          rule.identity_key_warned = true;
          std::vector<std::string_view> carried;
          for (const auto& col : c.identity) carried.push_back(col.name);
          const bool primary_key = rule.schema != nullptr && !rule.schema->primary_key.empty() &&
                                   carried.size() == rule.schema->primary_key.size() &&
                                   std::all_of(carried.begin(), carried.end(), [&](auto k) {
                                     return contains(rule.schema->primary_key, k);
                                   });
          if (primary_key) {
            spdlog::warn(
                "a change of {} at LSN {} was written under REPLICA IDENTITY DEFAULT (before a "
                "switch to USING INDEX): it carries only the primary key {}, not the key columns "
                "{}; keyed by the primary key instead, so it lands on another key than the row's "
                "later events",
                rule.data_collection, c.lsn.to_string(), join_names(carried),
                join_names(key_order_));
          } else {
            spdlog::warn(
                "a change of {} at LSN {} does not carry its key columns (its REPLICA IDENTITY is "
                "an index other than the primary key): keyed by the identity's columns instead, "
                "so it lands on another key than the row's other events. Use REPLICA IDENTITY "
                "DEFAULT or FULL, or key_columns naming the index's columns",
                rule.data_collection, c.lsn.to_string());
          }
        }
        const std::vector<std::string_view> saved = key_order_;
        key_order_.clear();
        for (const auto& col : *key_image) key_order_.push_back(col.name);
        has_key = append_key(s.key, *key_image, rule, err, header);
        key_order_ = saved;
      }
    }
    if (!err.empty()) return false;
    if (header == nullptr) s.header_key = s.key;
    // The key's bytes as Debezium's JsonConverter (Jackson) writes them, in both formats: the
    // bytes decide the partition and the compacted-topic identity.
    json::escape_supplementary(s.key);
    s.value.assign("{\"before\":"sv);
    // Under REPLICA IDENTITY DEFAULT (or an index) the old row is only its key. Debezium's
    // format writes `before: null` for an UPDATE then, and for a DELETE every column with the
    // non-key ones null; the native format keeps what is known, the key columns only (a value
    // that is not known never looks like a SQL NULL there).
    const bool key_only_before = before != nullptr && !before->empty() && rule.schema != nullptr &&
                                 before->size() < rule.schema->columns.size();
    if (before == nullptr || before->empty() ||
        (key_only_before && debezium_format() && op == 'u')) {
      s.value.append("null"sv);
    } else if (key_only_before && debezium_format() && op == 'd') {
      padded_.clear();
      if (rule.names_json_of != rule.schema) {
        // Once per table shape (the provider never reuses a shape's address).
        rule.names_json.clear();
        for (const ColumnInfo& ci : rule.schema->columns) {
          json::append_string(rule.names_json.emplace_back(), ci.name);
        }
        rule.names_json_of = rule.schema;
      }
      // Only the columns the row had when the change was written (a backlog decoded after ADD
      // COLUMN): one added since never appears in an older change.
      const std::size_t existing = columns_existing_at(*rule.schema, c.xid);
      for (std::size_t i = 0; i < rule.schema->columns.size(); ++i) {
        const ColumnInfo& ci = rule.schema->columns[i];
        if (const decoder::Column* known = find_column(*before, ci.name)) {
          padded_.push_back(*known);
        } else if (i < existing) {
          padded_.push_back(decoder::Column{ci.name, rule.names_json[i], ci.type_oid, "null"});
        }
      }
      append_image(s.value, padded_, rule, err, /*padded=*/true);
    } else {
      append_image(s.value, *before, rule, err);
    }
    s.value.append(",\"after\":"sv);
    if (after) {
      if (!append_after_image(s.value, c, rule, err)) return false;
    } else {
      s.value.append("null"sv);
    }
    if (!err.empty()) return false;
    s.value.push_back(',');
    append_source(s.value, c, rule);
    finish_row_record(s, rule, has_key, op);
    if (debezium_format()) json::escape_supplementary(s.value);
    return true;
  };

  switch (c.action) {
    case Action::kInsert:
      if (snapshot_ != nullptr) {
        if (!emit('r', &c.columns, nullptr, true)) return fail(err);
        return {};
      }
      if (!ops.create) return {};
      if (!emit('c', &c.columns, nullptr, true)) return fail(err);
      return {};
    case Action::kUpdate: {
      if (!ops.update) return {};
      // A key change is detected by comparing the old key values (identity) with the new ones,
      // not by the presence of `identity` (shared/cases/BUG-11.md). Debezium publishes it as a
      // delete of the old key (+ tombstone) and a create of the new key.
      bool key_changed = false;
      if (!c.identity.empty()) {
        for (const auto& old : c.identity) {
          if (!contains(key_order_, old.name)) continue;
          const decoder::Column* now = find_column(c.columns, old.name);
          if (now != nullptr && now->value != old.value) key_changed = true;
        }
      }
      if (key_changed) {
        // Debezium's headers on a primary-key change: __debezium.newkey on the delete and its
        // tombstone, __debezium.oldkey on the create, each the other record's key.
        if (!emit('d', &c.identity, &c.identity, false)) return fail(err);
        const std::size_t del = used_slots_ - 1;
        if (rule.tombstones) add_tombstone(*slots_[del]);
        const std::size_t tomb = rule.tombstones ? used_slots_ - 1 : del;
        if (!emit('c', &c.columns, nullptr, true)) return fail(err);
        Slot& created = *slots_[used_slots_ - 1];
        for (std::size_t i : {del, tomb}) {
          if (i == tomb && !rule.tombstones) continue;
          Slot& s = *slots_[i];
          s.header_names.push_back(header::kDebeziumNewKey);
          s.header_values.push_back(created.has_key ? created.header_key : std::string("null"));
        }
        created.header_names.push_back(header::kDebeziumOldKey);
        created.header_values.push_back(slots_[del]->has_key ? slots_[del]->header_key
                                                             : std::string("null"));
        return {};
      }
      if (!emit('u', &c.columns, &c.identity, true)) return fail(err);
      return {};
    }
    case Action::kDelete:
      if (!ops.del) return {};
      if (!emit('d', &c.identity, &c.identity, false)) return fail(err);
      if (rule.tombstones) add_tombstone(*slots_[used_slots_ - 1]);
      return {};
    case Action::kTruncate:
      if (!ops.truncate) return {};
      // TRUNCATE of a partitioned table is reported for the root and every leaf; they all map to
      // the root's topic, so publish it once per transaction.
      if (std::find(truncated_.begin(), truncated_.end(), rule.data_collection) !=
          truncated_.end()) {
        return {};
      }
      truncated_.push_back(rule.data_collection);
      if (!emit('t', nullptr, nullptr, false)) return fail(err);
      return {};
    default:
      return {};
  }
}

// ---- outbox --------------------------------------------------------------------------------

namespace {

struct OutboxFields {
  const decoder::Column* id = nullptr;
  const decoder::Column* aggregate_id = nullptr;
  const decoder::Column* aggregate_type = nullptr;
  const decoder::Column* payload = nullptr;
  const decoder::Column* event_type = nullptr;
  const decoder::Column* timestamp = nullptr;
};

}  // namespace

std::expected<void, MappingError> EventRouter::route_outbox_row(const decoder::Change& c,
                                                                const Rule& rule) {
  // The error context is built only for an error (an event must not allocate).
  return emit_outbox(*rule.outbox, c.columns, [&c] {
    return "outbox table " + std::string(c.schema) + "." + std::string(c.table);
  });
}

std::expected<void, MappingError> EventRouter::emit_outbox(const config::OutboxConfig& ob,
                                                           const std::vector<decoder::Column>& cols,
                                                           const ErrorContext& where) {
  auto fail = [&](const std::string& why) {
    return std::unexpected(MappingError{where() + ": " + why});
  };
  OutboxFields f;
  f.id = find_column(cols, ob.event_id);
  f.aggregate_id = find_column(cols, ob.aggregate_id);
  f.aggregate_type = find_column(cols, ob.aggregate_type);
  f.payload = find_column(cols, ob.payload);
  if (ob.event_type) f.event_type = find_column(cols, *ob.event_type);
  if (ob.timestamp) f.timestamp = find_column(cols, *ob.timestamp);
  if (f.id == nullptr || f.id->is_null())
    return fail("event id '" + ob.event_id + "' is missing or NULL");
  if (f.aggregate_id == nullptr || f.aggregate_id->is_null()) {
    return fail("aggregate id '" + ob.aggregate_id + "' is missing or NULL");
  }
  if (f.aggregate_type == nullptr || f.aggregate_type->is_null()) {
    return fail("aggregate type '" + ob.aggregate_type + "' is missing or NULL");
  }
  if (f.payload == nullptr) return fail("payload column '" + ob.payload + "' is missing");

  Slot& s = next_slot();
  s.id.clear();
  if (!append_text(s.id, f.id->value)) return fail("malformed event id");
  s.has_key = true;
  if (!append_text(s.key, f.aggregate_id->value)) return fail("malformed aggregate id");
  if (s.key.empty() && !ob.allow_empty_aggregate_id) {
    // shared/cases/CASE-09: key '' would put unrelated aggregates on one key and partition.
    return fail("aggregate id '" + ob.aggregate_id +
                "' is the empty string (events of unrelated aggregates would share one key; set "
                "outbox.allow_empty_aggregate_id: true to publish it)");
  }
  scratch_.clear();
  if (!append_text(scratch_, f.aggregate_type->value)) return fail("malformed aggregate type");
  if (scratch_.empty()) return fail("aggregate type '" + ob.aggregate_type + "' is empty");

  constexpr std::string_view kPlaceholder = "{aggregate_type}";
  const std::string_view tmpl = ob.topic;
  for (std::size_t pos = 0; pos < tmpl.size();) {
    const auto at = tmpl.find(kPlaceholder, pos);
    if (at == std::string_view::npos) {
      s.topic.append(tmpl.substr(pos));
      break;
    }
    s.topic.append(tmpl.substr(pos, at - pos));
    s.topic.append(scratch_);
    pos = at + kPlaceholder.size();
  }
  if (s.topic.empty() || s.topic.size() > 249 || s.topic == "." || s.topic == "..") {
    return fail("topic '" + s.topic + "' is not a valid Kafka topic name");
  }
  for (char ch : s.topic) {
    if (!valid_topic_char(ch)) {
      return fail("aggregate type gives topic '" + s.topic +
                  "', which has characters Kafka does not allow");
    }
  }

  // The value: the payload as JSON (a json/jsonb payload is the document itself, never a JSON
  // string holding it); text must hold JSON; bytea is published as its bytes.
  const decoder::Column& p = *f.payload;
  if (p.is_null()) {
    if (!ob.tombstone_on_empty_payload) {
      return fail("payload '" + ob.payload +
                  "' is NULL (set tombstone_on_empty_payload to publish a tombstone)");
    }
    s.has_value = false;
  } else {
    const std::uint32_t type = types_.resolve_domain(p.type_oid);
    if (type == oid::kBytea) {
      scratch_.clear();
      if (!json::unescape_string(p.value, scratch_) || !append_bytea(s.value, scratch_)) {
        return fail("malformed bytea payload");
      }
    } else if (json::is_string_token(p.value)) {
      if (!json::unescape_string(p.value, s.value)) return fail("malformed payload string");
      if (type != oid::kJson && type != oid::kJsonb && !is_valid_json(s.value, scratch_)) {
        return fail("payload '" + ob.payload + "' is not JSON");
      }
    } else {
      s.value.append(p.value);  // a number, boolean, or (message form) an embedded document
    }
  }

  s.timestamp_ms = commit_ts_ms_;
  if (f.timestamp != nullptr && !f.timestamp->is_null()) {
    scratch_.clear();
    if (append_text(scratch_, f.timestamp->value)) {
      if (auto ms = parse_commit_timestamp_ms(scratch_)) s.timestamp_ms = *ms;
    }
  }
  auto add_header = [&](std::string_view name, const decoder::Column* col) {
    if (col == nullptr || col->is_null()) return;
    s.header_names.push_back(name);
    s.header_values.emplace_back();
    append_text(s.header_values.back(), col->value);
  };
  if (ob.event_type) add_header(header::kEventType, f.event_type);
  for (const auto& a : ob.additional) add_header(a.header, find_column(cols, a.column));
  if (ob.payload_digest && s.has_value) {
    s.header_names.push_back(header::kPayloadDigest);
    s.header_values.emplace_back();
    append_sha256_hex(s.header_values.back(), {}, s.value);
  }
  return {};
}

std::expected<void, MappingError> EventRouter::route_message(const decoder::Change& c) {
  const config::MessageOutboxConfig* mo = nullptr;
  for (const auto& m : messages_) {
    if (m.prefix == c.prefix) mo = &m;
  }
  if (mo == nullptr) return {};  // other prefixes (and walrelay's own heartbeats) are skipped
  const auto where = [&] {
    return "message outbox '" + mo->prefix + "' at LSN " + c.lsn.to_string();
  };
  // The content is a JSON object whose top-level fields are named like the outbox columns.
  namespace od = simdjson::ondemand;
  static thread_local od::parser parser;
  message_buffer_.assign(c.content);
  message_buffer_.append(simdjson::SIMDJSON_PADDING, '\0');
  message_fields_.clear();
  od::document doc;
  od::object obj;
  if (parser.iterate(message_buffer_.data(), c.content.size(), message_buffer_.size()).get(doc) ||
      doc.get_object().get(obj)) {
    return std::unexpected(MappingError{where() + ": content is not a JSON object"});
  }
  for (auto field : obj) {
    std::string_view key;
    od::value v;
    if (field.unescaped_key().get(key) || field.value().get(v)) {
      return std::unexpected(MappingError{where() + ": content is not valid JSON"});
    }
    decoder::Column col;
    col.name = key;
    od::json_type t;
    if (v.type().get(t))
      return std::unexpected(MappingError{where() + ": content is not valid JSON"});
    std::string_view raw;
    if (t == od::json_type::object) {
      od::object o;
      if (v.get_object().get(o) || o.raw_json().get(raw)) {
        return std::unexpected(MappingError{where() + ": content is not valid JSON"});
      }
      col.type_oid = oid::kJson;
    } else if (t == od::json_type::array) {
      od::array a;
      if (v.get_array().get(a) || a.raw_json().get(raw)) {
        return std::unexpected(MappingError{where() + ": content is not valid JSON"});
      }
      col.type_oid = oid::kJson;
    } else {
      raw = v.raw_json_token();
      col.type_oid = t == od::json_type::string ? oid::kText : 0;
    }
    while (!raw.empty() &&
           (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\t' || raw.back() == '\r')) {
      raw.remove_suffix(1);
    }
    col.value = raw;
    message_fields_.push_back(col);
  }
  if (!at_document_end(doc)) {
    return std::unexpected(MappingError{where() + ": content is not valid JSON"});
  }
  return emit_outbox(mo->outbox, message_fields_, where);
}

}  // namespace walrelay::router
