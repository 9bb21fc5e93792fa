// The configuration loader's internals, shared by its files (config.cpp: the entry points;
// loader.cpp: the top level, name, metrics, log; loader_source.cpp: source, errors,
// exactly_once, heartbeat, snapshot; loader_kafka.cpp: kafka, topics, events;
// loader_tables.cpp: tables, exclude, messages, outboxes; relay_section.cpp: relay, outbox.poll,
// poll mode's rules). Not a public header.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "text.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/core/headers.hpp"

namespace walrelay::config::loading {

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
constexpr Spelling<SourceMode> kSourceModes[] = {{"logical", SourceMode::kLogical},
                                                 {"poll", SourceMode::kPoll}};
constexpr Spelling<RelayClaim> kRelayClaims[] = {{"transaction", RelayClaim::kTransaction},
                                                 {"lease", RelayClaim::kLease}};

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

/// Placeholders of an outbox topic template.
constexpr std::array<std::string_view, 1> kOutboxPlaceholders{"aggregate_type"};

/// Placeholders of a row-change topic template (`tables[].topic`).
constexpr std::array<std::string_view, 3> kTablePlaceholders{"prefix", "schema", "table"};

/// One known key of a map and how to read its value (value node, key path).
struct Field {
  std::string_view key;
  std::function<void(const YAML::Node&, const std::string&)> read;
};

std::string join(const std::string& path, std::string_view key);
/// A schema name walrelay writes unquoted (`inbox.schema`, `relay.schema`): [a-z_][a-z0-9_]*, at
/// most 63 bytes (NAMEDATALEN - 1).
bool is_plain_identifier(std::string_view name);

/// How a node looks, for "expected X, got Y" messages.
std::string describe(const YAML::Node& node);

/// Optimal string alignment distance (Levenshtein plus adjacent transposition), so `slto` is one
/// edit from `slot`.
std::size_t edit_distance(std::string_view a, std::string_view b);

bool is_topic_char(char c);

std::optional<std::string> name_problem(std::string_view name);

std::optional<std::string> slot_problem(std::string_view slot);

std::optional<std::string> prefix_problem(std::string_view prefix);

/// `{a}`, `{a} and {b}`, `{a}, {b} and {c}`.
std::string placeholder_list(std::span<const std::string_view> placeholders);

/// Checks a topic template: `{name}` must be one of `placeholders`; every other character must be
/// a Kafka topic character (the substituted values are mapped at run time, the literal text is
/// not).
std::optional<std::string> topic_template_problem(std::string_view topic,
                                                  std::span<const std::string_view> placeholders);

std::string suggestion(std::string_view key, std::span<const Field> fields);

/// What a file is loaded for: `run` and the commands of the connector need `name`, `source` and
/// `tables`; `walrelay inbox` needs `inbox` instead (config/inbox_load.hpp).
enum class Purpose { kConnector, kInbox };

/// Reads one YAML text (one document) for `purpose`; load_config_text's contract.
LoadResult load_text(const std::string& yaml_text, const std::string& source_name,
                     const EnvLookup& env, Purpose purpose);

/// Reads a whole file for `purpose`; load_config_file's contract.
LoadResult load_file(const std::string& path, Purpose purpose);

/// Walks one parsed document into a Config, recording every error instead of stopping.
/// Single use; not thread-safe.
class Loader {
 public:
  explicit Loader(const EnvLookup& env, Purpose purpose = Purpose::kConnector)
      : env_(env), purpose_(purpose) {}

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

  // The sections (read_*) and the readers of one value they share. A new section is a member
  // function in its own file (loader_<section>.cpp), listed in read_root's fields.
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

  void read_root(const YAML::Node& root);
  void read_name(const YAML::Node& node, const std::string& path);
  void read_source(const YAML::Node& node, const std::string& path);
  void read_errors(const YAML::Node& node, const std::string& path);
  void read_exactly_once(const YAML::Node& node, const std::string& path);
  void read_heartbeat(const YAML::Node& node, const std::string& path);
  void read_snapshot(const YAML::Node& node, const std::string& path);
  void read_kafka(const YAML::Node& node, const std::string& path);
  /// librdkafka properties are free-form (librdkafka itself rejects unknown names when the
  /// producer is created), so only their shape is checked here.
  void read_properties(const YAML::Node& node, const std::string& path);
  /// A plain (unquoted) YAML boolean is given to librdkafka as `true`/`false`: it parses only those
  /// spellings (rd_kafka_anyconf_set_prop0), not YAML 1.1's `yes`/`on`. Quoted text is kept.
  static std::string normalize_bool(const YAML::Node& node, std::string value);
  void read_topics(const YAML::Node& node, const std::string& path);
  void read_events(const YAML::Node& node, const std::string& path);
  /// Operation letters, as a YAML list (`[c, u, d]`) or one string (`"c,u,d"`); only the letters
  /// given are enabled. Unknown, duplicate and missing letters are errors (list items are
  /// reported at `path[i]`, letters in a string at `path`).
  std::optional<Operations> operations(const YAML::Node& node, const std::string& path);
  void read_tables(const YAML::Node& node, const std::string& path);
  /// `schema.table` pattern into `table.name`, `schema_pattern`, `table_pattern`.
  void read_table_name(const YAML::Node& node, const std::string& path, TableConfig& table);
  void read_table(const YAML::Node& node, const std::string& path);
  /// `exclude:` items: `schema.table` or `{name: schema.table}`, read like `tables[].name`.
  void read_exclude(const YAML::Node& node, const std::string& path);
  void read_messages(const YAML::Node& node, const std::string& path);
  void read_outbox(const YAML::Node& node, const std::string& path, OutboxConfig& outbox);
  /// `additional: {column: header, column: "header:alias"}` in file order. Debezium also has
  /// `envelope` and `partition` placements; only headers are supported.
  void read_additional(const YAML::Node& node, const std::string& path, OutboxConfig& outbox);
  void read_metrics(const YAML::Node& node, const std::string& path);
  void read_log(const YAML::Node& node, const std::string& path);
  // relay_section.cpp: `relay:`, `tables[].outbox.poll` and the rules of `source.mode: poll`.
  void read_relay(const YAML::Node& node, const std::string& path);
  void read_outbox_poll(const YAML::Node& node, const std::string& path, OutboxPollConfig& poll);
  /// The rules of one poll-mode table's `poll:` once `relay:` is read (its claim decides which
  /// keys apply): the lease keys' defaults or refusal, distinct statuses and columns.
  void check_outbox_poll(const std::string& path, OutboxPollConfig& poll);
  /// After every section: what poll mode refuses (row-change tables, message outboxes, globs,
  /// delivery exactly_once) and the poll columns every outbox table gets.
  void check_poll_mode();
  /// `inbox:` (config/inbox.cpp).
  void read_inbox(const YAML::Node& node, const std::string& path);
  void read_inbox_handlers(const YAML::Node& node, const std::string& path);
  void read_inbox_batch(const YAML::Node& node, const std::string& path);
  /// One field's source, among `allowed` (errors list the allowed spellings).
  std::optional<InboxField> inbox_field(const YAML::Node& node, const std::string& path,
                                        std::initializer_list<InboxFieldSource> allowed);
  /// A duration that may also be whole days (`30d`).
  std::optional<std::chrono::milliseconds> long_duration(const YAML::Node& node,
                                                         const std::string& path);

  const EnvLookup& env_;
  Purpose purpose_;
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

}  // namespace walrelay::config::loading
