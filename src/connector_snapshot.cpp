// The connector's snapshot phase: deciding whether and how to read the captured tables' rows, and
// handing over to the stream afterwards. The reading itself is snapshot::Snapshotter's.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "connector.hpp"

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
  return save_snapshot_progress();
}

bool Connector::save_snapshot_progress() {
  if (auto saved = snapshot_store_->save(*snapshot_progress_); !saved) {
    reason_ = "cannot save the snapshot progress (source.state_dir): " + saved.error();
    return false;
  }
  return true;
}

bool Connector::resume_snapshot_progress(const std::string& slot, Lsn confirmed_flush_lsn) {
  snapshot_progress_.reset();
  exported_snapshot_.clear();
  if (cfg_.snapshot.mode == "never") return true;
  snapshot_store_ = std::make_unique<snapshot::SnapshotProgressStore>(progress_dir(cfg_), slot);
  auto loaded = snapshot_store_->load();
  if (!loaded) {
    reason_ = loaded.error();
    return false;
  }
  if (!*loaded || (*loaded)->slot != slot || (*loaded)->complete()) return true;
  snapshot_progress_ = std::move(**loaded);
  // Created, then a crash before the consistent point was recorded: the slot has not moved since.
  if (snapshot_progress_->lsn.is_zero()) snapshot_progress_->lsn = confirmed_flush_lsn;
  if (!snapshot_progress_->resumed) {
    snapshot_progress_->resumed = true;
    return save_snapshot_progress();
  }
  return true;
}

Connector::Outcome Connector::prepare_initial_only() {
  // No slot is kept: the rows are read from a temporary slot's exported snapshot (dropped when
  // this connection closes), and walrelay stops afterwards.
  const std::string& slot = cfg_.source.slot;
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
  if (snapshot_progress_->resumed) {
    spdlog::warn(
        "snapshot: resuming an interrupted snapshot (progress in {}): the exported snapshot is "
        "gone, so the remaining chunks are read at their current state; the stream from {} "
        "follows and brings every key to its latest committed state",
        snapshot_store_->path(), snapshot_progress_->lsn.to_string());
  }
  snapshotter_ = std::make_unique<snapshot::Snapshotter>(
      io_.get_executor(), std::move(settings), *router_, *catalog_, publisher_, *snapshot_store_,
      *snapshot_progress_, exported_snapshot_,
      [this](std::optional<snapshot::SnapshotFailure> failure, const std::string& reason) {
        if (stopping_) return;
        if (snapshotter_) snapshot_progress_ = snapshotter_->progress();
        snapshotter_.reset();
        exported_snapshot_.clear();
        if (!failure) {
          start_streaming();
          return;
        }
        switch (*failure) {
          case snapshot::SnapshotFailure::kRetry:
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
  snapshotter_->start();
}

}  // namespace walrelay
