#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "walrelay/core/lsn.hpp"

// The progress of a snapshot, as plain values: kept in the state directory (src/snapshot,
// SnapshotProgressStore) and, with delivery exactly_once, in the position record in Kafka
// (walrelay/sink/position_record.hpp), so both sides share one definition.
namespace walrelay::snapshot {

/// A key value as text (the type's output function; nullopt for SQL NULL).
using KeyText = std::vector<std::optional<std::string>>;

/// How far one table's snapshot got: everything up to `last_key` (inclusive, in key order) has
/// been acknowledged by Kafka.
struct TableProgress {
  std::string schema;
  std::string table;
  bool done = false;
  std::optional<KeyText> last_key;  ///< nullopt: no chunk acknowledged yet
  std::uint64_t rows = 0;           ///< rows acknowledged
  std::uint64_t chunks = 0;         ///< chunks acknowledged (the next chunk's number)

  bool operator==(const TableProgress&) const = default;
};

/// A table's progress before anything of it was read (`done`: nothing to read).
inline TableProgress table_progress(std::string schema, std::string table, bool done = false) {
  TableProgress t;
  t.schema = std::move(schema);
  t.table = std::move(table);
  t.done = done;
  return t;
}

/// A snapshot's durable progress: the slot's consistent point it belongs to and every table's
/// position. Written before the slot is created (lsn 0/0: creation pending), so a crash at any
/// point is detected on the next start.
struct SnapshotProgress {
  std::string slot;
  Lsn lsn;                ///< the slot's consistent point (0/0 while the slot is being created)
  std::uint64_t xid = 0;  ///< the snapshot's transaction horizon (source.txId of its records)
  bool resumed = false;   ///< a crash lost the exported snapshot; chunks are read at current state
  std::vector<TableProgress> tables;

  [[nodiscard]] bool complete() const {
    for (const auto& t : tables) {
      if (!t.done) return false;
    }
    return lsn.value() != 0;
  }
  bool operator==(const SnapshotProgress&) const = default;
};

}  // namespace walrelay::snapshot
