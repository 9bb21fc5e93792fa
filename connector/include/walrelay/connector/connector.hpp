#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "walrelay/app/blocking_worker.hpp"
#include "walrelay/app/exit_code.hpp"
#include "walrelay/app/metrics/http_server.hpp"
#include "walrelay/app/supervisor.hpp"
#include "walrelay/catalog/catalog.hpp"
#include "walrelay/catalog/table_inventory.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/connector/heartbeat.hpp"
#include "walrelay/connector/repeated_error.hpp"
#include "walrelay/decoder/line_transcoder.hpp"
#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/kafka/admin.hpp"
#include "walrelay/kafka/error.hpp"
#include "walrelay/kafka/producer.hpp"
#include "walrelay/kafka/sliced_call.hpp"
#include "walrelay/kafka/transactions.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"
#include "walrelay/router/event_router.hpp"
#include "walrelay/sink/ack_tracker.hpp"
#include "walrelay/sink/dead_letter.hpp"
#include "walrelay/sink/position_reader.hpp"
#include "walrelay/sink/position_record.hpp"
#include "walrelay/sink/publisher.hpp"
#include "walrelay/snapshot/incremental_snapshot.hpp"
#include "walrelay/snapshot/snapshot_progress.hpp"
#include "walrelay/snapshot/snapshotter.hpp"
#include "walrelay/state/state_store.hpp"

namespace walrelay {

/// Wires the data path on one io_context (architecture.md):
/// ReplicationStream → Wal2JsonDecoder → EventRouter → kafka::Producer, and delivery reports →
/// AckTracker → flush LSN → standby status updates. Owns every piece; single-threaded.
///
/// Runs replication *sessions*: a session connects, checks the slot against walrelay's durable
/// slot record, streams, and ends when the connection or the producer fails. Whether to start
/// another session, and when, is decided in one place (`after_session`): retriable ends reconnect
/// with bounded, jittered exponential backoff and resume from the slot's confirmed position; a
/// slot held by another instance is waited for (hot standby); everything else exits.
class Connector final : public app::System {
 public:
  Connector(boost::asio::io_context& io, config::Config cfg);
  ~Connector() override;

  /// Starts on `io` (app::run drives it): ends, through `life.done`, once stopped (exit 0 after
  /// flushing and confirming) or at a failure retrying cannot help (its exit code).
  void start(app::Lifecycle& life) override;
  /// kGraceful: flush, confirm what Kafka acknowledged, end. kNow: the flush in progress stops
  /// waiting for Kafka (polled through the Lifecycle).
  void stop(app::StopMode mode) override;

 private:
  /// How a session attempt or a session ended.
  enum class Outcome : std::uint8_t {
    kStreaming,  ///< prepared and streaming (not an end)
    kRetry,      ///< connection-level failure: reconnect with backoff
    kStandby,    ///< the slot is held by another process: wait for it
    kFatal,      ///< exit with `fatal_code_`
    kPending,    ///< the set-up goes on off the event loop (setup_worker_); prepared() follows
  };

  /// Prepares a session (prepare(), then, exactly_once, eos_prepare on the event loop) and goes
  /// on with continue_session; waits while the last session's Kafka transaction is being aborted.
  void start_session();
  /// What prepare() (or, after a kPending, the set-up it started) decided: on to eos_prepare and
  /// continue_session, or session_not_started.
  void prepared(Outcome outcome);
  /// After prepare() (and eos_prepare): `after_prepare_`, then the snapshot or the stream.
  void continue_session();
  /// A session attempt ended before streaming: closes the connection, after_session(outcome).
  void session_not_started(Outcome outcome);
  /// Set by prepare() for what must run after eos_prepare (which may replace the local snapshot
  /// progress with Kafka's): reading an existing slot's snapshot progress, or the initial_only
  /// preparation. Run by continue_session; kStreaming to go on.
  std::function<Outcome()> after_prepare_;
  /// START_REPLICATION and the session's timers (after the snapshot, if one ran).
  void start_streaming();
  /// The session's checks and the slot, from IDENTIFY_SYSTEM on. A missing slot is created off
  /// the event loop (kPending): the broker probe, then CREATE_REPLICATION_SLOT on setup_worker_,
  /// each hop back on the loop (slot_probed, slot_created), ending in prepared().
  Outcome prepare();
  void slot_probed(std::expected<int, kafka::ProbeError> brokers);
  void slot_created(std::expected<std::pair<Lsn, std::string>, std::string> created);
  /// The end of prepare() once the slot is there: the acknowledgement tracking starts at
  /// start_lsn_ and the slot record is saved.
  Outcome finish_prepare();
  /// A set-up step on setup_worker_ came back while stopping: closes the session, ends the stop.
  /// True when it did (the caller returns).
  bool setup_returned_while_stopping();
  Outcome check_tables();
  /// What the start-up table check found, for check_catalog to compare with.
  void remember_captured(const std::vector<MatchedTable>& tables,
                         const std::vector<SkippedRelation>& skipped);
  void schedule_catalog_check();
  /// Looks the captured tables up again (source.catalog_check_interval) without blocking, and
  /// reports changes (compare_catalog).
  void check_catalog();
  void compare_catalog(const TableMatcher& matcher);
  bool catalog_check_running_ = false;
  /// Reads the database's server_encoding on the replication connection and sets `transcoder_`
  /// (connector_encoding.cpp). An encoding walrelay refuses is fatal with exit 2.
  Outcome check_encoding();
  Outcome fatal(ExitCode code);
  void after_session(Outcome outcome, const std::string& reason);
  void end_session();
  void create_producer();

  void on_xlogdata(const pg::XLogData& x);
  // Catalog lookups ahead of routing (connector_lookup.cpp).
  /// Starts the catalog lookup routing `c` needs, if any, without blocking: a copy of its line is
  /// kept and the stream paused, so the changes after it wait and nothing is confirmed past it;
  /// when the lookup completes the line is processed again and the stream resumes. True when `c`
  /// waits for a lookup.
  bool wait_for_lookup(const pg::XLogData& x, const decoder::Change& c);
  /// The same for a snapshot signal in `x` naming `tables`: the lookups of those whose shape is not
  /// cached (execute's checks would query the catalog, blocking). True when the signal waits.
  bool wait_for_lookups(const pg::XLogData& x,
                        const std::vector<std::pair<std::string, std::string>>& tables);
  /// Keeps `x` and pauses the stream until the lookups of `tables` (not cached) complete;
  /// `writer_xid`: the transaction of `x`'s change (Catalog::prefetch), 0 for none.
  void park(const pg::XLogData& x, const std::vector<std::pair<std::string, std::string>>& tables,
            std::uint32_t writer_xid = 0);
  void on_lookup_done(std::uint64_t epoch);
  /// The XLogData whose change waits for its catalog lookup.
  struct ParkedLine {
    Lsn data_start;
    Lsn wal_end;
    pg::PgEpochMicros send_time = 0;
    std::string data;
  };
  std::optional<ParkedLine> parked_;
  bool replaying_parked_ = false;
  void on_keepalive(const pg::Keepalive& k);
  void on_stream_end(pg::StreamEnd how, const std::string& reason);
  void on_delivery(const kafka::DeliveryReport& r);
  void on_producer_fatal(const kafka::Error& error);
  void send_status(bool reply_requested);
  void save_record();
  void schedule_status();
  void schedule_progress();
  /// Publishes the rest of the current change's records; false when it had to stop (queue full:
  /// the stream is paused and the rest is published on the next delivery report; or a failure).
  bool publish_pending();
  void apply_backpressure();
  void maybe_resume();
  /// A change that cannot be mapped: dead-letter it (errors.policy=dead_letter) or stop.
  /// `source` names the table (or message prefix) for the dead-letter record when `change` is
  /// null.
  bool handle_unmappable(const std::string& reason, std::string_view original,
                         const decoder::Change* change, std::string_view source = {});
  /// A line that cannot be made UTF-8 (connector_encoding.cpp): a mapping error naming its LSN
  /// and, when they can be told, its table and key; the dead-letter record carries the line's
  /// bytes as received.
  void on_unconvertible_line(const pg::XLogData& x, const decoder::TranscodeError& error);
  /// Publishes `dead_letter` (through dead_letters_, the one dead-letter path) in place of an
  /// event of transaction `seq`; false if that failed (the connector then stops).
  bool publish_dead_letter(std::uint64_t seq, const sink::DeadLetter& dead_letter);
  void finish(ExitCode code);
  /// finish()'s blocking part (flush, last status update, slot record), posted by finish() or,
  /// when a set-up step was on setup_worker_, run once it came back.
  void finish_blocking(ExitCode code);
  /// A second SIGINT/SIGTERM came during the shutdown: stop waiting for Kafka.
  bool second_signal() const;
  /// start()'s set-up: the slot record, the producer, the metrics endpoint, the first session
  /// (posted). kOk, or the exit code of a set-up that failed.
  ExitCode begin();

  // The snapshot phase (connector_snapshot.cpp): which tables to read, from which snapshot, and
  // handing over to the stream when it completes.
  /// A new progress record listing the captured tables, saved before the slot is created.
  bool begin_snapshot_progress(const std::string& slot);
  bool save_snapshot_progress();
  /// An existing slot: an unfinished snapshot of it is resumed (at current state). Without proof
  /// that its snapshot finished (`<slot>.snapshot` missing while walrelay has a slot record
  /// (`had_record`), empty, malformed, unreadable or of another slot) every captured table is
  /// read again the same way, with a warning saying why: never taken as done.
  bool resume_snapshot_progress(const std::string& slot, Lsn confirmed_flush_lsn, bool had_record);
  /// The captured row-change tables with a key, as not-done progress entries (what an incremental
  /// snapshot can read); "schema.table, …" of those without one in `keyless`.
  std::vector<snapshot::TableProgress> keyed_snapshot_tables(std::string& keyless) const;
  /// snapshot.mode initial, an existing slot walrelay never streamed from (no slot record, no
  /// initial snapshot progress of it: created by `walrelay slot create`, by SQL or by a DBA): its
  /// exported snapshot is gone, so every captured row-change table with a key is queued durably
  /// for an incremental snapshot read while streaming, with one info line saying why (a warning
  /// names the tables without a key, which it cannot read). Does nothing when the state directory
  /// has initial snapshot progress of the slot (walrelay created it: resume_snapshot_progress's
  /// case). False, with reason_ set, when the progress cannot be read or saved.
  bool queue_snapshot_of_existing_slot(const std::string& slot);
  /// snapshot.mode initial_only: read from a temporary slot's snapshot, keep no slot.
  Outcome prepare_initial_only();
  void run_snapshot();
  /// The incremental snapshot queue saved for this slot (`<state dir>/<slot>.incremental`);
  /// nullopt when there is none. A queue that was lost (the file empty, malformed, unreadable, of
  /// another slot, or missing although the slot record says it was kept) is replaced by every
  /// captured table with a key (what it held is unknown: reading them again loses nothing), with
  /// a warning. Afterwards the file exists (an empty queue too) and the slot record says so.
  [[nodiscard]] std::optional<snapshot::SnapshotProgress> load_incremental_queue();
  /// The slot record loaded at start said `<slot>.incremental` was kept, or this process made sure.
  bool incremental_kept_ = false;
  /// queue_snapshot_of_existing_slot ran in this process (the slot had no record): a later
  /// session's missing `<slot>.snapshot` is that case still, not lost progress.
  bool existing_slot_queued_ = false;
  /// Queues tables (with their acknowledged positions) for an incremental snapshot, durably.
  bool hand_over_to_incremental(const std::vector<snapshot::TableProgress>& tables);
  /// delivery exactly_once, at a session's start: the snapshot progress in `position` (Kafka's last
  /// committed position record) replaces the local files' (`.snapshot` for the same snapshot run,
  /// `.incremental`) for every table it lists (snapshot::reconcile_progress), before they are read.
  /// False with `reason_` set when a file cannot be written.
  bool reconcile_snapshot_progress(const sink::StreamPosition& position);
  /// While streaming: incremental snapshots (signals, new tables, resumed progress).
  void start_incremental();
  /// A watermark or signal message of the stream (the line `x`): handled here (true), never
  /// published. A snapshot signal naming tables whose shapes are not cached waits for their lookups
  /// first (wait_for_lookups): it is handled when the line is processed again.
  bool handle_snapshot_message(const pg::XLogData& x, const decoder::Change& c,
                               std::string_view original);

  // Per-message opaque: transaction seq (bits 0-47), session epoch (48-62), dead-letter (63).
  [[nodiscard]] std::uint64_t opaque(std::uint64_t seq, bool dead_letter) const;

  boost::asio::io_context& io_;
  config::Config cfg_;
  std::unique_ptr<pg::ReplicationStream> stream_;
  // Blocking set-up steps of a session (slot creation, broker probe), off the event loop; while
  // busy, stream_ belongs to the step. Declared after stream_: destroyed (joined) before it.
  app::BlockingWorker setup_worker_{io_.get_executor()};
  pg::CancelHandle setup_cancel_;       // cancels the step's command (a stop while it waits)
  bool finish_after_setup_ = false;     // finish() came while a step was out: finish_blocking after
  decoder::LineTranscoder transcoder_;  // the database's encoding → UTF-8, set each session
  std::string logged_encoding_;         // the server_encoding last logged
  decoder::Wal2JsonDecoder decoder_;
  router::TypeRegistry types_;
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<router::EventRouter> router_;
  /// The consistent point of the slot this process created (zero: it found its slot).
  Lsn created_slot_at_;
  std::unique_ptr<kafka::Producer> producer_;
  sink::Publisher publisher_;  // the publish path shared by the stream and the snapshot
  std::unique_ptr<Heartbeat> heartbeat_;
  sink::AckTracker tracker_;
  StateStore state_;
  std::optional<SlotRecord> record_;
  boost::asio::steady_timer status_timer_;
  boost::asio::steady_timer progress_timer_;
  boost::asio::steady_timer reconnect_timer_;
  boost::asio::steady_timer catalog_check_timer_;
  boost::asio::steady_timer confirm_timer_;
  std::chrono::steady_clock::time_point last_record_save_{};
  /// The slot's retained WAL (from restart_lsn) for the progress line, and the transaction that
  /// holds restart_lsn back, named once (connector_wal_retention.cpp).
  void poll_retained_wal();
  /// The second step: names what holds restart_lsn (`behind_confirmed` bytes before the
  /// confirmed position).
  void name_wal_holder(long long behind_confirmed);
  bool retained_poll_running_ = false;
  long long retained_wal_bytes_ = -1;
  /// At a session's start on an existing slot whose confirmed_flush_lsn (`slot_confirmed`) is
  /// behind the furthest position walrelay confirmed to the server (the slot record): the
  /// server lost confirmations (a PostgreSQL restart keeps a slot's position only as of its last
  /// checkpoint), so the WAL in between is decoded again. Logged and counted once per move back
  /// (connector_slot_rewind.cpp), never an error.
  void note_slot_rewind(Lsn slot_confirmed);
  std::uint64_t slot_rewinds_ = 0;       ///< walrelay_slot_rewinds_total
  std::uint64_t slot_rewind_bytes_ = 0;  ///< walrelay_slot_rewind_bytes_total
  Lsn rewind_reported_;                  ///< the record position the last report was against
  Lsn rewind_reported_from_;             ///< and the slot position it reported

  // Metrics and health (connector_metrics.cpp).
  void start_metrics();
  metrics::Response serve(const std::string& target);
  std::string metrics_text();
  /// Why /ready says no, or empty when ready.
  std::string not_ready_reason();
  /// Seconds since the commit of the oldest change not yet acknowledged (0 when none).
  double lag_seconds();
  /// Remembers a transaction's commit time until its end (`next_lsn`) is acknowledged.
  void note_commit_time(Lsn next_lsn, std::int64_t commit_ts_ms);
  void drop_confirmed_commit_times();
  std::unique_ptr<metrics::HttpServer> http_;
  std::deque<std::pair<Lsn, std::int64_t>> pending_commits_;  // (next LSN, commit ms)
  std::chrono::steady_clock::time_point last_ack_ = std::chrono::steady_clock::now();
  bool standby_ = false;
  std::string restart_lsn_text_;
  std::string wal_holder_named_;
  /// Every source.confirm_interval: a standby status update when the acknowledged position moved.
  void schedule_confirm();
  std::map<std::string, std::string> captured_;  // "schema.table" → identity problem ("" = none)
  std::set<std::size_t> matching_entries_;       // tables entries that matched something
  std::set<std::string> skipped_;                // relations matched but not capturable
  std::uint64_t catalog_alarms_ = 0;
  app::Lifecycle* life_ = nullptr;  // set by start()
  std::minstd_rand jitter_;

  pg::SystemInfo system_;
  Lsn start_lsn_;       // the slot's confirmed_flush_lsn at the session's start
  Lsn received_lsn_;    // newest WAL position received (write LSN)
  Lsn server_wal_end_;  // newest server WAL end seen in a keepalive
  Lsn last_sent_flush_;
  std::chrono::milliseconds status_interval_{10'000};
  std::chrono::milliseconds backoff_{0};
  RepeatedErrorGuard repeated_{5};
  Lsn best_flush_;  // the highest acknowledged position any session reached
  /// A session ended with a server error: counts it (RepeatedErrorGuard) and resets the backoff
  /// if the session delivered anything. True when the connector must stop (exit 6).
  bool note_session_failure(Lsn position, const std::string& reason);
  std::uint64_t epoch_ = 0;            // session number, in every opaque
  std::uint64_t stale_in_flight_ = 0;  // events of ended sessions still awaiting reports
  bool streaming_ = false;
  bool in_txn_ = false;
  bool stopping_ = false;
  bool standby_logged_ = false;
  bool producer_broken_ = false;
  std::optional<ExitCode> exit_code_;
  ExitCode fatal_code_ = ExitCode::kRuntimeError;
  std::string reason_;  // why the last session attempt did not stream
  std::vector<std::pair<std::string, std::string>> plugin_options_;

  // Snapshot phase.
  std::vector<std::pair<std::string, std::string>> snapshot_tables_;  // captured row tables
  // events.partitions leaf: each captured partitioned table's leaves (as of start-up), read in
  // its place by the initial snapshot and by an incremental snapshot signalled for it.
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<std::string, std::string>>>
      leaf_partitions_;
  std::unique_ptr<snapshot::SnapshotProgressStore> snapshot_store_;
  std::optional<snapshot::SnapshotProgress> snapshot_progress_;
  std::string exported_snapshot_;  // empty: resume at current state
  std::unique_ptr<snapshot::Snapshotter> snapshotter_;
  /// The initial snapshot failed with `permission denied`: said once as an error (with the
  /// GRANT), not at every retry.
  bool snapshot_denied_logged_ = false;
  std::unique_ptr<snapshot::SnapshotProgressStore> incremental_store_;
  /// delivery exactly_once, before start_incremental: the incremental queue as saved locally
  /// (tables the initial snapshot handed over), carried in each position record meanwhile.
  std::optional<snapshot::SnapshotProgress> queued_incremental_;
  std::unique_ptr<snapshot::IncrementalSnapshot> incremental_;

  // Records of the current change (or COMMIT) not yet handed to Kafka, and what completes it.
  enum class AfterPublish : std::uint8_t { kChange, kStandalone, kCommit };
  std::span<const Record> pending_;
  /// `pending_` holds an incremental snapshot chunk's rows (exactly_once never splits them over
  /// two Kafka transactions: the position record's progress counts a chunk whole).
  bool pending_chunk_ = false;
  std::size_t pending_next_ = 0;
  AfterPublish pending_after_ = AfterPublish::kChange;
  Lsn pending_lsn_;
  /// errors.policy dead_letter: the dead-letter path the stream and the snapshots share.
  std::optional<sink::DeadLetterWriter> dead_letters_;

  // delivery exactly_once (connector_exactly_once.cpp, docs/delivery.md "Exactly-once delivery"):
  // every record is published inside a Kafka transaction; a PostgreSQL transaction's records share
  // one (unless it exceeds exactly_once.max_transaction_events), several small ones share one up to
  // exactly_once.commit_interval; the position record in <prefix>.walrelay.positions is part of it;
  // the slot is confirmed only up to what a Kafka commit covered.
  [[nodiscard]] bool exactly_once() const {
    return cfg_.delivery == config::Delivery::kExactlyOnce;
  }
  /// Wires the publisher for exactly_once (a new producer): transactions opened on publish,
  /// snapshot reports held until the commit, the position record's reports.
  void eos_attach_publisher();
  /// A fatal producer error that means "fenced" (exactly_once, kafka::is_fencing_error): stops
  /// with exit 8, true.
  bool eos_fenced_by(const kafka::Error& error);
  /// The progress line's exactly_once part ("" otherwise).
  [[nodiscard]] std::string eos_progress() const;
  /// On stop: commits the open Kafka transaction (SIGTERM) or aborts it (any other stop).
  void eos_finish(ExitCode code);
  /// Once per session, after prepare() and before the snapshot progress is read: initialises the
  /// transactional producer (a later session: a new producer, after aborting the last one's open
  /// transaction; fencing an older instance with the same transactional.id), creates the
  /// positions topic if needed, reads the last committed position (read_committed) and takes the
  /// snapshot progress it carries (reconcile_snapshot_progress). Never blocks the event loop for
  /// more than about 100 ms at a time: init_transactions runs in slices (`txn_call_`, 30 s
  /// overall), the topic creation (30 s) and the reading (30 s) are polled on `eos_poll_timer_`.
  /// Meanwhile (`eos_starting_`) nothing is published or confirmed. Then calls `done`: true to
  /// go on; false with `reason_` set to retry the session (fatal/fenced init: with a new
  /// producer). Not at all once the connector stops (stopping_).
  void eos_prepare(std::function<void(bool)> done);
  /// eos_prepare's steps: init_transactions, the positions topic, the position.
  void eos_prepare_init();
  void eos_prepare_topic();
  void eos_poll_topic_creation();
  void eos_prepare_read();
  void eos_poll_position();
  /// Takes the position read (or the reason it could not be) and ends eos_prepare.
  void eos_take_position(std::expected<std::optional<sink::StreamPosition>, std::string> read);
  /// Ends eos_prepare: calls its `done` with `ok`.
  void eos_prepare_end(bool ok);
  std::function<void(bool)> eos_prepare_done_;
  bool eos_starting_ = false;  // eos_prepare is in progress
  /// A producer fatal error reported while eos_prepare runs: acted on once it ended (as when
  /// init_transactions blocked the loop: a fatal init result comes first and replaces the
  /// producer anyway).
  std::optional<kafka::Error> eos_deferred_fatal_;
  std::optional<kafka::TopicAdmin> topic_creation_;  // creating the positions topic
  std::optional<sink::PositionReader> position_reader_;
  /// True when the signal `c` (a logical message or a signal-table row) is in a unit Kafka already
  /// has: its effect is in the position record's progress, so it is not applied again.
  [[nodiscard]] bool eos_signal_in_kafka(const decoder::Change& c) const;
  /// The publisher's before_publish hook: opens a Kafka transaction if none is open.
  bool eos_open();
  /// A unit (PostgreSQL transaction, or a standalone message) starts; `lsn` identifies it as in
  /// the position record (the transaction's end LSN, wal2json nextlsn).
  void eos_on_begin(Lsn lsn);
  /// True when the unit's next record is already in Kafka (at or before the stored position):
  /// it is skipped, not published.
  bool eos_skip_record();
  /// True while the whole current unit is at or before the stored position (a replay).
  [[nodiscard]] bool eos_unit_in_kafka() const;
  /// One record of the current unit was handed to the producer.
  void eos_published();
  /// Before publishing a record: commits first when the open Kafka transaction holds
  /// max_transaction_events (a split inside a large PostgreSQL transaction). False: do not
  /// publish now (a commit is in progress: the stream is paused and resumes after it; or the
  /// session is ending).
  bool eos_split_if_full();
  /// The current unit is complete: commits when the commit interval or count is reached.
  void eos_on_unit_end();
  /// Writes the position record and starts committing the open Kafka transaction; once the
  /// commit succeeded (eos_commit_done), confirms and resumes publishing. The commit runs in
  /// slices of at most 100 ms on the event loop (`txn_call_`); until it
  /// ends (`eos_committing_`) the stream is paused and nothing is published (before_publish
  /// answers ERR__QUEUE_FULL). `blocking`: only set up; eos_finish calls the slices itself.
  void eos_commit(bool blocking = false);
  /// The commit ended with `r`: counts and confirms it, or acts on the failure (eos_failed).
  void eos_commit_done(const kafka::TxnResult& r);
  void eos_schedule_commit();
  /// A transactional call failed: fenced → stop (exit 8); otherwise abort and replay.
  void eos_failed(const kafka::TxnResult& r, const std::string& what);
  /// Aborts the open Kafka transaction and starts a new session (the replay skips what Kafka
  /// has); `new_producer` after a fatal producer error. The abort runs on the event loop
  /// (eos_abort); meanwhile the stream is paused and nothing is published.
  void eos_restart(const std::string& reason, bool new_producer);
  /// The rest of eos_restart once the transaction is aborted (`replace`: it could not be, or the
  /// producer is broken: a new producer takes over): ends the session, starts the next one.
  void eos_restart_done(const std::string& reason, bool replace);
  /// rd_kafka_abort_transaction in slices of at most 100 ms on the event loop (`txn_call_`), 10 s
  /// overall (then a non-ok result, kAbort), `eos_aborting_` meanwhile; drops the held reports
  /// and calls `then` with the outcome (not when the connector stops meanwhile: eos_finish
  /// aborts).
  void eos_abort(std::function<void(const kafka::TxnResult&)> then);
  void eos_fenced(const std::string& reason);
  /// Aborts the open Kafka transaction, if any (a session ends: its records are replayed, and an
  /// open transaction would hold the positions topic's last stable offset back), on the event
  /// loop (eos_abort), then calls `then` (at once when none is open or the producer is broken).
  /// Fenced → stop (exit 8; `then` is not called). Another failure: a new producer takes over
  /// (producer_broken_). While it runs, eos_restarting_ (nothing joins the transaction) and the
  /// next session waits for it (start_session).
  void eos_abort_open(std::function<void()> then = {});
  /// A delivery report with an error in exactly_once mode: the transaction cannot commit.
  void eos_delivery_failed(const std::string& reason, rd_kafka_resp_err_t err);
  /// What may be confirmed to the slot: in exactly_once mode only what a Kafka commit covered.
  [[nodiscard]] Lsn confirmable_lsn() const;
  std::unique_ptr<kafka::Transactions> txn_;
  std::optional<sink::StreamPosition> kafka_position_;  // read at the session's start
  /// The same, kept: a position record never goes back behind it.
  std::optional<sink::StreamPosition> resume_position_;
  bool eos_committing_ = false;  // a commit is in progress (eos_commit .. eos_commit_done)
  bool eos_aborting_ = false;    // an abort is in progress (eos_abort)
  /// The transactional call in progress (commit, abort or init), in slices of at most 100 ms.
  kafka::SlicedCall txn_call_{io_.get_executor()};
  /// eos_prepare polls the positions topic's creation and reading on it.
  boost::asio::steady_timer eos_poll_timer_{io_};
  Lsn commit_covers_;  // the end of the last complete unit in the committing transaction
  bool eos_finish_aborted_ = false;      // eos_finish aborted the open Kafka transaction
  sink::StreamPosition batch_position_;  // what the open Kafka transaction's position says
  bool batch_has_position_ = false;
  std::size_t batch_events_ = 0;
  std::chrono::steady_clock::time_point batch_opened_;
  bool commit_due_ = false;
  Lsn committed_lsn_;  // end of the newest unit a Kafka commit covered
  Lsn unit_lsn_;
  std::int64_t unit_index_ = 0;
  bool unit_open_ = false;
  bool eos_restarting_ = false;
  std::string eos_restart_reason_;  // why eos_restart last acted (logged when stopping)
  std::string positions_topic_;
  boost::asio::steady_timer commit_timer_{io_};
  std::uint64_t eos_commits_ = 0;
  std::uint64_t eos_aborts_ = 0;
  std::uint64_t eos_skipped_ = 0;

  std::uint64_t events_total_ = 0;
  std::uint64_t events_at_last_progress_ = 0;
  std::uint64_t events_at_last_trim_ = 0;  ///< events_total_ when free heap was last released
  std::uint64_t dead_lettered_mapping_ = 0;
  std::uint64_t dead_lettered_oversize_ = 0;
  std::uint64_t dead_lettered_delivery_ = 0;
  std::uint64_t reconnects_ = 0;
  std::chrono::steady_clock::time_point last_progress_;
};

}  // namespace walrelay
