#pragma once
// Server notices (NOTICE, WARNING: e.g. "identifier ... will be truncated", wal2json's "no tuple
// identifier" warning) go through walrelay's log instead of libpq's default printing to stderr, so
// every log line has walrelay's format (and --log-format json stays one object a line).

#include <libpq-fe.h>

#include <string>

namespace walrelay::pg {

/// `name` cut to PostgreSQL's 63-byte identifier limit (NAMEDATALEN - 1) at a UTF-8 character
/// boundary: the server would cut it itself, with a NOTICE sent before any notice processor is set.
std::string fit_application_name(std::string name);

/// Installs the notice processor on `conn` (no-op for nullptr). Notices are logged at warning
/// level as "postgres: <message>".
void route_notices_to_log(PGconn* conn);

}  // namespace walrelay::pg
