#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "walrelay/kafka/transactions.hpp"

namespace walrelay::kafka {

/// Runs a resumable transactional call (rd_kafka_init_transactions, rd_kafka_commit_transaction,
/// rd_kafka_abort_transaction: librdkafka >= 1.9 documents each as "resumable when a retriable
/// timeout error is returned: calling the function again will resume the operation that is
/// progressing in the background") in slices, so that the event loop it runs on is never blocked
/// for longer than one slice.
///
/// Each slice calls the function with a timeout of at most `Limits::slice` (ms). A result of
/// kRetry with ERR__TIMED_OUT (the slice's own timeout) is followed by the next slice right away
/// (after the handlers that are ready ran); another retriable error by the next slice after
/// `Limits::retry_delay`. It ends with the first result that is not kRetry, or, once
/// `Limits::budget` has passed since `start` or `Limits::max_errors` retriable errors other than
/// timeouts came back, with `Limits::spent` and a message saying so ("not completed after 12.3 s
/// and 2 retriable errors (last: ...)"). Warnings are logged from
/// `Limits::first_warning` after the start on, every `Limits::warning_interval`.
///
/// Driven (`start` with drive = true), the slices run on an Asio timer of the executor; not
/// driven, the caller calls `step` itself (e.g. a stopping process that may block). All calls on
/// the executor's thread. One call at a time: `start` replaces a call in progress (without calling
/// its `done`).
class SlicedCall {
 public:
  struct Limits {
    std::chrono::milliseconds slice{100};        ///< longest one call blocks
    std::chrono::milliseconds budget{60'000};    ///< overall, from `start`
    std::chrono::milliseconds retry_delay{100};  ///< before a slice after a retriable error
    int max_errors = 6;  ///< retriable errors (not the slice's timeout) before giving up
    TxnAction spent = TxnAction::kAbort;  ///< the action once the budget or errors are spent
    std::chrono::milliseconds first_warning{1'000};      ///< first "has not completed" warning
    std::chrono::milliseconds warning_interval{10'000};  ///< then every so often
  };
  /// The transactional call: makes progress for at most `timeout` (ms, >= 1) and returns its
  /// classified outcome (Transactions::init / commit / abort).
  using Call = std::function<TxnResult(std::chrono::milliseconds timeout)>;
  /// The call's outcome: never kRetry (a spent budget is `Limits::spent`).
  using Done = std::function<void(const TxnResult&)>;

  explicit SlicedCall(const boost::asio::any_io_executor& executor) : timer_(executor) {}

  /// Starts `call` named `name` (for logs, e.g. "commit_transaction"); `note` is appended to the
  /// "has not completed" warning (e.g. what waits meanwhile). Driven: runs the first slice before
  /// returning (so a quick call has called `done` already) and the next ones on the timer.
  void start(std::string name, const Limits& limits, Call call, Done done, bool drive = true,
             std::string note = {});
  /// Runs one slice; when it ends the call, calls `done` and returns false. True: not done yet
  /// (call `step` again, or let the timer do it when driven). False when no call is in progress.
  /// Blocks up to Limits::slice.
  bool step();
  /// Stops driving the call from the timer; `step` goes on working (a stopping process takes the
  /// call over).
  void stop_driving();
  /// Forgets the call in progress: no more slices, its `done` is not called. Safe from inside
  /// the call or `done`.
  void cancel();

  [[nodiscard]] bool running() const { return running_; }
  /// When the call in progress (or the last one) started.
  [[nodiscard]] std::chrono::steady_clock::time_point started() const { return started_; }

 private:
  void schedule(std::chrono::milliseconds delay);

  boost::asio::steady_timer timer_;
  std::string name_;
  std::string note_;
  Limits limits_;
  std::shared_ptr<Call> call_;
  Done done_;
  bool running_ = false;
  bool drive_ = false;
  std::uint64_t generation_ = 0;  // bumped by start and cancel: stale slices and timers do nothing
  int errors_ = 0;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point next_warning_;
};

}  // namespace walrelay::kafka
