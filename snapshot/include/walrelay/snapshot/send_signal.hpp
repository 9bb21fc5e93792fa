#pragma once

#include <expected>
#include <string>

#include "walrelay/snapshot/signal.hpp"

namespace walrelay::snapshot {

/// Sends `signal` to a running walrelay through the database: a transactional logical message
/// `pg_logical_emit_message(true, <prefix>, <signal JSON>)` on an ordinary connection to
/// `conninfo` (the role needs the privilege to call it: superuser or, from PostgreSQL 14 on, a
/// GRANT EXECUTE). The connector acts on it when its stream reaches it. Returns the message's
/// LSN, or the connection's or server's error.
std::expected<std::string, std::string> send_signal(const std::string& conninfo,
                                                    const std::string& prefix,
                                                    const Signal& signal);

}  // namespace walrelay::snapshot
