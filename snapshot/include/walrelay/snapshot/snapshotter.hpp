#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "walrelay/decoder/change.hpp"
#include "walrelay/decoder/wal2json_value.hpp"
#include "walrelay/router/event_router.hpp"
#include "walrelay/router/table_schema.hpp"
#include "walrelay/sink/dead_letter.hpp"
#include "walrelay/sink/publisher.hpp"
#include "walrelay/sink/unit_tracker.hpp"
#include "walrelay/snapshot/snapshot_connection.hpp"
#include "walrelay/snapshot/snapshot_figures.hpp"
#include "walrelay/snapshot/snapshot_progress.hpp"
#include "walrelay/snapshot/table_query.hpp"

namespace walrelay::snapshot {

/// How a snapshot ended, when it did not complete.
enum class SnapshotFailure : std::uint8_t {
  kRetry,     ///< a connection failed: start again later (the progress makes it a resume)
  kMapping,   ///< a row could not be mapped (errors.policy fail semantics: exit 4)
  kDelivery,  ///< a record could not be delivered for good (exit 3)
};

/// Reads the captured tables' existing rows and publishes them as `op: "r"` events through the
/// shared publish path, in key order and in chunks (keyset pagination), several tables at once.
///
/// - With an exported snapshot name (the slot's `CREATE_REPLICATION_SLOT … (SNAPSHOT 'export')`,
///   PostgreSQL docs §55.4), every connection reads inside `REPEATABLE READ` with
///   `SET TRANSACTION SNAPSHOT` (docs §9.27.5 "Snapshot Synchronization Functions"): the rows are
///   exactly the state at the slot's consistent point.
/// - Without one (after a crash lost the exported snapshot), each chunk is its own short
///   transaction reading the current state. Published before the stream that starts at the
///   consistent point, every key still ends at its latest committed state: a change made after
///   the consistent point is replayed by the stream after the row.
///
/// Memory is bounded by `chunk_size` rows per connection and the in-flight bounds, never by table
/// size. Progress (per table, the last key of the last fully acknowledged chunk) is saved after
/// every chunk, so a restart resumes at the next chunk. Rows are mapped by the router exactly as
/// streamed rows (value texts come through the replication session's pinned settings, and each
/// value becomes the token wal2json prints for it).
///
/// Owned by the connector; every call on the io_context thread.
class Snapshotter {
 public:
  struct Settings {
    std::string conninfo;
    std::string application_name;
    std::size_t chunk_size = 8192;
    std::size_t parallelism = 1;
    std::size_t max_in_flight_events = 40'000;
    std::size_t max_in_flight_bytes = 32ull * 1024 * 1024;
    decoder::NumericTokens numerics = decoder::NumericTokens::kNumbers;
    std::chrono::milliseconds progress_interval{5'000};
    /// errors.policy dead_letter: the dead-letter path the stream shares (owned by the
    /// connector, outlives this). A row that cannot be mapped or is over message.max.bytes goes
    /// there instead of stopping the snapshot. Null: stop (errors.policy fail).
    sink::DeadLetterWriter* dead_letters = nullptr;
    /// Also a record whose delivery failed for good (not under delivery exactly_once, where the
    /// Kafka transaction is aborted instead), as the stream does.
    bool dead_letter_deliveries = false;
    /// An SQL_ASCII database (source.allow_sql_ascii): row texts arrive as stored and each row
    /// must be UTF-8, else it is a mapping error (dead-lettered or stopping, as above).
    bool check_utf8 = false;
    /// snapshot.row_security: read with row-level security policies applied (default: off, a
    /// policy that would hide rows is an error).
    bool row_security = false;
  };
  using Done = std::function<void(std::optional<SnapshotFailure>, const std::string& reason)>;

  /// `exported_snapshot` empty: resume mode (no common snapshot). `progress` lists the tables
  /// (their progress is kept in `store`). The router, schemas and publisher must outlive this.
  Snapshotter(boost::asio::any_io_executor executor, Settings settings, router::EventRouter& router,
              router::SchemaProvider& schemas, sink::Publisher& publisher,
              SnapshotProgressStore& store, SnapshotProgress progress,
              std::string exported_snapshot, Done done);
  ~Snapshotter();
  Snapshotter(const Snapshotter&) = delete;
  Snapshotter& operator=(const Snapshotter&) = delete;

  /// Opens the connections and starts reading. `done` is called once, on the executor.
  void start();
  /// A delivery report of a snapshot record (the publisher's kSnapshot listener).
  void on_delivery(const kafka::DeliveryReport& report);
  /// Called when the publisher has room again (after any delivery report).
  void maybe_continue();
  /// Stops reading; no callback follows. Records in flight are ignored.
  void stop();
  /// Where a table goes that cannot be read from the exported snapshot any more (rewritten or
  /// truncated since: its new file is empty in the snapshot's view): the connector queues it,
  /// from its acknowledged position, for an incremental snapshot. False: it could not.
  using HandOver = std::function<bool(const TableProgress& table)>;
  void set_hand_over(HandOver hand_over) { hand_over_ = std::move(hand_over); }
  /// Stops reading new rows (shutdown) but keeps saving progress as acknowledgements arrive.
  void stop_reading() { reading_stopped_ = true; }

  [[nodiscard]] const SnapshotProgress& progress() const { return progress_; }
  /// True when the kRetry failure `done` reports is a table walrelay's role may not SELECT: the
  /// read failed with 42501 insufficient_privilege (PostgreSQL docs Appendix A), and not because
  /// of a row-level security policy (row_security_hint, table_query.hpp). Valid in `done`.
  [[nodiscard]] bool failure_lacks_select() const { return failure_lacks_select_; }
  /// Rows done per table (acknowledged by Kafka), pg_class.reltuples estimates, rows/s of the last
  /// progress interval: the progress line's figures, for /metrics.
  [[nodiscard]] SnapshotFigures figures() const;
  /// The progress as of every row handed to the producer so far, acknowledged or not (delivery
  /// exactly_once: what a Kafka commit now would cover, for the position record). Per table: the
  /// rows and key of its last row handed over, inside a chunk when one is being published (its
  /// `chunks` then counts that chunk, so a resumed snapshot numbers the rest as a new chunk);
  /// `done` once every row of it was handed over. A table without a key has no `last_key`.
  [[nodiscard]] SnapshotProgress produced() const;

 private:
  /// A chunk's data in the table's unit tracker (its unit number is the chunk's number; it is
  /// closed once every row of it was handed to the producer).
  struct Chunk {
    std::uint64_t rows = 0;
    KeyText last_key;
  };
  struct Table {
    TableProgress* progress = nullptr;
    TableReadPlan plan;
    KeyText next_after;  // last key read (the next chunk starts after it)
    bool have_next_after = false;
    sink::UnitTracker<Chunk> chunks;   // read, not yet fully acknowledged
    std::uint64_t rows_published = 0;  // this run
    double estimated_rows = 0;         // pg_class.reltuples
    bool estimated = false;            // reltuples was known (not -1: never vacuumed/analysed)
    bool assigned = false;
    bool read_complete = false;
    int shape_refreshes = 0;  // re-reads of the shape after a column change
    /// Read at its current state, not from the exported snapshot: it was rewritten after the
    /// consistent point and no incremental snapshot can finish it (initial_only, or no key).
    bool current_state = false;
    std::chrono::steady_clock::time_point started;
    std::string id_prefix;  // "<snapshot LSN>:r:<schema>.<table>:" of its records' `id`
  };
  struct Worker {
    std::unique_ptr<SnapshotConnection> conn;
    Table* table = nullptr;
    ResultPtr result;  // the chunk being published
    int next_row = 0;  // next row of `result` to publish
    /// Its rows' source.ts_ms/ts_us (Unix epoch): the exported snapshot's time (snapshot_time_)
    /// for rows read on it, else when `result` was taken from the server. One value per chunk,
    /// so the router's source block is written once per chunk instead of once per row.
    std::chrono::microseconds read_time{0};
    bool in_txn = false;   // a read transaction is open (one chunk, or a keyless cursor)
    bool cursor = false;   // reading a keyless table through a cursor
    bool waiting = false;  // a query is outstanding
    /// The next chunk's result, read while `result` was still being published (a keyset chunk
    /// asks for the next one as soon as it arrives, so PostgreSQL reads while walrelay maps and
    /// produces: at most two chunks per connection in memory).
    std::optional<std::expected<ResultPtr, std::string>> prefetched;
  };

  /// `lacks_select`: see failure_lacks_select().
  void fail(SnapshotFailure kind, const std::string& reason, bool lacks_select = false);
  /// Fails (kRetry) a read of `table` that the server refused with `message`.
  void fail_read(const Worker& w, const std::string& table, const std::string& message);
  bool open_worker(Worker& w);
  /// Opens a read transaction on the worker's connection (on the exported snapshot, if any).
  bool begin_read(Worker& w);
  /// In the worker's open read transaction: whether the table's file (a partitioned table's: its
  /// leaves') differs from the exported snapshot's, i.e. it was rewritten since (ALTER … TYPE,
  /// TRUNCATE, VACUUM FULL, CLUSTER), which the snapshot would read as empty.
  bool rewritten_since_export(Worker& w, const Table& t);
  /// A chunk's (or a read ahead's) result arrived: published now, or kept as the read ahead.
  void on_read(Worker& w, std::expected<ResultPtr, std::string> r);
  /// A keyset chunk found its table rewritten since the export: handed over to an incremental
  /// snapshot, or (initial_only) read at its current state from here.
  void on_rewritten(Worker& w);
  /// The table was rewritten and cannot be handed over: reads it at its current state from here.
  /// False when the new read transaction cannot start (the snapshot failed).
  bool read_at_current_state(Worker& w, Table& t, std::string_view why);
  void end_read(Worker& w);
  void next_table(Worker& w);
  bool prepare_table(Worker& w, Table& t);
  /// Reads the worker's next chunk, without waiting: its result reaches on_read. Asked for while
  /// the current chunk is still being published, it is a read ahead (a table rewritten since the
  /// export is then left to the read that follows the current chunk). Nothing when a read is
  /// outstanding, the in-flight bounds are reached or reading stopped.
  void read_chunk(Worker& w);
  /// Hands a prefetched result to on_chunk from a fresh handler (no recursion per chunk).
  void consume_prefetched(Worker& w);
  void on_chunk(Worker& w, std::expected<ResultPtr, std::string> result);
  void publish_rows(Worker& w);
  bool publish_row(Worker& w, int row, std::string_view marker);
  /// Publishes a dead-letter record for the current row in its chunk; false if that failed.
  bool dead_letter(Table& t, std::uint64_t unit, sink::DeadLetterKind kind,
                   const std::string& reason, std::optional<std::string_view> key, bool with_row);
  /// Fills values_ with the texts of `row` of `res`.
  void row_values(const PGresult* res, int row);
  void finish_table_read(Worker& w);
  void advance(Table& t);
  void check_done();
  /// Saves progress_ to the store (fsync: ~1 ms of the event loop): at once when `now` or the
  /// last save is kSaveInterval old, else once that interval has passed (one save for every
  /// chunk acknowledged in between). A crash loses at most that much progress: those chunks are
  /// read again (duplicates, never a gap). stop() writes what is pending.
  void save_progress(bool now = false);
  void write_progress();
  void schedule_progress_log();
  [[nodiscard]] bool has_room() const;

  boost::asio::any_io_executor executor_;
  Settings settings_;
  router::EventRouter& router_;
  router::SchemaProvider& schemas_;
  sink::Publisher& publisher_;
  SnapshotProgressStore& store_;
  SnapshotProgress progress_;
  std::string exported_;
  bool failure_lacks_select_ = false;
  /// now() of the first read on the exported snapshot (Unix epoch µs; 0 until read): the time of
  /// every row read on it, as Debezium's CURRENT_TIMESTAMP of its snapshot transaction.
  std::chrono::microseconds snapshot_time_{0};
  Done done_;
  HandOver hand_over_;
  std::vector<Table> tables_;
  std::vector<Worker> workers_;
  boost::asio::steady_timer progress_timer_;
  static constexpr std::chrono::milliseconds kSaveInterval{100};
  boost::asio::steady_timer save_timer_;
  std::chrono::steady_clock::time_point last_save_{};
  bool save_pending_ = false;
  bool stopped_ = false;
  bool reading_stopped_ = false;
  bool any_published_ = false;
  std::uint64_t rows_total_ = 0;  // this run, acknowledged
  RateMeter rate_;                // rows_total_ per second, read at each progress line

  // Reused per row.
  decoder::Change change_;
  std::string tokens_;
  std::vector<std::optional<std::string_view>> values_;
  std::string id_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace walrelay::snapshot
