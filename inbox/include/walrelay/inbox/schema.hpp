#pragma once

// The inbox's tables in PostgreSQL (docs/inbox.md "The schema"), all in the configured schema
// (`inbox.schema`, a plain identifier the configuration checked):
//   ledger      one row per (tenant, event id): the first digest seen, the decision, counts
//   offsets     per (group, topic, partition) the offset of the next record to read
//   versions    per (tenant, aggregate) the last applied version
//   deferred    events waiting for a missing prior version (the whole event, to apply later)
//   quarantine  events isolated with the reason (their bytes as received)
//   events      the APPLIED events when no handler is configured (applications read it)
//   audit       operator actions (`walrelay inbox redrive`: who, when, what was decided before)

#include <string>
#include <string_view>

namespace walrelay::inbox {

/// The DDL that creates every table above if it does not exist (CREATE ... IF NOT EXISTS), in one
/// transaction serialised by a transaction-level advisory lock (pg_advisory_xact_lock, PostgreSQL
/// docs §9.27.10), so that two inbox processes starting together do not race on the catalog.
/// `schema` must be a plain identifier ([a-z_][a-z0-9_]*): it is written unquoted.
/// Running it again changes nothing.
std::string schema_sql(std::string_view schema);

/// The decisions, as the ledger's `decision` column and the status command spell them.
inline constexpr std::string_view kApplied = "APPLIED";
inline constexpr std::string_view kDuplicate = "DUPLICATE";
inline constexpr std::string_view kDeferred = "DEFERRED";
inline constexpr std::string_view kQuarantined = "QUARANTINED";

}  // namespace walrelay::inbox
