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
// Commits never block the event loop for long: rd_kafka_commit_transaction is resumable, so it is
// called for at most kCommitSlice at a time, again from commit_timer_ until it completes or its
// budget is spent (then the transaction is aborted, as before). While a commit is in progress
// (eos_committing_) nothing joins the transaction: before_publish answers ERR__QUEUE_FULL, which
// every publisher treats as a full producer queue (the stream is paused and keeps the change's
// records in `pending_`, the snapshot waits for maybe_continue), and no commit starts while a
// change waits for its catalog lookup (its replay may publish). On SIGTERM the process is stopping
// anyway: eos_finish drives the commit itself, blocking, within the same budget.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstdlib>

#include "connector.hpp"

namespace walrelay {

namespace asio = boost::asio;

namespace {

constexpr std::chrono::milliseconds kInitTimeout{30'000};
constexpr std::chrono::milliseconds kPositionTimeout{30'000};
constexpr std::chrono::milliseconds kCommitTimeout{10'000};  // abort_transaction
// A commit is resumable (librdkafka >= 1.9: a timed-out commit_transaction goes on in the
// background and the next call picks it up), so the event loop calls it for at most kCommitSlice
// at a time and comes back on a timer until kCommitBudget has passed or kCommitAttempts retriable
// errors other than the slice's own timeout came back; then the transaction is aborted.
constexpr std::chrono::milliseconds kCommitSlice{100};
constexpr std::chrono::milliseconds kCommitBudget{60'000};
constexpr std::chrono::milliseconds kCommitRetryDelay{100};  // after a retriable error
constexpr int kCommitAttempts = 6;
constexpr std::chrono::seconds kCommitFirstWarning{1};
constexpr std::chrono::seconds kCommitWarningInterval{10};

}  // namespace

void Connector::eos_attach_publisher() {
  if (!exactly_once()) return;
  publisher_.before_publish([this] {
    // While a commit is in progress nothing may join the transaction: the record waits as for a
    // full queue (the stream stays paused, the snapshot waits for maybe_continue).
    if (eos_committing_) return RD_KAFKA_RESP_ERR__QUEUE_FULL;
    return eos_open() ? RD_KAFKA_RESP_ERR_NO_ERROR : RD_KAFKA_RESP_ERR__STATE;
  });
  publisher_.hold_reports(sink::RecordSource::kSnapshot, true);
  publisher_.listen(sink::RecordSource::kPosition, [this](const sink::DeliveryReport& r) {
    if (r.err != RD_KAFKA_RESP_ERR_NO_ERROR && !stopping_) {
      eos_delivery_failed(std::string("the position record failed: ") + rd_kafka_err2str(r.err),
                          r.err);
    }
  });
}

bool Connector::eos_fenced_by(const std::string& reason) {
  if (!exactly_once() || !(reason.starts_with("_FENCED") || reason.starts_with("PRODUCER_FENCED") ||
                           reason.starts_with("INVALID_PRODUCER_EPOCH"))) {
    return false;
  }
  eos_fenced(reason);
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
  if (code == ExitCode::kOk && !eos_restarting_ && (eos_committing_ || !pending_chunk_)) {
    stopping_ = false;  // eos_commit acts only while running
    if (!eos_committing_) eos_commit(/*blocking=*/true);
    while (eos_committing_ && !eos_restarting_ && !second_signal()) {
      const sink::TxnResult r = eos_commit_slice();
      if (r.action != sink::TxnAction::kRetry) eos_commit_done(r);
    }
    if (eos_committing_) {
      spdlog::warn("second signal: not waiting for the Kafka commit; the transaction is aborted");
      eos_committing_ = false;
    }
    stopping_ = true;
  }
  eos_committing_ = false;
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

bool Connector::eos_prepare() {
  if (!exactly_once()) return true;
  committed_lsn_ = start_lsn_;
  kafka_position_.reset();
  resume_position_.reset();
  batch_has_position_ = false;
  batch_events_ = 0;
  commit_due_ = false;
  unit_open_ = false;
  eos_restarting_ = false;
  eos_committing_ = false;
  positions_topic_ = sink::positions_topic(cfg_.topics.prefix);
  const std::string tid = sink::transactional_id_for(cfg_.name);
  if (txn_ && txn_->initialized()) {
    // A later session: another instance may have held the slot and the transactional.id in
    // between, so this one must fence it again, and an initialised producer cannot initialise
    // again (librdkafka): a new producer. Nothing is carried over from the earlier session.
    eos_abort_open();
    if (stopping_) return false;
    producer_->stop();
    producer_.reset();
    try {
      create_producer();
    } catch (const std::exception& e) {
      reason_ = e.what();
      return false;
    }
  }
  if (!txn_) txn_ = std::make_unique<sink::KafkaTransactions>(*producer_);
  if (!txn_->initialized()) {
    const sink::TxnResult r = txn_->init(kInitTimeout);
    if (!r.ok()) {
      reason_ = "cannot initialise Kafka transactions (transactional.id " + tid + "): " + r.message;
      if (r.action == sink::TxnAction::kFatal || r.action == sink::TxnAction::kFenced) {
        producer_broken_ = true;
      }
      return false;
    }
    spdlog::info(
        "delivery exactly_once: transactional.id {} initialised (any older instance with it is "
        "fenced, a transaction it left open is aborted)",
        tid);
  }
  if (auto created = sink::ensure_positions_topic(cfg_.kafka, positions_topic_, kPositionTimeout);
      !created) {
    spdlog::warn(
        "cannot create the positions topic {} ({}); walrelay goes on in case it exists or is "
        "created by the broker: create it as a compacted topic with one partition",
        positions_topic_, created.error());
  }
  auto position = sink::read_position(cfg_.kafka, positions_topic_, cfg_.name, kPositionTimeout);
  if (!position) {
    reason_ = "cannot read the last committed position from " + positions_topic_ + ": " +
              position.error();
    return false;
  }
  if (!*position) {
    eos_prepared_ = true;
    spdlog::info(
        "delivery exactly_once: no position for '{}' in {} yet; publishing from the "
        "slot's confirmed_flush_lsn {}",
        cfg_.name, positions_topic_, start_lsn_.to_string());
    return true;
  }
  const sink::StreamPosition& p = **position;
  if (p.system_id != system_.system_id) {
    eos_prepared_ = true;
    spdlog::warn(
        "the position stored in {} is of PostgreSQL system {}, not {}: ignored (changes after "
        "the slot's confirmed_flush_lsn {} that Kafka already has are published again)",
        positions_topic_, p.system_id, system_.system_id, start_lsn_.to_string());
    return true;
  }
  if (!reconcile_snapshot_progress(p)) return false;
  kafka_position_ = p;
  kafka_position_->snapshot.reset();  // taken (reconcile_snapshot_progress): not kept in memory
  kafka_position_->incremental.reset();
  resume_position_ = kafka_position_;
  eos_prepared_ = true;
  spdlog::info(
      "delivery exactly_once: Kafka has everything up to the transaction ending at {}{} "
      "(timeline {}); the slot resumes from {} and what Kafka has is skipped",
      p.lsn.to_string(),
      p.index < 0 ? std::string() : " (its first " + std::to_string(p.index) + " records)",
      p.timeline, start_lsn_.to_string());
  return true;
}

bool Connector::eos_open() {
  if (eos_restarting_ || !txn_ || stopping_) return false;
  if (txn_->open()) return true;
  // With no transaction open everything acknowledged is committed: keep it, so that what may be
  // confirmed never goes back while the new transaction is open.
  committed_lsn_ = std::max(committed_lsn_, tracker_.flush_lsn());
  const sink::TxnResult r = txn_->begin();
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
    const rd_kafka_resp_err_t err = publisher_.publish(sink::RecordSource::kPosition, rec, 0);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (!eos_restarting_ && !stopping_) {
        eos_restart(std::string("cannot produce the position record: ") + rd_kafka_err2str(err),
                    err == RD_KAFKA_RESP_ERR__FATAL);
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
    sink::TxnResult injected;
    injected.action = sink::TxnAction::kAbort;
    injected.message = "injected abort (WALRELAY_TEST_ABORT_EVERY)";
    eos_failed(injected, "commit_transaction");
    return;
  }
  // From here until the commit ends nothing joins the transaction (before_publish answers
  // ERR__QUEUE_FULL); when it takes more than a slice the stream is paused and the event loop
  // goes on between the slices.
  eos_committing_ = true;
  commit_started_ = std::chrono::steady_clock::now();
  commit_next_warning_ = commit_started_ + kCommitFirstWarning;
  commit_attempts_ = 0;
  commit_covers_ = has_position && position.index < 0 ? position.lsn : Lsn{};
  if (!blocking) eos_commit_step();  // eos_finish drives a blocking one itself
}

void Connector::eos_commit_step() {
  if (!eos_committing_ || stopping_) return;  // eos_finish takes an interrupted commit over
  const sink::TxnResult r = eos_commit_slice();
  if (r.action != sink::TxnAction::kRetry) {
    eos_commit_done(r);
    return;
  }
  if (stopping_ || !eos_committing_) return;  // eos_finish, or eos_restart during the slice
  // No change is decoded meanwhile (a split's caller keeps its records in `pending_`);
  // eos_commit_done resumes the stream.
  if (streaming_ && stream_) stream_->pause();
  // Right away after the slice's own timeout (the delivery reports and the other handlers ran in
  // between); after a short delay when the coordinator answered with a retriable error.
  commit_timer_.expires_after(r.code == RD_KAFKA_RESP_ERR__TIMED_OUT ? std::chrono::milliseconds(0)
                                                                     : kCommitRetryDelay);
  commit_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) eos_commit_step();
  });
}

sink::TxnResult Connector::eos_commit_slice() {
  const auto now = std::chrono::steady_clock::now();
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(commit_started_ + kCommitBudget - now);
  sink::TxnResult r = txn_->commit(std::clamp(left, std::chrono::milliseconds(1), kCommitSlice));
  if (r.action != sink::TxnAction::kRetry || eos_restarting_) return r;
  const auto elapsed = std::chrono::steady_clock::now() - commit_started_;
  const double secs = std::chrono::duration<double>(elapsed).count();
  if (r.code != RD_KAFKA_RESP_ERR__TIMED_OUT) {
    ++commit_attempts_;
    spdlog::warn("commit_transaction (attempt {} of {}): {}; retrying", commit_attempts_,
                 kCommitAttempts, r.message);
  }
  if (commit_attempts_ >= kCommitAttempts || elapsed >= kCommitBudget) {
    r.action = sink::TxnAction::kAbort;
    r.message = fmt::format("not committed after {:.1f} s and {} retriable errors (last: {})", secs,
                            commit_attempts_, r.message);
    return r;
  }
  if (std::chrono::steady_clock::now() >= commit_next_warning_) {
    commit_next_warning_ = std::chrono::steady_clock::now() + kCommitWarningInterval;
    spdlog::warn(
        "commit_transaction has not completed after {:.1f} s ({}); still trying for up to {} s "
        "(the stream waits meanwhile; health, metrics and standby status updates go on)",
        secs, r.message, std::chrono::duration_cast<std::chrono::seconds>(kCommitBudget).count());
  }
  return r;
}

void Connector::eos_commit_done(const sink::TxnResult& r) {
  eos_committing_ = false;
  if (!r.ok()) {
    eos_failed(r, "commit_transaction");  // nothing more when eos_restart already acts
    return;
  }
  ++eos_commits_;
  if (const auto took = std::chrono::steady_clock::now() - commit_started_;
      took >= kCommitFirstWarning) {
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

void Connector::eos_failed(const sink::TxnResult& r, const std::string& what) {
  if (stopping_) return;
  const std::string reason = what + " failed: " + r.message;
  switch (r.action) {
    case sink::TxnAction::kNone:
      return;
    case sink::TxnAction::kFenced:
      eos_fenced(reason);
      return;
    case sink::TxnAction::kFatal:
      eos_restart(reason + " (fatal: a new producer takes over)", true);
      return;
    case sink::TxnAction::kRetry:
    case sink::TxnAction::kAbort:
      eos_restart(reason, false);
      return;
  }
}

void Connector::eos_restart(const std::string& reason, bool new_producer) {
  if (eos_restarting_ || stopping_) return;
  eos_restarting_ = true;
  eos_committing_ = false;  // a commit in progress is not resumed: the transaction is aborted
  commit_timer_.cancel();
  if (stream_) stream_->pause();
  // Act outside the current call chain (a delivery report or librdkafka's commit may be on the
  // stack).
  asio::post(io_, [this, reason, new_producer] {
    if (stopping_) return;
    bool replace = new_producer;
    if (!replace && txn_ && txn_->open()) {
      const sink::TxnResult a = txn_->abort(kCommitTimeout);
      if (a.action == sink::TxnAction::kFenced) {
        eos_restarting_ = false;
        eos_fenced("abort_transaction failed: " + a.message);
        return;
      }
      if (!a.ok()) {
        spdlog::warn("abort_transaction failed: {}; a new producer takes over", a.message);
        replace = true;
      }
    }
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
  });
}

void Connector::eos_fenced(const std::string& reason) {
  if (stopping_) return;
  spdlog::error(
      "fenced: another walrelay instance with transactional.id {} has taken over ({}), or the "
      "transaction coordinator aborted a Kafka transaction that stayed open longer than "
      "transaction.timeout.ms (e.g. during a broker outage), which fences the same way. This "
      "instance publishes nothing more and stops without confirming anything Kafka did not "
      "commit; started again, it resumes exactly once from the last committed position",
      sink::transactional_id_for(cfg_.name), reason);
  // finish() confirms at most what a Kafka commit covered (confirmable_lsn) and commits nothing.
  finish(ExitCode::kFenced);
}

void Connector::eos_abort_open() {
  if (!exactly_once() || !txn_ || !txn_->open() || producer_broken_) return;
  const sink::TxnResult a = txn_->abort(kCommitTimeout);
  publisher_.drop_held();
  if (a.ok()) {
    ++eos_aborts_;
    spdlog::info("aborted the open Kafka transaction; the next session publishes it again");
  } else if (a.action == sink::TxnAction::kFenced) {
    eos_fenced("abort_transaction failed: " + a.message);
  } else {
    spdlog::warn("abort_transaction failed: {}; a new producer takes over", a.message);
    producer_broken_ = true;
  }
}

void Connector::eos_delivery_failed(const std::string& reason, rd_kafka_resp_err_t err) {
  if (sink::is_fencing_error(err)) {
    eos_fenced(reason);
    return;
  }
  spdlog::error("{}; the Kafka transaction cannot commit", reason);
  eos_restart(reason, err == RD_KAFKA_RESP_ERR__FATAL);
}

}  // namespace walrelay
