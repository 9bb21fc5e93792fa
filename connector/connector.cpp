#include "walrelay/connector/connector.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <csignal>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "walrelay/app/allocator.hpp"
#include "walrelay/connector/preflight.hpp"
#include "walrelay/core/headers.hpp"
#include "walrelay/decoder/plugin_options.hpp"
#include "walrelay/kafka/security.hpp"

namespace walrelay {

namespace asio = boost::asio;

namespace {

std::string version_string() {
  return WALRELAY_VERSION;
}

constexpr std::uint64_t kSeqMask = (1ull << 48) - 1;
constexpr std::uint64_t kEpochMask = 0x3FF;  // 10 bits: the publisher keeps bits 59-63
constexpr std::uint64_t kDeadLetterBit = 1ull << 58;

}  // namespace

bool Connector::second_signal() const {
  return life_ != nullptr && life_->stop_now();
}

Connector::Connector(asio::io_context& io, config::Config cfg)
    : io_(io),
      cfg_(std::move(cfg)),
      state_(cfg_.source.state_dir.empty() ? StateStore::default_dir() : cfg_.source.state_dir,
             cfg_.source.slot),
      status_timer_(io),
      progress_timer_(io),
      reconnect_timer_(io),
      catalog_check_timer_(io),
      confirm_timer_(io),
      jitter_(
          static_cast<std::uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count())),
      status_interval_(cfg_.source.status_interval),
      repeated_(static_cast<int>(cfg_.source.max_repeated_errors)) {
  if (cfg_.errors.policy == config::ErrorPolicy::kDeadLetter) {
    dead_letters_.emplace(publisher_, cfg_.errors.dead_letter_topic);
  }
}

Connector::~Connector() = default;

std::uint64_t Connector::opaque(std::uint64_t seq, bool dead_letter) const {
  return (seq & kSeqMask) | ((epoch_ & kEpochMask) << 48) | (dead_letter ? kDeadLetterBit : 0);
}

Connector::Outcome Connector::fatal(ExitCode code) {
  fatal_code_ = code;
  return Outcome::kFatal;
}

void Connector::start(app::Lifecycle& life) {
  life_ = &life;
  const ExitCode started = begin();
  if (started != ExitCode::kOk) life.done(started);
}

void Connector::stop(app::StopMode mode) {
  // kNow: the blocking shutdown steps poll Lifecycle::stop_now (second_signal) themselves.
  if (mode == app::StopMode::kGraceful) finish(ExitCode::kOk);
}

ExitCode Connector::begin() {
  spdlog::info("walrelay {} starting connector '{}' (slot record {})", version_string(), cfg_.name,
               state_.path());
  auto loaded = state_.load();
  if (!loaded) {
    spdlog::error("{}", loaded.error());
    return ExitCode::kRuntimeError;
  }
  record_ = *loaded;
  incremental_kept_ = record_ && record_->incremental_kept;
  // Allowed, but weaker than the defaults: say so once.
  if (auto it = cfg_.kafka.properties.find("acks");
      it != cfg_.kafka.properties.end() && it->second != "all" && it->second != "-1") {
    spdlog::warn(
        "kafka.properties.acks={}: an acknowledged event can still be lost if the "
        "partition leader fails; walrelay's guarantee assumes acks=all",
        it->second);
  }
  if (auto it = cfg_.kafka.properties.find("message.timeout.ms");
      it != cfg_.kafka.properties.end() && it->second != "0") {
    spdlog::warn(
        "kafka.properties.message.timeout.ms={}: during a broker outage events time out "
        "and count as failed deliveries ({}), instead of waiting",
        it->second, dead_letters_ ? "dead-lettered" : "walrelay stops");
  }
  try {
    create_producer();
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return ExitCode::kConfigError;
  }
  start_metrics();
  asio::post(io_, [this] { start_session(); });
  return ExitCode::kOk;
}

void Connector::create_producer() {
  txn_.reset();  // bound to the producer it was made for
  producer_ = std::make_unique<kafka::Producer>(
      io_.get_executor(),
      exactly_once()
          ? kafka::transactional_properties(cfg_.kafka, kafka::transactional_id_for(cfg_.name))
          : cfg_.kafka,
      "walrelay-" + cfg_.name,
      [this](const kafka::DeliveryReport& r) { publisher_.on_delivery(r); },
      [this](const kafka::Error& error) { on_producer_fatal(error); });
  publisher_.attach(producer_.get());
  publisher_.listen(sink::RecordSource::kStream,
                    [this](const kafka::DeliveryReport& r) { on_delivery(r); });
  publisher_.listen(sink::RecordSource::kSnapshot, [this](const kafka::DeliveryReport& r) {
    if (!snapshotter_) return;  // a report of an abandoned snapshot run: its chunk is read again
    snapshotter_->on_delivery(r);
    if (snapshotter_) snapshotter_->maybe_continue();
  });
  eos_attach_publisher();
  producer_->start();
  stale_in_flight_ = 0;  // a new producer: nothing of the old one will report
}

void Connector::start_session() {
  if (stopping_) return;
  if (eos_aborting_) {
    // exactly_once: the last session's Kafka transaction is still being aborted (in slices on
    // this event loop): the new session starts once it is.
    reconnect_timer_.expires_after(std::chrono::milliseconds(100));
    reconnect_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || stopping_) return;
      start_session();
    });
    return;
  }
  if (producer_broken_) {
    producer_->stop();
    producer_.reset();
    try {
      create_producer();
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      finish(ExitCode::kConfigError);
      return;
    }
    producer_broken_ = false;
  }
  stream_ = std::make_unique<pg::ReplicationStream>(io_.get_executor(), cfg_.source.conninfo,
                                                    "walrelay-" + cfg_.name);
  reason_.clear();
  after_prepare_ = nullptr;
  prepared(prepare());
}

void Connector::prepared(Outcome outcome) {
  if (outcome == Outcome::kPending) return;  // the set-up step calls again when it is back
  if (outcome == Outcome::kStreaming && producer_broken_) {
    // The producer failed while a set-up step was off the loop (on_producer_fatal): a new one
    // takes over in the next session.
    reason_ =
        "Kafka producer fatal error during the session's set-up; restarting with a new "
        "producer";
    outcome = Outcome::kRetry;
  }
  if (outcome != Outcome::kStreaming) {
    session_not_started(outcome);
    return;
  }
  if (!exactly_once()) {
    continue_session();
    return;
  }
  // exactly_once: Kafka's last committed position first (with the snapshot progress consumers
  // saw, so that a resumed snapshot starts right after its last committed row), without blocking
  // the event loop.
  eos_prepare([this](bool prepared) {
    if (stopping_) return;
    if (!prepared) {
      session_not_started(Outcome::kRetry);
      return;
    }
    continue_session();
  });
}

void Connector::session_not_started(Outcome outcome) {
  stream_->close();
  after_session(outcome, reason_);
}

void Connector::continue_session() {
  if (auto after = std::exchange(after_prepare_, nullptr)) {
    if (const Outcome outcome = after(); outcome != Outcome::kStreaming) {
      session_not_started(outcome);
      return;
    }
  }
  if (snapshot_progress_ && !snapshot_progress_->complete()) {
    run_snapshot();  // streams (or stops, initial_only) when it completes
    return;
  }
  start_streaming();
}

void Connector::start_streaming() {
  if (stopping_) return;
  if (cfg_.snapshot.mode == config::SnapshotMode::kInitialOnly) {
    spdlog::info("snapshot.mode initial_only: the snapshot is complete; stopping");
    finish(ExitCode::kOk);
    return;
  }
  pg::ReplicationStream::Handlers handlers{
      [this](const pg::XLogData& x) { on_xlogdata(x); },
      [this](const pg::Keepalive& k) { on_keepalive(k); },
      [this](pg::StreamEnd how, const std::string& reason) { on_stream_end(how, reason); }};
  // 0/0: the server resumes from the slot's confirmed_flush_lsn.
  if (auto started = stream_->start(cfg_.source.slot, Lsn{}, plugin_options_, std::move(handlers));
      !started) {
    stream_->close();
    // wal2json before 2.6 rejects numeric-data-types-as-string (SQLSTATE 22023, its only
    // optional option: a second 22023 without it ends the session as any error does): drop it
    // and accept that NaN and Infinity arrive as null (the router warns when it sees one).
    const bool has_numeric_option = std::ranges::any_of(
        plugin_options_, [](const auto& o) { return o.first == "numeric-data-types-as-string"; });
    if (has_numeric_option && stream_->failure().is(pg::sqlstate::kInvalidParameterValue)) {
      std::erase_if(plugin_options_,
                    [](const auto& o) { return o.first == "numeric-data-types-as-string"; });
      spdlog::info(
          "the server's wal2json does not know numeric-data-types-as-string (added in "
          "2.6): NaN and Infinity of numeric/float columns will arrive as null");
      asio::post(io_, [this] { start_session(); });
      return;
    }
    // Another instance took the slot between the check and START_REPLICATION ("replication slot
    // … is active for PID …", SQLSTATE 55006 object_in_use).
    const bool in_use = stream_->failure().is(pg::sqlstate::kObjectInUse);
    if (note_session_failure(start_lsn_, "START_REPLICATION failed: " + started.error())) return;
    after_session(in_use ? Outcome::kStandby : Outcome::kRetry,
                  "START_REPLICATION failed: " + started.error());
    return;
  }
  streaming_ = true;
  // The backoff starts over only once a session delivers something (note_session_failure): a
  // server that fails every session right after it starts must not be hammered.
  if (confirmable_lsn() > best_flush_) best_flush_ = confirmable_lsn();
  standby_logged_ = false;
  standby_ = false;
  spdlog::info(
      "streaming: server {} (system {}, timeline {}), database {}, slot {} from "
      "confirmed_flush_lsn {}, server WAL at {}, topic prefix '{}', kafka {}",
      system_.server_version, system_.system_id, system_.timeline, system_.dbname, cfg_.source.slot,
      start_lsn_.to_string(), system_.xlogpos.to_string(), cfg_.topics.prefix,
      cfg_.kafka.bootstrap_servers);
  // The heartbeat runs while a session streams (between sessions the server may be unreachable).
  if (!heartbeat_ && cfg_.heartbeat.enabled) {
    heartbeat_ = std::make_unique<Heartbeat>(io_.get_executor(), cfg_.source.conninfo,
                                             "walrelay-heartbeat-" + cfg_.name, cfg_.heartbeat);
  }
  if (heartbeat_) heartbeat_->start();
  start_incremental();
  last_progress_ = std::chrono::steady_clock::now();
  schedule_status();
  schedule_progress();
  schedule_catalog_check();
  schedule_confirm();
}

void Connector::after_session(Outcome outcome, const std::string& reason) {
  if (stopping_) return;
  std::chrono::milliseconds delay{0};
  switch (outcome) {
    case Outcome::kStreaming:
    case Outcome::kPending:  // never an end (prepared() returns on it)
      return;
    case Outcome::kFatal:
      spdlog::error("{}", reason);
      finish(fatal_code_);
      return;
    case Outcome::kStandby:
      standby_ = true;
      // Two instances must never both stream: wait until the holder lets the slot go (a crashed
      // holder keeps it "active" until wal_sender_timeout, shared/cases/README.md item 13).
      if (!standby_logged_) {
        spdlog::warn("{}: waiting as a hot standby, retrying every {} ms", reason,
                     std::max<long long>(cfg_.source.reconnect_min.count(), 1000));
        standby_logged_ = true;
      }
      delay = std::max(cfg_.source.reconnect_min, std::chrono::milliseconds(1000));
      break;
    case Outcome::kRetry: {
      ++reconnects_;
      backoff_ = backoff_.count() == 0 ? cfg_.source.reconnect_min
                                       : std::min(backoff_ * 2, cfg_.source.reconnect_max);
      // ±25 % jitter so that many connectors do not reconnect in lockstep.
      std::uniform_real_distribution<double> spread(0.75, 1.25);
      delay = std::chrono::milliseconds(
          static_cast<long long>(static_cast<double>(backoff_.count()) * spread(jitter_)));
      spdlog::warn("{}: reconnecting in {} ms", reason, delay.count());
      break;
    }
  }
  reconnect_timer_.expires_after(delay);
  reconnect_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    start_session();
  });
}

void Connector::end_session() {
  streaming_ = false;
  incremental_.reset();  // the next session resumes from its confirmed progress
  if (heartbeat_) heartbeat_->stop();
  status_timer_.cancel();
  progress_timer_.cancel();
  catalog_check_timer_.cancel();
  confirm_timer_.cancel();
  commit_timer_.cancel();
  if (eos_committing_) txn_call_.cancel();  // not resumed: eos_abort_open aborts it
  eos_committing_ = false;
  unit_open_ = false;
  eos_abort_open();  // exactly_once: the next session replays what the open transaction held
  if (stream_) stream_->close();
  // Events of this session still in flight report under the old epoch and are ignored: the next
  // session replays everything after the slot's confirmed position (at least once). Per
  // partition they still come before the replay, so no key's order changes.
  ++epoch_;
  pending_commits_.clear();
  stale_in_flight_ += tracker_.in_flight_events();
  tracker_ = sink::AckTracker{};
  in_txn_ = false;
  pending_ = {};
  pending_chunk_ = false;
  if (parked_) {
    // The next session replays the change from the slot; its lookup may never answer. Closing
    // the non-blocking catalog connection drops the periodic queries queued behind it too.
    parked_.reset();
    if (catalog_) catalog_->abandon_prefetch();
    catalog_check_running_ = false;
    retained_poll_running_ = false;
  }
}

bool Connector::note_session_failure(Lsn position, const std::string& reason) {
  // Progress = acknowledged beyond anything an earlier session reached: a session that only
  // replays what its predecessor delivered (not yet confirmed to the server when it failed) is
  // no progress.
  if (streaming_ && confirmable_lsn() > best_flush_) {
    best_flush_ = confirmable_lsn();
    backoff_ = std::chrono::milliseconds(0);
    repeated_.progressed();
  }
  const std::string& sqlstate = stream_ ? stream_->last_sqlstate() : std::string();
  const int n = repeated_.failed(position, sqlstate, reason);
  if (!repeated_.exhausted()) {
    if (n > 1) {
      spdlog::warn("the same server error (SQLSTATE {}) at LSN {}, {} times in a row", sqlstate,
                   position.to_string(), n);
    }
    return false;
  }
  spdlog::error(
      "the server failed {} times in a row with the same error at LSN {} without delivering "
      "anything (source.max_repeated_errors): SQLSTATE {}: {}. {}",
      n, position.to_string(), sqlstate, reason, RepeatedErrorGuard::advice(sqlstate, position));
  if (streaming_) end_session();
  finish(ExitCode::kRepeatedServerError);
  return true;
}

void Connector::on_stream_end(pg::StreamEnd how, const std::string& reason) {
  if (stopping_ || !streaming_) return;
  // The position the stream had reached: where a deterministic decoding error repeats.
  if (note_session_failure(received_lsn_.is_zero() ? start_lsn_ : received_lsn_, reason)) return;
  end_session();
  after_session(Outcome::kRetry,
                std::string("replication stream ended (") +
                    (how == pg::StreamEnd::kServerEnded ? "by the server" : "error") +
                    "): " + reason);
}

void Connector::on_producer_fatal(const kafka::Error& error) {
  // Called from inside the producer's poll: act after it returns.
  asio::post(io_, [this, error] {
    if (stopping_ || producer_broken_) return;
    const std::string reason = error.describe();
    // Refused credentials or a failed TLS handshake (kafka/security.hpp): exit 7, also while
    // an exactly_once session starts (finish ends the start, as a SIGTERM does).
    if (const auto kind = kafka::security_failure(error); kind != kafka::SecurityFailure::kNone) {
      spdlog::error("{}", kafka::security_failure_message(kind, reason, cfg_.kafka.properties));
      finish(ExitCode::kKafkaAuthFailed);
      return;
    }
    if (eos_starting_) {
      // exactly_once, a session starting: acted on once eos_prepare ended (a fatal
      // init_transactions replaces the producer first, as when it blocked the event loop).
      eos_deferred_fatal_ = error;
      return;
    }
    if (eos_fenced_by(error)) return;
    producer_broken_ = true;
    if (setup_worker_.busy()) {
      // A set-up step is off the loop with stream_: the session ends when it is back
      // (prepared), and the next one gets a new producer.
      spdlog::warn("Kafka producer fatal error: {}; the session being set up restarts", reason);
      return;
    }
    commit_timer_.cancel();
    publisher_.drop_held();
    if (snapshotter_) {
      // The snapshot resumes from its last acknowledged chunk in the next session.
      snapshotter_.reset();
      if (stream_) stream_->close();
    }
    const std::string why = "Kafka producer fatal error: " + reason +
                            "; restarting with a new producer from the slot's confirmed position";
    if (streaming_) {
      stream_->pause();
      end_session();
    } else {
      reconnect_timer_.cancel();
    }
    after_session(Outcome::kRetry, why);
  });
}

void Connector::on_xlogdata(const pg::XLogData& x) {
  if (stopping_ || !streaming_) return;
  if (x.data_start > received_lsn_) received_lsn_ = x.data_start;
  // wal2json writes the database's encoding; everything after this works on UTF-8 (CASE-01).
  std::string_view line = x.data;
  if (transcoder_.mode() != decoder::TranscodeMode::kPassThrough) {
    auto utf8 = transcoder_.to_utf8(x.data);
    if (!utf8) {
      on_unconvertible_line(x, utf8.error());
      return;
    }
    line = *utf8;
  }
  auto decoded = decoder_.decode(line);
  if (!decoded) {
    handle_unmappable("cannot decode wal2json output at LSN " + x.data_start.to_string() + ": " +
                          decoded.error().reason,
                      line, nullptr);
    return;
  }
  const decoder::Change& c = **decoded;
  using decoder::Action;
  switch (c.action) {
    case Action::kBegin: {
      if (in_txn_) {
        handle_unmappable("wal2json sent BEGIN inside a transaction at LSN " + c.lsn.to_string(),
                          line, nullptr);
        return;
      }
      tracker_.begin(c.next_lsn);
      eos_on_begin(c.next_lsn);
      in_txn_ = true;
      const auto commit_time =
          router::parse_commit_timestamp(c.timestamp).value_or(std::chrono::microseconds{0});
      router_->begin(c.xid, c.lsn, commit_time);
      note_commit_time(c.next_lsn, commit_time.count() / 1000);
      return;
    }
    case Action::kCommit:
      if (!in_txn_) {
        handle_unmappable("wal2json sent COMMIT outside a transaction at LSN " + c.lsn.to_string(),
                          line, nullptr);
        return;
      }
      pending_ = router_->commit(c.next_lsn);
      pending_next_ = 0;
      pending_after_ = AfterPublish::kCommit;
      pending_lsn_ = c.lsn;
      publish_pending();
      return;
    default:
      break;
  }
  // A non-transactional logical message arrives outside any B/C pair (shared/cases/README.md
  // item 8): track it as its own unit, confirmed at the end of its record.
  if (!replaying_parked_ && wait_for_lookup(x, c)) return;
  if ((c.action == Action::kMessage || c.action == Action::kInsert) &&
      handle_snapshot_message(x, c, line)) {
    return;
  }
  if (c.action == Action::kTruncate && incremental_ && incremental_->collecting()) {
    incremental_->on_truncated(router_->topic_of(c.schema, c.table));
  }
  const bool standalone = !in_txn_;
  if (standalone) {
    tracker_.begin(c.lsn);
    eos_on_begin(c.lsn);
  }
  auto routed = router_->route(c);
  if (!routed) {
    std::string reason = routed.error().reason;
    reason += " (xid " + std::to_string(c.xid) + ", LSN " + c.lsn.to_string() + ")";
    if (handle_unmappable(reason, line, &c) && standalone) {
      tracker_.commit();
      eos_on_unit_end();
    }
    return;
  }
  if (incremental_ && incremental_->collecting()) incremental_->on_streamed(*routed, c.xid);
  pending_ = *routed;
  pending_next_ = 0;
  pending_after_ = standalone ? AfterPublish::kStandalone : AfterPublish::kChange;
  pending_lsn_ = c.lsn;
  if (!publish_pending()) return;
  apply_backpressure();
}

bool Connector::publish_pending() {
  while (pending_next_ < pending_.size()) {
    const Record& rec = pending_[pending_next_];
    const auto seq = *tracker_.open_txn();
    if (exactly_once()) {
      if (eos_skip_record()) {  // Kafka has it already (the stored position)
        ++pending_next_;
        continue;
      }
      // A chunk's rows stay in one Kafka transaction (handle_snapshot_message split before it).
      if (!pending_chunk_ && !eos_split_if_full()) return false;
    }
    const sink::PublishResult published =
        publisher_.publish(sink::RecordSource::kStream, rec, opaque(seq, false));
    if (published.status == sink::PublishStatus::kQueueFull) {
      // librdkafka's queue limits (possibly lowered in kafka.properties) are full: wait for
      // delivery reports to free room, then publish the rest of this change (the records stay
      // valid: nothing is decoded or routed while the stream is paused).
      stream_->pause();
      return false;
    }
    // kFatal: on_producer_fatal restarts the session. kNoTransaction (exactly_once): no Kafka
    // transaction could be opened; eos_restart/eos_fenced act on it.
    if (published.restart()) return false;
    if (!published.queued()) {
      const std::string key = rec.key ? std::string(*rec.key) : std::string("null");
      std::string event_id;
      for (const auto& h : rec.headers) {
        if (h.name == header::kId) event_id = h.value;
      }
      const std::string reason = std::string("cannot publish to topic ") + std::string(rec.topic) +
                                 " (key " + key + ", transaction ending at LSN " +
                                 tracker_.next_lsn_of(seq).value_or(Lsn{}).to_string() +
                                 "): " + published.error();
      if (dead_letters_ && published.status == sink::PublishStatus::kTooLarge) {
        // A record over message.max.bytes fails synchronously (librdkafka rd_kafka_producev).
        if (!publish_dead_letter(seq, {sink::DeadLetterKind::kOversize, reason, rec.topic,
                                       pending_lsn_, event_id, rec.key, std::nullopt})) {
          return false;
        }
        ++dead_lettered_oversize_;
        ++pending_next_;
        continue;
      }
      spdlog::error("{}; stopping without confirming past it", reason);
      pending_ = {};
      finish(ExitCode::kDeliveryFailed);
      return false;
    }
    tracker_.add_event(kafka::record_bytes(rec));
    if (exactly_once()) eos_published();
    ++events_total_;
    ++pending_next_;
  }
  pending_ = {};
  pending_next_ = 0;
  pending_chunk_ = false;
  switch (pending_after_) {
    case AfterPublish::kChange:
      break;
    case AfterPublish::kStandalone:
      tracker_.commit();
      eos_on_unit_end();
      break;
    case AfterPublish::kCommit:
      tracker_.commit();
      in_txn_ = false;
      eos_on_unit_end();
      break;
  }
  return !stopping_ && !eos_restarting_;
}

void Connector::apply_backpressure() {
  if (!streaming_ || stream_->paused() || stopping_) return;
  if (tracker_.in_flight_events() + stale_in_flight_ >= cfg_.kafka.max_in_flight_events ||
      tracker_.in_flight_bytes() >= cfg_.kafka.max_in_flight_bytes) {
    spdlog::debug("backpressure: {} events / {} bytes in flight, pausing the slot",
                  tracker_.in_flight_events(), tracker_.in_flight_bytes());
    stream_->pause();
  }
}

void Connector::maybe_resume() {
  // exactly_once: nothing is published while a commit is in progress, whether its delivery
  // reports are served inside commit_transaction or between its slices (eos_commit_done resumes).
  // Nor while the transaction is being aborted (the session ends).
  if (!streaming_ || stopping_ || !stream_->paused() || parked_ || eos_committing_ ||
      eos_restarting_) {
    return;
  }
  if (!pending_.empty() && !publish_pending()) return;
  if (tracker_.in_flight_events() + stale_in_flight_ < cfg_.kafka.max_in_flight_events &&
      tracker_.in_flight_bytes() < cfg_.kafka.max_in_flight_bytes) {
    stream_->resume();
  }
}

void Connector::on_delivery(const kafka::DeliveryReport& r) {
  const std::uint64_t seq = r.opaque & kSeqMask;
  const std::uint64_t epoch = (r.opaque >> 48) & kEpochMask;
  const bool dead_letter = (r.opaque & kDeadLetterBit) != 0;
  // The publish metrics are the Publisher's (counted for every source as the reports pass).
  if (r.err == RD_KAFKA_RESP_ERR_NO_ERROR) last_ack_ = std::chrono::steady_clock::now();
  if (epoch != (epoch_ & kEpochMask)) {
    // A report from an ended session: its transaction is replayed by the current one.
    if (stale_in_flight_ > 0) --stale_in_flight_;
    maybe_resume();
    return;
  }
  if (r.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    tracker_.on_ack(seq, r.bytes);
    maybe_resume();
    return;
  }
  const auto lsn = tracker_.next_lsn_of(seq);
  const std::string key = r.has_key ? std::string(r.key) : std::string("null");
  // exactly_once: an abort in progress purges what was not sent yet: expected, and the session
  // ends anyway.
  if (stopping_ || (eos_aborting_ && (r.err == RD_KAFKA_RESP_ERR__PURGE_QUEUE ||
                                      r.err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT))) {
    tracker_.on_failure(seq, r.bytes);
    return;
  }
  const std::string reason = "delivery failed for good: topic " + std::string(r.topic) + ", key " +
                             key + ", transaction ending at LSN " +
                             (lsn ? lsn->to_string() : std::string("?")) + ": " +
                             rd_kafka_err2str(r.err);
  if (exactly_once()) {
    // The Kafka transaction cannot commit with a failed record: it is aborted and replayed (a
    // dead-letter record could not be committed with it either).
    tracker_.on_failure(seq, r.bytes);
    eos_delivery_failed(reason, r.err);
    return;
  }
  if (!dead_letter && dead_letters_) {
    // The dead-letter record takes the failed event's place in its transaction.
    if (publish_dead_letter(
            seq, {sink::DeadLetterKind::kDelivery, reason, r.topic, lsn.value_or(Lsn{}), r.event_id,
                  r.has_key ? std::optional<std::string_view>(r.key) : std::nullopt,
                  r.has_value ? std::optional<std::string_view>(r.value) : std::nullopt})) {
      ++dead_lettered_delivery_;
      tracker_.on_ack(seq, r.bytes);
      return;
    }
    tracker_.on_failure(seq, r.bytes);
    return;  // publish_dead_letter stopped the connector
  }
  tracker_.on_failure(seq, r.bytes);
  spdlog::error("{}{}; not confirming this transaction or anything after it", reason,
                dead_letter ? " (this was the dead-letter record)" : "");
  finish(ExitCode::kDeliveryFailed);
}

void Connector::on_keepalive(const pg::Keepalive& k) {
  if (k.wal_end > server_wal_end_) server_wal_end_ = k.wal_end;
  // Nothing open or in flight: the server's WAL end is safe to confirm, so an idle database (or
  // one whose writes are all filtered out) does not pile up WAL behind the slot
  // (shared/cases/BUG-18.md).
  if (!in_txn_ && pending_.empty() && !parked_ && !eos_restarting_) {
    tracker_.advance_idle(k.wal_end);
  }
  if (k.reply_requested) send_status(false);
}

void Connector::send_status(bool reply_requested) {
  if (!streaming_) return;
  const Lsn flush = confirmable_lsn();
  const Lsn write = std::max(received_lsn_, flush);
  stream_->send_status(write, flush, flush, reply_requested);
  last_sent_flush_ = flush;
  if (incremental_) incremental_->on_flushed(flush);
  if (record_ && flush > record_->confirmed) {
    record_->confirmed = flush;
    // Two fsyncs per save: at most once a second from the prompt confirms (the record only has
    // to know roughly how far the slot was streamed; finish() saves the last position).
    const auto now = std::chrono::steady_clock::now();
    if (now - last_record_save_ >= std::chrono::seconds(1)) {
      last_record_save_ = now;
      save_record();
    }
  }
}

void Connector::save_record() {
  if (!record_) return;
  if (auto saved = state_.save(*record_); !saved) {
    spdlog::warn("cannot save the slot record: {}", saved.error());
  }
}

void Connector::schedule_status() {
  status_timer_.expires_after(status_interval_);
  status_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_ || !streaming_) return;
    send_status(false);
    schedule_status();
  });
}

void Connector::schedule_confirm() {
  if (cfg_.source.confirm_interval.count() <= 0) return;
  confirm_timer_.expires_after(cfg_.source.confirm_interval);
  confirm_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_ || !streaming_) return;
    if (confirmable_lsn() > last_sent_flush_) send_status(false);
    schedule_confirm();
  });
}

void Connector::schedule_progress() {
  progress_timer_.expires_after(cfg_.log.progress_interval);
  progress_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_ || !streaming_) return;
    const auto now = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(now - last_progress_).count();
    const double rate =
        secs > 0 ? static_cast<double>(events_total_ - events_at_last_progress_) / secs : 0;
    const Lsn flush = confirmable_lsn();
    const std::uint64_t lag = server_wal_end_ > flush ? server_wal_end_.value() - flush.value() : 0;
    poll_retained_wal();
    // The incremental snapshot's rows/s, once per interval (its status and /metrics report it).
    const bool incremental_busy = incremental_ && incremental_->busy();
    if (incremental_busy) incremental_->sample_rate();
    // Until the first poll of the slot has answered, its restart_lsn is unknown.
    const std::string retained =
        restart_lsn_text_.empty()
            ? std::string("unknown")
            : fmt::format("{} bytes (restart_lsn {})", retained_wal_bytes_, restart_lsn_text_);
    spdlog::info(
        "progress: {:.0f} events/s, {} events total, flush_lsn {}, lag {} bytes, retained WAL {}, "
        "in flight {} "
        "events / {} bytes, dead-lettered {} mapping / {} oversize / {} delivery, {} "
        "reconnects{}{}{}{}",
        rate, events_total_, flush.to_string(), lag, retained, tracker_.in_flight_events(),
        tracker_.in_flight_bytes(), dead_lettered_mapping_, dead_lettered_oversize_,
        dead_lettered_delivery_, reconnects_,
        parked_             ? " (paused: a change waits for its catalog lookup)"
        : eos_committing_   ? " (paused: a Kafka commit is in progress)"
        : stream_->paused() ? " (paused: backpressure)"
                            : "",
        (router_->outbox_updates_ignored() > 0
             ? fmt::format(", {} outbox UPDATEs ignored", router_->outbox_updates_ignored())
             : std::string()) +
            (catalog_alarms_ > 0 ? fmt::format(", {} catalog alarms", catalog_alarms_)
                                 : std::string()),
        incremental_busy ? "; " + incremental_->status() : std::string(), eos_progress());
    // Idle after a burst: give the freed heap back (tune_allocator keeps it while busy).
    if (tracker_.in_flight_events() == 0 && events_total_ != events_at_last_trim_) {
      release_free_memory();
      events_at_last_trim_ = events_total_;
    }
    events_at_last_progress_ = events_total_;
    last_progress_ = now;
    schedule_progress();
  });
}

void Connector::finish(ExitCode code) {
  if (stopping_) return;
  stopping_ = true;
  exit_code_ = code;
  if (stream_ && !setup_worker_.busy()) stream_->pause();
  status_timer_.cancel();
  progress_timer_.cancel();
  catalog_check_timer_.cancel();
  confirm_timer_.cancel();
  reconnect_timer_.cancel();
  // A second signal cuts the flush short (an orchestrator's impatience, or an operator's): what
  // is acknowledged by then is still confirmed, the rest is replayed on the next start.
  if (life_ != nullptr) life_->stopping();
  if (heartbeat_) heartbeat_->stop();
  if (snapshotter_) snapshotter_->stop_reading();  // what is acknowledged still counts
  // Defer the blocking part: finish may be called from inside a delivery report.
  commit_timer_.cancel();
  // exactly_once: a commit in progress is taken over by eos_finish; a session's start ends here.
  txn_call_.stop_driving();
  eos_poll_timer_.cancel();
  topic_creation_.reset();
  position_reader_.reset();
  if (setup_worker_.busy()) {
    // A set-up step is off the loop with stream_: cancel its command (a slot creation waiting on
    // the server's transactions; nothing is left behind) and end the stop when it is back. A
    // broker probe ends by its own timeout.
    finish_after_setup_ = true;
    std::string error;
    if (!setup_cancel_.cancel(&error) && !error.empty()) {
      spdlog::warn("could not cancel the slot creation: {}", error);
    }
    return;
  }
  asio::post(io_, [this, code] { finish_blocking(code); });
}

void Connector::finish_blocking(ExitCode code) {
  eos_finish(code);
  if (producer_) {
    const auto deadline = std::chrono::steady_clock::now() + cfg_.kafka.flush_timeout;
    producer_->poll();
    int left = producer_->outstanding();
    while (left > 0 && !second_signal() && std::chrono::steady_clock::now() < deadline) {
      left = producer_->flush(std::chrono::milliseconds(100));
    }
    if (left > 0 && second_signal()) {
      spdlog::warn("second signal: not waiting for the last {} events", left);
    }
    if (left > 0) {
      spdlog::warn(
          "{} events were not acknowledged at shutdown; they will be sent again on "
          "restart",
          left);
      producer_->purge();
    }
    producer_->stop();
  }
  if (streaming_) {
    const Lsn flush = confirmable_lsn();
    if (stream_->send_status_blocking(std::max(received_lsn_, flush), flush, flush)) {
      spdlog::info("confirmed flush_lsn {} to the server", flush.to_string());
      if (incremental_) incremental_->on_flushed(flush);
      if (record_ && flush > record_->confirmed) record_->confirmed = flush;
    } else {
      spdlog::warn("could not send the last standby status update; the server keeps flush_lsn {}",
                   last_sent_flush_.to_string());
    }
  }
  save_record();
  if (stream_) stream_->close();
  if (life_ != nullptr) life_->done(code);
}

}  // namespace walrelay
