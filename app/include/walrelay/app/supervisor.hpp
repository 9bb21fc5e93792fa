#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>

#include "walrelay/app/exit_code.hpp"

namespace walrelay::app {

/// How a system is asked to stop.
enum class StopMode : std::uint8_t {
  /// The first SIGINT/SIGTERM: flush what is in flight, confirm what Kafka acknowledged, then end
  /// (exit 0 unless something failed).
  kGraceful,
  /// A second signal during a stop: stop waiting for Kafka; what is acknowledged by then is still
  /// confirmed, the rest is published again by the next start.
  kNow,
};

/// What a system gets from the supervisor that runs it. Valid while the system runs.
class Lifecycle {
 public:
  virtual ~Lifecycle() = default;
  /// The system has ended with `code` (its exit code): the supervisor stops the event loop. Called
  /// once; later calls are ignored.
  virtual void done(ExitCode code) = 0;
  /// The system began stopping on its own (a failure retrying cannot help): from now on a signal
  /// means StopMode::kNow.
  virtual void stopping() = 0;
  /// True once a stop was asked with StopMode::kNow. Safe to poll from a blocking shutdown step
  /// (a flush, a commit) that holds the event loop: it is set from the signal handler itself.
  [[nodiscard]] virtual bool stop_now() const = 0;
};

/// A system the supervisor runs on its event loop (the connector; later the relay and the inbox).
/// It never runs or stops the event loop, installs no signal handler and never exits the process:
/// it reports its end through Lifecycle::done. Seastar's app_template and sharded<S>::stop are the
/// model: app_template::run ends the application when its future resolves, and every sharded
/// service is stopped through its stop().
class System {
 public:
  virtual ~System() = default;
  /// Starts on the supervisor's event loop (called from it, before it runs). `life` outlives the
  /// system's run.
  virtual void start(Lifecycle& life) = 0;
  /// Asked to stop (a signal). Called on the event loop: kGraceful at most once (not when the
  /// system began stopping on its own), then kNow at most once. A step that holds the event loop
  /// meanwhile polls Lifecycle::stop_now() instead.
  virtual void stop(StopMode mode) = 0;
};

/// The one owner of the process's lifecycle: runs `system` on `io` until it reports its end and
/// returns that exit code. Owns SIGINT and SIGTERM: the first asks the system to stop gracefully
/// ("received signal N: flushing and stopping" at info), a second one (or the first, once the
/// system began stopping on its own) asks it to stop now. A system that ends without saying how
/// exits kRuntimeError.
ExitCode run(boost::asio::io_context& io, System& system);

}  // namespace walrelay::app
