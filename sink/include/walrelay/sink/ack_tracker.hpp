#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

#include "walrelay/core/lsn.hpp"
#include "walrelay/sink/unit_tracker.hpp"

namespace walrelay::sink {

/// Tracks which source transactions are fully acknowledged by Kafka and derives the flush LSN that
/// may be confirmed to PostgreSQL.
///
/// Rule (the delivery contract): the flush LSN is the `nextlsn` (end of the commit record,
/// PostgreSQL docs §55.4 "Streaming Replication Protocol", XLogData and the commit record) of the
/// newest transaction whose events, and those of every earlier transaction, have all been
/// acknowledged. It only moves forward. Delivery reports may arrive in any order across partitions
/// (librdkafka INTRODUCTION.md "Message ordering"); a failed transaction stops the flush LSN before
/// it for good.
///
/// The stream's use of the UnitTracker every source shares (a unit: one transaction). Memory: one
/// small entry per transaction that is open or not yet fully acknowledged, none per event. Owned
/// by the connector's io_context thread; not thread-safe.
class AckTracker {
 public:
  /// Identifies a transaction for delivery reports (the per-message opaque). Strictly increasing.
  using TxnSeq = std::uint64_t;

  /// Sets the starting flush LSN (the slot's confirmed_flush_lsn), so walrelay never reports a
  /// position behind what the server already has. Only moves forward.
  void set_confirmed(Lsn confirmed) {
    if (confirmed > flush_lsn_) flush_lsn_ = confirmed;
  }

  /// Opens a transaction (wal2json B line). `next_lsn` is the end of its commit record: what
  /// becomes the flush LSN once it is fully acknowledged. Opening a transaction while another is
  /// open is a caller error (throws std::logic_error).
  TxnSeq begin(Lsn next_lsn);

  /// Counts one event of the open transaction handed to the producer, with `bytes` of key + value.
  /// Throws std::logic_error when no transaction is open.
  void add_event(std::size_t bytes);

  /// Counts one more event for transaction `seq`, open or not, as long as it still has events in
  /// flight (a dead-letter record replacing one of its events). Returns false when `seq` is no
  /// longer tracked.
  bool add_event_to(TxnSeq seq, std::size_t bytes);

  /// Closes the open transaction (wal2json C line). Empty transactions complete here at once.
  void commit();

  /// A delivery report with success for one event of `seq` carrying `bytes`. Returns true when the
  /// flush LSN moved. Throws std::logic_error (changing nothing) for a report of an unknown event.
  bool on_ack(TxnSeq seq, std::size_t bytes);

  /// A delivery that failed for good for an event of `seq`: the flush LSN never reaches `seq` or
  /// anything after it.
  void on_failure(TxnSeq seq, std::size_t bytes);

  /// Seq of the currently open transaction, if any.
  [[nodiscard]] std::optional<TxnSeq> open_txn() const;

  /// The LSN that may be sent as flush in standby status updates (0/0 until something completes,
  /// or the value given to `advance_idle`).
  [[nodiscard]] Lsn flush_lsn() const { return flush_lsn_; }

  /// next_lsn of transaction `seq` if it is still tracked.
  [[nodiscard]] std::optional<Lsn> next_lsn_of(TxnSeq seq) const;

  /// When nothing is open or in flight (and nothing failed), moves the flush LSN to
  /// `server_wal_end` if that is later: an idle database must not pile up WAL behind the slot.
  /// Returns true if moved.
  bool advance_idle(Lsn server_wal_end);

  [[nodiscard]] std::size_t in_flight_events() const { return units_.in_flight_events(); }
  [[nodiscard]] std::size_t in_flight_bytes() const { return units_.in_flight_bytes(); }
  /// True once any delivery failed for good.
  [[nodiscard]] bool failed() const { return units_.failed(); }
  /// Number of transactions open or waiting for acknowledgements.
  [[nodiscard]] std::size_t pending_transactions() const { return units_.size(); }

 private:
  bool advance();

  UnitTracker<Lsn> units_;  // per transaction: its next_lsn
  bool open_ = false;
  Lsn flush_lsn_;
};

}  // namespace walrelay::sink
