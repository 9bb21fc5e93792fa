#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walrelay::config {

/// Column names of an outbox table (Debezium outbox event router's `table.field.*` settings).
/// Each INSERT into the table becomes one domain event.
struct OutboxConfig {
  std::string event_id = "id";                   ///< column → header `id` (table.field.event.id)
  std::string aggregate_id = "aggregateid";      ///< column → record key (table.field.event.key)
  std::string aggregate_type = "aggregatetype";  ///< route-by column (route.by.field)
  std::string payload = "payload";  ///< column → record value (table.field.event.payload)
  /// Topic template; `{aggregate_type}` is replaced by the route-by value verbatim
  /// (Debezium's default `outbox.event.${routedByValue}`).
  std::string topic = "outbox.event.{aggregate_type}";
};

/// One `tables:` entry. `name` is `schema.table`, where either part may be `*` or contain `*`
/// globs; a part that itself contains a dot is written quoted: `"my.schema"."t"`.
/// The first entry that matches a table wins.
struct TableConfig {
  std::string name;                    ///< pattern as written in the file
  std::string schema_pattern;          ///< unquoted schema part (may contain `*`)
  std::string table_pattern;           ///< unquoted table part (may contain `*`)
  std::optional<OutboxConfig> outbox;  ///< set: this table is an outbox, not a row-change table
};

struct SourceConfig {
  std::string conninfo;  ///< libpq conninfo string or URI (may hold a password: never log it raw)
  std::string slot;      ///< replication slot name; default `walrelay_<name>`
  bool create_slot = true;  ///< create the slot (plugin wal2json) when missing
  /// Interval between standby status updates (PostgreSQL docs §55.4 "Standby status update");
  /// must stay below the server's wal_sender_timeout (default 60 s).
  std::chrono::milliseconds status_interval{10'000};
};

struct KafkaConfig {
  std::string bootstrap_servers = "127.0.0.1:9092";
  /// Passed to librdkafka as is (after walrelay's own defaults, so these win).
  std::map<std::string, std::string> properties;
  /// Backpressure bounds: when either is reached the replication socket is not read until
  /// delivery reports drain below it. Memory is bounded by these, never by transaction size.
  std::size_t max_in_flight_events = 100'000;
  std::size_t max_in_flight_bytes = 64ull * 1024 * 1024;  ///< bytes of key + value in flight
  /// Longest wait for outstanding deliveries on a graceful stop (SIGINT/SIGTERM).
  std::chrono::milliseconds flush_timeout{30'000};
};

struct TopicsConfig {
  std::string prefix;  ///< topic prefix for row-change events; default = `name`
};

struct LogConfig {
  std::string level = "info";  ///< spdlog level: trace, debug, info, warn, error, critical, off
  std::chrono::milliseconds progress_interval{5'000};  ///< period of the progress log line
};

/// The whole configuration file. Plain data with defaults; produced by `load_config`.
struct Config {
  std::string name;  ///< connector name (required): default slot name, topic prefix, logs
  SourceConfig source;
  KafkaConfig kafka;
  TopicsConfig topics;
  std::vector<TableConfig> tables;  ///< at least one
  LogConfig log;
};

/// One problem in a configuration file: the dotted key path (`tables[1].outbox.payload`) and
/// why it is wrong. Key "" is the whole document (unreadable file, YAML syntax error, several
/// documents); only those reasons name the file, so print them as they are and other errors as
/// `key: reason` after the file name.
struct ConfigError {
  std::string key;
  std::string reason;
};

/// Result of loading: either a Config or every error found (never just the first).
struct LoadResult {
  std::optional<Config> config;
  std::vector<ConfigError> errors;
};

/// Looks up one environment variable: its value, or nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

/// Loads YAML text. `${VAR}` is replaced by the environment variable VAR (an unset variable is an
/// error naming it; `${VAR:-default}` gives a default). Unknown keys are errors (a typo must not be
/// silently ignored). `source_name` is used in messages only.
///
/// Substitution (see `substitute_env`) applies to every scalar value, before it is interpreted
/// (so `max_in_flight_events: ${N}` is checked as an integer), never to keys.
/// Output: `config` set and `errors` empty, or `config` empty and every error found, each with the
/// key path (`source.slot`, `tables[1].outbox.topic`, `""` for the whole document) and the reason.
/// A YAML syntax error is one error with key "" (further checks need a parsed document).
/// Does not throw for any input.
LoadResult load_config_text(const std::string& yaml_text, const std::string& source_name);

/// As above, with variables looked up through `env` instead of the process environment (tests).
LoadResult load_config_text(const std::string& yaml_text, const std::string& source_name,
                            const EnvLookup& env);

/// Reads and loads a file (`path` is also the source name in messages); an unreadable file is one
/// error with key "" and the OS reason (`cannot read /x.yaml: No such file or directory`).
LoadResult load_config_file(const std::string& path);

/// Reads the process environment (`getenv`): the value of `name`, or nullopt when unset.
std::optional<std::string> process_env(const std::string& name);

/// Expands environment references in one scalar value:
///   `${VAR}`            the value of VAR (set but empty gives ""); unset is an error
///   `${VAR:-default}`   VAR when set and non-empty, else `default` (taken literally, up to `}`)
///   `$$`                a literal `$` (to write `${` literally: `$${`)
///   `$` before anything else stays a literal `$` (so a password like `pa$word` needs no escape)
/// VAR is `[A-Za-z_][A-Za-z0-9_]*`. Output: the expanded text, or the reason it cannot be expanded
/// (every unset variable is named; `${` without `}` and a bad name are errors too).
std::expected<std::string, std::string> substitute_env(std::string_view text, const EnvLookup& env);

/// Parses a positive duration: a bare integer is milliseconds, otherwise an integer followed by
/// `ms`, `s`, `m` or `h` (`500ms`, `10s`, `1m`; a space before the unit is allowed).
/// Output: the duration, or the reason (`expected a positive duration ... got "abc"`, overflow).
std::expected<std::chrono::milliseconds, std::string> parse_duration(std::string_view text);

/// Parses a positive byte size: a bare integer is bytes, otherwise an integer followed by a unit,
/// case-insensitive: `B`, decimal `KB` `MB` `GB` `TB` (powers of 1000) or binary `KiB` `MiB` `GiB`
/// `TiB` (powers of 1024). Output: the size, or the reason it is invalid (including overflow).
std::expected<std::size_t, std::string> parse_size(std::string_view text);

/// Schema and table parts of a `tables:` name, quotes removed.
struct TableName {
  std::string schema;
  std::string table;
};

/// Splits `schema.table` on the first dot outside double quotes. A part may be double-quoted (`""`
/// inside stands for one `"`), so `"my.schema"."Weird ""T"""` gives `my.schema` / `Weird "T"`;
/// an unquoted part is taken verbatim (case kept; the table part may then contain dots). `*` is
/// left in place for `glob_match`, quoted or not. Output: the parts, or why the name is invalid
/// (no dot, an empty part, an unterminated quote, text after a closing quote).
std::expected<TableName, std::string> parse_table_name(std::string_view text);

/// The slot name used when `source.slot` is absent: `walrelay_<name>`, lower-cased, with every
/// character outside `[a-z0-9_]` replaced by `_` (PostgreSQL slot names allow only those). The
/// result may exceed the 63-character limit; the loader reports that.
std::string default_slot_name(std::string_view connector_name);

/// Returns `conninfo` with any password (keyword `password=...` or the password part of a
/// `postgresql://user:pass@host` URI) replaced by `****`, for logs and `check` output.
/// Covers: keyword/value form (`password=x`, `password = 'a b'`, `sslpassword=`), URIs
/// (`postgres[ql]://user:pw@host`, `?password=x&...`), and a `dbname` value that is itself a
/// conninfo string or URI (libpq expands those). Everything else is returned unchanged; malformed
/// input is masked from a `password` keyword to the end rather than risk printing it.
std::string mask_conninfo(const std::string& conninfo);

/// True for librdkafka property names whose values are secrets (`*password*`, `*secret*`,
/// `sasl.*`, and `ssl.key.pem`, a private key); case-insensitive. Their values are printed as
/// `****`.
bool is_secret_property(const std::string& name);

/// Matches `name` against a glob with `*` (any run of characters, including none). Case-sensitive,
/// as PostgreSQL identifiers are once quoted.
bool glob_match(const std::string& pattern, const std::string& name);

}  // namespace walrelay::config
