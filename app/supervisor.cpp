#include "walrelay/app/supervisor.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <csignal>
#include <optional>

namespace walrelay::app {

namespace {

// Set from the raw signal handler that replaces the signal_set once a stop is under way: the
// stopping system may hold the event loop (a blocking flush), so the signal_set's handler could
// not run.
std::atomic<bool> g_stop_now{false};
extern "C" void on_signal_while_stopping(int /*signo*/) {
  g_stop_now.store(true);
}

class Supervisor final : public Lifecycle {
 public:
  Supervisor(boost::asio::io_context& io, System& system)
      : io_(io), system_(system), signals_(io, SIGINT, SIGTERM), watch_(io) {}

  ExitCode run() {
    signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
      if (ec || code_) return;
      spdlog::info("received signal {}: flushing and stopping", sig);
      stopping();
      system_.stop(StopMode::kGraceful);
    });
    system_.start(*this);
    if (!code_) io_.run();
    return code_.value_or(ExitCode::kRuntimeError);
  }

  void done(ExitCode code) override {
    if (code_) return;
    code_ = code;
    boost::system::error_code ec;
    signals_.cancel(ec);
    watch_.cancel();
    io_.stop();
  }

  void stopping() override {
    if (stopping_) return;
    stopping_ = true;
    // From now on a signal means "stop now", also while the system holds the event loop.
    boost::system::error_code ec;
    signals_.cancel(ec);
    signals_.clear(ec);
    std::signal(SIGINT, on_signal_while_stopping);
    std::signal(SIGTERM, on_signal_while_stopping);
    watch();
  }

  [[nodiscard]] bool stop_now() const override { return g_stop_now.load(); }

 private:
  // While the event loop runs (the system does not hold it), a signal during the stop reaches the
  // system as stop(kNow) within 100 ms.
  void watch() {
    watch_.expires_after(std::chrono::milliseconds(100));
    watch_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || code_) return;
      if (g_stop_now.load()) {
        system_.stop(StopMode::kNow);
        return;
      }
      watch();
    });
  }

  boost::asio::io_context& io_;
  System& system_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer watch_;
  std::optional<ExitCode> code_;
  bool stopping_ = false;
};

}  // namespace

ExitCode run(boost::asio::io_context& io, System& system) {
  Supervisor supervisor(io, system);
  return supervisor.run();
}

}  // namespace walrelay::app
