#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "walrelay/core/lsn.hpp"

namespace walrelay {

/// walrelay's durable record of one slot it has streamed: which cluster (system identifier), on
/// which timeline, and the last position it confirmed. Checked at every start so that a slot that
/// was dropped, invalidated or lost in a failover is never silently replaced by a fresh one
/// (which would skip every change in between).
struct SlotRecord {
  std::string system_id;  ///< IDENTIFY_SYSTEM systemid (decimal text)
  std::uint32_t timeline = 0;
  std::string database;
  std::string slot;
  Lsn confirmed;  ///< last flush LSN walrelay sent in a standby status update
  /// source.allow_slot_reset was used to accept a loss; cleared by a start without the setting.
  bool reset_used = false;
  /// `<slot>.incremental` (the incremental snapshot queue) was kept beside this record when it
  /// was saved: one missing now was lost, and the tables it may have queued are read again.
  /// False in records of walrelay versions that wrote that file only once something was queued.
  bool incremental_kept = false;
};

/// Stores SlotRecords as small text files `<dir>/<slot>.state` (`key=value` lines), replaced
/// atomically (write to a temporary file, fsync, rename, fsync the directory) so a crash leaves
/// either the old or the new record. Not thread-safe.
class StateStore {
 public:
  /// `dir` is created on first save.
  StateStore(std::string dir, std::string slot);

  /// The record, nullopt when none exists yet, or an error naming the file (unreadable, empty,
  /// malformed or incomplete: walrelay does not start on it, since without the record it would
  /// not notice a lost slot; the message says how to recover).
  std::expected<std::optional<SlotRecord>, std::string> load() const;

  /// Writes the record durably. Errors carry the OS reason.
  std::expected<void, std::string> save(const SlotRecord& record) const;

  [[nodiscard]] const std::string& path() const { return path_; }

  /// The default directory: $WALRELAY_STATE_DIR, else $XDG_STATE_HOME/walrelay, else
  /// $HOME/.local/state/walrelay, else ./walrelay-state.
  static std::string default_dir();

 private:
  std::expected<std::optional<SlotRecord>, std::string> load_record() const;
  std::string dir_;
  std::string path_;
};

/// Replaces `path` (inside `dir`, created if missing) with `text` atomically: a temporary file,
/// fsync, rename, fsync of the directory; a crash leaves the old or the new content. Errors carry
/// the OS reason.
std::expected<void, std::string> write_file_durably(const std::string& dir, const std::string& path,
                                                    const std::string& text);

/// Removes every file walrelay keeps in `dir` for `slot`: its record (`<slot>.state`) and the
/// progress of its snapshots (`<slot>.snapshot`, `<slot>.incremental`), with their leftover
/// temporary files (`*.tmp`), then fsyncs the directory. For `walrelay slot drop`: a dropped
/// slot's record would make the next start refuse to create a new one (exit 5), and its snapshot
/// progress is not the next slot's. Returns the paths removed (files that did not exist are
/// skipped; empty when there were none), or an error naming the file that could not be removed
/// and the OS reason (files removed before it stay removed).
std::expected<std::vector<std::string>, std::string> remove_slot_files(const std::string& dir,
                                                                       const std::string& slot);

/// Parses the body of a TIMELINE_HISTORY file (PostgreSQL docs §55.4: lines
/// `<tli>\t<switchpoint LSN>\t<reason>`) and returns the LSN where `timeline` ended, or nullopt
/// when the history does not name it (it is the current timeline or unknown).
std::optional<Lsn> timeline_switchpoint(const std::string& history, std::uint32_t timeline);

}  // namespace walrelay
