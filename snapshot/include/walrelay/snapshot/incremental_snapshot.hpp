#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "walrelay/core/record.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"
#include "walrelay/router/event_router.hpp"
#include "walrelay/snapshot/snapshot_figures.hpp"
#include "walrelay/snapshot/snapshot_progress.hpp"
#include "walrelay/snapshot/table_query.hpp"

namespace walrelay::snapshot {

/// Backfills tables while the slot streams, chunk by chunk, with the watermark algorithm of
/// Netflix's DBLog (Andreas Andreakis, Ioannis Papapanagiotou, "DBLog: A Watermark Based
/// Change-Data- Capture Framework", 2020), as Debezium's incremental snapshots do:
///
/// 1. a low watermark: a transactional logical message (prefix `kWatermarkPrefix`) is committed;
/// 2. the chunk is read (`SELECT … WHERE key > last ORDER BY key LIMIT n`, its own short
///    transaction, so vacuum is never held back for the snapshot's duration);
/// 3. a high watermark is committed.
///
/// When the stream reaches the low watermark, the keys of every streamed event of the table are
/// remembered; when it reaches the high watermark, the chunk's rows whose keys were streamed in
/// between are dropped (the stream already carried a newer state) and the rest are published as
/// `op: "r"` events (source.snapshot "incremental") inside the high watermark's transaction: they
/// share its acknowledgement tracking, and the slot moves past it only once Kafka has them. A
/// table's progress (last key of the last chunk whose transaction was confirmed) is saved in
/// `<state dir>/<slot>.incremental`, so a restart resumes at the next chunk. Watermarks are never
/// published.
///
/// Nothing of a chunk blocks the event loop: the table's shape is read with `ShapeReader`, and the
/// watermarks, the chunk's transaction and its SELECT run on an pg::AsyncConnection, each step sent
/// once the one before it has completed, so a chunk that waits (on a lock, say) never delays the
/// stream, its delivery reports or standby status updates.
///
/// Memory: one chunk of rows and the keys that can still supersede one of its rows, at most
/// `Settings::max_window_keys` of them. While the stream is behind (a backlog: the watermarks
/// are written at the head of the WAL), every streamed change before the low watermark belongs to
/// a transaction the chunk's snapshot saw, whose key is therefore not kept once the snapshot is
/// known; a chunk whose window would hold more keys is dropped and read again a second later
/// (nothing is lost: its rows were not published). Owned by the connector; every call on the
/// io_context thread.
class IncrementalSnapshot {
 public:
  static constexpr const char* kWatermarkPrefix = "walrelay-watermark";

  struct Settings {
    std::string conninfo;
    std::string application_name;
    std::size_t chunk_size = 8192;
    /// An SQL_ASCII database: each row must be UTF-8 (a row that is not is a mapping error).
    bool check_utf8 = false;
    /// snapshot.row_security: read with row-level security policies applied (default: off, a
    /// policy that would hide rows is an error).
    bool row_security = false;
    /// snapshot.max_window_keys: streamed keys a chunk keeps to drop its superseded rows (those
    /// before its low watermark of transactions its snapshot did not see, and every one between
    /// its watermarks). A chunk that would keep more is read again (retried in 1 s).
    std::size_t max_window_keys = 65536;
  };

  /// Reads `schema.table`'s current shape without blocking and calls the callback on the
  /// executor with it (nullptr: the table does not exist, or its shape cannot be read and none was
  /// known). The shape must stay valid while the IncrementalSnapshot lives.
  using ShapeReader = std::function<void(const std::string& schema, const std::string& table,
                                         std::function<void(const router::TableSchema*)> done)>;

  /// `progress` holds the queued tables and their positions (from `store`, or empty). `schemas`
  /// answers execute()'s checks (from its cache); `read_shape` gives each chunk the table's shape.
  IncrementalSnapshot(boost::asio::any_io_executor executor, Settings settings,
                      router::EventRouter& router, router::SchemaProvider& schemas,
                      ShapeReader read_shape, SnapshotProgressStore& store,
                      SnapshotProgress progress);
  ~IncrementalSnapshot();
  IncrementalSnapshot(const IncrementalSnapshot&) = delete;
  IncrementalSnapshot& operator=(const IncrementalSnapshot&) = delete;

  /// Queues `names` (`schema.table`, quoted parts allowed as in `tables`) for a snapshot. A table
  /// already queued or being read starts over. Returns one message per table that was refused:
  /// unknown or not a captured row-change table, or without any key (incremental chunks need one:
  /// `key_columns`). The checks read each table's shape from `schemas` (and the router, which reads
  /// it there too): one `schemas` would have to query for blocks the event loop, so look such
  /// tables up first (the connector prefetches them on the catalog's non-blocking connection).
  std::vector<std::string> execute(const std::vector<std::pair<std::string, std::string>>& tables);
  /// Stops the snapshot of `tables` (every table when empty); rows published stay.
  void stop(const std::vector<std::pair<std::string, std::string>>& tables);

  /// Starts the next chunk when none is in progress and a table is queued.
  void kick();

  /// A watermark message of the stream (its content, LSN and transaction). Returns the records to
  /// publish here (after the high watermark of the chunk in progress: its remaining rows; otherwise
  /// none), each with header `id` `<lsn>:r:<schema>.<table>:<chunk>:<row>` (`lsn`: the high
  /// watermark's, so ids of different reads never collide). They stay valid until the next call.
  /// Error: a row that cannot be mapped.
  std::expected<std::span<const Record>, std::string> on_watermark(std::string_view content,
                                                                   Lsn lsn, std::uint64_t xid,
                                                                   Lsn txn_next_lsn);
  /// Records of a streamed change of transaction `xid`: while a chunk is in progress, their keys
  /// are remembered (with the transaction, before the low watermark).
  void on_streamed(std::span<const Record> records, std::uint64_t xid);
  /// A TRUNCATE of a table publishing to `topic` was streamed: a chunk of it in progress holds
  /// rows that may no longer exist, and is dropped whole (rows inserted since are streamed).
  void on_truncated(std::string_view topic);
  /// The slot's confirmed position moved: progress of chunks confirmed by it is saved.
  void on_flushed(Lsn flush);

  /// The queue and every table's position in memory: a chunk counts from the moment its rows are
  /// returned by on_watermark (delivery exactly_once writes this into the position record of the
  /// Kafka transaction that holds them; the durable file moves only in on_flushed).
  [[nodiscard]] const SnapshotProgress& progress() const { return progress_; }
  /// True while streamed keys are collected (from a chunk's start to its high watermark).
  [[nodiscard]] bool collecting() const { return phase_ != Phase::kIdle; }
  [[nodiscard]] bool busy() const;
  /// Takes the rows/s reading of status() and figures(): rows read since the last call (since
  /// construction for the first) per second. Call once per progress interval (the connector's
  /// progress timer does, while busy()).
  void sample_rate();
  /// For the progress line: the table being read, its chunks read, tables queued and the figures'
  /// summary (rows/s as of the last sample_rate()); "" when idle.
  [[nodiscard]] std::string status() const;
  /// Rows read per table queued since the start (or resumed), reltuples estimates of the tables
  /// read so far, rows/s as of the last sample_rate(): for /metrics.
  [[nodiscard]] SnapshotFigures figures() const;
  /// Why chunks cannot be read, while the last read of the current table failed with
  /// `permission denied` (SQLSTATE 42501; retried every second until someone GRANTs SELECT):
  /// set from that failure until a chunk is read or stop() is called; "" otherwise. For /ready.
  [[nodiscard]] const std::string& blocked() const { return blocked_; }

 private:
  // kPreparing: reading the table's shape; kReading: from the low watermark's write to the high
  // one's; kWaitingHigh: the high watermark is written (or being written), its message awaited.
  enum class Phase : std::uint8_t { kIdle, kPreparing, kReading, kWaitingHigh };
  struct Pending {
    Lsn next_lsn;
    std::size_t table = 0;
    KeyText last_key;
    std::uint64_t rows = 0;
    bool done = false;
  };
  struct OwnedRecord {
    std::string topic;
    std::string key;
    std::string value;
    std::string id;
    bool has_key = false;
    std::int64_t ts = 0;
    char op = 0;  ///< Record::op
  };

  void start_chunk();
  /// The chunk's table shape arrived: plans the chunk and writes the low watermark.
  void on_shape(const router::TableSchema* shape);
  /// Commits the "low" or "high" watermark of the current chunk (autocommit), then calls `then`
  /// if the chunk is still current; on error retries later.
  void write_watermark(const std::string& kind, std::function<void()> then);
  /// 2. Starts the chunk's transaction and sends its SELECT (after the low watermark committed).
  void read_chunk();
  /// Whether `id` is still the chunk in progress (a stop or a retry ends it).
  [[nodiscard]] bool current(const std::string& id) const {
    return phase_ != Phase::kIdle && chunk_id_ == id;
  }
  /// Whether the stream already carried a state of `key` newer than the chunk's snapshot.
  [[nodiscard]] bool superseded(const std::string& key) const;
  /// Whether transaction `xid` (32-bit, modulo-2^32 order) committed before the chunk's snapshot
  /// was taken, as far as that snapshot says (PostgreSQL docs §9.27.5, pg_current_snapshot():
  /// visible when below xmax and not in xip). Only meaningful once snapshot_known_.
  [[nodiscard]] bool seen_by_snapshot(std::uint32_t xid) const;
  /// Drops the chunk when its window holds more than max_window_keys keys (retried later).
  void bound_window();
  void on_rows(pg::AsyncConnection::Result result);
  /// The chunk's snapshot (pg_current_snapshot() text) read: commits and writes the high mark.
  void on_snapshot(pg::AsyncConnection::Result snap);
  /// Drops the chunk and tries again in a second; `quiet`: logged at debug level (the reason was
  /// already logged as an error).
  void retry_later(const std::string& why, bool quiet = false);
  /// Applies `change` to the durable record of `schema.table` (created when missing) and saves.
  void persist(const std::function<void(TableProgress&)>& change, const std::string& schema,
               const std::string& table);
  void forget_pending(std::size_t table);
  /// Drops the chunk in progress (stopped, or its table starts over).
  void abandon_chunk();
  /// Frees the streamed keys kept for the chunk in progress.
  void release_window();
  /// The chunk connection (created, connecting lazily, when there is none); nullptr (retrying
  /// later) when the conninfo cannot be parsed.
  pg::AsyncConnection* connection();
  /// The first unfinished table that is still captured as a row-change table (one taken out of
  /// `tables` since it was queued stays queued, unread).
  std::optional<std::size_t> next_table() const;
  [[nodiscard]] bool captured(const TableProgress& t) const;

  boost::asio::any_io_executor executor_;
  Settings settings_;
  router::EventRouter& router_;
  router::SchemaProvider& schemas_;
  SnapshotProgressStore& store_;
  SnapshotProgress progress_;
  ShapeReader read_shape_;
  std::unique_ptr<pg::AsyncConnection> conn_;
  boost::asio::steady_timer retry_timer_;

  Phase phase_ = Phase::kIdle;
  std::string blocked_;    // see blocked()
  std::size_t table_ = 0;  // the table of the chunk in progress
  TableReadPlan plan_;
  std::string chunk_id_;
  /// Chunk ids are `<slot>-<pid>-<start ms>-<n>`, n counted per process: a watermark replayed
  /// from an earlier session or process never matches a later chunk, nor does one of a walrelay
  /// of another slot on the same database (every stream shows the database's watermarks).
  static inline std::uint64_t chunk_counter_ = 0;
  std::string chunk_id_prefix_;
  bool window_open_ = false;
  std::string topic_;  // the table's topic (window key matching)
  std::unordered_set<std::string> window_keys_;
  // Keys streamed after the chunk started but before its low watermark, with the newest xid that
  // touched each: a transaction whose commit record precedes the low watermark in the WAL can
  // still be invisible to the chunk's snapshot (it leaves the ProcArray after its commit record
  // is written), so its keys are dropped from the chunk when the snapshot did not see it.
  std::unordered_map<std::string, std::vector<std::uint32_t>> pre_window_keys_;
  // The chunk's snapshot (pg_current_snapshot() in the SELECT's transaction), 32-bit xids.
  std::uint32_t snap_xmax_ = 0;
  std::vector<std::uint32_t> snap_xip_;
  bool snapshot_known_ = false;  // snap_xmax_/snap_xip_ are the current chunk's
  std::uint64_t superseded_ = 0;
  bool truncated_ = false;  // the chunk's table was truncated while the chunk was in progress
                            // rows of the current table dropped for a streamed change
  std::vector<std::vector<std::optional<std::string>>> rows_;
  bool last_chunk_ = false;
  std::deque<Pending> pending_;
  std::vector<OwnedRecord> owned_;
  std::vector<std::vector<Header>> headers_;
  std::vector<Record> records_;
  decoder::Change change_;
  std::string tokens_;
  std::unordered_map<std::string, double> estimates_;  // schema.table → pg_class.reltuples
  RateMeter rate_;                                     // rows read per second, sample_rate()
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace walrelay::snapshot
