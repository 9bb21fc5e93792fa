#include "walrelay/kafka/sliced_call.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <utility>

namespace walrelay::kafka {

void SlicedCall::start(std::string name, const Limits& limits, Call call, Done done, bool drive,
                       std::string note) {
  timer_.cancel();
  ++generation_;
  name_ = std::move(name);
  note_ = std::move(note);
  limits_ = limits;
  call_ = std::make_shared<Call>(std::move(call));
  done_ = std::move(done);
  running_ = true;
  drive_ = drive;
  errors_ = 0;
  started_ = std::chrono::steady_clock::now();
  next_warning_ = started_ + limits_.first_warning;
  if (drive_) step();
}

bool SlicedCall::step() {
  if (!running_) return false;
  const std::uint64_t gen = generation_;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      started_ + limits_.budget - std::chrono::steady_clock::now());
  // Held here too: the call may cancel or replace this one, which must not destroy what runs.
  const std::shared_ptr<Call> call = call_;
  TxnResult r = (*call)(std::clamp(left, std::chrono::milliseconds(1), limits_.slice));
  if (gen != generation_ || !running_) return false;  // cancelled or replaced during the call
  if (r.action == TxnAction::kRetry) {
    const auto now = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(now - started_).count();
    const bool timed_out = r.code == RD_KAFKA_RESP_ERR__TIMED_OUT;
    if (!timed_out) {
      ++errors_;
      spdlog::warn("{} (attempt {} of {}): {}; retrying", name_, errors_, limits_.max_errors,
                   r.message);
    }
    if (errors_ >= limits_.max_errors || now - started_ >= limits_.budget) {
      r.action = limits_.spent;
      r.message = fmt::format("not completed after {:.1f} s and {} retriable errors (last: {})",
                              secs, errors_, r.message);
    } else {
      if (now >= next_warning_) {
        next_warning_ = now + limits_.warning_interval;
        spdlog::warn("{} has not completed after {:.1f} s ({}); still trying for up to {} s{}",
                     name_, secs, r.message,
                     std::chrono::duration_cast<std::chrono::seconds>(limits_.budget).count(),
                     note_);
      }
      // Right away after the slice's own timeout (the handlers that are ready run first); after a
      // short delay when the other side answered with a retriable error.
      if (drive_) schedule(timed_out ? std::chrono::milliseconds(0) : limits_.retry_delay);
      return true;
    }
  }
  running_ = false;
  timer_.cancel();
  // `done` may start another call on this object: nothing of this one is used after it.
  Done done = std::move(done_);
  call_.reset();
  if (done) done(r);
  return false;
}

void SlicedCall::stop_driving() {
  drive_ = false;
  timer_.cancel();
}

void SlicedCall::cancel() {
  ++generation_;
  running_ = false;
  drive_ = false;
  timer_.cancel();
  // Safe inside the call (step holds it) and inside `done` (moved out before it runs).
  call_.reset();
  done_ = nullptr;
}

void SlicedCall::schedule(std::chrono::milliseconds delay) {
  const std::uint64_t gen = generation_;
  timer_.expires_after(delay);
  timer_.async_wait([this, gen](const boost::system::error_code& ec) {
    if (ec || gen != generation_ || !drive_) return;
    step();
  });
}

}  // namespace walrelay::kafka
