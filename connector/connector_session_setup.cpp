// The session's set-up (Connector::prepare and the steps it hands off the event loop): the server
// and its settings, the slot record, the tables, the slot's advisory lock, then the slot, found
// or created (the broker probe and CREATE_REPLICATION_SLOT on setup_worker_), and the
// acknowledgement tracking from the slot's position. The rest of the session is in connector.cpp.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <utility>

#include "walrelay/connector/connector.hpp"
#include "walrelay/connector/preflight.hpp"
#include "walrelay/kafka/security.hpp"

namespace walrelay {

namespace {

std::string in_use_reason(const std::string& slot, std::optional<int> active_pid) {
  return "replication slot '" + slot + "' is in use by another process (active_pid " +
         (active_pid ? std::to_string(*active_pid) : std::string("?")) + ")";
}

std::string version_string() {
  return WALRELAY_VERSION;
}

// How long the metadata request that checks Kafka before a slot is created may take.
constexpr std::chrono::milliseconds kKafkaProbeTimeout{10000};

}  // namespace

Connector::Outcome Connector::prepare() {
  auto sys = stream_->connect();
  if (!sys) {
    reason_ = sys.error();
    // Credentials, pg_hba.conf, a grant, the database name or the conninfo: retrying cannot fix
    // them (pg::needs_operator).
    return stream_->failure().needs_operator() ? fatal(ExitCode::kRuntimeError) : Outcome::kRetry;
  }
  system_ = *sys;
  if (system_.xlogpos > server_wal_end_) server_wal_end_ = system_.xlogpos;

  auto wal_level = stream_->query("SHOW wal_level");
  if (!wal_level) {
    reason_ = "cannot read wal_level: " + wal_level.error();
    return Outcome::kRetry;
  }
  if (auto refused = check_wal_level(wal_level->empty() ? "" : (*wal_level)[0][0].value_or(""))) {
    reason_ = refused->message;
    return fatal(refused->code);
  }
  if (auto encoding = check_encoding(); encoding != Outcome::kStreaming) return encoding;
  status_interval_ = cfg_.source.status_interval;
  if (auto t = stream_->query("SHOW wal_sender_timeout"); t && !t->empty()) {
    const auto chosen = status_interval_for(cfg_.source.status_interval,
                                            parse_pg_duration((*t)[0][0].value_or("0")));
    status_interval_ = chosen.interval;
    if (!chosen.warning.empty()) spdlog::warn("{}", chosen.warning);
  }

  const std::string& slot = cfg_.source.slot;
  // allow_slot_reset accepts one loss: once used it is remembered in the record and ignored until
  // the operator removes it from the configuration (a start without it clears the mark).
  const bool allow_reset = slot_reset_allowed(cfg_, record_);
  if (record_ && record_->reset_used) {
    if (cfg_.source.allow_slot_reset) {
      spdlog::warn(
          "source.allow_slot_reset is still set but was already used once for slot {}; "
          "it is ignored now. Remove it from the configuration",
          slot);
    } else {
      record_->reset_used = false;
    }
  }
  // The durable slot record: a different cluster, or a failover past what walrelay confirmed,
  // means the slot's stream may be missing changes (preflight.hpp, as `check` says).
  std::optional<Lsn> fork;
  if (record_ && record_->timeline != system_.timeline) {
    auto history = stream_->query("TIMELINE_HISTORY " + std::to_string(system_.timeline));
    if (history && !history->empty() && (*history)[0].size() >= 2) {
      fork = timeline_switchpoint((*history)[0][1].value_or(""), record_->timeline);
    }
  }
  if (auto refused = check_slot_record(record_, allow_reset, system_, fork)) {
    reason_ = refused->message;
    return fatal(refused->code);
  }
  if (record_ && !allow_reset && fork) {
    spdlog::info(
        "timeline {} → {} (fork at {}): walrelay's confirmed position {} is before the "
        "fork, resuming",
        record_->timeline, system_.timeline, fork->to_string(), record_->confirmed.to_string());
  }

  // Tables, topics and outbox columns are checked before a slot is created: a configuration
  // that cannot run must leave nothing behind on the server.
  if (!catalog_) {
    catalog_ = std::make_unique<Catalog>(io_.get_executor(), cfg_.source.conninfo,
                                         "walrelay-catalog-" + cfg_.name, types_);
    if (auto connected = catalog_->connect(); !connected) {
      reason_ = connected.error();
      const bool needs_operator = catalog_->connect_failure().needs_operator();
      catalog_.reset();
      return needs_operator ? fatal(ExitCode::kRuntimeError) : Outcome::kRetry;
    }
  }
  if (!router_) {
    router_ = std::make_unique<router::EventRouter>(
        router::RouterSettings{cfg_.name, cfg_.topics.prefix, system_.dbname, version_string(),
                               cfg_.events},
        cfg_, catalog_.get(), types_);
    if (auto checked = check_tables(); checked != Outcome::kStreaming) {
      router_.reset();
      return checked;
    }
  }

  // One walrelay per slot, also while it takes a snapshot (the slot is not active then): a
  // session-level advisory lock on this connection, released when it closes.
  auto locked = stream_->query("SELECT pg_try_advisory_lock(hashtext(" +
                               pg::quote_literal("walrelay slot " + slot) + "))");
  if (!locked) {
    reason_ = "cannot take the slot's advisory lock: " + locked.error();
    return Outcome::kRetry;
  }
  if (locked->empty() || (*locked)[0][0].value_or("f") != "t") {
    auto holder = stream_->find_slot(slot);
    if (holder && *holder && (*holder)->active) {
      reason_ = in_use_reason(slot, (*holder)->active_pid);
    } else {
      reason_ = "slot " + slot +
                " is in use by another walrelay (it holds the slot's advisory lock while it "
                "takes the slot's snapshot or connects)";
    }
    return Outcome::kStandby;
  }

  if (cfg_.snapshot.mode == config::SnapshotMode::kInitialOnly) {
    // After eos_prepare (continue_session): Kafka's snapshot progress first.
    after_prepare_ = [this] { return prepare_initial_only(); };
    return Outcome::kStreaming;
  }

  auto found = stream_->find_slot(slot);
  if (!found) {
    reason_ = "cannot look up slot " + slot + ": " + found.error();
    return Outcome::kRetry;
  }
  if (auto refused = check_slot(*found, record_, allow_reset, cfg_, system_.dbname)) {
    reason_ = refused->message;
    return fatal(refused->code);
  }
  if (!*found) {
    // A slot retains WAL from the moment it exists, and its exported snapshot would fill the
    // in-flight bounds at once: it is created only once Kafka answers. Not answering is an outage
    // like any (retried with backoff, never an exit): `check` says the same. Both steps may wait
    // (the probe up to its timeout, the creation on the server's running transactions): they run
    // off the event loop, which serves /live, /metrics and signals meanwhile.
    setup_worker_.run(
        [kafka = cfg_.kafka] { return kafka::probe_brokers(kafka, kKafkaProbeTimeout); },
        [this](std::expected<int, kafka::ProbeError> brokers) { slot_probed(std::move(brokers)); });
    return Outcome::kPending;
  }
  const auto& s = **found;
  if (s.active) {
    reason_ = in_use_reason(slot, s.active_pid);
    return Outcome::kStandby;
  }
  start_lsn_ = s.confirmed_flush_lsn;
  note_slot_rewind(start_lsn_);
  // The slot this process created, not yet confirmed past its consistent point (a session
  // restarted before its first commit, e.g. for the wal2json option fallback): still no last
  // commit.
  router_->set_stream_start(
      !created_slot_at_.is_zero() && start_lsn_ == created_slot_at_ ? Lsn{} : start_lsn_);
  // A slot walrelay has no record of ever streaming from (record_ is saved below, before the
  // first START_REPLICATION): its rows are still owed to Kafka.
  if (!record_ && cfg_.snapshot.mode == config::SnapshotMode::kInitial) {
    if (!queue_snapshot_of_existing_slot(slot)) return fatal(ExitCode::kRuntimeError);
    existing_slot_queued_ = true;  // a later session's record is this process's own
  }
  // After eos_prepare (continue_session): Kafka's last committed position first, with the
  // snapshot progress consumers saw, so that a resumed snapshot starts right after its last
  // committed row.
  after_prepare_ = [this, slot, confirmed = s.confirmed_flush_lsn,
                    had_record = record_ && !existing_slot_queued_] {
    return resume_snapshot_progress(slot, confirmed, had_record) ? Outcome::kStreaming
                                                                 : fatal(ExitCode::kRuntimeError);
  };
  return finish_prepare();
}

Connector::Outcome Connector::finish_prepare() {
  const std::string& slot = cfg_.source.slot;
  tracker_ = sink::AckTracker{};
  tracker_.set_confirmed(start_lsn_);
  last_sent_flush_ = start_lsn_;
  received_lsn_ = Lsn{};
  in_txn_ = false;
  pending_ = {};
  pending_chunk_ = false;

  // The record now names this cluster, timeline and slot; the confirmed position never moves
  // back in it.
  SlotRecord rec;
  rec.system_id = system_.system_id;
  rec.timeline = system_.timeline;
  rec.database = system_.dbname;
  rec.slot = slot;
  rec.confirmed = start_lsn_;
  if (record_ && record_->confirmed > rec.confirmed && record_->system_id == rec.system_id &&
      !record_->reset_used) {
    rec.confirmed = record_->confirmed;
  }
  rec.reset_used = record_ && record_->reset_used;
  rec.incremental_kept = incremental_kept_;
  record_ = rec;
  save_record();
  return Outcome::kStreaming;
}

void Connector::slot_probed(std::expected<int, kafka::ProbeError> brokers) {
  if (setup_returned_while_stopping()) return;
  const std::string& slot = cfg_.source.slot;
  if (!brokers) {
    if (brokers.error().config) {  // as the producer's own creation would report it
      reason_ = brokers.error().message;
      prepared(fatal(ExitCode::kConfigError));
      return;
    }
    if (const auto kind = kafka::security_failure(brokers.error().err);
        kind != kafka::SecurityFailure::kNone) {  // as the producer's error_cb would report it
      reason_ =
          kafka::security_failure_message(kind, brokers.error().message, cfg_.kafka.properties);
      prepared(fatal(ExitCode::kKafkaAuthFailed));
      return;
    }
    reason_ = "Kafka does not answer at kafka.bootstrap_servers " + cfg_.kafka.bootstrap_servers +
              " within " + std::to_string(kKafkaProbeTimeout.count() / 1000) + " s (" +
              brokers.error().message + "): slot " + slot + " is not created until it does";
    prepared(Outcome::kRetry);
    return;
  }
  // With an initial snapshot the slot exports its snapshot: the tables are read at exactly
  // the slot's consistent point before START_REPLICATION (which ends the export).
  const bool snapshot = cfg_.snapshot.mode == config::SnapshotMode::kInitial;
  if (snapshot && !begin_snapshot_progress(slot)) {
    prepared(fatal(ExitCode::kRuntimeError));
    return;
  }
  setup_cancel_ = stream_->cancel_handle();
  setup_worker_.run(
      [stream = stream_.get(), slot, snapshot] {
        return stream->create_slot(slot, "wal2json", snapshot ? "export" : "nothing");
      },
      [this](std::expected<std::pair<Lsn, std::string>, std::string> created) {
        slot_created(std::move(created));
      });
}

void Connector::slot_created(std::expected<std::pair<Lsn, std::string>, std::string> created) {
  setup_cancel_ = {};
  const std::string& slot = cfg_.source.slot;
  const bool snapshot = cfg_.snapshot.mode == config::SnapshotMode::kInitial;
  const bool allow_reset = slot_reset_allowed(cfg_, record_);
  if (!created) {
    if (setup_returned_while_stopping()) return;  // cancelled by the stop: nothing was made
    reason_ = "cannot create replication slot '" + slot + "': " + created.error();
    prepared(Outcome::kRetry);
    return;
  }
  if (snapshot) {
    exported_snapshot_ = created->second;
    snapshot_progress_->lsn = created->first;
    if (!save_snapshot_progress()) {
      prepared(fatal(ExitCode::kRuntimeError));
      return;
    }
  }
  if (record_ && allow_reset) {
    spdlog::error(
        "source.allow_slot_reset: created a new slot {}; changes committed between "
        "{} (last confirmed) and {} are NOT in the stream. The setting is now used "
        "up: remove it from the configuration",
        slot, record_->confirmed.to_string(), created->first.to_string());
    record_->reset_used = true;
    record_->confirmed = created->first;
  }
  spdlog::info("created replication slot {} (plugin wal2json) at consistent point {}", slot,
               created->first.to_string());
  start_lsn_ = created->first;
  created_slot_at_ = created->first;
  router_->set_stream_start(Lsn{});  // a new slot: no last commit yet (Debezium: null)
  // Made, and recorded, as if a stop during the creation had come right after it.
  const Outcome outcome = finish_prepare();
  if (setup_returned_while_stopping()) return;
  prepared(outcome);
}

bool Connector::setup_returned_while_stopping() {
  if (!stopping_) return false;
  setup_cancel_ = {};
  if (std::exchange(finish_after_setup_, false)) {
    finish_blocking(exit_code_.value_or(ExitCode::kOk));
  }
  return true;
}

}  // namespace walrelay
