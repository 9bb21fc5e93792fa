#pragma once

// walrelay's audit table of operator actions, shared by the commands that change state on an
// operator's word (`walrelay inbox redrive`, docs/inbox.md "Redrive"; `walrelay outbox retry`,
// docs/relay.md "Retry"). One table per walrelay schema (`inbox.schema`, `relay.schema`; both
// `walrelay` by default, so one database's actions are in one place):
//   audit (id bigserial, at timestamptz, actor text, action text, tenant text, event_id text,
//          detail text)

#include <string>
#include <string_view>

namespace walrelay::app {

/// `CREATE TABLE IF NOT EXISTS <schema>.audit (...)` and its semicolon: run it in a transaction
/// holding `schema_lock_sql(schema)`. `schema` must be a plain identifier ([a-z_][a-z0-9_]*, the
/// configuration checks it): it is written unquoted. The schema itself must exist.
std::string audit_table_sql(std::string_view schema);

/// `SELECT pg_advisory_xact_lock(...)` (PostgreSQL docs §9.27.10) on walrelay's key for the DDL
/// of `schema`: two processes creating walrelay's tables of one schema at once (an inbox starting,
/// a retry) wait for each other instead of racing on the catalog. With its semicolon.
std::string schema_lock_sql(std::string_view schema);

/// One audit row: `$1` the actor (NULL: the database's current_user), `$2` the action (`redrive`,
/// `outbox retry`), `$3` the tenant (NULL: none), `$4` the event id, `$5` the detail.
std::string audit_insert_sql(std::string_view schema);

}  // namespace walrelay::app
