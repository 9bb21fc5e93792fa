// delivery exactly_once: Kafka transactions (KIP-98) aligned with PostgreSQL transactions.
//
// Units: a PostgreSQL transaction (B..C, identified by the end of its commit record, wal2json
// `nextlsn`) or a standalone logical message (identified by its LSN). Every record, whatever its
// source (stream, dead-letter, snapshot), is produced inside an open Kafka transaction (the
// publisher's before_publish hook opens one). A Kafka transaction is committed at a unit's end
// once it has been open for exactly_once.commit_interval or holds
// exactly_once.max_transaction_events records; only a unit larger than that is split, and then the
// position says how many of its records are in. The position record (<prefix>.walrelay.positions,
// key = connector name) is the transaction's last record, so a read_committed consumer sees the
// records and the position together or not at all. At a session's start the last committed
// position is read (after init_transactions aborted whatever a killed instance left open), and
// every record at or before it is skipped. The slot is confirmed only up to the end of the newest
// unit a commit covered: its confirmed_flush_lsn is a WAL-retention hint that may lag Kafka.
//
// Snapshot rows: they are produced inside the same Kafka transactions (committed on the commit
// interval); their delivery reports are held back until the commit, so a chunk counts as
// acknowledged (and the local progress file moves past it) only once a read_committed consumer
// can see it. The position record carries the snapshot progress as of its transaction: the
// initial snapshot's (every row handed to the producer before the commit, so inside a chunk when
// the commit came there: Snapshotter::produced) and the incremental snapshots' (a chunk's rows are
// never split over two Kafka transactions). At a session's start that progress replaces the local
// files' (which may lag it: a crash between a commit and the local save), so a resumed snapshot
// starts right after the last row Kafka has, and a signal in a unit Kafka has is not applied again.
//
// Transactional calls never block the event loop for long: rd_kafka_init_transactions,
// rd_kafka_commit_transaction and rd_kafka_abort_transaction are resumable, so each is called for
// at most kSlice at a time, again from a timer until it completes or its budget is spent
// (kafka::SlicedCall, `txn_call_`; a commit that cannot complete is then aborted, as before). The
// positions topic's creation and reading at a session's start are polled the same way
// (eos_poll_timer_). While a session starts (eos_starting_) or a transaction is aborted
// (eos_restarting_) nothing is published and nothing beyond the last commit is confirmed; the
// next session waits for an abort in progress (start_session). While a commit is in progress
// (eos_committing_) nothing joins the transaction: before_publish answers ERR__QUEUE_FULL, which
// every publisher treats as a full producer queue (the stream is paused and keeps the change's
// records in `pending_`, the snapshot waits for maybe_continue), and no commit starts while a
// change waits for its catalog lookup (its replay may publish). On SIGTERM the process is stopping
// anyway: eos_finish drives the commit itself, blocking, within the same budget.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstdlib>
#include <utility>

#include "walrelay/connector/connector.hpp"

namespace walrelay {

namespace asio = boost::asio;

namespace {

// The transactional calls are resumable (librdkafka >= 1.9: a timed-out call goes on in the
// background and the next call picks it up), so the event loop calls each for at most kSlice at a
// time and comes back on a timer until its budget has passed or kTxnAttempts retriable errors
// other than the slice's own timeout came back (kafka::SlicedCall).
constexpr std::chrono::milliseconds kSlice{100};
constexpr std::chrono::milliseconds kInitBudget{30'000};       // init_transactions
constexpr std::chrono::milliseconds kPositionTimeout{30'000};  // creating, reading the topic
constexpr std::chrono::milliseconds kAbortBudget{10'000};      // abort_transaction
constexpr std::chrono::milliseconds kCommitBudget{60'000};     // commit_transaction
constexpr std::chrono::milliseconds kRetryDelay{100};          // after a retriable error
constexpr int kTxnAttempts = 6;
constexpr std::chrono::milliseconds kFirstWarning{1'000};
constexpr std::chrono::milliseconds kWarningInterval{10'000};
// How often the positions topic's creation is looked at (without waiting).
constexpr std::chrono::milliseconds kTopicPollInterval{20};

kafka::SlicedCall::Limits txn_limits(std::chrono::milliseconds budget) {
  kafka::SlicedCall::Limits l;
  l.slice = kSlice;
  l.budget = budget;
  l.retry_delay = kRetryDelay;
  l.max_errors = kTxnAttempts;
  l.spent = kafka::TxnAction::kAbort;
  l.first_warning = kFirstWarning;
  l.warning_interval = kWarningInterval;
  return l;
}

}  // namespace

void Connector::eos_attach_publisher() {
  if (!exactly_once()) return;
  publisher_.before_publish([this] {
    // While a commit is in progress nothing may join the transaction: the record waits as for a
    // full queue (the stream stays paused, the snapshot waits for maybe_continue).
    if (eos_committing_) return RD_KAFKA_RESP_ERR__QUEUE_FULL;
    if (eos_starting_) return RD_KAFKA_RESP_ERR__STATE;
    return eos_open() ? RD_KAFKA_RESP_ERR_NO_ERROR : RD_KAFKA_RESP_ERR__STATE;
  });
  publisher_.hold_reports(sink::RecordSource::kSnapshot, true);
  publisher_.listen(sink::RecordSource::kPosition, [this](const kafka::DeliveryReport& r) {
    if (r.err != RD_KAFKA_RESP_ERR_NO_ERROR && !stopping_) {
      eos_delivery_failed(std::string("the position record failed: ") + rd_kafka_err2str(r.err),
                          r.err);
    }
  });
}

bool Connector::eos_fenced_by(const kafka::Error& error) {
  if (!exactly_once() || !kafka::is_fencing_error(error)) return false;
  eos_fenced(error.describe());
  return true;
}

std::string Connector::eos_progress() const {
  if (!exactly_once()) return {};
  return fmt::format(
      "; Kafka transactions {} committed / {} aborted, {} records skipped (already "
      "in Kafka)",
      eos_commits_, eos_aborts_, eos_skipped_);
}

void Connector::eos_finish(ExitCode code) {
  if (!producer_ || !txn_ || !txn_->open()) return;
  // Commit what is published (the position says how far, inside a PostgreSQL transaction if need
  // be), unless the transaction is failing or this instance is fenced.
  // Not while an incremental chunk's rows are being published: the progress counts the chunk
  // from its high watermark on, so the Kafka transaction is aborted and the next start reads the
  // chunk again (a commit already in progress holds none of them: it is finished).
  // The process is stopping, so the commit blocks the event loop (in slices, so that a second
  // signal cuts it short), within the same budget as while running; what it does not commit is
  // aborted below and published again by the next start.
  if (code == ExitCode::kOk && !eos_restarting_ && !eos_aborting_ &&
      (eos_committing_ || !pending_chunk_)) {
    stopping_ = false;  // eos_commit acts only while running
    if (!eos_committing_) eos_commit(/*blocking=*/true);
    // finish() stopped driving a commit in progress: it is taken over here (eos_commit_done ends
    // it).
    while (eos_committing_ && !eos_restarting_ && !second_signal() && txn_call_.step()) {
    }
    if (eos_committing_) {
      spdlog::warn("second signal: not waiting for the Kafka commit; the transaction is aborted");
      eos_committing_ = false;
    } else if (eos_restarting_) {
      // The broker refused the commit (an abortable error such as OUT_OF_ORDER_SEQUENCE_NUMBER
      // from a broker that restarted): nothing of it is visible to read_committed consumers, and
      // the slot is confirmed only up to the last commit.
      spdlog::warn("{}; the transaction is aborted and the next start publishes it again",
                   eos_restart_reason_);
    }
    stopping_ = true;
  }
  eos_committing_ = false;
  txn_call_.cancel();
  if (txn_ && txn_->open()) {
    (void)txn_->abort(std::chrono::milliseconds(5000));
    // Its records were acknowledged, but no read_committed consumer sees them: the slot is
    // confirmed only up to the last commit.
    eos_finish_aborted_ = true;
  }
  publisher_.drop_held();
}

Lsn Connector::confirmable_lsn() const {
  if (!exactly_once()) return tracker_.flush_lsn();
  // With a Kafka transaction open, acknowledged records may still be aborted: only what a commit
  // covered counts. With none open every acknowledged record is committed (an abort ends the
  // session and resets the tracker; one on the way out is remembered), and the tracker also covers
  // units without records.
  if (txn_ && (txn_->open() || eos_finish_aborted_)) return committed_lsn_;
  return std::max(committed_lsn_, tracker_.flush_lsn());
}

void Connector::eos_prepare(std::function<void(bool)> done) {
  committed_lsn_ = start_lsn_;
  kafka_position_.reset();
  resume_position_.reset();
  batch_has_position_ = false;
  batch_events_ = 0;
  commit_due_ = false;
  unit_open_ = false;
  eos_restarting_ = false;
  eos_committing_ = false;
  eos_starting_ = true;
  eos_prepare_done_ = std::move(done);
  positions_topic_ = sink::positions_topic(cfg_.topics.prefix);
  if (txn_ && txn_->initialized()) {
    // A later session: another instance may have held the slot and the transactional.id in
    // between, so this one must fence it again, and an initialised producer cannot initialise
    // again (librdkafka): a new producer. Nothing is carried over from the earlier session.
    eos_abort_open([this] {
      if (stopping_) return;
      producer_->stop();
      producer_.reset();
      try {
        create_producer();
      } catch (const std::exception& e) {
        reason_ = e.what();
        eos_prepare_end(false);
        return;
      }
      eos_prepare_init();
    });
    return;
  }
  eos_prepare_init();
}

void Connector::eos_prepare_init() {
  eos_restarting_ = false;  // eos_abort_open set it while it aborted
  if (!txn_) txn_ = std::make_unique<kafka::Transactions>(*producer_);
  if (txn_->initialized()) {
    eos_prepare_topic();
    return;
  }
  txn_call_.start(
      "init_transactions", txn_limits(kInitBudget),
      [this](std::chrono::milliseconds timeout) { return txn_->init(timeout); },
      [this](const kafka::TxnResult& r) {
        if (stopping_) return;
        const std::string tid = kafka::transactional_id_for(cfg_.name);
        if (!r.ok()) {
          reason_ =
              "cannot initialise Kafka transactions (transactional.id " + tid + "): " + r.message;
          if (r.action == kafka::TxnAction::kFatal || r.action == kafka::TxnAction::kFenced) {
            producer_broken_ = true;
          }
          eos_prepare_end(false);
          return;
        }
        spdlog::info(
            "delivery exactly_once: transactional.id {} initialised (any older instance with it "
            "is fenced, a transaction it left open is aborted)",
            tid);
        eos_prepare_topic();
      },
      /*drive=*/true, " (the session waits meanwhile; health and metrics go on)");
}

void Connector::eos_prepare_topic() {
  // Compacted, one partition, the broker's default replication factor (KIP-464).
  const kafka::NewTopic topic{positions_topic_, 1, -1, {{"cleanup.policy", "compact"}}};
  auto admin = kafka::TopicAdmin::connect(cfg_.kafka, "positions");
  std::expected<void, kafka::Error> sent =
      admin ? admin->create(topic, kPositionTimeout) : std::unexpected(admin.error());
  if (!sent) {
    spdlog::warn(
        "cannot create the positions topic {} ({}); walrelay goes on in case it exists or is "
        "created by the broker: create it as a compacted topic with one partition",
        positions_topic_, sent.error().message);
    eos_prepare_read();
    return;
  }
  topic_creation_.emplace(std::move(*admin));
  eos_poll_topic_creation();
}

void Connector::eos_poll_topic_creation() {
  if (stopping_ || !topic_creation_) return;
  auto created = topic_creation_->poll(std::chrono::milliseconds(0));
  if (!created) {
    eos_poll_timer_.expires_after(kTopicPollInterval);
    eos_poll_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) eos_poll_topic_creation();
    });
    return;
  }
  topic_creation_.reset();
  if (!*created) {
    spdlog::warn(
        "cannot create the positions topic {} ({}); walrelay goes on in case it exists or is "
        "created by the broker: create it as a compacted topic with one partition",
        positions_topic_, created->error().message);
  } else if (**created == kafka::CreateOutcome::kCreated) {
    spdlog::info("created the compacted positions topic {}", positions_topic_);
  }
  eos_prepare_read();
}

void Connector::eos_prepare_read() {
  auto reader =
      sink::PositionReader::start(cfg_.kafka, positions_topic_, cfg_.name, kPositionTimeout);
  if (!reader) {
    eos_take_position(std::unexpected(reader.error()));
    return;
  }
  position_reader_.emplace(std::move(*reader));
  eos_poll_position();
}

void Connector::eos_poll_position() {
  if (stopping_ || !position_reader_) return;
  auto read = position_reader_->poll(kSlice);
  if (!read) {
    // Right away, after the handlers that are ready (health, metrics, signals) ran.
    eos_poll_timer_.expires_after(std::chrono::milliseconds(0));
    eos_poll_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) eos_poll_position();
    });
    return;
  }
  position_reader_.reset();
  eos_take_position(std::move(*read));
}

void Connector::eos_take_position(
    std::expected<std::optional<sink::StreamPosition>, std::string> position) {
  if (!position) {
    reason_ = "cannot read the last committed position from " + positions_topic_ + ": " +
              position.error();
    eos_prepare_end(false);
    return;
  }
  if (!*position) {
    spdlog::info(
        "delivery exactly_once: no position for '{}' in {} yet; publishing from the "
        "slot's confirmed_flush_lsn {}",
        cfg_.name, positions_topic_, start_lsn_.to_string());
    eos_prepare_end(true);
    return;
  }
  const sink::StreamPosition& p = **position;
  if (p.system_id != system_.system_id) {
    spdlog::warn(
        "the position stored in {} is of PostgreSQL system {}, not {}: ignored (changes after "
        "the slot's confirmed_flush_lsn {} that Kafka already has are published again)",
        positions_topic_, p.system_id, system_.system_id, start_lsn_.to_string());
    eos_prepare_end(true);
    return;
  }
  if (!reconcile_snapshot_progress(p)) {
    eos_prepare_end(false);
    return;
  }
  kafka_position_ = p;
  kafka_position_->snapshot.reset();  // taken (reconcile_snapshot_progress): not kept in memory
  kafka_position_->incremental.reset();
  resume_position_ = kafka_position_;
  spdlog::info(
      "delivery exactly_once: Kafka has everything up to the transaction ending at {}{} "
      "(timeline {}); the slot resumes from {} and what Kafka has is skipped",
      p.lsn.to_string(),
      p.index < 0 ? std::string() : " (its first " + std::to_string(p.index) + " records)",
      p.timeline, start_lsn_.to_string());
  eos_prepare_end(true);
}

void Connector::eos_prepare_end(bool ok) {
  eos_starting_ = false;
  eos_poll_timer_.cancel();
  topic_creation_.reset();
  position_reader_.reset();
  // A fatal producer error that came meanwhile (on_producer_fatal deferred it).
  if (auto why = std::exchange(eos_deferred_fatal_, std::nullopt); why && !producer_broken_) {
    on_producer_fatal(*why);  // acts from the event loop, after the start
  }
  if (auto done = std::exchange(eos_prepare_done_, nullptr)) done(ok);
}

bool Connector::eos_open() {
  if (eos_restarting_ || eos_starting_ || eos_aborting_ || !txn_ || stopping_) return false;
  if (txn_->open()) return true;
  // With no transaction open everything acknowledged is committed: keep it, so that what may be
  // confirmed never goes back while the new transaction is open.
  committed_lsn_ = std::max(committed_lsn_, tracker_.flush_lsn());
  const kafka::TxnResult r = txn_->begin();
  if (!r.ok()) {
    eos_failed(r, "begin_transaction");
    return false;
  }
  batch_opened_ = std::chrono::steady_clock::now();
  batch_events_ = 0;
  commit_due_ = false;
  eos_schedule_commit();
  return true;
}

void Connector::eos_on_begin(Lsn lsn) {
  if (!exactly_once()) return;
  unit_lsn_ = lsn;
  unit_index_ = 0;
  unit_open_ = true;
}

bool Connector::eos_skip_record() {
  if (!kafka_position_) return false;
  const sink::StreamPosition& p = *kafka_position_;
  const bool skip =
      unit_lsn_ < p.lsn || (unit_lsn_ == p.lsn && (p.index < 0 || unit_index_ < p.index));
  if (!skip) {
    // Past the stored position: nothing later can be at or before it.
    kafka_position_.reset();
    return false;
  }
  ++unit_index_;
  ++eos_skipped_;
  return true;
}

bool Connector::eos_signal_in_kafka(const decoder::Change& c) const {
  if (in_txn_) return eos_unit_in_kafka();
  // A non-transactional message is no unit of its own here: Kafka has it when it has a unit
  // after it.
  return kafka_position_ && c.lsn < kafka_position_->lsn;
}

bool Connector::eos_unit_in_kafka() const {
  if (!kafka_position_) return false;
  return unit_lsn_ < kafka_position_->lsn ||
         (unit_lsn_ == kafka_position_->lsn && kafka_position_->index < 0);
}

void Connector::eos_published() {
  ++unit_index_;
  ++batch_events_;
}

bool Connector::eos_split_if_full() {
  if (eos_committing_) return false;
  if (!txn_ || !txn_->open() || batch_events_ < cfg_.exactly_once.max_transaction_events) {
    return !eos_restarting_;
  }
  spdlog::debug(
      "exactly_once: {} records in the Kafka transaction; committing inside the "
      "transaction ending at {} after its record {}",
      batch_events_, unit_lsn_.to_string(), unit_index_);
  eos_commit();
  return !eos_committing_ && !eos_restarting_ && !stopping_;
}

void Connector::eos_on_unit_end() {
  if (!exactly_once()) return;
  unit_open_ = false;
  batch_position_ = {system_.system_id, system_.timeline, unit_lsn_, -1, {}, {}};
  batch_has_position_ = true;
  if (!txn_ || !txn_->open() || eos_restarting_ || eos_committing_) return;
  if (commit_due_ || batch_events_ >= cfg_.exactly_once.max_transaction_events ||
      std::chrono::steady_clock::now() - batch_opened_ >= cfg_.exactly_once.commit_interval) {
    eos_commit();
  }
}

void Connector::eos_schedule_commit() {
  commit_timer_.expires_at(batch_opened_ + cfg_.exactly_once.commit_interval);
  commit_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_ || eos_restarting_ || eos_committing_ || !txn_ || !txn_->open()) return;
    // Never in the middle of a PostgreSQL transaction (that is the split's job): at its end. Nor
    // while a change waits for its catalog lookup: it is processed (and may need to publish, e.g.
    // a dead-letter record) when the lookup answers, which must not be during the commit.
    if (unit_open_ || !pending_.empty() || parked_) {
      commit_due_ = true;
      return;
    }
    eos_commit();
  });
}

void Connector::eos_commit(bool blocking) {
  if (!txn_ || !txn_->open() || eos_restarting_ || eos_committing_) return;
  commit_timer_.cancel();
  // The position: the last complete unit, or inside the current one (a split, or a stop).
  sink::StreamPosition position = batch_position_;
  bool has_position = batch_has_position_;
  if (unit_open_) {
    position = {system_.system_id, system_.timeline, unit_lsn_, unit_index_, {}, {}};
    has_position = true;
  }
  if (!has_position && (snapshotter_ || incremental_)) {
    // Only snapshot rows so far (the initial snapshot, before the stream): the stream stands
    // where this session started.
    position = resume_position_.value_or(
        sink::StreamPosition{system_.system_id, system_.timeline, start_lsn_, -1, {}, {}});
    has_position = true;
  }
  // Never behind the position this session started from (a transaction holding only records of
  // a replayed unit, e.g. snapshot rows, must not move the stored position back).
  if (resume_position_ && has_position &&
      (position.lsn < resume_position_->lsn ||
       (position.lsn == resume_position_->lsn &&
        (resume_position_->index < 0 ||
         (position.index >= 0 && position.index < resume_position_->index))))) {
    position = *resume_position_;
  }
  // The snapshot progress as of this transaction (every snapshot row in it counted).
  position.snapshot.reset();
  position.incremental.reset();
  if (snapshotter_) position.snapshot = snapshotter_->produced();
  if (incremental_ && !incremental_->progress().tables.empty()) {
    position.incremental = incremental_->progress();
  } else if (!incremental_ && queued_incremental_ && !queued_incremental_->tables.empty()) {
    position.incremental = *queued_incremental_;  // handed over during the initial snapshot
  }
  std::string value;
  if (has_position) {
    value = sink::encode_position(position);
    const Record rec{positions_topic_, std::string_view(cfg_.name), std::string_view(value), {}, 0};
    const sink::PublishResult published = publisher_.publish(sink::RecordSource::kPosition, rec, 0);
    if (!published.queued()) {
      if (!eos_restarting_ && !stopping_) {
        eos_restart(std::string("cannot produce the position record: ") + published.error(),
                    published.status == sink::PublishStatus::kFatal);
      }
      return;
    }
  }
  // Test hook (tests/integration/durability/exactly_once_test.cpp): WALRELAY_TEST_ABORT_EVERY=N
  // turns every N-th commit into an abortable failure, to exercise abort and replay on a real
  // broker. Unset in production.
  static const long abort_every = [] {
    const char* v = std::getenv("WALRELAY_TEST_ABORT_EVERY");
    return v != nullptr ? std::strtol(v, nullptr, 10) : 0L;
  }();
  if (abort_every > 0 &&
      (eos_commits_ + eos_aborts_ + 1) % static_cast<std::uint64_t>(abort_every) == 0) {
    kafka::TxnResult injected;
    injected.action = kafka::TxnAction::kAbort;
    injected.message = "injected abort (WALRELAY_TEST_ABORT_EVERY)";
    eos_failed(injected, "commit_transaction");
    return;
  }
  // From here until the commit ends nothing joins the transaction (before_publish answers
  // ERR__QUEUE_FULL); when it takes more than a slice the stream is paused and the event loop
  // goes on between the slices.
  eos_committing_ = true;
  commit_covers_ = has_position && position.index < 0 ? position.lsn : Lsn{};
  // Driven from the event loop unless blocking (eos_finish calls the slices itself); a quick
  // commit is done (eos_commit_done ran) when start returns.
  txn_call_.start(
      "commit_transaction", txn_limits(kCommitBudget),
      [this](std::chrono::milliseconds timeout) { return txn_->commit(timeout); },
      [this](const kafka::TxnResult& r) { eos_commit_done(r); }, !blocking,
      " (the stream waits meanwhile; health, metrics and standby status updates go on)");
  // Longer than a slice: no change is decoded meanwhile (a split's caller keeps its records in
  // `pending_`); eos_commit_done resumes the stream.
  if (!blocking && eos_committing_ && !stopping_ && streaming_ && stream_) stream_->pause();
}

void Connector::eos_commit_done(const kafka::TxnResult& r) {
  eos_committing_ = false;
  if (!r.ok()) {
    eos_failed(r, "commit_transaction");  // nothing more when eos_restart already acts
    return;
  }
  ++eos_commits_;
  if (const auto took = std::chrono::steady_clock::now() - txn_call_.started();
      took >= kFirstWarning) {
    spdlog::info("commit_transaction completed after {:.1f} s",
                 std::chrono::duration<double>(took).count());
  }
  if (commit_covers_ > committed_lsn_) committed_lsn_ = commit_covers_;
  // A failure during the commit (a delivery report) ends the session: nothing to resume.
  if (eos_restarting_) return;
  batch_events_ = 0;
  commit_due_ = false;
  publisher_.release_held();  // snapshot rows now visible to read_committed consumers
  if (snapshotter_) snapshotter_->maybe_continue();
  // Confirm after the commit (source.confirm_interval rate-limits the rest).
  if (streaming_ && !stopping_ && confirmable_lsn() > last_sent_flush_) send_status(false);
  // The delivery reports served during the commit may have made room: resume a paused stream,
  // from the event loop (this may run inside publish_pending).
  if (streaming_ && stream_ && stream_->paused()) asio::post(io_, [this] { maybe_resume(); });
}

void Connector::eos_failed(const kafka::TxnResult& r, const std::string& what) {
  if (stopping_) return;
  const std::string reason = what + " failed: " + r.message;
  switch (r.action) {
    case kafka::TxnAction::kNone:
      return;
    case kafka::TxnAction::kFenced:
      eos_fenced(reason);
      return;
    case kafka::TxnAction::kFatal:
      eos_restart(reason + " (fatal: a new producer takes over)", true);
      return;
    case kafka::TxnAction::kRetry:
    case kafka::TxnAction::kAbort:
      eos_restart(reason, false);
      return;
  }
}

void Connector::eos_restart(const std::string& reason, bool new_producer) {
  // While a session starts no transaction is open: a failure reported meanwhile (of an earlier
  // session's record) has nothing to abort, and the session being started replays it anyway.
  if (eos_restarting_ || stopping_ || eos_starting_) return;
  eos_restarting_ = true;
  eos_restart_reason_ = reason;
  eos_committing_ = false;  // a commit in progress is not resumed: the transaction is aborted
  commit_timer_.cancel();
  // No more slices of a commit in progress (one under way on the stack still ends in
  // eos_commit_done, which counts a commit that completed and does nothing more).
  txn_call_.stop_driving();
  if (stream_) stream_->pause();
  // Act outside the current call chain (a delivery report or librdkafka's commit may be on the
  // stack).
  asio::post(io_, [this, reason, new_producer] {
    if (stopping_) return;
    if (!eos_aborting_) txn_call_.cancel();
    if (new_producer || !txn_ || !txn_->open() || eos_aborting_) {
      // eos_aborting_: end_session's abort is under way; start_session waits for it.
      eos_restart_done(reason, new_producer);
      return;
    }
    eos_abort([this, reason](const kafka::TxnResult& a) {
      if (a.action == kafka::TxnAction::kFenced) {
        eos_restarting_ = false;
        eos_fenced("abort_transaction failed: " + a.message);
        return;
      }
      if (!a.ok())
        spdlog::warn("abort_transaction failed: {}; a new producer takes over", a.message);
      eos_restart_done(reason, !a.ok());
    });
  });
}

void Connector::eos_restart_done(const std::string& reason, bool replace) {
  if (stopping_) return;
  ++eos_aborts_;
  publisher_.drop_held();
  if (replace) producer_broken_ = true;
  if (snapshotter_) {
    snapshotter_.reset();  // resumes from its last acknowledged (committed) chunk
    if (stream_) stream_->close();
  }
  // A session that committed beyond any before it starts the backoff over (as a server error
  // does, note_session_failure): an abort now and then must not grow the delay for good.
  if (streaming_ && confirmable_lsn() > best_flush_) {
    best_flush_ = confirmable_lsn();
    backoff_ = std::chrono::milliseconds(0);
  }
  if (streaming_) {
    end_session();
  } else {
    reconnect_timer_.cancel();
  }
  after_session(Outcome::kRetry, "Kafka transaction aborted (" + reason +
                                     "); publishing again from the last committed position");
}

void Connector::eos_abort(std::function<void(const kafka::TxnResult&)> then) {
  eos_aborting_ = true;
  txn_call_.start(
      "abort_transaction", txn_limits(kAbortBudget),
      [this](std::chrono::milliseconds timeout) { return txn_->abort(timeout); },
      [this, then = std::move(then)](const kafka::TxnResult& r) {
        eos_aborting_ = false;
        publisher_.drop_held();
        if (stopping_) return;
        then(r);
      },
      /*drive=*/true, " (nothing is published meanwhile; health and metrics go on)");
}

void Connector::eos_fenced(const std::string& reason) {
  if (stopping_) return;
  spdlog::error(
      "fenced: another walrelay instance with transactional.id {} has taken over ({}), or the "
      "transaction coordinator aborted a Kafka transaction that stayed open longer than "
      "transaction.timeout.ms (e.g. during a broker outage), which fences the same way. This "
      "instance publishes nothing more and stops without confirming anything Kafka did not "
      "commit; started again, it resumes exactly once from the last committed position",
      kafka::transactional_id_for(cfg_.name), reason);
  // finish() confirms at most what a Kafka commit covered (confirmable_lsn) and commits nothing.
  finish(ExitCode::kFenced);
}

void Connector::eos_abort_open(std::function<void()> then) {
  if (!exactly_once() || !txn_ || !txn_->open() || producer_broken_ || eos_aborting_) {
    if (then) then();
    return;
  }
  eos_restarting_ = true;  // nothing joins the transaction meanwhile
  eos_abort([this, then = std::move(then)](const kafka::TxnResult& a) {
    if (a.ok()) {
      ++eos_aborts_;
      spdlog::info("aborted the open Kafka transaction; the next session publishes it again");
    } else if (a.action == kafka::TxnAction::kFenced) {
      eos_fenced("abort_transaction failed: " + a.message);
      return;
    } else {
      spdlog::warn("abort_transaction failed: {}; a new producer takes over", a.message);
      producer_broken_ = true;
    }
    if (then) then();
  });
}

void Connector::eos_delivery_failed(const std::string& reason, rd_kafka_resp_err_t err) {
  if (kafka::is_fencing_error(err)) {
    eos_fenced(reason);
    return;
  }
  spdlog::error("{}; the Kafka transaction cannot commit", reason);
  eos_restart(reason, err == RD_KAFKA_RESP_ERR__FATAL);
}

}  // namespace walrelay
