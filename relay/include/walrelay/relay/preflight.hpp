#pragma once

// What the relay checks in the catalog before it claims anything (`run` and `check` in poll
// mode, docs/relay.md "Checks"): every configured table exists, has every configured column, and
// the role may SELECT and UPDATE it; the types of the columns the record builder reads (domains
// resolved, so a domain over jsonb is read as jsonb); whether a partial index covers the pending
// rows.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "walrelay/config/config.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/relay/outbox_table.hpp"
#include "walrelay/router/type_registry.hpp"

namespace walrelay::relay {

struct PreflightResult {
  std::vector<OutboxTable> tables;  ///< in `tables` order; complete when `problems` is empty
  /// Configuration problems, each `key: reason` naming the key (`tables[0].outbox.poll.sent_at:
  /// public.event_outbox has no column "sent_at"`) or the GRANT to give: exit 2.
  std::vector<std::string> problems;
  /// Advice that does not stop the relay (a missing partial index on the pending rows).
  std::vector<std::string> warnings;
  /// The catalog could not be read (connection refused, a server error): nothing is known.
  std::optional<pg::Error> error;
};

/// Runs the checks on `conn` (an ordinary session; its queries run one after another) for every
/// table of `cfg` (source.mode poll: each an outbox with `poll` set) and calls `done` once on the
/// connection's executor. Types found are added to `types`. `cfg`, `conn` and `types` must
/// outlive the call.
void preflight(pg::AsyncConnection& conn, const config::Config& cfg, router::TypeRegistry& types,
               std::function<void(PreflightResult)> done);

/// The SQL a user runs for a table (docs/relay.md "Set-up"): the partial indexes on pending rows
/// the claim uses, with `retention` (relay.retention set) the partial index on sent rows' sent_at
/// the retention job uses, and the trigger that NOTIFYs `channel` on each insert ("" = no
/// trigger).
std::string setup_sql(const OutboxTable& t, const std::string& channel, bool retention = false);

}  // namespace walrelay::relay
