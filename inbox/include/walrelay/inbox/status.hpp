#pragma once

#include <ostream>

#include "walrelay/app/exit_code.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay::inbox {

/// `walrelay inbox status --config F [--json]` (docs/inbox.md "Status"): reads the inbox's tables
/// (schema.hpp) and prints the decisions counted (APPLIED: ledger rows applied; DUPLICATE: every
/// redelivery with the same digest plus the events of an older version; DEFERRED: events waiting
/// now; QUARANTINED: quarantine rows), the stored offsets of `inbox.group_id`, and the deferred
/// and quarantined events with their age in seconds (the oldest 100 of each). `json`: one JSON
/// object, {"group_id","schema","decisions":{...},"offsets":[...],"deferred":[...],
/// "quarantined":[...]}, numbers as JSON numbers. Returns kOk, or kRuntimeError (the message on
/// `err`) when the database cannot be read or the schema does not exist. Blocks.
ExitCode run_inbox_status(const config::Config& cfg, bool json, std::ostream& out,
                          std::ostream& err);

}  // namespace walrelay::inbox
