#include "walrelay/sink/ack_tracker.hpp"

#include <stdexcept>

namespace walrelay::sink {

AckTracker::TxnSeq AckTracker::begin(Lsn next_lsn) {
  if (open_) throw std::logic_error("AckTracker::begin: a transaction is already open");
  open_ = true;
  return units_.open(next_lsn);
}

void AckTracker::add_event(std::size_t bytes) {
  if (!open_) throw std::logic_error("AckTracker::add_event: no open transaction");
  (void)units_.add(units_.next_seq() - 1, bytes);
}

bool AckTracker::add_event_to(TxnSeq seq, std::size_t bytes) {
  return units_.add(seq, bytes);
}

void AckTracker::commit() {
  if (!open_) throw std::logic_error("AckTracker::commit: no open transaction");
  units_.close(units_.next_seq() - 1);
  open_ = false;
  advance();
}

std::optional<AckTracker::TxnSeq> AckTracker::open_txn() const {
  if (!open_) return std::nullopt;
  return units_.next_seq() - 1;
}

std::optional<Lsn> AckTracker::next_lsn_of(TxnSeq seq) const {
  if (const Lsn* lsn = units_.unit(seq)) return *lsn;
  return std::nullopt;
}

bool AckTracker::on_ack(TxnSeq seq, std::size_t bytes) {
  try {
    units_.ack(seq, bytes);
  } catch (const std::logic_error&) {
    throw std::logic_error("AckTracker::on_ack: delivery report for an unknown event");
  }
  return advance();
}

void AckTracker::on_failure(TxnSeq seq, std::size_t bytes) {
  units_.fail(seq, bytes);
}

bool AckTracker::advance() {
  bool moved = false;
  units_.pop_done([&](TxnSeq, Lsn next_lsn) {
    if (next_lsn > flush_lsn_) {
      flush_lsn_ = next_lsn;
      moved = true;
    }
  });
  return moved;
}

bool AckTracker::advance_idle(Lsn server_wal_end) {
  if (open_ || units_.failed() || !units_.empty() || units_.in_flight_events() != 0) return false;
  if (server_wal_end <= flush_lsn_) return false;
  flush_lsn_ = server_wal_end;
  return true;
}

}  // namespace walrelay::sink
