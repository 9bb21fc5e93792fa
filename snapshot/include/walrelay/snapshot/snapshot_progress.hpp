#pragma once

#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "walrelay/core/snapshot_progress.hpp"

namespace walrelay::snapshot {

/// Stores SnapshotProgress as `<dir>/<slot>.snapshot` (YAML), replaced atomically like the slot
/// record. Not thread-safe.
class SnapshotProgressStore {
 public:
  /// The file is `<dir>/<slot><suffix>` (`.snapshot` for the initial snapshot, `.incremental`).
  SnapshotProgressStore(std::string dir, const std::string& slot,
                        const std::string& suffix = ".snapshot");

  /// The progress, nullopt when there is none, or an error (unreadable, empty or malformed file:
  /// the caller must not take it as done).
  [[nodiscard]] std::expected<std::optional<SnapshotProgress>, std::string> load() const;
  /// Writes durably; errors carry the OS reason.
  [[nodiscard]] std::expected<void, std::string> save(const SnapshotProgress& p) const;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

/// delivery exactly_once: the progress a snapshot resumes from, given the local file's (`local`,
/// nullopt when there is none) and the one in Kafka's last committed position record (`kafka`,
/// same slot and run). Kafka's is what read_committed consumers saw, so for every table it lists
/// it replaces the local entry, whether that is behind it (a crash between a Kafka commit and the
/// local save: reading from the local entry would publish committed rows again) or ahead of it
/// (Kafka lost what the local file counts: it is read again). Tables only the local file lists
/// (queued after that commit: nothing of them is in Kafka) are kept as they are. `lsn`, `xid` come
/// from the local file when it has them, else from Kafka's; `resumed` is either's.
/// `changed` (optional) receives "schema.table" of every table whose entry changed.
SnapshotProgress reconcile_progress(const std::optional<SnapshotProgress>& local,
                                    const SnapshotProgress& kafka,
                                    std::vector<std::string>* changed = nullptr);

}  // namespace walrelay::snapshot
