#pragma once

// `walrelay check` in poll mode (docs/relay.md "Checks"): the relay's preflight (tables, columns,
// privileges), the SQL to create the partial indexes and the notification trigger, and a probe
// of the Kafka cluster. Blocking; for the command line only.

#include <ostream>

#include "walrelay/app/exit_code.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay::relay {

/// Prints the findings to `out`. Returns kOk, kConfigError (a table, column or privilege the
/// configuration names is missing: the message names the key or the GRANT) or kRuntimeError
/// (PostgreSQL or Kafka did not answer).
ExitCode run_check(const config::Config& cfg, std::ostream& out);

}  // namespace walrelay::relay
