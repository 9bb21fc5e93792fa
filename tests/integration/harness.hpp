#pragma once

// Test harness for the integration tier: real PostgreSQL (wal2json) + real Kafka + the walrelay
// binary, driven the way a user drives them. Connection settings come from the environment written
// by tests/services/start.sh; every test makes its own names (slot, schema, topic prefix) so tests
// can run in parallel against the same services.

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace walrelay::itest {

using namespace std::chrono_literals;

/// Generous default for anything that waits on the services.
inline constexpr std::chrono::milliseconds kDefaultTimeout = 30s;

// ------------------------------------------------------------------------------- environment

/// Connection settings of the services (tests/services/start.sh writes them).
struct TestEnv {
  std::string pg_conninfo;        ///< WALRELAY_TEST_PG_CONNINFO: role walrelay, db walrelay_test
  std::string pg_admin_conninfo;  ///< WALRELAY_TEST_PG_ADMIN_CONNINFO
  std::string kafka_bootstrap;    ///< WALRELAY_TEST_KAFKA_BOOTSTRAP
};

/// Reads the environment. Error: a message naming every missing variable and how to set them.
/// Tests must fail (not skip) on an error: CI always sets them.
std::expected<TestEnv, std::string> load_test_env();

// ------------------------------------------------------------------------------------- names

/// A name unique to this process and call, valid as a slot, schema, table and topic name:
/// `it_<pid>_<counter>_<tag>` in lower case (characters other than [a-z0-9_] become `_`),
/// at most 50 characters so suffixes still fit PostgreSQL's 63-byte identifiers.
std::string unique_name(std::string_view tag);

// ---------------------------------------------------------------------------------- waiting

/// Polls `predicate` every `poll` until it returns true (returns true) or `timeout` passes
/// (returns false after one last evaluation).
bool wait_until(const std::function<bool()>& predicate,
                std::chrono::milliseconds timeout = kDefaultTimeout,
                std::chrono::milliseconds poll = 50ms);

/// How many times `what` occurs in `text` (e.g. a line in a log), overlapping ones included.
std::size_t count_occurrences(const std::string& text, const std::string& what);

// --------------------------------------------------------------------------------------- Pg

/// libpq error (connection or statement), with the SQL that failed.
class PgError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One blocking libpq connection. Every failure throws PgError with the server's message.
class Pg {
 public:
  using Row = std::vector<std::optional<std::string>>;  ///< nullopt = SQL NULL

  explicit Pg(const std::string& conninfo);
  ~Pg();
  Pg(const Pg&) = delete;
  Pg& operator=(const Pg&) = delete;

  /// Runs `sql` (several `;`-separated statements are allowed; the last one's rows are returned).
  std::vector<Row> query(const std::string& sql);
  /// Runs `sql`, ignoring any rows.
  void exec(const std::string& sql) { (void)query(sql); }
  /// Runs the statements in one transaction and commits it (or rolls it back).
  void commit(const std::vector<std::string>& statements);
  void rollback(const std::vector<std::string>& statements);
  /// First column of the first row; throws PgError when there is no row.
  std::optional<std::string> scalar(const std::string& sql);
  /// As scalar, but a NULL is an error too.
  std::string value(const std::string& sql);

 private:
  PGconn* conn_ = nullptr;
};

/// `'text'` with quotes doubled: a SQL string literal.
std::string sql_literal(std::string_view text);
/// `"text"` with quotes doubled: a SQL identifier.
std::string sql_ident(std::string_view text);

/// A login role with REPLICATION made for one test (CREATE ROLE now), dropped with everything it
/// owns when the scope ends (errors ignored there).
class ScopedRole {
 public:
  ScopedRole(Pg& pg, std::string name);
  ~ScopedRole();
  ScopedRole(const ScopedRole&) = delete;
  ScopedRole& operator=(const ScopedRole&) = delete;

 private:
  Pg& pg_;
  std::string name_;
};

/// The slot row of pg_replication_slots, nullopt when the slot does not exist.
struct SlotState {
  bool active = false;
  std::optional<std::string> confirmed_flush_lsn;  ///< `X/X`; NULL for a physical slot
};
std::optional<SlotState> slot_state(Pg& pg, const std::string& slot);

/// Waits until the slot exists and is in use by a walsender (walrelay is streaming from it).
bool wait_slot_active(Pg& pg, const std::string& slot,
                      std::chrono::milliseconds timeout = kDefaultTimeout);
/// Waits until the slot is no longer in use (the walsender of a stopped walrelay has exited).
bool wait_slot_inactive(Pg& pg, const std::string& slot,
                        std::chrono::milliseconds timeout = kDefaultTimeout);
/// Drops the slot if it exists, waiting for it to become inactive first. Never throws.
void drop_slot_quietly(Pg& pg, const std::string& slot);

/// `a` > `b` as LSNs (`X/Y` text), compared by the server.
bool lsn_after(Pg& pg, const std::string& a, const std::string& b);
/// Waits until the slot's confirmed_flush_lsn is past `lsn` (lsn_after); `confirmed` is left at
/// the last value read ("0/0" while the slot has none).
bool wait_confirmed_past(Pg& pg, const std::string& slot, const std::string& lsn,
                         std::string& confirmed,
                         std::chrono::milliseconds timeout = kDefaultTimeout);

// ------------------------------------------------------------------------------ lock waits
// A test that makes walrelay's session wait on the server (a lock another session holds) checks
// in pg_stat_activity that it waits before it asserts. While pg_catalog.pg_namespace is locked,
// every session the test uses must have resolved its names before (a name lookup that misses the
// session's cache reads pg_namespace and would wait too): hence warm_up_slot_queries.

/// SQL giving, as text, how many sessions named `application_name` (cut to 63 bytes, as the server
/// keeps it) wait as `wait_condition` says (a condition on pg_stat_activity, e.g.
/// "wait_event_type = 'Lock'" or "wait_event = 'SyncRep'").
std::string waiting_sessions_sql(const std::string& application_name,
                                 const std::string& wait_condition);
/// Waits until `observer` counts exactly one session with `waiting_sql` (waiting_sessions_sql).
bool wait_for_waiting_session(Pg& observer, const std::string& waiting_sql,
                              std::chrono::milliseconds timeout = kDefaultTimeout);
/// Runs on `pg` once each query lsn_after and slot_state send, so that it has resolved their names.
void warm_up_slot_queries(Pg& pg, const std::string& slot);
/// BEGIN and LOCK TABLE `table` IN ACCESS EXCLUSIVE MODE on `locker`: held until it commits.
void hold_exclusive_lock(Pg& locker, const std::string& table);

// ------------------------------------------------------------------------------------ Kafka

/// One consumed Kafka record.
struct KafkaRecord {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::optional<std::string> key;              ///< nullopt: null key
  std::optional<std::string> value;            ///< nullopt: null value (tombstone)
  std::map<std::string, std::string> headers;  ///< last value wins for a repeated name
  /// Every header in the record's order, repeated names too.
  std::vector<std::pair<std::string, std::string>> header_list;
  std::int64_t timestamp_ms = -1;  ///< the record's timestamp (rd_kafka_message_timestamp)

  /// The header's value, or "" when it is absent.
  [[nodiscard]] std::string header(const std::string& name) const;
  /// One line for failure messages: topic/partition@offset key=... id=... value=...
  [[nodiscard]] std::string describe() const;
};

/// Reads topics from the beginning with a fresh librdkafka consumer per call (assign, no group
/// membership, nothing committed), so calls are independent and repeatable.
class KafkaReader {
 public:
  /// `properties`: more librdkafka settings of its consumers (e.g. security.protocol, sasl.*,
  /// ssl.ca.location to read over a SASL_SSL listener), added after the reader's own.
  explicit KafkaReader(std::string bootstrap_servers,
                       std::vector<std::pair<std::string, std::string>> properties = {});

  /// Reads every partition of `topics` from the beginning until at least `count` records arrived
  /// or `timeout` passed; topics that do not exist yet are picked up when they appear.
  /// Returns what was read (check the size), ordered by arrival.
  std::vector<KafkaRecord> read_at_least(const std::vector<std::string>& topics, std::size_t count,
                                         std::chrono::milliseconds timeout = kDefaultTimeout);

  /// Reads everything in `topics` up to the high watermarks at the time of the call (use after
  /// the producer stopped). A topic that does not exist contributes nothing. Throws
  /// std::runtime_error if the records cannot be read within `timeout`.
  std::vector<KafkaRecord> read_all(const std::vector<std::string>& topics,
                                    std::chrono::milliseconds timeout = kDefaultTimeout);

  /// Names of the existing topics that start with `prefix`, sorted.
  std::vector<std::string> topics_with_prefix(const std::string& prefix);

 private:
  std::string bootstrap_;
  std::vector<std::pair<std::string, std::string>> properties_;
};

/// Sorts records by (topic, partition, offset): Kafka's order within a partition.
void sort_by_partition_order(std::vector<KafkaRecord>& records);
/// A librdkafka consumer handle for assign()-only reading (no subscription, no commits, never
/// auto-creates a topic), with `extra` settings added. Throws std::runtime_error naming a rejected
/// setting. The caller owns it (rd_kafka_consumer_close + rd_kafka_destroy).
rd_kafka_t* new_assign_consumer(const std::string& bootstrap,
                                const std::vector<std::pair<const char*, std::string>>& extra);

/// describe() of every record, one a line, for failure messages.
std::string describe(const std::vector<KafkaRecord>& records);

// ------------------------------------------------------------------------------------- JSON

/// The element at the JSON pointer (RFC 6901, e.g. "/after/id", "" for the root) of `document`,
/// re-serialised minified (strings keep their quotes, numbers go through double/int64 so use
/// this only for values that survive that). Throws std::runtime_error if the document does not
/// parse or the pointer does not exist.
std::string json_at(std::string_view document, std::string_view pointer);
/// The string at the pointer, unescaped; throws if it is missing or not a string.
std::string json_string_at(std::string_view document, std::string_view pointer);
/// True when both documents parse and are equal after minifying (key order matters).
bool json_equal(std::string_view a, std::string_view b);

// ------------------------------------------------------------------------------- http

/// An answer of walrelay's metrics endpoint: status (0 when none) and body.
struct HttpResult {
  int status = 0;
  std::string body;
};
/// A TCP connection to 127.0.0.1:`port`, or -1.
int connect_local(int port);
/// Sends `request` as is and reads the whole response until the server closes (10 s at most).
HttpResult http_raw(int port, const std::string& request);
/// GET `path` on 127.0.0.1:`port`.
HttpResult http_get(int port, const std::string& path);

class WalrelayProcess;
/// The port walrelay logged for its metrics endpoint (metrics.listen 127.0.0.1:0 picks a free one).
std::optional<int> metrics_port(WalrelayProcess& proc);

// ------------------------------------------------------------------------------- walrelay

/// One `tables:` entry of a generated configuration.
struct TableEntry {
  TableEntry(std::string table_name, std::vector<std::string> outbox = {})  // NOLINT: implicit
      : name(std::move(table_name)), outbox_lines(std::move(outbox)) {}

  std::string name;  ///< schema.table (pattern)
  /// Set for an outbox table: the YAML lines under `outbox:` without indentation, e.g.
  /// {"event_id: event_id", "topic: \"x.{aggregate_type}\""}.
  std::vector<std::string> outbox_lines;
};

/// Builds a walrelay YAML configuration for the test services.
struct WalrelayConfig {
  std::string name;                ///< connector name
  std::string slot;                ///< source.slot
  std::string prefix;              ///< topics.prefix
  std::string conninfo;            ///< source.conninfo
  std::string bootstrap;           ///< kafka.bootstrap_servers
  std::vector<TableEntry> tables;  ///< at least one
  std::string status_interval = "1s";
  /// source.state_dir (walrelay's slot record): a directory of this test's own, emptied by
  /// for_test, kept across restarts within the test.
  std::string state_dir;
  std::string log_level = "info";
  std::string progress_interval = "1s";
  /// snapshot.mode. The streaming tests were written for a slot without a snapshot: "never";
  /// the snapshot tests choose theirs.
  std::string snapshot_mode = "never";
  /// More lines under `snapshot:` (e.g. "  chunk_size: 100\n").
  std::string snapshot_lines;
  /// metrics.listen: a free port of its own by default (tests run in parallel); "" = off.
  std::string metrics_listen = "127.0.0.1:0";
  /// Extra lines appended to the document as they are (e.g. another top-level section).
  std::string extra_yaml;

  /// A configuration for these names using the services of `env`.
  static WalrelayConfig for_test(const TestEnv& env, const std::string& name);
  [[nodiscard]] std::string to_yaml() const;
};

/// The walrelay binary run as a child process: `walrelay run --config <dir>/walrelay.yaml` with
/// stdout and stderr appended to <dir>/stdout.log and <dir>/stderr.log (kept across restarts).
/// The directory is a fresh temp dir; it is deleted on destruction unless the current test failed,
/// in which case both logs are printed to stderr and the directory is kept.
class WalrelayProcess {
 public:
  /// Special exit codes (normal exits are 0..255).
  static constexpr int kTimedOut = -1;  ///< did not exit within the timeout (then SIGKILLed)
  static constexpr int kNotRunning = -2;

  /// Writes the config file; does not start the process.
  explicit WalrelayProcess(const std::string& config_yaml, std::string label = "walrelay");
  ~WalrelayProcess();
  WalrelayProcess(const WalrelayProcess&) = delete;
  WalrelayProcess& operator=(const WalrelayProcess&) = delete;

  /// Starts the binary with `args` (default: run --config <config file>). Throws if it is already
  /// running or cannot be spawned.
  void start(const std::vector<std::string>& args = {});
  /// Sends `sig` and waits for the exit: the exit code, 128+N when killed by signal N, kTimedOut
  /// when it had not exited after `timeout` (it is then SIGKILLed), kNotRunning if not started.
  int stop(int sig = SIGTERM, std::chrono::milliseconds timeout = kDefaultTimeout);
  /// SIGKILL and reap. No-op when not running.
  void kill();
  /// Waits for the process to exit on its own; same result convention as stop().
  int wait_exit(std::chrono::milliseconds timeout = kDefaultTimeout);
  /// True while the child has not exited (reaps it if it has).
  bool running();

  /// Waits until stderr contains `text` (returns false on timeout or if the process exited first
  /// without writing it).
  bool wait_for_log(const std::string& text, std::chrono::milliseconds timeout = kDefaultTimeout);

  [[nodiscard]] std::string stdout_text() const;
  [[nodiscard]] std::string stderr_text() const;
  /// Both logs with headings, for failure messages.
  [[nodiscard]] std::string logs() const;
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }
  [[nodiscard]] const std::filesystem::path& config_path() const { return config_path_; }
  [[nodiscard]] std::optional<int> last_exit_code() const { return last_exit_; }
  /// The child's process id while it runs; -1 before the first start.
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  int reap(bool block);  ///< exit convention result, or kNotRunning if still running (non-block)

  std::string label_;
  std::filesystem::path dir_;
  std::filesystem::path config_path_;
  pid_t pid_ = -1;
  std::optional<int> last_exit_;
};

// ------------------------------------------------------------------------------ services
// The shared services of tests/services/start.sh, restarted by the suites that run alone
// (RUN_SERIAL). The service scripts find the services through WALRELAY_TEST_STATE_DIR, which
// start.sh writes into its env file.

/// WALRELAY_TEST_STATE_DIR (start.sh's STATE_DIR), or "" when unset.
std::string services_state_dir();
/// Runs tests/services/<script> STATE_DIR [args] (e.g. pg-restart.sh; kafka-ctl.sh stop), echoing
/// the command line to stdout; returns the shell's exit status (128 when it did not exit).
int run_service_script(const std::string& script, const std::string& args = "");

/// A broker outage: stop() stops the shared Kafka (kafka-ctl.sh stop), start() starts it again.
/// Whatever happens in between (a failed assertion returns early), the broker runs again when the
/// object goes: the destructor starts it if it is still stopped.
class KafkaOutage {
 public:
  KafkaOutage() = default;
  ~KafkaOutage();
  KafkaOutage(const KafkaOutage&) = delete;
  KafkaOutage& operator=(const KafkaOutage&) = delete;

  /// kafka-ctl.sh stop; its exit status. From the call on, the broker counts as stopped.
  int stop();
  /// kafka-ctl.sh start; its exit status. The broker counts as stopped until this succeeds.
  int start();

 private:
  bool stopped_ = false;
};

/// A `VmXxx:` figure of /proc/<pid>/status in kB (e.g. VmRSS, VmHWM), nullopt if it cannot be read.
std::optional<long> proc_status_kb(pid_t pid, const std::string& field);

// ------------------------------------------------------------------------------- fixture

/// Base fixture: checks the environment (a missing variable FAILS the test), connects to
/// PostgreSQL, makes a unique name used as schema, slot, connector name and topic prefix, and
/// creates that schema. TearDown drops the slot and the schema (topics are left in Kafka).
class IntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  /// A configuration with this test's names and the given tables.
  [[nodiscard]] WalrelayConfig make_config(std::vector<TableEntry> tables) const;
  /// `<schema>.<table>` of this test's schema.
  [[nodiscard]] std::string table(const std::string& name) const { return schema_ + "." + name; }
  /// Row-change topic of a table of this test's schema: `<prefix>.<schema>.<table>`.
  [[nodiscard]] std::string topic(const std::string& table_name) const {
    return name_ + "." + schema_ + "." + table_name;
  }
  /// Starts `proc` and waits until walrelay streams from `slot` (slot active). Throws
  /// std::runtime_error with the logs if it exits or does not get there within the timeout.
  void start_streaming(WalrelayProcess& proc, const std::string& slot);
  /// Stops `proc` with SIGTERM, expects exit code 0, then waits for the slot to be released.
  /// Returns false (after recording a failure) if either does not happen.
  bool stop_gracefully(WalrelayProcess& proc, const std::string& slot);

  TestEnv env_;
  std::string name_;    ///< unique: connector name, slot, topic prefix and schema
  std::string schema_;  ///< == name_
  std::unique_ptr<Pg> pg_;
  std::unique_ptr<KafkaReader> kafka_;
};

}  // namespace walrelay::itest
