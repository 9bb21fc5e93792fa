#pragma once

namespace walrelay {

/// Process exit codes (documented in README "Exit codes").
enum class ExitCode : int {
  kOk = 0,              ///< stopped by SIGINT/SIGTERM after flushing and confirming
  kRuntimeError = 1,    ///< could not connect, replication ended, other runtime failure
  kConfigError = 2,     ///< the configuration file is invalid; nothing was started
  kDeliveryFailed = 3,  ///< a record could not be delivered to Kafka for good
  kMappingFailed = 4,   ///< a change could not be decoded or mapped (errors.policy=fail)
};

}  // namespace walrelay
