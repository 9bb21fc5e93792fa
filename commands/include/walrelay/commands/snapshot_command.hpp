#pragma once
// `walrelay snapshot`: which of the names it was given the running connector would snapshot,
// checked before the signal is sent (the connector's own refusal shows only in its log).

#include <expected>
#include <string>
#include <vector>

#include "walrelay/config/config.hpp"

namespace walrelay {

/// Judges the `--table` names of `walrelay snapshot` (without `--stop`) as the connector judges
/// an execute-snapshot signal, against the database's catalog now: a name must parse as
/// `schema.table`; a glob must match at least one table the configuration captures as a
/// row-change table (as `run` matches `tables` at start-up); a plain name must be a table that
/// exists, that the configuration routes as a row-change table (exclude first, then the first
/// matching `tables` entry; outbox tables are never snapshotted) and that has a key to read it
/// in chunks by. Connects (blocking) to `cfg.source.conninfo` over ordinary connections.
/// Returns one message per refused name, naming it and why (empty: every name is fine), or the
/// error when the catalog cannot be read (connection refused, a failed query).
std::expected<std::vector<std::string>, std::string> refused_snapshot_tables(
    const config::Config& cfg, const std::vector<std::string>& names);

}  // namespace walrelay
