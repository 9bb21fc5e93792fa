// The one owner of the process's lifecycle (app/supervisor.hpp): a system is started, asked to
// stop by the first signal, told to stop now by a second, and its exit code is the process's.

#include "walrelay/app/supervisor.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <csignal>
#include <vector>

namespace walrelay::app {
namespace {

using namespace std::chrono_literals;

/// A system that records what it is asked and acts as told.
class FakeSystem final : public System {
 public:
  explicit FakeSystem(boost::asio::io_context& io) : io_(io), timer_(io) {}

  std::function<void(FakeSystem&)> on_start;
  std::function<void(FakeSystem&, StopMode)> on_stop;
  std::vector<StopMode> stops;
  Lifecycle* life = nullptr;  // valid while run() runs

  void start(Lifecycle& l) override {
    life = &l;
    if (on_start) on_start(*this);
  }
  void stop(StopMode mode) override {
    stops.push_back(mode);
    if (on_stop) on_stop(*this, mode);
  }
  /// Runs `f` on the event loop after `d`.
  void after(std::chrono::milliseconds d, std::function<void()> f) {
    timer_.expires_after(d);
    timer_.async_wait([f = std::move(f)](const boost::system::error_code& ec) {
      if (!ec) f();
    });
  }
  boost::asio::io_context& io_;
  boost::asio::steady_timer timer_;
};

class SupervisorTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
  boost::asio::io_context io_;
};

// A system that ends on its own: its exit code is run()'s, and it was never asked to stop.
TEST_F(SupervisorTest, TheSystemsExitCodeIsTheProcesss) {
  FakeSystem sys(io_);
  sys.on_start = [](FakeSystem& s) {
    s.after(10ms, [&s] { s.life->done(ExitCode::kDeliveryFailed); });
  };
  EXPECT_EQ(run(io_, sys), ExitCode::kDeliveryFailed);
  EXPECT_TRUE(sys.stops.empty());
}

// A set-up that fails at once (done from start, before the loop runs) ends without running it.
TEST_F(SupervisorTest, ASystemThatFailsToStartEndsAtOnce) {
  FakeSystem sys(io_);
  sys.on_start = [](FakeSystem& s) { s.life->done(ExitCode::kConfigError); };
  EXPECT_EQ(run(io_, sys), ExitCode::kConfigError);
}

// The first SIGTERM asks for a graceful stop; the system ends with 0 when it has flushed.
TEST_F(SupervisorTest, TheFirstSignalAsksForAGracefulStop) {
  FakeSystem sys(io_);
  sys.on_start = [](FakeSystem& s) { s.after(20ms, [] { std::raise(SIGTERM); }); };
  sys.on_stop = [](FakeSystem& s, StopMode mode) {
    if (mode == StopMode::kGraceful) s.after(20ms, [&s] { s.life->done(ExitCode::kOk); });
  };
  EXPECT_EQ(run(io_, sys), ExitCode::kOk);
  EXPECT_EQ(sys.stops, std::vector<StopMode>{StopMode::kGraceful});
}

// A second signal during the stop: a step that holds the event loop sees stop_now() at once (set
// from the signal handler), and the system is told stop(kNow) once the loop runs again.
TEST_F(SupervisorTest, ASecondSignalTellsTheSystemToStopNow) {
  FakeSystem sys(io_);
  sys.on_start = [](FakeSystem& s) { s.after(20ms, [] { std::raise(SIGTERM); }); };
  bool seen_while_blocking = false;
  sys.on_stop = [&](FakeSystem& s, StopMode mode) {
    if (mode == StopMode::kGraceful) {
      // A blocking flush: the second signal arrives while the loop is held.
      std::raise(SIGINT);
      seen_while_blocking = s.life->stop_now();
      return;
    }
    s.life->done(ExitCode::kOk);
  };
  EXPECT_EQ(run(io_, sys), ExitCode::kOk);
  EXPECT_TRUE(seen_while_blocking);
  EXPECT_EQ(sys.stops, (std::vector<StopMode>{StopMode::kGraceful, StopMode::kNow}));
}

}  // namespace
}  // namespace walrelay::app
