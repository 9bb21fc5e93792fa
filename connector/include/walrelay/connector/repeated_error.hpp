#pragma once
// Recognises a server error that repeats at the same stream position (shared/cases/CASE-02: a
// change wal2json cannot decode fails every attempt at the same LSN), so the connector stops
// with a clear message instead of reconnecting for ever.

#include <string>
#include <string_view>

#include "walrelay/core/lsn.hpp"

namespace walrelay {

class RepeatedErrorGuard {
 public:
  /// `limit`: how many consecutive identical failures stop the connector (source.
  /// max_repeated_errors); 0 never stops.
  explicit RepeatedErrorGuard(int limit) : limit_(limit) {}

  /// Whether an error with this SQLSTATE can repeat deterministically at one position: server
  /// errors of the decoding itself. Not connection loss (class 08), operator intervention (57:
  /// shutdown, cancel), lack of resources (53: too many connections) or a slot in use (55006),
  /// which retrying outlives (PostgreSQL docs Appendix A "PostgreSQL Error Codes").
  static bool can_repeat(std::string_view sqlstate);

  /// Records a session that ended with `sqlstate`/`message` after the stream had reached
  /// `position` (the last LSN received). Returns how many sessions failed this same way at this
  /// same position since the last progress (1 for a new kind of failure). A failure that cannot
  /// repeat (can_repeat false) leaves the count as it is.
  int failed(Lsn position, std::string_view sqlstate, std::string_view message);

  /// A session delivered something (the confirmed position moved): the count starts over.
  void progressed() { count_ = 0; }

  /// True when the last failure reached the limit.
  [[nodiscard]] bool exhausted() const { return limit_ > 0 && count_ >= limit_; }
  [[nodiscard]] int count() const { return count_; }

  /// What an operator should know about a repeating failure: the likely cause and the ways on
  /// (never skipping the change by itself), for the final log line.
  /// `sqlstate` 54000 program_limit_exceeded (a string over 1 GB) adds the likely cause.
  static std::string advice(std::string_view sqlstate, Lsn position);

 private:
  int limit_;
  int count_ = 0;
  Lsn position_;
  std::string key_;  // SQLSTATE + the message's first line
};

}  // namespace walrelay
