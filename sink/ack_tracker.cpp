#include "walrelay/sink/ack_tracker.hpp"

#include <stdexcept>

namespace walrelay::sink {

AckTracker::TxnSeq AckTracker::begin(Lsn next_lsn) {
  if (open_) throw std::logic_error("AckTracker::begin: a transaction is already open");
  txns_.push_back(Txn{next_lsn, 0, false, false});
  open_ = true;
  return next_seq_++;
}

void AckTracker::add_event(std::size_t bytes) {
  if (!open_) throw std::logic_error("AckTracker::add_event: no open transaction");
  ++txns_.back().outstanding;
  ++in_flight_events_;
  in_flight_bytes_ += bytes;
}

bool AckTracker::add_event_to(TxnSeq seq, std::size_t bytes) {
  Txn* t = find(seq);
  if (t == nullptr) return false;
  ++t->outstanding;
  ++in_flight_events_;
  in_flight_bytes_ += bytes;
  return true;
}

void AckTracker::commit() {
  if (!open_) throw std::logic_error("AckTracker::commit: no open transaction");
  txns_.back().committed = true;
  open_ = false;
  advance();
}

std::optional<AckTracker::TxnSeq> AckTracker::open_txn() const {
  if (!open_) return std::nullopt;
  return next_seq_ - 1;
}

AckTracker::Txn* AckTracker::find(TxnSeq seq) {
  if (seq < front_seq_ || seq - front_seq_ >= txns_.size()) return nullptr;
  return &txns_[seq - front_seq_];
}

std::optional<Lsn> AckTracker::next_lsn_of(TxnSeq seq) const {
  if (seq < front_seq_ || seq - front_seq_ >= txns_.size()) return std::nullopt;
  return txns_[seq - front_seq_].next_lsn;
}

bool AckTracker::on_ack(TxnSeq seq, std::size_t bytes) {
  Txn* t = find(seq);
  if (t == nullptr || t->outstanding == 0) {
    throw std::logic_error("AckTracker::on_ack: delivery report for an unknown event");
  }
  --in_flight_events_;
  in_flight_bytes_ -= bytes;
  --t->outstanding;
  return advance();
}

void AckTracker::on_failure(TxnSeq seq, std::size_t bytes) {
  --in_flight_events_;
  in_flight_bytes_ -= bytes;
  failed_ = true;
  if (Txn* t = find(seq)) {
    if (t->outstanding > 0) --t->outstanding;
    t->failed = true;
  }
}

bool AckTracker::advance() {
  bool moved = false;
  while (!txns_.empty()) {
    const Txn& t = txns_.front();
    if (!t.committed || t.outstanding != 0 || t.failed) break;
    if (t.next_lsn > flush_lsn_) {
      flush_lsn_ = t.next_lsn;
      moved = true;
    }
    txns_.pop_front();
    ++front_seq_;
  }
  return moved;
}

bool AckTracker::advance_idle(Lsn server_wal_end) {
  if (open_ || failed_ || !txns_.empty() || in_flight_events_ != 0) return false;
  if (server_wal_end <= flush_lsn_) return false;
  flush_lsn_ = server_wal_end;
  return true;
}

}  // namespace walrelay::sink
