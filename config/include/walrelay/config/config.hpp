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

#include "walrelay/config/inbox.hpp"
#include "walrelay/config/reconcile.hpp"
#include "walrelay/config/relay.hpp"

namespace walrelay::config {

/// How an extra outbox column is placed (Debezium `table.fields.additional.placement`
/// `column:header[:alias]`); only headers are supported.
struct AdditionalField {
  std::string column;  ///< outbox column
  std::string header;  ///< header name (the alias, or the column name when none is given)
};

/// Column names and options of an outbox (Debezium outbox event router, `table.field.*`,
/// `route.*`, `table.fields.additional.placement`, `route.tombstone.on.empty.payload`).
/// Each INSERT into an outbox table, or each logical message with a configured prefix, becomes
/// one domain event.
struct OutboxConfig {
  std::string event_id = "id";                   ///< column → header `id` (table.field.event.id)
  std::string aggregate_id = "aggregateid";      ///< column → record key (table.field.event.key)
  std::string aggregate_type = "aggregatetype";  ///< route-by column (route.by.field)
  std::string payload = "payload";  ///< column → record value (table.field.event.payload)
  /// Optional column → header `eventType` (Debezium's `type` column, placed as a header).
  std::optional<std::string> event_type;
  /// Optional timestamptz/timestamp column → Kafka record timestamp
  /// (table.field.event.timestamp). Absent: the commit time.
  std::optional<std::string> timestamp;
  /// Further columns placed as headers, in file order (`additional: {col: "header[:alias]"}`).
  std::vector<AdditionalField> additional;
  /// Topic template; `{aggregate_type}` is replaced by the route-by value verbatim
  /// (Debezium's default `outbox.event.${routedByValue}`).
  std::string topic = "outbox.event.{aggregate_type}";
  /// Add header `payload_digest` = lower-case hex SHA-256 of the value bytes, so an inbox can
  /// tell a replay (same id, same digest) from a conflict (same id, different digest).
  bool payload_digest = false;
  /// A NULL payload publishes a tombstone (null value) when true; otherwise the row is an error
  /// handled by the error policy (route.tombstone.on.empty.payload, default false).
  bool tombstone_on_empty_payload = false;
  /// Publish an event whose aggregate id is the empty string (key ''). Off: such a row is a
  /// mapping error (errors.policy), like a NULL id: unrelated aggregates would share one key.
  bool allow_empty_aggregate_id = false;
  /// `tables[].outbox.poll`: the columns `source.mode: poll` reads and writes (config/relay.hpp);
  /// set (defaults) for every outbox table in poll mode, absent otherwise.
  std::optional<OutboxPollConfig> poll;
};

/// Row-change operations (Debezium `op` letters): c insert, u update, d delete, t truncate.
struct Operations {
  bool create = true;
  bool update = true;
  bool del = true;
  bool truncate = false;  ///< off by default, like Debezium's skipped.operations=t
};

/// One `tables:` entry. `name` is `schema.table`, where either part may be `*` or contain `*`
/// globs; a part that itself contains a dot is written quoted: `"my.schema"."t"`.
/// The first entry that matches a table wins; an entry an earlier one covers for every name it
/// can match is a configuration error (glob_covers).
struct TableConfig {
  std::string name;                    ///< pattern as written in the file
  std::string schema_pattern;          ///< unquoted schema part (may contain `*`)
  std::string table_pattern;           ///< unquoted table part (may contain `*`)
  std::optional<OutboxConfig> outbox;  ///< set: this table is an outbox, not a row-change table
  /// Topic template for row changes: `{prefix}`, `{schema}`, `{table}` (default
  /// `{prefix}.{schema}.{table}`). Characters Kafka does not allow are mapped (docs/events.md).
  std::optional<std::string> topic;
  /// Key columns for tables without a primary key, or to override it
  /// (Debezium message.key.columns). Empty: the primary key.
  std::vector<std::string> key_columns;
  std::vector<std::string> exclude_columns;  ///< left out of before/after (column.exclude.list)
  /// Replaced by hex SHA-256(salt || value text) (column.mask.hash.SHA-256.with.salt).
  std::vector<std::string> mask_columns;
  std::optional<Operations> operations;      ///< absent: the global `operations`
  std::optional<bool> tombstones_on_delete;  ///< absent: the global tombstones_on_delete
};

/// Logical-message outbox (`pg_logical_emit_message(transactional, prefix, content)`): messages
/// with `prefix` are routed exactly like rows of an outbox table whose columns are the JSON
/// content's top-level fields (named as in `outbox`).
struct MessageOutboxConfig {
  std::string prefix;
  OutboxConfig outbox;
};

struct SourceConfig {
  /// logical (the slot, default) or poll (outbox tables only, the relay; docs/relay.md).
  SourceMode mode = SourceMode::kLogical;
  std::string conninfo;  ///< libpq conninfo string or URI (may hold a password: never log it raw)
  std::string slot;      ///< replication slot name; default `walrelay_<name>`
  bool create_slot = true;  ///< create the slot (plugin wal2json) when missing
  /// Interval between standby status updates (PostgreSQL docs §55.4 "Standby status update");
  /// must stay below the server's wal_sender_timeout (default 60 s).
  std::chrono::milliseconds status_interval{10'000};
  /// How soon a moved acknowledged position is confirmed to the server (a standby status update
  /// besides the status_interval cadence): bounds what a crash replays. 0 = only on
  /// status_interval.
  std::chrono::milliseconds confirm_interval{200};
  /// Where walrelay keeps its durable record of each slot it streamed (server system identifier,
  /// timeline, last confirmed LSN): `<state_dir>/<slot>.state`. Default: $WALRELAY_STATE_DIR, or
  /// $XDG_STATE_HOME/walrelay, or ~/.local/state/walrelay.
  std::string state_dir;
  /// The operator accepts that changes may be missing from the stream: lets walrelay create a
  /// fresh slot although its record says it streamed one before (dropped, invalidated or lost in
  /// a failover), or resume across a timeline change past the fork point. Use once, then remove.
  bool allow_slot_reset = false;
  /// Stream a database whose server_encoding is SQL_ASCII (no defined encoding: any bytes). Off:
  /// walrelay refuses it at start-up (exit 2). On: every wal2json line is checked to be UTF-8
  /// and one that is not is a mapping error (errors.policy); snapshot rows likewise.
  bool allow_sql_ascii = false;
  /// Reconnect backoff (PostgreSQL connection lost, slot held by another instance): starts at
  /// `reconnect_min`, doubles with jitter up to `reconnect_max`.
  std::chrono::milliseconds reconnect_min{500};
  std::chrono::milliseconds reconnect_max{30'000};
  /// How often the captured tables are looked up again while streaming (shared/cases/CASE-05,
  /// CASE-06): a table that became UNLOGGED or another kind, lost its replica identity, or a
  /// `tables` entry that matches nothing any more is reported. 0 = only at start-up.
  std::chrono::milliseconds catalog_check_interval{30'000};
  /// Consecutive sessions failing with the same server error at the same LSN, without delivering
  /// anything, before walrelay stops with exit 6 (shared/cases/CASE-02). 1..1000.
  std::size_t max_repeated_errors = 5;
};

struct KafkaConfig {
  std::string bootstrap_servers = "127.0.0.1:9092";
  /// Passed to librdkafka as is (after walrelay's own defaults, so these win).
  std::map<std::string, std::string> properties;
  /// Backpressure bounds: when either is reached the replication socket is not read until
  /// delivery reports drain below it. Memory is bounded by these, never by transaction size:
  /// librdkafka holds about 1 KB per small in-flight event besides its key and value, so the
  /// defaults keep the peak RSS near 60 MB (benchmarks/RESULTS.md, `run.sh memory`).
  std::size_t max_in_flight_events = 40'000;
  std::size_t max_in_flight_bytes = 32ull * 1024 * 1024;  ///< bytes of key + value in flight
  /// Longest wait for outstanding deliveries on a graceful stop (SIGINT/SIGTERM).
  std::chrono::milliseconds flush_timeout{30'000};
};

struct TopicsConfig {
  std::string prefix;  ///< topic prefix for row-change events; default = `name`
};

// The configuration's choices, as enums (docs/configuration.md names each value). Each has a
// `to_string` giving its spelling in the file ("at_least_once", "dead_letter", ...), for logs.

/// `delivery` (docs/delivery.md).
enum class Delivery : std::uint8_t {
  kAtLeastOnce,  ///< at_least_once: idempotent producer, duplicates after a crash (default)
  kExactlyOnce,  ///< exactly_once: Kafka transactions (KIP-98), positions stored in Kafka
};
/// `errors.policy` (docs/operations.md "Error policy").
enum class ErrorPolicy : std::uint8_t {
  kFail,        ///< fail: stop without confirming past it, exit non-zero (default)
  kDeadLetter,  ///< dead_letter: publish it to errors.dead_letter_topic, then go on
};
/// `snapshot.mode` (Debezium's snapshot.mode; docs/snapshots.md).
enum class SnapshotMode : std::uint8_t {
  kInitial,      ///< initial: read every captured table when walrelay creates the slot (default)
  kNever,        ///< never: stream only
  kInitialOnly,  ///< initial_only: read the rows, then stop (no slot is kept)
};
/// `snapshot.new_tables`.
enum class NewTables : std::uint8_t {
  kIncremental,  ///< incremental: read tables added later while streaming (default)
  kNever,        ///< never: leave them
};
/// `events.value_format` (docs/events.md).
enum class ValueFormat : std::uint8_t {
  kNative,    ///< native: walrelay's envelope (default)
  kDebezium,  ///< debezium: Debezium's envelope, with Debezium's value types
};
/// `events.decimal_handling`: Debezium's decimal.handling.mode (debezium format only).
enum class DecimalHandling : std::uint8_t {
  kPrecise,  ///< precise (default)
  kString,   ///< string
  kDouble,   ///< double
};
/// `events.partitions`: where a leaf partition's changes go.
enum class Partitions : std::uint8_t {
  kRoot,  ///< root: the root table's topic, source.table the root (default)
  kLeaf,  ///< leaf: per leaf
};

std::string_view to_string(Delivery value);
std::string_view to_string(ErrorPolicy value);
std::string_view to_string(SnapshotMode value);
std::string_view to_string(NewTables value);
std::string_view to_string(ValueFormat value);
std::string_view to_string(DecimalHandling value);
std::string_view to_string(Partitions value);

/// Value mapping of row-change events (docs/events.md "Value mapping").
struct EventsConfig {
  ValueFormat value_format = ValueFormat::kNative;
  bool json_as_document = false;  ///< json/jsonb columns embedded as JSON (native only)
  /// Debezium's decimal.handling.mode (debezium format only).
  DecimalHandling decimal_handling = DecimalHandling::kPrecise;
  bool tombstones_on_delete = true;  ///< Debezium tombstones.on.delete
  Operations operations;             ///< default for tables that do not set `operations`
  /// Stands in for an unchanged TOASTed column wal2json left out of an UPDATE
  /// (Debezium unavailable.value.placeholder).
  std::string toast_placeholder = "__debezium_unavailable_value";
  /// Salt for mask_columns (required when any table masks a column).
  std::string mask_salt;
  /// Partitioned tables: changes of a leaf partition go to the root's topic with
  /// source.table = the root (kRoot, default) or stay per leaf (kLeaf).
  Partitions partitions = Partitions::kRoot;
  /// BEGIN/END records on `<prefix>.transaction` and a `transaction` block in every envelope
  /// (Debezium provide.transaction.metadata).
  bool transaction_metadata = false;
};

/// What happens to a change that cannot be published (`errors:`).
struct ErrorsConfig {
  /// kFail: stop without confirming past it, exit non-zero (default). kDeadLetter: publish the
  /// original bytes with the reason in headers to `dead_letter_topic`, then go on.
  ErrorPolicy policy = ErrorPolicy::kFail;
  std::string dead_letter_topic;  ///< required with policy dead_letter
};

/// Keeps the slot's confirmed position moving on idle databases (`heartbeat:`): a transactional
/// `pg_logical_emit_message(true, 'walrelay', ...)` every `interval` (or `query` instead, for
/// managed services that forbid it), never published as a user event.
struct HeartbeatConfig {
  bool enabled = true;
  std::chrono::milliseconds interval{10'000};
  std::string query;  ///< empty: the logical message
};

/// Initial snapshot of the row-change tables (`snapshot:`), read from the slot's exported
/// snapshot before streaming starts (Debezium's `snapshot.mode`, `snapshot.fetch.size`,
/// `snapshot.max.threads`).
struct SnapshotConfig {
  /// kInitial: when walrelay creates the slot, read every captured table's rows first (default);
  /// kNever: stream only; kInitialOnly: read the rows, then stop (no slot is kept).
  SnapshotMode mode = SnapshotMode::kInitial;
  std::size_t chunk_size = 8192;  ///< rows per chunk (keyset pagination on the table's key)
  std::size_t parallelism = 1;    ///< tables read at once, one connection each
  /// Streamed keys an incremental snapshot's chunk may keep to drop rows the stream superseded
  /// (docs/snapshots.md "Incremental snapshots"); a chunk that would keep more is read again.
  /// Bounds its memory whatever the backlog.
  std::size_t max_window_keys = 65536;
  /// Tables captured by `tables` that the slot's snapshots never read (added to the configuration
  /// later): kIncremental reads them while streaming (default), kNever leaves them.
  NewTables new_tables = NewTables::kIncremental;
  /// Prefix of the logical messages carrying snapshot signals (Debezium's signal JSON), e.g.
  /// `pg_logical_emit_message(true, 'walrelay-signal', '{"type":"execute-snapshot",...}')`.
  std::string signal_prefix = "walrelay-signal";
  /// Optional signal table with Debezium's columns (id, type, data): an INSERT into it is a
  /// signal (Debezium's `signal.data.collection`). Empty: none.
  std::string signal_table;
  std::string signal_table_schema;  ///< its parts, parsed by the loader
  std::string signal_table_name;
  /// false (default): snapshots read with row_security off, so a row-level security policy that
  /// would hide rows from walrelay's role is an error, as in pg_dump. true: policies apply (the
  /// operator vouches that they show the role every row; pg_dump --enable-row-security).
  bool row_security = false;
};

/// The metrics and health endpoint (docs/operations.md "Metrics and health").
struct MetricsConfig {
  /// host:port to serve /metrics, /live and /ready on; empty = off. Port 0 = any free port.
  std::string listen = "127.0.0.1:9187";
  /// /ready turns false when the oldest unacknowledged change is older than this, or no
  /// acknowledgement came for this long while events are in flight.
  std::chrono::milliseconds max_lag{60'000};
};

struct LogConfig {
  std::string level = "info";  ///< spdlog level: trace, debug, info, warn, error, critical, off
  std::chrono::milliseconds progress_interval{5'000};  ///< period of the progress log line
};

/// `exactly_once:` (used when `delivery` is `exactly_once`; docs/delivery.md "Exactly-once
/// delivery"). Kafka transactions (KIP-98) aligned with PostgreSQL transactions: each PostgreSQL
/// transaction's records go into one Kafka transaction, several small ones share one.
struct ExactlyOnceConfig {
  /// Longest time a Kafka transaction stays open collecting PostgreSQL transactions before it is
  /// committed (what a read_committed consumer waits at most beyond delivery). Default 100 ms.
  std::chrono::milliseconds commit_interval{100};
  /// Records per Kafka transaction before it is committed at the next PostgreSQL commit; a
  /// single PostgreSQL transaction larger than this is split into several Kafka transactions
  /// (with a position inside it, so a resume skips exactly the published part). Default 10000.
  std::size_t max_transaction_events = 10'000;
};

/// The whole configuration file. Plain data with defaults; produced by `load_config`.
struct Config {
  std::string name;  ///< connector name (required): default slot name, topic prefix, logs
  SourceConfig source;
  KafkaConfig kafka;
  TopicsConfig topics;
  EventsConfig events;
  std::vector<TableConfig> tables;  ///< at least one (or a message outbox)
  /// Tables never captured even when a `tables` pattern matches them (checked first).
  std::vector<TableConfig> exclude;
  std::vector<MessageOutboxConfig> messages;  ///< logical-message outboxes, by prefix
  ErrorsConfig errors;
  HeartbeatConfig heartbeat;
  SnapshotConfig snapshot;
  LogConfig log;
  MetricsConfig metrics;
  /// `delivery`: at_least_once (default: idempotent producer, duplicates after a crash) or
  /// exactly_once (transactional producer, positions stored in Kafka; docs/delivery.md).
  Delivery delivery = Delivery::kAtLeastOnce;
  ExactlyOnceConfig exactly_once;
  ReconcileConfig reconcile;  ///< `reconcile:` (walrelay reconcile; config/reconcile.hpp)
  RelayConfig relay;          ///< `relay:` (source.mode poll; config/relay.hpp)
  InboxConfig inbox;          ///< `inbox:` (walrelay inbox; config/inbox.hpp)
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

/// Whether every name `other` (a glob as for glob_match) can match is matched by `pattern`: true
/// when `pattern` matches `other` with each of its `*` taken as a character only a `*` matches.
/// A sufficient test (it may answer false for some containments of several `*`), never a wrong
/// true: the `tables` check refuses an entry only when it is certainly dead.
bool glob_covers(const std::string& pattern, const std::string& other);

}  // namespace walrelay::config
