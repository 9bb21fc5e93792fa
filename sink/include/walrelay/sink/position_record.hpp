#pragma once

// walrelay's checkpoint in Kafka (delivery exactly_once): the position record's value, a pure
// codec (no I/O). Written in the same Kafka transaction as the records it covers
// (src/connector_exactly_once.cpp), read back with PositionReader (position_reader.hpp).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "walrelay/core/lsn.hpp"
#include "walrelay/core/snapshot_progress.hpp"

namespace walrelay::sink {

/// Where a connector's output stands in Kafka: the value of its record in the positions topic,
/// written in the same Kafka transaction as the records it covers.
struct StreamPosition {
  std::string system_id;       ///< PostgreSQL system identifier (IDENTIFY_SYSTEM)
  std::uint32_t timeline = 0;  ///< timeline at the time of writing
  /// End of the commit record (wal2json `nextlsn`) of the newest PostgreSQL transaction whose
  /// records are (in part, see `index`) in Kafka.
  Lsn lsn;
  /// -1: that whole transaction is in Kafka. n >= 0: only its first n records are (a transaction
  /// larger than exactly_once.max_transaction_events, split across Kafka transactions).
  std::int64_t index = -1;
  /// The initial snapshot's progress as of this Kafka transaction, while one runs: every snapshot
  /// row (`op` `r`) handed to the producer before the commit is in it, so each table's `last_key`
  /// is the key of its last row in Kafka (inside a chunk if the commit came there). nullopt: no
  /// initial snapshot ran when it was written (or an older walrelay wrote it).
  std::optional<snapshot::SnapshotProgress> snapshot;
  /// The incremental snapshots' progress (every table queued for one, done ones included) as of
  /// this Kafka transaction: an incremental chunk's rows and the progress past it are in the same
  /// Kafka transaction (a chunk is never split across two). nullopt: none was running.
  std::optional<snapshot::SnapshotProgress> incremental;

  bool operator==(const StreamPosition&) const = default;
};

/// The position record's value, a JSON object:
///
///     {"system_id":"7312345678901234567","timeline":1,"lsn":"0/16B3748","index":-1,
///      "snapshot":{"slot":"walrelay_app","lsn":"0/16B3000","xid":741,"resumed":false,
///                  "tables":[{"schema":"public","table":"orders","done":false,"rows":16384,
///                             "chunks":2,"last_key":["16384"]}]},
///      "incremental":{"slot":"walrelay_app","lsn":"0/0","xid":0,"resumed":false,"tables":[]}}
///
/// `snapshot` and `incremental` (StreamPosition's fields of the same names) are left out when
/// nullopt; a table's `last_key` (texts, null for SQL NULL) when it has none. Size: one entry per
/// table of the snapshot, each with one key.
std::string encode_position(const StreamPosition& position);
/// Parses a position record's value: encode_position's output, and the older form without
/// `snapshot` and `incremental` (both nullopt then). Unknown members are ignored. nullopt for
/// anything else: not JSON, a required member (system_id, timeline, lsn, index) missing or of the
/// wrong type, an LSN that does not parse, index < -1, or a malformed snapshot section.
std::optional<StreamPosition> decode_position(std::string_view value);

/// `<prefix>.walrelay.positions`.
std::string positions_topic(std::string_view prefix);

}  // namespace walrelay::sink
