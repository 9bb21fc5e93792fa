// app::BlockingWorker: a blocking step runs off the loop, its result comes back on the loop's
// thread, and the loop keeps running handlers meanwhile.

#include "walrelay/app/blocking_worker.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <thread>

namespace walrelay::app {
namespace {

TEST(BlockingWorker, TheResultComesBackOnTheLoopWhileTheLoopKeepsServing) {
  boost::asio::io_context io;
  BlockingWorker worker(io.get_executor());
  std::atomic<bool> release{false};
  const auto loop_thread = std::this_thread::get_id();
  int served_meanwhile = 0;
  int result = 0;
  bool busy_in_done = true;
  // The loop would otherwise run out of work before the step's result is posted back.
  auto guard = boost::asio::make_work_guard(io);
  worker.run(
      [&] {
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_NE(std::this_thread::get_id(), loop_thread);
        return 42;
      },
      [&](int r) {
        EXPECT_EQ(std::this_thread::get_id(), loop_thread);
        result = r;
        busy_in_done = worker.busy();
        guard.reset();
      });
  EXPECT_TRUE(worker.busy());
  // Other handlers run while the step blocks; the last one lets it finish.
  for (int i = 0; i < 3; ++i) {
    boost::asio::post(io, [&, i] {
      ++served_meanwhile;
      if (i == 2) release = true;
    });
  }
  io.run();
  EXPECT_EQ(served_meanwhile, 3);
  EXPECT_EQ(result, 42);
  EXPECT_FALSE(busy_in_done);
  EXPECT_FALSE(worker.busy());
}

TEST(BlockingWorker, ADoneNotRunBeforeTheWorkerGoesIsDropped) {
  boost::asio::io_context io;
  bool ran = false;
  {
    BlockingWorker worker(io.get_executor());
    worker.run([] { return 1; }, [&](int) { ran = true; });
  }  // joins the step; its done is posted but the worker is gone
  io.run();
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace walrelay::app
