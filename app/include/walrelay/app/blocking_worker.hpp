#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <memory>
#include <type_traits>
#include <utility>

namespace walrelay::app {

/// Runs a system's blocking set-up steps (a libpq command that may wait on the server, such as
/// CREATE_REPLICATION_SLOT; librdkafka's synchronous metadata request of a broker probe) on a
/// thread of its own, one at a time, and hands each result back on the system's event loop, so
/// that the loop keeps serving /live, /metrics and signals meanwhile.
///
/// `run(work, done)`: `work()` runs on the worker's thread; `done(result)` is then posted to
/// `loop` (the event loop the system runs on). `work` must touch nothing the loop uses until
/// `done` runs: it gets what it needs by value, or objects the loop leaves alone while `busy()`.
/// `busy()` is true from `run` until `done` has returned. Calls on the loop's thread only.
///
/// The destructor waits for a running `work` (cancel it first, e.g. with pg::CancelHandle, when
/// it may wait long); a `done` not yet run by then is dropped.
class BlockingWorker {
 public:
  explicit BlockingWorker(boost::asio::any_io_executor loop) : loop_(std::move(loop)) {}
  ~BlockingWorker() {
    *alive_ = false;
    pool_.join();
  }
  BlockingWorker(const BlockingWorker&) = delete;
  BlockingWorker& operator=(const BlockingWorker&) = delete;

  template <class Work, class Done>
  void run(Work work, Done done) {
    busy_ = true;
    boost::asio::post(
        pool_, [this, alive = alive_, work = std::move(work), done = std::move(done)]() mutable {
          auto result = std::make_shared<std::invoke_result_t<Work&>>(work());
          boost::asio::post(loop_, [this, alive, result, done = std::move(done)]() mutable {
            if (!*alive) return;
            busy_ = false;
            done(std::move(*result));
          });
        });
  }

  [[nodiscard]] bool busy() const { return busy_; }

 private:
  boost::asio::any_io_executor loop_;
  boost::asio::thread_pool pool_{1};
  // Read on the loop's thread only (the loop outlives the worker, or runs no more handlers).
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool busy_ = false;
};

}  // namespace walrelay::app
