#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "walrelay/app/exit_code.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay::inbox {

/// `walrelay inbox redrive --config F --event-id ID … [--tenant T] [--actor NAME]` (docs/inbox.md
/// "Redrive"): decides a quarantined or deferred event again, after a handler or producer fix,
/// from the bytes the inbox kept (never edited). In one transaction per id: an `audit` row (actor:
/// `actor`, else the database user; the action; the earlier decision and its reason), the earlier
/// QUARANTINED or DEFERRED decision removed (its ledger row, and its quarantine or deferred row),
/// and the event decided as if it had just arrived (it may be APPLIED, DEFERRED again, or
/// QUARANTINED again with the new reason). A conflict (the id already decided with another
/// digest) is refused: the inbox cannot tell which record is right. Prints one line per id
/// (`ID: APPLIED`…) on `out`; returns kOk when every id was decided again, kRuntimeError (the
/// reason on `err`) when one was not found, refused, or the database failed. Blocks.
ExitCode run_inbox_redrive(const config::Config& cfg, const std::vector<std::string>& event_ids,
                           const std::string& tenant, const std::string& actor, std::ostream& out,
                           std::ostream& err);

}  // namespace walrelay::inbox
