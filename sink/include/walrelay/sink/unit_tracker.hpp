#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <utility>

namespace walrelay::sink {

/// The acknowledgement tracking every source shares: a source publishes its records in units (a
/// PostgreSQL transaction of the stream, a chunk of a snapshot, later a claimed outbox batch) and
/// learns when a unit is done, in the order it opened them. A unit is done once it is closed (the
/// source handed over all its records) and Kafka acknowledged every record of it and of every
/// unit opened before it: a later unit acknowledged first never completes before an earlier one
/// (delivery reports arrive in any order across partitions, librdkafka INTRODUCTION.md "Message
/// ordering"). A unit with a record that failed for good is never done, nor is anything after it.
///
/// `Unit` is the source's data for a unit (the transaction's commit LSN, a chunk's last key and row
/// count), handed back by `pop_done`. Memory: one entry per unit not yet done, none per record.
/// Units are numbered (Seq) from `first` on, one more per `open`; a source uses the number as its
/// delivery-report unit. Not thread-safe: the thread of the event loop that publishes.
template <class Unit>
class UnitTracker {
 public:
  using Seq = std::uint64_t;

  /// The first unit opened will be `first` (a resumed snapshot numbers its chunks on).
  explicit UnitTracker(Seq first = 0) : front_seq_(first), next_seq_(first) {}

  /// Opens a unit at the back (its records follow with `add`). Returns its number.
  Seq open(Unit unit) {
    units_.push_back(Entry{std::move(unit), 0, false, false});
    return next_seq_++;
  }
  /// One record of unit `seq` (open or closed, not yet done) handed to the producer, carrying
  /// `bytes` (key + value). Returns false when `seq` is not tracked (done or never opened).
  bool add(Seq seq, std::size_t bytes) {
    Entry* e = find(seq);
    if (e == nullptr) return false;
    ++e->outstanding;
    ++in_flight_events_;
    in_flight_bytes_ += bytes;
    return true;
  }
  /// No more records for unit `seq`. Throws std::logic_error for a unit not tracked.
  void close(Seq seq) {
    Entry* e = find(seq);
    if (e == nullptr) throw std::logic_error("UnitTracker::close: unknown unit");
    e->closed = true;
  }
  /// A record of `seq` carrying `bytes` acknowledged. Throws std::logic_error (changing nothing)
  /// for a unit without records in flight: a report that does not belong to any.
  void ack(Seq seq, std::size_t bytes) {
    if (!try_ack(seq, bytes)) {
      throw std::logic_error("UnitTracker::ack: delivery report for an unknown record");
    }
  }
  /// As `ack`, but a report that belongs to no tracked record changes nothing and returns false
  /// (a report of an earlier run of the source, whose units were given up).
  bool try_ack(Seq seq, std::size_t bytes) {
    Entry* e = find(seq);
    if (e == nullptr || e->outstanding == 0) return false;
    --e->outstanding;
    --in_flight_events_;
    in_flight_bytes_ -= bytes < in_flight_bytes_ ? bytes : in_flight_bytes_;
    return true;
  }
  /// A record of `seq` carrying `bytes` failed for good: `seq` and every later unit are never
  /// done.
  void fail(Seq seq, std::size_t bytes) {
    if (in_flight_events_ > 0) --in_flight_events_;
    in_flight_bytes_ -= bytes < in_flight_bytes_ ? bytes : in_flight_bytes_;
    failed_ = true;
    if (Entry* e = find(seq)) {
      if (e->outstanding > 0) --e->outstanding;
      e->failed = true;
    }
  }
  /// Hands every done unit at the front to `done(Seq, Unit&&)`, oldest first, and forgets it.
  /// Returns how many.
  template <class F>
  std::size_t pop_done(F&& done) {
    std::size_t n = 0;
    while (!units_.empty()) {
      Entry& e = units_.front();
      if (!e.closed || e.outstanding != 0 || e.failed) break;
      Unit unit = std::move(e.unit);
      units_.pop_front();
      const Seq seq = front_seq_++;
      ++n;
      done(seq, std::move(unit));
    }
    return n;
  }
  /// Calls `f(Seq, const Unit&, bool closed)` for every tracked unit, oldest first.
  template <class F>
  void for_each(F&& f) const {
    Seq seq = front_seq_;
    for (const Entry& e : units_) f(seq++, e.unit, e.closed);
  }

  /// The data of unit `seq` while it is tracked, else null.
  [[nodiscard]] Unit* unit(Seq seq) {
    Entry* e = find(seq);
    return e != nullptr ? &e->unit : nullptr;
  }
  [[nodiscard]] const Unit* unit(Seq seq) const {
    return const_cast<UnitTracker*>(this)->unit(seq);
  }
  /// The newest unit (the one being published), if any.
  [[nodiscard]] Unit* back() { return units_.empty() ? nullptr : &units_.back().unit; }
  [[nodiscard]] bool back_closed() const { return !units_.empty() && units_.back().closed; }
  /// The number the next `open` returns.
  [[nodiscard]] Seq next_seq() const { return next_seq_; }
  /// Units not yet done.
  [[nodiscard]] std::size_t size() const { return units_.size(); }
  [[nodiscard]] bool empty() const { return units_.empty(); }
  [[nodiscard]] std::size_t in_flight_events() const { return in_flight_events_; }
  [[nodiscard]] std::size_t in_flight_bytes() const { return in_flight_bytes_; }
  /// True once any record failed for good.
  [[nodiscard]] bool failed() const { return failed_; }

 private:
  struct Entry {
    Unit unit;
    std::uint64_t outstanding = 0;
    bool closed = false;
    bool failed = false;
  };
  Entry* find(Seq seq) {
    if (seq < front_seq_ || seq - front_seq_ >= units_.size()) return nullptr;
    return &units_[seq - front_seq_];
  }

  std::deque<Entry> units_;  // front() is front_seq_
  Seq front_seq_;
  Seq next_seq_;
  std::size_t in_flight_events_ = 0;
  std::size_t in_flight_bytes_ = 0;
  bool failed_ = false;
};

}  // namespace walrelay::sink
