// The connector's snapshot phase: deciding whether and how to read the captured tables' rows, and
// handing over to the stream afterwards. The reading itself is snapshot::Snapshotter's.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "walrelay/connector/connector.hpp"
#include "walrelay/core/json.hpp"
#include "walrelay/snapshot/signal.hpp"

namespace walrelay {

namespace {

std::string progress_dir(const config::Config& cfg) {
  return cfg.source.state_dir.empty() ? StateStore::default_dir() : cfg.source.state_dir;
}

}  // namespace

bool Connector::begin_snapshot_progress(const std::string& slot) {
  snapshot_store_ = std::make_unique<snapshot::SnapshotProgressStore>(progress_dir(cfg_), slot);
  snapshot::SnapshotProgress p;
  p.slot = slot;
  for (const auto& [schema, table] : snapshot_tables_) {
    snapshot::TableProgress t;
    t.schema = schema;
    t.table = table;
    p.tables.push_back(std::move(t));
  }
  snapshot_progress_ = std::move(p);
  exported_snapshot_.clear();
  if (!save_snapshot_progress()) return false;
  if (cfg_.snapshot.mode != config::SnapshotMode::kInitial)
    return true;  // initial_only: the slot's queue stays
  // A new slot, whose snapshot reads every table: the incremental snapshots queued for an older
  // slot of this name (dropped, e.g. with source.allow_slot_reset) are not this slot's.
  const snapshot::SnapshotProgressStore incremental(progress_dir(cfg_), slot, ".incremental");
  auto loaded = incremental.load();
  if (loaded && *loaded && (*loaded)->slot == slot && !(*loaded)->tables.empty()) {
    spdlog::warn(
        "snapshot: the incremental snapshot progress in {} is of an older slot {} (the new "
        "slot's snapshot reads every table): discarded",
        incremental.path(), slot);
  }
  snapshot::SnapshotProgress empty;
  empty.slot = slot;
  // Written even when there was none: from now on a missing file was lost (SlotRecord).
  if (auto saved = incremental.save(empty); !saved) {
    reason_ = "cannot save the incremental snapshot progress: " + saved.error();
    return false;
  }
  incremental_kept_ = true;
  return true;
}

bool Connector::save_snapshot_progress() {
  if (auto saved = snapshot_store_->save(*snapshot_progress_); !saved) {
    reason_ = "cannot save the snapshot progress (source.state_dir): " + saved.error();
    return false;
  }
  return true;
}

bool Connector::resume_snapshot_progress(const std::string& slot, Lsn confirmed_flush_lsn,
                                         bool had_record) {
  snapshot_progress_.reset();
  exported_snapshot_.clear();
  if (cfg_.snapshot.mode == config::SnapshotMode::kNever) {
    // An interrupted snapshot is left as it is (snapshot.mode initial picks it up again): say so.
    const snapshot::SnapshotProgressStore store(progress_dir(cfg_), slot);
    if (auto loaded = store.load();
        loaded && *loaded && (*loaded)->slot == slot && !(*loaded)->complete()) {
      spdlog::warn(
          "snapshot.mode never: the interrupted snapshot in {} is not finished (tables not done "
          "get no more rows); with snapshot.mode initial it resumes where it stopped",
          store.path());
    }
    return true;
  }
  snapshot_store_ = std::make_unique<snapshot::SnapshotProgressStore>(progress_dir(cfg_), slot);
  auto loaded = snapshot_store_->load();
  // Only a readable progress file of this slot that says every table is done proves that the
  // snapshot finished: without it the tables are read again (tests/integration/snapshot/
  // lost_state_test.cpp).
  std::string unproven;
  if (!loaded) {
    unproven = loaded.error();
  } else if (!*loaded) {
    // No record either: a slot walrelay never streamed (queue_snapshot_of_existing_slot's case).
    if (!had_record) return true;
    unproven = snapshot_store_->path() + " is missing, yet walrelay streamed this slot (" +
               state_.path() + ")";
  } else if ((*loaded)->slot != slot) {
    unproven = snapshot_store_->path() + " is of slot '" + (*loaded)->slot + "'";
  } else if ((*loaded)->complete()) {
    return true;
  }
  if (unproven.empty()) {
    snapshot_progress_ = std::move(**loaded);
  } else {
    snapshot::SnapshotProgress again;
    again.slot = slot;
    again.lsn = confirmed_flush_lsn;
    for (const auto& [schema, table] : snapshot_tables_) {
      again.tables.push_back(snapshot::table_progress(schema, table, false));
    }
    spdlog::warn(
        "snapshot: no proof that the snapshot of slot {} finished ({}): its {} captured "
        "table(s) are read again (at least once), as an interrupted snapshot is resumed",
        slot, unproven, again.tables.size());
    snapshot_progress_ = std::move(again);
  }
  // Created, then a crash before the consistent point was recorded: the slot has not moved since.
  if (snapshot_progress_->lsn.is_zero()) snapshot_progress_->lsn = confirmed_flush_lsn;
  snapshot_progress_->resumed = true;
  // The exported snapshot is gone with the crash. Tables with a key finish as an incremental
  // snapshot while streaming from the consistent point (their chunks carry on after the last
  // acknowledged key); a table without one is read again, whole, before streaming.
  std::vector<snapshot::TableProgress> handover;
  for (auto& t : snapshot_progress_->tables) {
    if (t.done) continue;
    const router::TableSchema* shape = catalog_->table(t.schema, t.table, /*refresh=*/false);
    auto plan = shape != nullptr
                    ? snapshot::make_read_plan(*shape, router_->key_columns_of(t.schema, t.table))
                    : std::nullopt;
    if (!plan || plan->key.empty()) continue;
    handover.push_back(t);
    t.done = true;
  }
  if (!handover.empty()) {
    spdlog::warn(
        "snapshot: resuming an interrupted snapshot (progress in {}): the exported snapshot is "
        "gone, so {} table(s) finish as an incremental snapshot while streaming from {}, each "
        "from its last acknowledged chunk",
        snapshot_store_->path(), handover.size(), snapshot_progress_->lsn.to_string());
    if (!hand_over_to_incremental(handover)) return false;
  }
  return save_snapshot_progress();
}

bool Connector::queue_snapshot_of_existing_slot(const std::string& slot) {
  const snapshot::SnapshotProgressStore initial(progress_dir(cfg_), slot);
  auto loaded = initial.load();
  // Progress of this slot (walrelay created it and snapshots it), or unreadable progress
  // (resume_snapshot_progress reads every table again, saying why): not this case.
  if (!loaded || *loaded) return true;
  std::string keyless;
  const std::vector<snapshot::TableProgress> tables = keyed_snapshot_tables(keyless);
  if (tables.empty() && keyless.empty()) return true;
  spdlog::info(
      "slot {} existed before walrelay (no record of it in {}): its exported snapshot is gone, so "
      "the {} captured table(s) are read by an incremental snapshot while streaming "
      "(snapshot.mode initial)",
      slot, progress_dir(cfg_), tables.size());
  if (!keyless.empty()) {
    spdlog::warn(
        "slot {} existed before walrelay: tables without a key cannot be read by an incremental "
        "snapshot, their rows are not published (set key_columns, then signal a snapshot): {}",
        slot, keyless);
  }
  return hand_over_to_incremental(tables);
}

bool Connector::reconcile_snapshot_progress(const sink::StreamPosition& position) {
  const std::string& slot = cfg_.source.slot;
  const auto take = [&](const std::optional<snapshot::SnapshotProgress>& kafka,
                        const std::string& suffix, bool same_run) {
    if (!kafka || kafka->slot != slot) return true;
    const snapshot::SnapshotProgressStore store(progress_dir(cfg_), slot, suffix);
    auto loaded = store.load();
    std::optional<snapshot::SnapshotProgress> local;
    if (!loaded) {
      spdlog::warn("{}: replaced by the snapshot progress in Kafka", loaded.error());
    } else if (*loaded && (*loaded)->slot == slot) {
      local = std::move(**loaded);
    }
    // The initial snapshot's progress belongs to one run of it (the slot's consistent point).
    if (same_run && local && local->lsn != kafka->lsn) {
      spdlog::warn("the snapshot progress in {} is of the snapshot at {}, not {} ({}): ignored",
                   positions_topic_, kafka->lsn.to_string(), local->lsn.to_string(), store.path());
      return true;
    }
    std::vector<std::string> changed;
    const snapshot::SnapshotProgress merged = snapshot::reconcile_progress(local, *kafka, &changed);
    if (local && changed.empty()) return true;
    if (auto saved = store.save(merged); !saved) {
      reason_ = "cannot save the snapshot progress (source.state_dir): " + saved.error();
      return false;
    }
    spdlog::info(
        "delivery exactly_once: {} table(s) of {} resume where Kafka's last committed position "
        "says (what read_committed consumers saw){}{}",
        changed.size(), store.path(), changed.empty() ? "" : ", e.g. ",
        changed.empty() ? "" : changed.front());
    return true;
  };
  if (!take(position.snapshot, ".snapshot", true)) return false;
  if (position.incremental && position.incremental->slot == slot) {
    // The incremental progress names no consistent point, but its record's position is of the
    // stream of the slot that wrote it: a position before this slot's consistent point (the
    // snapshot progress walrelay saves when it creates the slot; 0/0: being created) is of an
    // older slot of this name (dropped, created again), whose queue is not this slot's.
    const snapshot::SnapshotProgressStore initial(progress_dir(cfg_), slot);
    if (auto loaded = initial.load(); loaded && *loaded && (*loaded)->slot == slot &&
                                      ((*loaded)->lsn.is_zero() || position.lsn < (*loaded)->lsn)) {
      spdlog::warn(
          "the incremental snapshot progress in {} is of a position ({}) before slot {}'s "
          "consistent point {} ({}): it is of an older slot of that name, ignored",
          positions_topic_, position.lsn.to_string(), slot, (*loaded)->lsn.to_string(),
          initial.path());
      return true;
    }
  }
  return take(position.incremental, ".incremental", false);
}

std::vector<snapshot::TableProgress> Connector::keyed_snapshot_tables(std::string& keyless) const {
  std::vector<snapshot::TableProgress> tables;
  for (const auto& [schema, table] : snapshot_tables_) {
    const router::TableSchema* shape = catalog_->table(schema, table, /*refresh=*/false);
    auto plan = shape != nullptr
                    ? snapshot::make_read_plan(*shape, router_->key_columns_of(schema, table))
                    : std::nullopt;
    if (!plan || plan->key.empty()) {
      keyless += (keyless.empty() ? "" : ", ") + schema + "." + table;
      continue;
    }
    tables.push_back(snapshot::table_progress(schema, table, false));
  }
  return tables;
}

std::optional<snapshot::SnapshotProgress> Connector::load_incremental_queue() {
  const std::string& slot = cfg_.source.slot;
  const snapshot::SnapshotProgressStore store(progress_dir(cfg_), slot, ".incremental");
  auto loaded = store.load();
  std::string lost;
  if (!loaded) {
    lost = loaded.error();
  } else if (*loaded && (*loaded)->slot != slot) {
    lost = store.path() + " is of slot '" + (*loaded)->slot + "'";
  } else if (!*loaded && incremental_kept_) {
    lost = store.path() + " is missing, yet the slot record " + state_.path() + " says it was kept";
  }
  std::optional<snapshot::SnapshotProgress> queue;
  if (!lost.empty()) {
    std::string keyless;
    queue.emplace();
    queue->slot = slot;
    queue->tables = keyed_snapshot_tables(keyless);
    spdlog::warn(
        "incremental snapshot queue lost ({}): what it held is unknown, so the {} captured "
        "table(s) with a key are read again by an incremental snapshot while streaming (at least "
        "once){}{}",
        lost, queue->tables.size(),
        keyless.empty() ? "" : "; tables without a key cannot be: ", keyless);
  } else if (*loaded) {
    queue = std::move(**loaded);
  }
  if (!lost.empty() || !*loaded) {
    // From here on the file exists (an empty queue too): one missing later was lost.
    snapshot::SnapshotProgress saved_queue = queue.value_or(snapshot::SnapshotProgress{});
    saved_queue.slot = slot;
    if (auto saved = store.save(saved_queue); !saved) {
      spdlog::error("cannot save the incremental snapshot progress: {}", saved.error());
      return queue;
    }
  }
  if (!incremental_kept_) {
    incremental_kept_ = true;
    if (record_ && !record_->incremental_kept) {
      record_->incremental_kept = true;
      save_record();
    }
  }
  return queue;
}

bool Connector::hand_over_to_incremental(const std::vector<snapshot::TableProgress>& tables) {
  const std::string& slot = cfg_.source.slot;
  incremental_store_ =
      std::make_unique<snapshot::SnapshotProgressStore>(progress_dir(cfg_), slot, ".incremental");
  snapshot::SnapshotProgress queue =
      load_incremental_queue().value_or(snapshot::SnapshotProgress{});
  queue.slot = slot;
  for (const auto& t : tables) {
    std::erase_if(queue.tables,
                  [&](const auto& q) { return q.schema == t.schema && q.table == t.table; });
    queue.tables.push_back(t);
    queue.tables.back().done = false;
  }
  if (auto saved = incremental_store_->save(queue); !saved) {
    reason_ = "cannot save the incremental snapshot progress: " + saved.error();
    spdlog::error("{}", reason_);
    return false;
  }
  // exactly_once: the position record carries it from the next commit (the initial snapshot's
  // own progress says the table is done; without this the queue would live only on local disk).
  if (!incremental_) queued_incremental_ = queue;
  return true;
}

Connector::Outcome Connector::prepare_initial_only() {
  // No slot is kept: the rows are read from a temporary slot's exported snapshot (dropped when
  // this connection closes), and walrelay stops afterwards.
  const std::string& slot = cfg_.source.slot;
  // exactly_once: runs after eos_prepare (continue_session), which took the progress Kafka's last
  // committed position carries first.
  snapshot_store_ = std::make_unique<snapshot::SnapshotProgressStore>(progress_dir(cfg_), slot);
  auto loaded = snapshot_store_->load();
  if (!loaded) {
    reason_ = loaded.error();
    return fatal(ExitCode::kRuntimeError);
  }
  if (*loaded && (*loaded)->slot == slot) {
    snapshot_progress_ = std::move(**loaded);
    if (snapshot_progress_->complete()) {
      spdlog::info("snapshot.mode initial_only: the snapshot in {} is already complete",
                   snapshot_store_->path());
      return Outcome::kStreaming;
    }
    if (!snapshot_progress_->lsn.is_zero()) {
      snapshot_progress_->resumed = true;
      exported_snapshot_.clear();
      return save_snapshot_progress() ? Outcome::kStreaming : fatal(ExitCode::kRuntimeError);
    }
  }
  if (!begin_snapshot_progress(slot)) return fatal(ExitCode::kRuntimeError);
  const std::string temp = "walrelay_snapshot_" + std::to_string(::getpid());
  auto created = stream_->create_slot(temp, "wal2json", "export", /*temporary=*/true);
  if (!created) {
    reason_ = "cannot create the temporary slot for the snapshot: " + created.error();
    return Outcome::kRetry;
  }
  exported_snapshot_ = created->second;
  snapshot_progress_->lsn = created->first;
  return save_snapshot_progress() ? Outcome::kStreaming : fatal(ExitCode::kRuntimeError);
}

void Connector::run_snapshot() {
  snapshot::Snapshotter::Settings settings;
  settings.conninfo = cfg_.source.conninfo;
  settings.application_name = "walrelay-snapshot-" + cfg_.name;
  settings.chunk_size = cfg_.snapshot.chunk_size;
  settings.parallelism = cfg_.snapshot.parallelism;
  settings.max_in_flight_events = cfg_.kafka.max_in_flight_events;
  settings.max_in_flight_bytes = cfg_.kafka.max_in_flight_bytes;
  // Exact text for NaN/±Infinity too; the router maps a quoted number like a bare one.
  settings.numerics = decoder::NumericTokens::kStrings;
  settings.progress_interval = cfg_.log.progress_interval;
  if (dead_letters_) {
    settings.dead_letters = &*dead_letters_;
    settings.dead_letter_deliveries = !exactly_once();
  }
  settings.check_utf8 = transcoder_.mode() == decoder::TranscodeMode::kValidate;
  settings.row_security = cfg_.snapshot.row_security;
  if (snapshot_progress_->resumed) {
    spdlog::warn(
        "snapshot: resuming an interrupted snapshot (progress in {}): the exported snapshot is "
        "gone, so tables without a key are read again at their current state; the stream from "
        "{} follows and brings every key to its latest committed state",
        snapshot_store_->path(), snapshot_progress_->lsn.to_string());
  }
  // delivery exactly_once: the incremental queue saved so far (tables handed over by an earlier
  // run of this snapshot) goes into every position record until start_incremental takes over.
  queued_incremental_.reset();
  if (exactly_once()) queued_incremental_ = load_incremental_queue();
  snapshotter_ = std::make_unique<snapshot::Snapshotter>(
      io_.get_executor(), std::move(settings), *router_, *catalog_, publisher_, *snapshot_store_,
      *snapshot_progress_, exported_snapshot_,
      [this](std::optional<snapshot::SnapshotFailure> failure, const std::string& reason) {
        if (stopping_) return;
        if (snapshotter_) snapshot_progress_ = snapshotter_->progress();
        const bool lacks_select = snapshotter_ && snapshotter_->failure_lacks_select();
        snapshotter_.reset();
        exported_snapshot_.clear();
        if (!failure) {
          start_streaming();
          return;
        }
        switch (*failure) {
          case snapshot::SnapshotFailure::kRetry:
            if (!snapshot_denied_logged_ && lacks_select) {
              // Retried with backoff until someone GRANTs SELECT (/ready says "not streaming"
              // meanwhile): the fix, once, as an error.
              snapshot_denied_logged_ = true;
              spdlog::error(
                  "{}: the role of source.conninfo cannot read it. Run GRANT SELECT ON the "
                  "table TO that role (`walrelay check` names each); retrying until then",
                  reason);
            }
            stream_->close();
            // The exported snapshot ends with the replication connection: the next session
            // resumes at current state.
            if (snapshot_progress_) snapshot_progress_->resumed = true;
            after_session(Outcome::kRetry, reason);
            return;
          case snapshot::SnapshotFailure::kMapping:
            spdlog::error("{}; stopping (the snapshot resumes from its last acknowledged chunk)",
                          reason);
            finish(ExitCode::kMappingFailed);
            return;
          case snapshot::SnapshotFailure::kDelivery:
            spdlog::error("{}", reason);
            finish(ExitCode::kDeliveryFailed);
            return;
        }
      });
  if (cfg_.snapshot.mode ==
      config::SnapshotMode::kInitial) {  // initial_only has no stream to finish it
    snapshotter_->set_hand_over(
        [this](const snapshot::TableProgress& t) { return hand_over_to_incremental({t}); });
  }
  snapshotter_->start();
}

}  // namespace walrelay

namespace walrelay {

void Connector::start_incremental() {
  incremental_.reset();
  queued_incremental_.reset();  // the incremental snapshot's own progress from here on
  const std::string& slot = cfg_.source.slot;
  incremental_store_ =
      std::make_unique<snapshot::SnapshotProgressStore>(progress_dir(cfg_), slot, ".incremental");
  // A lost queue is read again whole (load_incremental_queue), never dropped.
  snapshot::SnapshotProgress progress =
      load_incremental_queue().value_or(snapshot::SnapshotProgress{});
  progress.slot = slot;
  snapshot::IncrementalSnapshot::Settings settings{
      cfg_.source.conninfo,       "walrelay-snapshot-" + cfg_.name,
      cfg_.snapshot.chunk_size,   transcoder_.mode() == decoder::TranscodeMode::kValidate,
      cfg_.snapshot.row_security, cfg_.snapshot.max_window_keys};
  // Each chunk reads its table's shape on the catalog's non-blocking connection.
  auto read_shape = [this](const std::string& schema, const std::string& table,
                           std::function<void(const router::TableSchema*)> done) {
    catalog_->reload(schema, table, std::move(done));
  };
  incremental_ = std::make_unique<snapshot::IncrementalSnapshot>(
      io_.get_executor(), std::move(settings), *router_, *catalog_, std::move(read_shape),
      *incremental_store_, progress);

  // Tables added to the configuration since the slot's snapshots: offer their rows.
  if (cfg_.snapshot.mode == config::SnapshotMode::kNever ||
      cfg_.snapshot.new_tables != config::NewTables::kIncremental) {
    incremental_->kick();
    return;
  }
  if (!snapshot_store_) {
    snapshot_store_ = std::make_unique<snapshot::SnapshotProgressStore>(progress_dir(cfg_), slot);
  }
  auto initial = snapshot_store_->load();
  if (!initial) {
    spdlog::error("{}", initial.error());
    incremental_->kick();
    return;
  }
  if (!*initial || (*initial)->slot != slot) {
    // A slot walrelay did not create, whose tables queue_snapshot_of_existing_slot queued (a
    // slot with a record and no proof of its snapshot was read again by
    // resume_snapshot_progress): what is captured now is known.
    snapshot::SnapshotProgress known;
    known.slot = slot;
    known.lsn = start_lsn_.is_zero() ? Lsn{1} : start_lsn_;
    for (const auto& [schema, table] : snapshot_tables_) {
      known.tables.push_back(snapshot::table_progress(schema, table, true));
    }
    if (auto saved = snapshot_store_->save(known); !saved) spdlog::warn("{}", saved.error());
    incremental_->kick();
    return;
  }
  std::vector<std::pair<std::string, std::string>> added;
  for (const auto& [schema, table] : snapshot_tables_) {
    auto known_in = [&](const snapshot::SnapshotProgress& p) {
      return std::any_of(p.tables.begin(), p.tables.end(),
                         [&](const auto& t) { return t.schema == schema && t.table == table; });
    };
    if (!known_in(**initial) && !known_in(progress)) added.emplace_back(schema, table);
  }
  if (!added.empty()) {
    spdlog::info(
        "{} table(s) new to the configuration: reading their rows while streaming "
        "(snapshot.new_tables: incremental)",
        added.size());
    for (const auto& refused : incremental_->execute(added)) {
      spdlog::warn("incremental snapshot refused: {}", refused);
    }
  }
  incremental_->kick();
}

bool Connector::handle_snapshot_message(const pg::XLogData& x, const decoder::Change& c,
                                        std::string_view original) {
  if (c.action == decoder::Action::kMessage &&
      (c.prefix == snapshot::IncrementalSnapshot::kWatermarkPrefix ||
       c.prefix == cfg_.snapshot.signal_prefix)) {
    router_->note_message(c);  // consumed here, never routed, but pgoutput would send it
  }
  if (c.prefix == snapshot::IncrementalSnapshot::kWatermarkPrefix) {
    if (!incremental_ || !in_txn_) return true;  // watermarks are transactional
    // exactly_once: a full Kafka transaction is committed before the chunk, never inside it (the
    // chunk counts in the progress from here on). While that commit runs the chunk's rows wait
    // in `pending_` (publish_pending finds the publisher closed, as for a full queue) and go into
    // the next transaction.
    if (exactly_once() && !eos_split_if_full() && (eos_restarting_ || stopping_)) return true;
    auto records = incremental_->on_watermark(
        c.content, c.lsn, c.xid, tracker_.next_lsn_of(*tracker_.open_txn()).value_or(c.lsn));
    if (!records) {
      handle_unmappable(records.error() + " (LSN " + c.lsn.to_string() + ")", original, &c);
      return true;
    }
    if (!records->empty()) {
      // The chunk's rows belong to the high watermark's transaction: the slot moves past it only
      // once Kafka has them.
      pending_ = *records;
      pending_chunk_ = true;
      pending_next_ = 0;
      pending_after_ = AfterPublish::kChange;
      pending_lsn_ = c.lsn;
      if (publish_pending()) apply_backpressure();
    }
    return true;
  }
  std::string signal_text;
  if (c.action == decoder::Action::kInsert) {
    // A row of the signal table (Debezium's columns id, type, data): type and data make the
    // signal's JSON.
    if (cfg_.snapshot.signal_table.empty() || c.schema != cfg_.snapshot.signal_table_schema ||
        c.table != cfg_.snapshot.signal_table_name) {
      return false;
    }
    std::string type;
    std::string data;
    for (const auto& col : c.columns) {
      if (col.name == "type" && json::is_string_token(col.value)) {
        json::unescape_string(col.value, type);
      } else if (col.name == "data" && json::is_string_token(col.value)) {
        json::unescape_string(col.value, data);
      }
    }
    signal_text = "{\"type\":";
    json::append_string(signal_text, type);
    signal_text += ",\"data\":" + (data.empty() ? std::string("null") : data) + "}";
  } else if (c.prefix == cfg_.snapshot.signal_prefix) {
    signal_text = c.content;
  } else {
    return false;
  }
  auto signal = snapshot::parse_signal(signal_text);
  if (!signal) {
    spdlog::error("snapshot signal at LSN {} ignored: {}: {}", c.lsn.to_string(), signal.error(),
                  signal_text.substr(0, 200));
    return true;
  }
  std::vector<std::pair<std::string, std::string>> tables;
  // What is said about the names is logged once the signal is applied: a signal that waits for
  // catalog lookups is processed again when they complete.
  std::vector<std::pair<spdlog::level::level_enum, std::string>> notes;
  for (const auto& name : signal->tables) {
    auto parsed = config::parse_table_name(name);
    if (!parsed) {
      notes.emplace_back(spdlog::level::err,
                         fmt::format("snapshot signal at LSN {}: table '{}': {}", c.lsn.to_string(),
                                     name, parsed.error()));
      continue;
    }
    if (parsed->schema.find('*') != std::string::npos ||
        parsed->table.find('*') != std::string::npos) {
      // A glob, as in `tables`: every table the snapshots read that it matches (leaves, with
      // events.partitions leaf).
      std::size_t matched = 0;
      for (const auto& captured : snapshot_tables_) {
        if (config::glob_match(parsed->schema, captured.first) &&
            config::glob_match(parsed->table, captured.second)) {
          tables.push_back(captured);
          ++matched;
        }
      }
      if (matched == 0) {
        notes.emplace_back(spdlog::level::err,
                           fmt::format("snapshot signal at LSN {}: {}: matches no captured table",
                                       c.lsn.to_string(), name));
      }
      continue;
    }
    // events.partitions leaf: a partitioned table's rows go to its leaves' topics, as its
    // changes do, so its leaves are read (or stopped) in its place.
    if (auto leaves = leaf_partitions_.find({parsed->schema, parsed->table});
        leaves != leaf_partitions_.end()) {
      notes.emplace_back(
          spdlog::level::info,
          fmt::format("snapshot signal at LSN {}: {} is partitioned (events.partitions: leaf): "
                      "applies to its {} leaf partition(s)",
                      c.lsn.to_string(), name, leaves->second.size()));
      tables.insert(tables.end(), leaves->second.begin(), leaves->second.end());
      continue;
    }
    tables.emplace_back(parsed->schema, parsed->table);
  }
  const bool in_kafka = incremental_ && exactly_once() && eos_signal_in_kafka(c);
  // execute's checks read the tables' shapes: those not cached are looked up first, without
  // blocking, as for a change of a new table (the stream waits at the signal meanwhile).
  if (incremental_ && !in_kafka && signal->kind == snapshot::Signal::Kind::kExecute &&
      wait_for_lookups(x, tables)) {
    return true;
  }
  for (const auto& [level, text] : notes) spdlog::log(level, "{}", text);
  if (!incremental_) return true;
  if (in_kafka) {
    spdlog::info(
        "snapshot signal at LSN {}: already applied (Kafka's last committed position is past "
        "it and carries its effect)",
        c.lsn.to_string());
    return true;
  }
  if (signal->kind == snapshot::Signal::Kind::kStop) {
    incremental_->stop(tables);
    return true;
  }
  for (const auto& refused : incremental_->execute(tables)) {
    spdlog::error("snapshot signal at LSN {} refused for {}", c.lsn.to_string(), refused);
  }
  return true;
}

}  // namespace walrelay
