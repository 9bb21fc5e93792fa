#include "walrelay/config/config.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <sstream>
#include <system_error>

#include "text.hpp"
#include "walrelay/core/headers.hpp"

namespace walrelay::config {

namespace {

/// The spelling of each configuration choice in the file: the one table `one_of` reads and
/// `to_string` writes.
template <class E>
struct Spelling {
  std::string_view name;
  E value;
};
constexpr Spelling<Delivery> kDeliveries[] = {{"at_least_once", Delivery::kAtLeastOnce},
                                              {"exactly_once", Delivery::kExactlyOnce}};
constexpr Spelling<ErrorPolicy> kErrorPolicies[] = {{"fail", ErrorPolicy::kFail},
                                                    {"dead_letter", ErrorPolicy::kDeadLetter}};
constexpr Spelling<SnapshotMode> kSnapshotModes[] = {{"initial", SnapshotMode::kInitial},
                                                     {"never", SnapshotMode::kNever},
                                                     {"initial_only", SnapshotMode::kInitialOnly}};
constexpr Spelling<NewTables> kNewTables[] = {{"incremental", NewTables::kIncremental},
                                              {"never", NewTables::kNever}};
constexpr Spelling<ValueFormat> kValueFormats[] = {{"native", ValueFormat::kNative},
                                                   {"debezium", ValueFormat::kDebezium}};
constexpr Spelling<DecimalHandling> kDecimalHandlings[] = {{"precise", DecimalHandling::kPrecise},
                                                           {"string", DecimalHandling::kString},
                                                           {"double", DecimalHandling::kDouble}};
constexpr Spelling<Partitions> kPartitions[] = {{"root", Partitions::kRoot},
                                                {"leaf", Partitions::kLeaf}};

template <class E, std::size_t N>
std::string_view spelling(const Spelling<E> (&table)[N], E value) {
  for (const auto& s : table) {
    if (s.value == value) return s.name;
  }
  return "?";
}

constexpr std::string_view kMissing = "required key is missing";

/// PostgreSQL's NAMEDATALEN - 1: longer slot names are rejected by CREATE_REPLICATION_SLOT.
constexpr std::size_t kMaxSlotName = 63;
constexpr std::size_t kMaxChunkSize = 1'000'000;  // snapshot.chunk_size
constexpr std::size_t kMinWindowKeys = 1024;      // snapshot.max_window_keys

/// Status updates also carry the flush LSN; more than an hour between them keeps WAL retained on
/// the primary for no benefit.
constexpr std::chrono::milliseconds kMaxStatusInterval{3'600'000};

constexpr std::array<std::string_view, 7> kLogLevels{"trace", "debug",    "info", "warn",
                                                     "error", "critical", "off"};

using detail::quoted;

std::string join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

/// How a node looks, for "expected X, got Y" messages.
std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return quoted(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return "an empty value";
}

/// Optimal string alignment distance (Levenshtein plus adjacent transposition), so `slto` is one
/// edit from `slot`.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

bool is_topic_char(char c) {
  // Kafka's legal topic characters (org.apache.kafka.common.internals.Topic#validate).
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

std::optional<std::string> name_problem(std::string_view name) {
  if (name.empty()) return "must not be empty";
  // The name ends up in the default slot name, the default topic prefix and log lines, so it is
  // kept to characters that are safe in all three.
  for (char c : name) {
    if (!is_topic_char(c)) {
      return "may contain only letters, digits, '.', '_' and '-', got " + quoted(name);
    }
  }
  return std::nullopt;
}

std::optional<std::string> slot_problem(std::string_view slot) {
  if (slot.empty()) return "must not be empty";
  if (slot.size() > kMaxSlotName) {
    return "is longer than 63 characters (PostgreSQL's limit for slot names), got " + quoted(slot);
  }
  for (char c : slot) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      // ReplicationSlotValidateName in PostgreSQL's slot.c.
      return "may contain only lower-case letters, digits and '_' (PostgreSQL replication slot "
             "name rules), got " +
             quoted(slot);
    }
  }
  return std::nullopt;
}

std::optional<std::string> prefix_problem(std::string_view prefix) {
  if (prefix.empty()) return "must not be empty";
  for (char c : prefix) {
    if (!is_topic_char(c)) {
      return "may contain only Kafka topic characters (letters, digits, '.', '_', '-'), got " +
             quoted(prefix);
    }
  }
  return std::nullopt;
}

/// Placeholders of an outbox topic template.
constexpr std::array<std::string_view, 1> kOutboxPlaceholders{"aggregate_type"};
/// Placeholders of a row-change topic template (`tables[].topic`).
constexpr std::array<std::string_view, 3> kTablePlaceholders{"prefix", "schema", "table"};

/// `{a}`, `{a} and {b}`, `{a}, {b} and {c}`.
std::string placeholder_list(std::span<const std::string_view> placeholders) {
  std::string out;
  for (std::size_t i = 0; i < placeholders.size(); ++i) {
    if (i > 0) out += i + 1 == placeholders.size() ? " and " : ", ";
    out += '{';
    out += placeholders[i];
    out += '}';
  }
  return out;
}

/// Checks a topic template: `{name}` must be one of `placeholders`; every other character must be
/// a Kafka topic character (the substituted values are mapped at run time, the literal text is
/// not).
std::optional<std::string> topic_template_problem(std::string_view topic,
                                                  std::span<const std::string_view> placeholders) {
  const std::string allowed = placeholder_list(placeholders);
  for (std::size_t i = 0; i < topic.size(); ++i) {
    const char c = topic[i];
    if (c == '{') {
      const std::size_t close = topic.find('}', i + 1);
      if (close == std::string_view::npos) return "unterminated \"{\" in " + quoted(topic);
      const std::string_view placeholder = topic.substr(i + 1, close - i - 1);
      if (std::ranges::find(placeholders, placeholder) == placeholders.end()) {
        return "unknown placeholder {" + std::string(placeholder) + "} in " + quoted(topic) +
               (placeholders.size() == 1 ? " (the only placeholder is " : " (placeholders are ") +
               allowed + ")";
      }
      i = close;
    } else if (c == '}') {
      return "unmatched \"}\" in " + quoted(topic);
    } else if (!is_topic_char(c)) {
      return "invalid character '" + std::string(1, c) + "' in " + quoted(topic) +
             " (allowed: letters, digits, '.', '_', '-' and " + allowed + ")";
    }
  }
  return std::nullopt;
}

/// One known key of a map and how to read its value (value node, key path).
struct Field {
  std::string_view key;
  std::function<void(const YAML::Node&, const std::string&)> read;
};

std::string suggestion(std::string_view key, std::span<const Field> fields) {
  std::string_view best;
  std::size_t best_distance = 3;  // more than two edits is a different word, not a typo
  for (const Field& field : fields) {
    const std::size_t distance = edit_distance(key, field.key);
    if (distance < best_distance && distance < key.size()) {
      best = field.key;
      best_distance = distance;
    }
  }
  if (best.empty()) return "";
  return " (did you mean " + quoted(best) + "?)";
}

/// Walks one parsed document into a Config, recording every error instead of stopping.
/// Single use; not thread-safe.
class Loader {
 public:
  explicit Loader(const EnvLookup& env) : env_(env) {}

  LoadResult load(const YAML::Node& root) {
    read_root(root);
    LoadResult result;
    if (errors_.empty()) {
      result.config = std::move(config_);
    } else {
      result.errors = std::move(errors_);
    }
    return result;
  }

 private:
  void error(std::string key, std::string reason) {
    errors_.push_back(ConfigError{std::move(key), std::move(reason)});
  }

  /// Dispatches each entry of map `node` to its field. Unknown and duplicate keys are errors.
  /// Returns the keys present, or nullopt (after an error) when `node` is not a map.
  std::optional<std::set<std::string>> walk(const YAML::Node& node, const std::string& path,
                                            std::span<const Field> fields) {
    if (!node.IsMap()) {
      error(path, "expected a map, got " + describe(node));
      return std::nullopt;
    }
    std::set<std::string> seen;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) {
        error(path, "expected a plain key, got " + describe(entry.first));
        continue;
      }
      const std::string& key = entry.first.Scalar();
      const std::string child = join(path, key);
      // yaml-cpp keeps both entries of a repeated key; which one wins would be an accident.
      if (!seen.insert(key).second) {
        error(child, "duplicate key");
        continue;
      }
      const auto field =
          std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.key == key; });
      if (field == fields.end()) {
        error(child, "unknown key" + suggestion(key, fields));
        continue;
      }
      field->read(entry.second, child);
    }
    return seen;
  }

  /// A scalar value after `${VAR}` substitution; `expected` names the wanted type for messages.
  std::optional<std::string> scalar(const YAML::Node& node, const std::string& path,
                                    std::string_view expected) {
    if (!node.IsScalar()) {
      error(path, "expected " + std::string(expected) + ", got " + describe(node));
      return std::nullopt;
    }
    auto value = substitute_env(node.Scalar(), env_);
    if (!value) {
      error(path, std::move(value.error()));
      return std::nullopt;
    }
    return std::move(*value);
  }

  std::optional<std::string> nonempty_string(const YAML::Node& node, const std::string& path) {
    auto value = scalar(node, path, "a string");
    if (value && value->empty()) {
      error(path, "must not be empty");
      return std::nullopt;
    }
    return value;
  }

  std::optional<bool> boolean(const YAML::Node& node, const std::string& path) {
    const auto value = scalar(node, path, "true or false");
    if (!value) return std::nullopt;
    std::string lower = *value;
    std::ranges::transform(lower, lower.begin(), [](char c) {
      return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    });
    // YAML 1.1's spellings, which yaml-cpp's own bool conversion also accepts.
    if (lower == "true" || lower == "yes" || lower == "on") return true;
    if (lower == "false" || lower == "no" || lower == "off") return false;
    error(path, "expected true or false, got " + quoted(*value));
    return std::nullopt;
  }

  std::optional<std::size_t> positive_int(const YAML::Node& node, const std::string& path) {
    const auto value = scalar(node, path, "a positive integer");
    if (!value) return std::nullopt;
    std::size_t number = 0;
    const char* end = value->data() + value->size();
    const auto [ptr, ec] = std::from_chars(value->data(), end, number);
    if (ec == std::errc::result_out_of_range && ptr == end) {
      error(path, "integer " + quoted(*value) + " is too large");
      return std::nullopt;
    }
    // from_chars accepts a leading '-' for unsigned types on some libraries; digits only here.
    if (ec != std::errc() || ptr != end || number == 0 || value->front() == '-') {
      error(path, "expected a positive integer, got " + quoted(*value));
      return std::nullopt;
    }
    return number;
  }

  std::optional<std::chrono::milliseconds> duration(const YAML::Node& node,
                                                    const std::string& path) {
    const auto value = scalar(node, path, "a duration");
    if (!value) return std::nullopt;
    auto parsed = parse_duration(*value);
    if (!parsed) {
      error(path, std::move(parsed.error()));
      return std::nullopt;
    }
    return *parsed;
  }

  std::optional<std::size_t> size(const YAML::Node& node, const std::string& path) {
    const auto value = scalar(node, path, "a size");
    if (!value) return std::nullopt;
    auto parsed = parse_size(*value);
    if (!parsed) {
      error(path, std::move(parsed.error()));
      return std::nullopt;
    }
    return *parsed;
  }

  void read_root(const YAML::Node& root) {
    const Field fields[] = {
        {"name", [this](const YAML::Node& v, const std::string& p) { read_name(v, p); }},
        {"source", [this](const YAML::Node& v, const std::string& p) { read_source(v, p); }},
        {"kafka", [this](const YAML::Node& v, const std::string& p) { read_kafka(v, p); }},
        {"topics", [this](const YAML::Node& v, const std::string& p) { read_topics(v, p); }},
        {"events", [this](const YAML::Node& v, const std::string& p) { read_events(v, p); }},
        {"tables", [this](const YAML::Node& v, const std::string& p) { read_tables(v, p); }},
        {"exclude", [this](const YAML::Node& v, const std::string& p) { read_exclude(v, p); }},
        {"messages", [this](const YAML::Node& v, const std::string& p) { read_messages(v, p); }},
        {"errors", [this](const YAML::Node& v, const std::string& p) { read_errors(v, p); }},
        {"heartbeat", [this](const YAML::Node& v, const std::string& p) { read_heartbeat(v, p); }},
        {"snapshot", [this](const YAML::Node& v, const std::string& p) { read_snapshot(v, p); }},
        {"log", [this](const YAML::Node& v, const std::string& p) { read_log(v, p); }},
        {"metrics", [this](const YAML::Node& v, const std::string& p) { read_metrics(v, p); }},
        {"delivery",
         [this](const YAML::Node& v, const std::string& p) {
           if (auto d = one_of(v, p, kDeliveries)) config_.delivery = *d;
         }},
        {"exactly_once",
         [this](const YAML::Node& v, const std::string& p) { read_exactly_once(v, p); }},
    };
    std::set<std::string> seen;
    if (root.IsNull()) {
      // An empty file: report the required keys rather than "expected a map".
    } else if (root.IsMap()) {
      seen = *walk(root, "", fields);
    } else {
      error("", "expected a map at the top level, got " + describe(root));
      return;
    }
    if (!seen.contains("name")) error("name", std::string(kMissing));
    if (!seen.contains("source")) error("source.conninfo", std::string(kMissing));
    // A list that is not a list was reported already; an empty or absent one is checked here.
    if (config_.tables.empty() && config_.messages.empty() && !tables_malformed_ &&
        !messages_malformed_) {
      error("tables", "at least one table or message outbox is required");
    }
    if (masks_columns_ && config_.events.mask_salt.empty() && !mask_salt_malformed_) {
      error("events.mask_salt", "required when a table masks columns");
    }

    // Defaults derived from the name, only from a valid one (an invalid name is reported once).
    if (name_valid_ && !slot_given_) {
      std::string slot = default_slot_name(config_.name);
      if (slot.size() > kMaxSlotName) {
        error("source.slot", "the default slot name " + quoted(slot) +
                                 " (from name) is longer than 63 characters; set source.slot");
      } else {
        config_.source.slot = std::move(slot);
      }
    }
    if (name_valid_ && !prefix_given_) config_.topics.prefix = config_.name;
  }

  void read_name(const YAML::Node& node, const std::string& path) {
    const auto value = scalar(node, path, "a string");
    if (!value) return;
    if (auto problem = name_problem(*value)) {
      error(path, std::move(*problem));
      return;
    }
    config_.name = *value;
    name_valid_ = true;
  }

  void read_source(const YAML::Node& node, const std::string& path) {
    SourceConfig& source = config_.source;
    const Field fields[] = {
        {"conninfo",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto s = nonempty_string(v, p)) source.conninfo = std::move(*s);
         }},
        {"slot",
         [&](const YAML::Node& v, const std::string& p) {
           slot_given_ = true;
           auto s = scalar(v, p, "a string");
           if (!s) return;
           if (auto problem = slot_problem(*s)) {
             error(p, std::move(*problem));
           } else {
             source.slot = std::move(*s);
           }
         }},
        {"create_slot",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto b = boolean(v, p)) source.create_slot = *b;
         }},
        {"status_interval",
         [&](const YAML::Node& v, const std::string& p) {
           const auto d = duration(v, p);
           if (!d) return;
           if (*d > kMaxStatusInterval) {
             error(p, "must be at most 1h (3600s)");
           } else {
             source.status_interval = *d;
           }
         }},

        {"state_dir",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto s = nonempty_string(v, p)) source.state_dir = std::move(*s);
         }},
        {"max_repeated_errors",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto n = positive_int(v, p)) {
             if (*n > 1000) {
               error(p, "at most 1000");
             } else {
               source.max_repeated_errors = *n;
             }
           }
         }},
        {"confirm_interval",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto d = duration(v, p)) source.confirm_interval = *d;
         }},
        {"catalog_check_interval",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto d = duration(v, p)) source.catalog_check_interval = *d;
         }},
        {"allow_slot_reset",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto b = boolean(v, p)) source.allow_slot_reset = *b;
         }},
        {"allow_sql_ascii",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto b = boolean(v, p)) source.allow_sql_ascii = *b;
         }},
        {"reconnect_min",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto d = duration(v, p)) source.reconnect_min = *d;
         }},
        {"reconnect_max",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto d = duration(v, p)) source.reconnect_max = *d;
         }},
    };
    const auto seen = walk(node, path, fields);
    if (seen && !seen->contains("conninfo")) error(join(path, "conninfo"), std::string(kMissing));
    if (source.reconnect_min > source.reconnect_max) {
      error(join(path, "reconnect_min"), "must not be larger than source.reconnect_max");
    }
  }

  void read_errors(const YAML::Node& node, const std::string& path) {
    ErrorsConfig& errors = config_.errors;
    const Field fields[] = {
        {"policy",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto e = one_of(v, p, kErrorPolicies)) errors.policy = *e;
         }},
        {"dead_letter_topic",
         [&](const YAML::Node& v, const std::string& p) {
           auto s = nonempty_string(v, p);
           if (!s) return;
           if (auto problem = prefix_problem(*s)) {
             error(p, std::move(*problem));
           } else {
             errors.dead_letter_topic = std::move(*s);
           }
         }},
    };
    const auto seen = walk(node, path, fields);
    if (seen && errors.policy == ErrorPolicy::kDeadLetter && !seen->contains("dead_letter_topic")) {
      error(join(path, "dead_letter_topic"), "required when errors.policy is dead_letter");
    }
  }

  void read_exactly_once(const YAML::Node& node, const std::string& path) {
    ExactlyOnceConfig& eos = config_.exactly_once;
    const Field fields[] = {
        {"commit_interval",
         [&](const YAML::Node& v, const std::string& p) {
           const auto d = duration(v, p);
           if (!d) return;
           if (*d > std::chrono::minutes(1)) {
             error(p,
                   "must be at most 1m (a Kafka transaction must end well within "
                   "transaction.timeout.ms)");
           } else {
             eos.commit_interval = *d;
           }
         }},
        {"max_transaction_events",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto n = positive_int(v, p)) eos.max_transaction_events = *n;
         }},
    };
    walk(node, path, fields);
  }

  void read_heartbeat(const YAML::Node& node, const std::string& path) {
    HeartbeatConfig& hb = config_.heartbeat;
    const Field fields[] = {
        {"enabled",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto b = boolean(v, p)) hb.enabled = *b;
         }},
        {"interval",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto d = duration(v, p)) hb.interval = *d;
         }},
        {"query",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto s = nonempty_string(v, p)) hb.query = std::move(*s);
         }},
    };
    walk(node, path, fields);
  }

  void read_snapshot(const YAML::Node& node, const std::string& path) {
    SnapshotConfig& sc = config_.snapshot;
    const Field fields[] = {
        {"mode",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto m = one_of(v, p, kSnapshotModes)) sc.mode = *m;
         }},
        {"chunk_size",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto n = positive_int(v, p)) {
             if (*n > kMaxChunkSize) {
               error(p, "at most " + std::to_string(kMaxChunkSize) +
                            " rows (a chunk is held in memory while it is published)");
             } else {
               sc.chunk_size = *n;
             }
           }
         }},
        {"max_window_keys",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto n = positive_int(v, p)) {
             if (*n < kMinWindowKeys) {
               error(p, "at least " + std::to_string(kMinWindowKeys) +
                            " (a smaller bound has chunks of a busy table read again and again)");
             } else {
               sc.max_window_keys = *n;
             }
           }
         }},
        {"new_tables",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto n = one_of(v, p, kNewTables)) sc.new_tables = *n;
         }},
        {"row_security",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto b = boolean(v, p)) sc.row_security = *b;
         }},
        {"signal_prefix",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto s = nonempty_string(v, p)) sc.signal_prefix = std::move(*s);
         }},
        {"signal_table",
         [&](const YAML::Node& v, const std::string& p) {
           auto s = nonempty_string(v, p);
           if (!s) return;
           auto parsed = parse_table_name(*s);
           if (!parsed) {
             error(p, parsed.error());
             return;
           }
           sc.signal_table = std::move(*s);
           sc.signal_table_schema = parsed->schema;
           sc.signal_table_name = parsed->table;
         }},
        {"parallelism",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto n = positive_int(v, p)) {
             if (*n > 16) {
               error(p, "at most 16 (one database connection per table read at once)");
             } else {
               sc.parallelism = *n;
             }
           }
         }},
    };
    walk(node, path, fields);
  }

  void read_kafka(const YAML::Node& node, const std::string& path) {
    KafkaConfig& kafka = config_.kafka;
    const Field fields[] = {
        {"bootstrap_servers",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto s = nonempty_string(v, p)) kafka.bootstrap_servers = std::move(*s);
         }},
        {"properties", [&](const YAML::Node& v, const std::string& p) { read_properties(v, p); }},
        {"max_in_flight_events",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto n = positive_int(v, p)) kafka.max_in_flight_events = *n;
         }},
        {"max_in_flight_bytes",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto n = size(v, p)) kafka.max_in_flight_bytes = *n;
         }},
        {"flush_timeout",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto d = duration(v, p)) kafka.flush_timeout = *d;
         }},
    };
    walk(node, path, fields);
  }

  /// librdkafka properties are free-form (librdkafka itself rejects unknown names when the
  /// producer is created), so only their shape is checked here.
  void read_properties(const YAML::Node& node, const std::string& path) {
    if (!node.IsMap()) {
      error(path, "expected a map of librdkafka properties, got " + describe(node));
      return;
    }
    std::set<std::string> seen;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar() || entry.first.Scalar().empty()) {
        error(path, "expected a property name, got " + describe(entry.first));
        continue;
      }
      const std::string& name = entry.first.Scalar();
      const std::string child = join(path, name);
      if (!seen.insert(name).second) {
        error(child, "duplicate key");
        continue;
      }
      if (name == "bootstrap.servers") {
        // Two places for one setting would make the precedence a trap.
        error(child, "set kafka.bootstrap_servers instead");
        continue;
      }
      // Values are never quoted in messages: they may be secrets (sasl.password).
      if (!entry.second.IsScalar()) {
        error(child, "expected a string, number or boolean");
        continue;
      }
      auto value = scalar(entry.second, child, "a string, number or boolean");
      if (!value) continue;
      std::string v = normalize_bool(entry.second, std::move(*value));
      // walrelay confirms the slot once Kafka acknowledged an event: settings that make an
      // acknowledgement mean nothing, or let a retry reorder a key's events, break the delivery
      // guarantee (docs/delivery.md "Delivery guarantee").
      if (name == "acks" && v == "0") {
        error(child,
              "acks=0 acknowledges nothing, so walrelay could confirm changes the broker "
              "never stored; use all (the default)");
        continue;
      }
      if (name == "enable.idempotence" && v == "false") {
        error(child,
              "without idempotence a retried batch can land after a later one and reorder "
              "a key's events; keep true (the default)");
        continue;
      }
      config_.kafka.properties[name] = std::move(v);
    }
  }

  /// A plain (unquoted) YAML boolean is given to librdkafka as `true`/`false`: it parses only those
  /// spellings (rd_kafka_anyconf_set_prop0), not YAML 1.1's `yes`/`on`. Quoted text is kept.
  static std::string normalize_bool(const YAML::Node& node, std::string value) {
    if (node.Tag() != "?") return value;
    const std::string& raw = node.Scalar();
    for (std::string_view t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"}) {
      if (raw == t) return "true";
    }
    for (std::string_view f : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"}) {
      if (raw == f) return "false";
    }
    return value;
  }

  void read_topics(const YAML::Node& node, const std::string& path) {
    const Field fields[] = {
        {"prefix",
         [&](const YAML::Node& v, const std::string& p) {
           prefix_given_ = true;
           auto s = scalar(v, p, "a string");
           if (!s) return;
           if (auto problem = prefix_problem(*s)) {
             error(p, std::move(*problem));
           } else {
             config_.topics.prefix = std::move(*s);
           }
         }},
    };
    walk(node, path, fields);
  }

  void read_events(const YAML::Node& node, const std::string& path) {
    EventsConfig& events = config_.events;
    // Only values that were read correctly take part in the cross-key check below.
    std::optional<ValueFormat> value_format;
    std::optional<bool> json_as_document;
    std::optional<DecimalHandling> decimal_handling;
    const Field fields[] = {
        {"value_format",
         [&](const YAML::Node& v, const std::string& p) {
           value_format = one_of(v, p, kValueFormats);
           if (value_format) events.value_format = *value_format;
         }},
        {"json_as_document",
         [&](const YAML::Node& v, const std::string& p) {
           json_as_document = boolean(v, p);
           if (json_as_document) events.json_as_document = *json_as_document;
         }},
        {"decimal_handling",
         [&](const YAML::Node& v, const std::string& p) {
           decimal_handling = one_of(v, p, kDecimalHandlings);
           if (decimal_handling) events.decimal_handling = *decimal_handling;
         }},
        {"tombstones_on_delete",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto b = boolean(v, p)) events.tombstones_on_delete = *b;
         }},
        {"operations",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto ops = operations(v, p)) events.operations = *ops;
         }},
        {"toast_placeholder",
         [&](const YAML::Node& v, const std::string& p) {
           // May be empty: an unchanged TOASTed value then reads as "".
           if (auto s = scalar(v, p, "a string")) events.toast_placeholder = std::move(*s);
         }},
        {"mask_salt",
         [&](const YAML::Node& v, const std::string& p) {
           auto s = scalar(v, p, "a string");
           if (s) {
             events.mask_salt = std::move(*s);
           } else {
             mask_salt_malformed_ = true;  // one error for the key, not a second "required"
           }
         }},
        {"partitions",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto s = one_of(v, p, kPartitions)) events.partitions = *s;
         }},
        {"transaction_metadata",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto b = boolean(v, p)) events.transaction_metadata = *b;
         }},
    };
    walk(node, path, fields);
    if (decimal_handling && *decimal_handling != DecimalHandling::kPrecise &&
        value_format != ValueFormat::kDebezium) {
      error(join(path, "decimal_handling"),
            "is Debezium's decimal.handling.mode and needs value_format: debezium (native "
            "always writes numeric and money as exact decimal strings)");
    }
    if (json_as_document == true && value_format == ValueFormat::kDebezium) {
      error(join(path, "json_as_document"),
            "must be false when value_format is debezium (Debezium's JSON converter gives json "
            "columns as strings)");
    }
  }

  /// A scalar that must be one of `choices` (listed in the message when it is not).
  std::optional<std::string> one_of(const YAML::Node& node, const std::string& path,
                                    std::initializer_list<std::string_view> choices) {
    std::string expected;
    for (std::size_t i = 0; i < choices.size(); ++i) {
      if (i > 0) expected += i + 1 == choices.size() ? " or " : ", ";
      expected += choices.begin()[i];
    }
    auto value = scalar(node, path, expected);
    if (!value) return std::nullopt;
    if (std::ranges::find(choices, std::string_view(*value)) == choices.end()) {
      error(path, "expected " + expected + ", got " + quoted(*value));
      return std::nullopt;
    }
    return value;
  }

  /// One of the spellings in `table`, as its enum value (errors as the string form).
  template <class E, std::size_t N>
  std::optional<E> one_of(const YAML::Node& node, const std::string& path,
                          const Spelling<E> (&table)[N]) {
    std::string expected;
    for (std::size_t i = 0; i < N; ++i) {
      if (i > 0) expected += i + 1 == N ? " or " : ", ";
      expected += table[i].name;
    }
    auto value = scalar(node, path, expected);
    if (!value) return std::nullopt;
    for (const auto& s : table) {
      if (s.name == *value) return s.value;
    }
    error(path, "expected " + expected + ", got " + quoted(*value));
    return std::nullopt;
  }

  /// Operation letters, as a YAML list (`[c, u, d]`) or one string (`"c,u,d"`); only the letters
  /// given are enabled. Unknown, duplicate and missing letters are errors (list items are
  /// reported at `path[i]`, letters in a string at `path`).
  std::optional<Operations> operations(const YAML::Node& node, const std::string& path) {
    Operations ops{.create = false, .update = false, .del = false, .truncate = false};
    std::set<std::string> seen;
    bool valid = true;
    const auto add = [&](std::string_view letter, const std::string& p) {
      bool* flag = letter == "c"   ? &ops.create
                   : letter == "u" ? &ops.update
                   : letter == "d" ? &ops.del
                   : letter == "t" ? &ops.truncate
                                   : nullptr;
      if (flag == nullptr) {
        error(p, (letter.empty() ? std::string("empty operation")
                                 : "unknown operation " + quoted(letter)) +
                     " (expected c for create, u for update, d for delete or t for truncate)");
        valid = false;
      } else if (!seen.emplace(letter).second) {
        error(p, "duplicate operation " + quoted(letter));
        valid = false;
      } else {
        *flag = true;
      }
    };
    static constexpr std::string_view kEmpty = "must list at least one operation (c, u, d or t)";
    if (node.IsSequence()) {
      if (node.size() == 0) {
        error(path, std::string(kEmpty));
        return std::nullopt;
      }
      for (std::size_t i = 0; i < node.size(); ++i) {
        const std::string item = path + "[" + std::to_string(i) + "]";
        if (auto letter = scalar(node[i], item, "an operation letter (c, u, d or t)")) {
          add(trim(*letter), item);
        } else {
          valid = false;
        }
      }
    } else if (node.IsScalar()) {
      const auto text = scalar(node, path, "a list of operations");
      if (!text) return std::nullopt;
      if (trim(*text).empty()) {
        error(path, std::string(kEmpty));
        return std::nullopt;
      }
      std::string_view rest = *text;
      while (true) {
        const std::size_t comma = rest.find(',');
        add(trim(rest.substr(0, comma)), path);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
    } else {
      error(path,
            "expected a list of operations such as [c, u, d] or \"c,u,d\", got " + describe(node));
      return std::nullopt;
    }
    if (!valid) return std::nullopt;
    return ops;
  }

  static std::string_view trim(std::string_view text) {
    const std::size_t first = text.find_first_not_of(" \t");
    if (first == std::string_view::npos) return {};
    return text.substr(first, text.find_last_not_of(" \t") - first + 1);
  }

  /// A list of distinct, non-empty column names. Returns the valid names (so that cross-checks
  /// still run when one item is wrong), or nullopt when `node` is not a list.
  std::optional<std::vector<std::string>> column_list(const YAML::Node& node,
                                                      const std::string& path) {
    if (!node.IsSequence()) {
      error(path, "expected a list of column names, got " + describe(node));
      return std::nullopt;
    }
    std::vector<std::string> columns;
    for (std::size_t i = 0; i < node.size(); ++i) {
      const std::string item = path + "[" + std::to_string(i) + "]";
      auto column = nonempty_string(node[i], item);
      if (!column) continue;
      if (std::ranges::find(columns, *column) != columns.end()) {
        error(item, "duplicate column " + quoted(*column));
        continue;
      }
      columns.push_back(std::move(*column));
    }
    return columns;
  }

  void read_tables(const YAML::Node& node, const std::string& path) {
    if (!node.IsSequence()) {
      error(path, "expected a list of tables, got " + describe(node));
      tables_malformed_ = true;
      return;
    }
    const std::size_t first = config_.tables.size();
    for (std::size_t i = 0; i < node.size(); ++i) {
      read_table(node[i], path + "[" + std::to_string(i) + "]");
    }
    // The first matching entry wins: an entry an earlier one matches for every name it can match
    // would be silently dead (its outbox, key or topic never applied). Refuse it, naming both.
    for (std::size_t j = first + 1; j < config_.tables.size(); ++j) {
      const TableConfig& later = config_.tables[j];
      if (later.name.empty()) continue;  // an invalid name, reported already
      for (std::size_t i = first; i < j; ++i) {
        const TableConfig& earlier = config_.tables[i];
        if (earlier.name.empty() || !glob_covers(earlier.schema_pattern, later.schema_pattern) ||
            !glob_covers(earlier.table_pattern, later.table_pattern)) {
          continue;
        }
        error(path + "[" + std::to_string(j - first) + "].name",
              "entry " + quoted(later.name) + " is never used: the earlier entry " +
                  quoted(earlier.name) + " (" + path + "[" + std::to_string(i - first) +
                  "]) matches every table it names, and the first matching entry wins. Move " +
                  quoted(later.name) + " before " + quoted(earlier.name) + ", or remove it");
        break;
      }
    }
  }

  /// `schema.table` pattern into `table.name`, `schema_pattern`, `table_pattern`.
  void read_table_name(const YAML::Node& node, const std::string& path, TableConfig& table) {
    auto s = scalar(node, path, "a string");
    if (!s) return;
    auto parsed = parse_table_name(*s);
    if (!parsed) {
      error(path, std::move(parsed.error()));
      return;
    }
    table.name = std::move(*s);
    table.schema_pattern = std::move(parsed->schema);
    table.table_pattern = std::move(parsed->table);
  }

  void read_table(const YAML::Node& node, const std::string& path) {
    TableConfig table;
    // Row-change keys are rejected on an outbox entry wherever `outbox` appears in it.
    bool is_outbox = false;
    if (node.IsMap()) {
      for (const auto& entry : node) {
        if (entry.first.IsScalar() && entry.first.Scalar() == "outbox") is_outbox = true;
      }
    }
    using Read = std::function<void(const YAML::Node&, const std::string&)>;
    const auto row_only = [&](Read read) -> Read {
      return [&, read = std::move(read)](const YAML::Node& v, const std::string& p) {
        if (is_outbox) {
          error(p, "not used for outbox tables");
        } else {
          read(v, p);
        }
      };
    };
    std::optional<std::vector<std::string>> excluded;
    std::optional<std::vector<std::string>> masked;
    const Field fields[] = {
        {"name", [&](const YAML::Node& v, const std::string& p) { read_table_name(v, p, table); }},
        {"outbox",
         [&](const YAML::Node& v, const std::string& p) {
           if (v.IsNull()) {
             error(p, "expected a map (write `outbox: {}` for the default column names)");
             return;
           }
           read_outbox(v, p, table.outbox.emplace());
         }},
        {"topic", row_only([&](const YAML::Node& v, const std::string& p) {
           auto s = nonempty_string(v, p);
           if (!s) return;
           if (auto problem = topic_template_problem(*s, kTablePlaceholders)) {
             error(p, std::move(*problem));
           } else {
             table.topic = std::move(*s);
           }
         })},
        {"key_columns", row_only([&](const YAML::Node& v, const std::string& p) {
           if (auto columns = column_list(v, p)) table.key_columns = std::move(*columns);
         })},
        {"exclude_columns", row_only([&](const YAML::Node& v, const std::string& p) {
           excluded = column_list(v, p);
           if (excluded) table.exclude_columns = *excluded;
         })},
        {"mask_columns", row_only([&](const YAML::Node& v, const std::string& p) {
           masked = column_list(v, p);
           if (masked) table.mask_columns = *masked;
         })},
        {"operations", row_only([&](const YAML::Node& v, const std::string& p) {
           table.operations = operations(v, p);
         })},
        {"tombstones_on_delete", row_only([&](const YAML::Node& v, const std::string& p) {
           table.tombstones_on_delete = boolean(v, p);
         })},
    };
    const auto seen = walk(node, path, fields);
    if (seen && !seen->contains("name")) error(join(path, "name"), std::string(kMissing));
    if (excluded && masked) {
      for (const std::string& column : *masked) {
        if (std::ranges::find(*excluded, column) != excluded->end()) {
          error(join(path, "mask_columns"),
                quoted(column) +
                    " is also in exclude_columns (a column is either left out or "
                    "masked, not both)");
        }
      }
    }
    if (masked && !masked->empty()) masks_columns_ = true;
    config_.tables.push_back(std::move(table));
  }

  /// `exclude:` items: `schema.table` or `{name: schema.table}`, read like `tables[].name`.
  void read_exclude(const YAML::Node& node, const std::string& path) {
    if (!node.IsSequence()) {
      error(path, "expected a list of table names, got " + describe(node));
      return;
    }
    for (std::size_t i = 0; i < node.size(); ++i) {
      const std::string item = path + "[" + std::to_string(i) + "]";
      const YAML::Node& entry = node[i];
      TableConfig table;
      if (entry.IsScalar()) {
        read_table_name(entry, item, table);
      } else if (entry.IsMap()) {
        const Field fields[] = {
            {"name",
             [&](const YAML::Node& v, const std::string& p) { read_table_name(v, p, table); }},
        };
        const auto seen = walk(entry, item, fields);
        if (seen && !seen->contains("name")) error(join(item, "name"), std::string(kMissing));
      } else {
        error(item, "expected schema.table or a map with name, got " + describe(entry));
      }
      config_.exclude.push_back(std::move(table));
    }
  }

  void read_messages(const YAML::Node& node, const std::string& path) {
    if (!node.IsSequence()) {
      error(path, "expected a list of message outboxes, got " + describe(node));
      messages_malformed_ = true;
      return;
    }
    std::map<std::string, std::string> prefixes;  // prefix → path of the entry that has it
    for (std::size_t i = 0; i < node.size(); ++i) {
      const std::string item = path + "[" + std::to_string(i) + "]";
      MessageOutboxConfig message;
      const Field fields[] = {
          {"prefix",
           [&](const YAML::Node& v, const std::string& p) {
             auto s = nonempty_string(v, p);
             if (!s) return;
             const auto [it, added] = prefixes.emplace(*s, item);
             if (!added) {
               error(p, "duplicate prefix " + quoted(*s) + " (also in " + it->second + ")");
               return;
             }
             message.prefix = std::move(*s);
           }},
          {"outbox",
           [&](const YAML::Node& v, const std::string& p) {
             if (v.IsNull()) {
               error(p,
                     "expected a map (write `outbox: {}` or leave it out for the default "
                     "field names)");
               return;
             }
             read_outbox(v, p, message.outbox);
           }},
      };
      const auto seen = walk(node[i], item, fields);
      if (seen && !seen->contains("prefix")) error(join(item, "prefix"), std::string(kMissing));
      config_.messages.push_back(std::move(message));
    }
  }

  void read_outbox(const YAML::Node& node, const std::string& path, OutboxConfig& outbox) {
    auto column = [this](std::string& target) {
      return [this, &target](const YAML::Node& v, const std::string& p) {
        if (auto s = nonempty_string(v, p)) target = std::move(*s);
      };
    };
    auto optional_column = [this](std::optional<std::string>& target) {
      return [this, &target](const YAML::Node& v, const std::string& p) {
        if (auto s = nonempty_string(v, p)) target = std::move(*s);
      };
    };
    const Field fields[] = {
        {"event_id", column(outbox.event_id)},
        {"aggregate_id", column(outbox.aggregate_id)},
        {"aggregate_type", column(outbox.aggregate_type)},
        {"payload", column(outbox.payload)},
        {"event_type", optional_column(outbox.event_type)},
        {"timestamp", optional_column(outbox.timestamp)},
        {"additional",
         [&](const YAML::Node& v, const std::string& p) { read_additional(v, p, outbox); }},
        {"topic",
         [&](const YAML::Node& v, const std::string& p) {
           auto s = nonempty_string(v, p);
           if (!s) return;
           if (auto problem = topic_template_problem(*s, kOutboxPlaceholders)) {
             error(p, std::move(*problem));
           } else {
             outbox.topic = std::move(*s);
           }
         }},
        {"payload_digest",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto b = boolean(v, p)) outbox.payload_digest = *b;
         }},
        {"allow_empty_aggregate_id",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto b = boolean(v, p)) outbox.allow_empty_aggregate_id = *b;
         }},
        {"tombstone_on_empty_payload",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto b = boolean(v, p)) outbox.tombstone_on_empty_payload = *b;
         }},
    };
    walk(node, path, fields);

    // Headers walrelay sets itself must not be set twice (consumers would see two values).
    for (const AdditionalField& field : outbox.additional) {
      const char* owner = field.header == header::kId                               ? "event_id"
                          : field.header == header::kEventType && outbox.event_type ? "event_type"
                          : field.header == header::kPayloadDigest && outbox.payload_digest
                              ? "payload_digest"
                              : nullptr;
      if (owner != nullptr) {
        error(join(join(path, "additional"), field.column),
              "header " + quoted(field.header) + " is already set from " + owner);
      }
    }
  }

  /// `additional: {column: header, column: "header:alias"}` in file order. Debezium also has
  /// `envelope` and `partition` placements; only headers are supported.
  void read_additional(const YAML::Node& node, const std::string& path, OutboxConfig& outbox) {
    if (!node.IsMap()) {
      error(path,
            "expected a map of column: \"header\" or \"header:<name>\", got " + describe(node));
      return;
    }
    std::set<std::string> columns;
    std::map<std::string, std::string> headers;  // header → column that sets it
    for (const auto& entry : node) {
      if (!entry.first.IsScalar() || entry.first.Scalar().empty()) {
        error(path, "expected a column name, got " + describe(entry.first));
        continue;
      }
      const std::string& column = entry.first.Scalar();
      const std::string child = join(path, column);
      if (!columns.insert(column).second) {
        error(child, "duplicate key");
        continue;
      }
      const auto value = scalar(entry.second, child, "\"header\" or \"header:<name>\"");
      if (!value) continue;
      const std::size_t colon = value->find(':');
      const std::string_view placement = std::string_view(*value).substr(0, colon);
      if (placement != "header") {
        error(child,
              "only header placement is supported: expected \"header\" or "
              "\"header:<name>\", got " +
                  quoted(*value));
        continue;
      }
      std::string header = colon == std::string::npos ? column : value->substr(colon + 1);
      if (header.empty()) {
        error(child, "header name after \"header:\" must not be empty");
        continue;
      }
      const auto [it, added] = headers.emplace(header, column);
      if (!added) {
        error(child, "header " + quoted(header) + " is also set by column " + quoted(it->second));
        continue;
      }
      outbox.additional.push_back(AdditionalField{column, std::move(header)});
    }
  }

  void read_metrics(const YAML::Node& node, const std::string& path) {
    const Field fields[] = {
        {"listen",
         [&](const YAML::Node& v, const std::string& p) {
           auto s = scalar(v, p, "host:port or empty");
           if (!s) return;
           if (!s->empty() && s->rfind(':') == std::string::npos) {
             error(p,
                   "expected host:port (e.g. 127.0.0.1:9187) or \"\" for off, got " + quoted(*s));
           } else {
             config_.metrics.listen = std::move(*s);
           }
         }},
        {"max_lag",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto d = duration(v, p)) config_.metrics.max_lag = *d;
         }},
    };
    walk(node, path, fields);
  }

  void read_log(const YAML::Node& node, const std::string& path) {
    const Field fields[] = {
        {"level",
         [&](const YAML::Node& v, const std::string& p) {
           auto s = scalar(v, p, "a log level");
           if (!s) return;
           if (std::ranges::find(kLogLevels, *s) == kLogLevels.end()) {
             error(p, "expected one of trace, debug, info, warn, error, critical, off, got " +
                          quoted(*s));
           } else {
             config_.log.level = std::move(*s);
           }
         }},
        {"progress_interval",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto d = duration(v, p)) config_.log.progress_interval = *d;
         }},
    };
    walk(node, path, fields);
  }

  const EnvLookup& env_;
  Config config_;
  std::vector<ConfigError> errors_;
  bool name_valid_ = false;
  bool slot_given_ = false;
  bool prefix_given_ = false;
  bool tables_malformed_ = false;     ///< `tables` is not a list (already reported)
  bool messages_malformed_ = false;   ///< `messages` is not a list (already reported)
  bool masks_columns_ = false;        ///< some table has mask_columns
  bool mask_salt_malformed_ = false;  ///< `events.mask_salt` was reported already
};

LoadResult single_error(std::string reason) {
  LoadResult result;
  result.errors.push_back(ConfigError{"", std::move(reason)});
  return result;
}

}  // namespace

std::string default_slot_name(std::string_view connector_name) {
  std::string slot = "walrelay_";
  for (char c : connector_name) {
    if (c >= 'A' && c <= 'Z') {
      slot += static_cast<char>(c - 'A' + 'a');
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') {
      slot += c;
    } else {
      slot += '_';
    }
  }
  return slot;
}

namespace {

// Parses without building nodes (yaml-cpp's event API).
class NullEventHandler final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Number of YAML documents in `text`, counting at most `limit`.
int count_documents(const std::string& text, int limit) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  NullEventHandler handler;
  int n = 0;
  while (n < limit && parser.HandleNextDocument(handler)) ++n;
  return n;
}

}  // namespace

LoadResult load_config_text(const std::string& yaml_text, const std::string& source_name,
                            const EnvLookup& env) {
  const std::string where = source_name.empty() ? std::string() : source_name + ": ";
  try {
    // yaml-cpp's Load would silently drop every document after the first, so count them first,
    // but only up to two: yaml-cpp 0.7's LoadAll never ends on input such as "," (it keeps adding
    // empty documents; jbeder/yaml-cpp#1040, found by tests/fuzz/fuzz_config).
    if (count_documents(yaml_text, 2) > 1) {
      return single_error(where + "expected one YAML document, found several");
    }
    Loader loader(env);
    return loader.load(YAML::Load(yaml_text));
  } catch (const YAML::ParserException& e) {
    return single_error(where + "YAML syntax error at line " + std::to_string(e.mark.line + 1) +
                        ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  } catch (const YAML::Exception& e) {
    return single_error(where + e.what());
  }
}

LoadResult load_config_text(const std::string& yaml_text, const std::string& source_name) {
  return load_config_text(yaml_text, source_name, process_env);
}

LoadResult load_config_file(const std::string& path) {
  const auto cannot_read = [&path](int err) {
    return single_error("cannot read " + path + ": " +
                        std::error_code(err, std::generic_category()).message());
  };
  // stdio rather than ifstream: it keeps errno, so the message says why (ENOENT, EACCES, EISDIR).
  errno = 0;
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                             &std::fclose);
  if (!file) return cannot_read(errno);
  std::string text;
  char buffer[8192];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) text.append(buffer, n);
  if (std::ferror(file.get())) return cannot_read(errno);
  return load_config_text(text, path);
}

std::string_view to_string(Delivery value) {
  return spelling(kDeliveries, value);
}
std::string_view to_string(ErrorPolicy value) {
  return spelling(kErrorPolicies, value);
}
std::string_view to_string(SnapshotMode value) {
  return spelling(kSnapshotModes, value);
}
std::string_view to_string(NewTables value) {
  return spelling(kNewTables, value);
}
std::string_view to_string(ValueFormat value) {
  return spelling(kValueFormats, value);
}
std::string_view to_string(DecimalHandling value) {
  return spelling(kDecimalHandlings, value);
}
std::string_view to_string(Partitions value) {
  return spelling(kPartitions, value);
}

}  // namespace walrelay::config
