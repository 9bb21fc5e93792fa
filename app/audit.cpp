#include "walrelay/app/audit.hpp"

namespace walrelay::app {

std::string audit_table_sql(std::string_view schema) {
  const std::string s(schema);
  return "CREATE TABLE IF NOT EXISTS " + s +
         ".audit (\n"
         "  id bigserial PRIMARY KEY,\n"
         "  at timestamptz NOT NULL DEFAULT now(),\n"
         "  actor text NOT NULL DEFAULT current_user,\n"
         "  action text NOT NULL,\n"
         "  tenant text,\n"
         "  event_id text,\n"
         "  detail text);\n";
}

std::string schema_lock_sql(std::string_view schema) {
  // The key the inbox has always taken (inbox/schema.cpp), so that older inboxes agree.
  return "SELECT pg_advisory_xact_lock(hashtext('walrelay.inbox.schema'), hashtext('" +
         std::string(schema) + "'));\n";
}

std::string audit_insert_sql(std::string_view schema) {
  return "INSERT INTO " + std::string(schema) +
         ".audit (actor, action, tenant, event_id, detail) "
         "VALUES (coalesce($1, current_user), $2, $3, $4, $5)";
}

}  // namespace walrelay::app
