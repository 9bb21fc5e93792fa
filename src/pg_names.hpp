#pragma once
// The names src/ gave the PostgreSQL client pieces before they moved to pg/ (walrelay_pg):
// `replication::` for the replication stream and its wire codec, `AsyncPgConnection` for the
// non-blocking connection. Kept so that the move left the connector's code as it was; new code
// names walrelay::pg directly, and this header goes once src/ does too.

#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"

namespace walrelay {
namespace replication = pg;
using AsyncPgConnection = pg::AsyncConnection;
}  // namespace walrelay
