#pragma once

#include <libpq-fe.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "walrelay/core/lsn.hpp"
#include "walrelay/pg/cancel.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/wire.hpp"

namespace walrelay::pg {

/// Result of IDENTIFY_SYSTEM (PostgreSQL docs §55.4, "IDENTIFY_SYSTEM").
struct SystemInfo {
  std::string system_id;  ///< the cluster's unique system identifier (decimal text)
  std::uint32_t timeline = 0;
  Lsn xlogpos;             ///< current WAL flush location
  std::string dbname;      ///< database of this replication connection
  int server_version = 0;  ///< PQserverVersion, e.g. 150018
};

/// A row of pg_replication_slots for one slot.
struct SlotInfo {
  std::string plugin;
  std::string slot_type;  ///< "logical" or "physical"
  std::string database;
  bool active = false;
  std::optional<int> active_pid;
  Lsn confirmed_flush_lsn;
  std::string wal_status;  ///< reserved, extended, unreserved, lost (PostgreSQL ≥ 13)
};

/// How a streaming session ended, decided in one place (architecture, lesson 6).
enum class StreamEnd {
  kServerEnded,  ///< the server ended COPY (e.g. shutdown, walsender terminated)
  kError,        ///< connection or protocol error
};

/// Owns one libpq replication connection (`replication=database`): the catalog queries made
/// before streaming, slot creation, START_REPLICATION, reading CopyData (XLogData 'w', keepalive
/// 'k') without blocking on an Asio executor, and writing standby status updates ('r').
/// It never sees JSON. Not thread-safe: every call on the executor's thread.
class ReplicationStream {
 public:
  struct Handlers {
    /// One XLogData message; the data view is valid during the call only.
    std::function<void(const XLogData&)> on_xlogdata;
    std::function<void(const Keepalive&)> on_keepalive;
    /// The stream ended; no more callbacks follow.
    std::function<void(StreamEnd, const std::string& reason)> on_end;
  };

  /// `conninfo` is the user's libpq conninfo or URI; `application_name` is shown in
  /// pg_stat_replication. The session's output-affecting settings are pinned in the startup
  /// `options` (DateStyle ISO, TimeZone UTC, IntervalStyle iso_8601, extra_float_digits 3,
  /// bytea_output hex, lc_monetary C): wal2json prints values with them (their meaning:
  /// PostgreSQL docs §20.11 "Client Connection Defaults").
  ReplicationStream(boost::asio::any_io_executor executor, std::string conninfo,
                    std::string application_name);
  ~ReplicationStream();
  ReplicationStream(const ReplicationStream&) = delete;
  ReplicationStream& operator=(const ReplicationStream&) = delete;

  /// Connects (blocking; before streaming) and runs IDENTIFY_SYSTEM. Errors carry libpq's message
  /// with any password masked by the caller's conninfo handling (libpq never echoes passwords).
  std::expected<SystemInfo, std::string> connect();

  /// Runs one SQL or replication command in simple-query mode (blocking; before streaming only).
  /// Returns the rows as text (SQL NULL as nullopt), or the server's error message.
  using Row = std::vector<std::optional<std::string>>;
  std::expected<std::vector<Row>, std::string> query(const std::string& sql);

  /// Looks the slot up in pg_replication_slots; nullopt when it does not exist.
  std::expected<std::optional<SlotInfo>, std::string> find_slot(const std::string& slot);

  /// CREATE_REPLICATION_SLOT <slot> LOGICAL <plugin> (SNAPSHOT '<snapshot>') (PostgreSQL docs
  /// §55.4). `snapshot` is "nothing" for streaming only, or "export" for a later initial load: the
  /// returned snapshot name is then valid until the next command on this connection.
  /// Returns the consistent point and the exported snapshot name (empty unless exported).
  /// `temporary`: the slot is dropped when this connection ends (a one-off snapshot).
  ///
  /// It may wait long: a logical slot is consistent only once every transaction that was
  /// running when its creation began has ended (PostgreSQL's
  /// src/backend/replication/logical/snapbuild.c, SnapBuildFindSnapshot), and the command
  /// returns then. A caller that runs it on another thread (the stream is then not used on its
  /// executor until it returns) can cut it short with a `cancel_handle()` taken before: it then
  /// fails with SQLSTATE 57014 (query_canceled) and the half-made slot is gone.
  std::expected<std::pair<Lsn, std::string>, std::string> create_slot(const std::string& slot,
                                                                      const std::string& plugin,
                                                                      const std::string& snapshot,
                                                                      bool temporary = false);

  /// Sends START_REPLICATION SLOT <slot> LOGICAL <start> (<options>) and starts reading on the
  /// executor. A `start` of 0/0 makes the server resume from the slot's confirmed_flush_lsn.
  std::expected<void, std::string> start(
      const std::string& slot, Lsn start,
      const std::vector<std::pair<std::string, std::string>>& options, Handlers handlers);

  /// What cancels this connection's running command from another thread (see pg/cancel.hpp);
  /// take it before handing a blocking call to another thread. Empty before connect().
  [[nodiscard]] CancelHandle cancel_handle() const { return CancelHandle(conn_); }

  /// Stops handing messages out (backpressure). Status updates can still be sent.
  void pause();
  /// Resumes: first the messages libpq already buffered, then the socket.
  void resume();
  [[nodiscard]] bool paused() const { return paused_; }

  /// Queues a standby status update (write, flush, apply LSN and the current clock) and flushes it
  /// without blocking (the rest is written when the socket is writable).
  void send_status(Lsn write, Lsn flush, Lsn apply, bool reply_requested);

  /// Blocking variant for the last update before closing; returns false on failure.
  bool send_status_blocking(Lsn write, Lsn flush, Lsn apply);

  /// Releases the socket from the executor and closes the connection (PQfinish). Idempotent.
  void close();

  /// libpq's current message on the connection (PQerrorMessage), "not connected" without one.
  [[nodiscard]] std::string last_error() const;
  /// The typed error (error.hpp) behind the last failure: of connect() (a failed attempt has no
  /// SQLSTATE, its kind from classify_connection_failure; a conninfo libpq cannot parse is
  /// kConfiguration), of a query, find_slot or create_slot, of start() (e.g. 55006 object_in_use:
  /// the slot is active for another PID), or of the stream's end (the server's error, or a lost
  /// connection: kTransient without SQLSTATE). Its message is libpq's text without the prefixes
  /// the returned strings add. Reset by connect() and start().
  [[nodiscard]] const Error& failure() const { return failure_; }
  /// failure()'s SQLSTATE: of the server error that ended the stream or failed START_REPLICATION
  /// (empty when the end was not a server error, e.g. a lost connection).
  [[nodiscard]] const std::string& last_sqlstate() const { return failure_.sqlstate; }

 private:
  void arm_read();
  void drain();
  void arm_write();
  void end(StreamEnd how, std::string reason);

  boost::asio::any_io_executor executor_;
  std::string conninfo_;
  std::string application_name_;
  PGconn* conn_ = nullptr;
  std::unique_ptr<boost::asio::posix::stream_descriptor> socket_;
  Handlers handlers_;
  bool streaming_ = false;
  bool paused_ = false;
  bool reading_ = false;  // an async read wait is outstanding
  bool writing_ = false;  // an async write wait is outstanding
  bool ended_ = false;
  // Handlers queued on the executor hold a weak_ptr to this: they do nothing once the stream
  // is destroyed (a session's stream is replaced on reconnect).
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  Error failure_;
};

/// The startup `options` for a connection whose value texts must equal wal2json's: the user's own
/// `options` from `conninfo`, then the settings the replication session pins (DateStyle ISO,
/// TimeZone UTC, IntervalStyle iso_8601, extra_float_digits 3, bytea_output hex, lc_monetary C),
/// which win. Error: `conninfo` cannot be parsed (the message never quotes its text).
std::expected<std::string, std::string> pinned_startup_options(const std::string& conninfo);

/// Quotes an identifier for a replication command or SQL ("" doubled).
std::string quote_ident(const std::string& name);
/// Quotes a literal for SQL ('' doubled; a backslash needs no escape with
/// standard_conforming_strings on, the default since PostgreSQL 9.1).
std::string quote_literal(const std::string& value);

}  // namespace walrelay::pg
