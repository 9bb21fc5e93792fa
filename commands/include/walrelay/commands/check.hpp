#pragma once

#include <ostream>

#include "walrelay/app/exit_code.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay {

/// `walrelay check`: connects to both ends without streaming or creating anything and reports
/// server version, wal_level, the slot's state (plugin, active, confirmed_flush_lsn, wal_status),
/// the matched tables and the Kafka brokers. Secrets are masked in everything printed.
/// Returns kOk when walrelay could stream with this configuration, kRuntimeError otherwise.
ExitCode run_check(const config::Config& cfg, std::ostream& out);

}  // namespace walrelay
