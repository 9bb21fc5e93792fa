#include "walrelay/inbox/schema.hpp"

#include "walrelay/app/audit.hpp"

namespace walrelay::inbox {

std::string schema_sql(std::string_view schema_name) {
  const std::string s(schema_name);
  // Text columns hold the bytes as received where they must be kept exactly (quarantine's
  // payload and key as bytea: an undecodable event may not be UTF-8); the deferred event is
  // text, as the handler's parameters are.
  // client_min_messages for this transaction only: each IF NOT EXISTS of a schema that exists
  // would send a NOTICE ("relation … already exists, skipping"), logged as a warning at every
  // start.
  return "BEGIN;\n"
         "SET LOCAL client_min_messages = warning;\n" +
         app::schema_lock_sql(s) + "CREATE SCHEMA IF NOT EXISTS " + s +
         ";\n"
         "CREATE TABLE IF NOT EXISTS " +
         s +
         ".ledger (\n"
         "  tenant text NOT NULL,\n"
         "  event_id text NOT NULL,\n"
         "  digest text NOT NULL,\n"
         "  aggregate text,\n"
         "  version bigint,\n"
         "  event_type text,\n"
         "  topic text NOT NULL,\n"
         "  kafka_partition integer NOT NULL,\n"
         "  kafka_offset bigint NOT NULL,\n"
         "  decision text NOT NULL\n"
         "    CHECK (decision IN ('APPLIED', 'DUPLICATE', 'DEFERRED', 'QUARANTINED')),\n"
         "  reason text,\n"
         "  duplicates bigint NOT NULL DEFAULT 0,\n"
         "  conflicts bigint NOT NULL DEFAULT 0,\n"
         "  first_seen timestamptz NOT NULL DEFAULT now(),\n"
         "  last_seen timestamptz NOT NULL DEFAULT now(),\n"
         "  decided_at timestamptz NOT NULL DEFAULT now(),\n"
         "  PRIMARY KEY (tenant, event_id));\n"
         "CREATE INDEX IF NOT EXISTS ledger_last_seen ON " +
         s +
         ".ledger (last_seen);\n"
         "CREATE TABLE IF NOT EXISTS " +
         s +
         ".offsets (\n"
         "  group_id text NOT NULL,\n"
         "  topic text NOT NULL,\n"
         "  kafka_partition integer NOT NULL,\n"
         "  next_offset bigint NOT NULL,\n"
         "  updated_at timestamptz NOT NULL DEFAULT now(),\n"
         "  PRIMARY KEY (group_id, topic, kafka_partition));\n"
         "CREATE TABLE IF NOT EXISTS " +
         s +
         ".versions (\n"
         "  tenant text NOT NULL,\n"
         "  aggregate text NOT NULL,\n"
         "  last_version bigint NOT NULL,\n"
         "  updated_at timestamptz NOT NULL DEFAULT now(),\n"
         "  PRIMARY KEY (tenant, aggregate));\n"
         "CREATE TABLE IF NOT EXISTS " +
         s +
         ".deferred (\n"
         "  tenant text NOT NULL,\n"
         "  event_id text NOT NULL,\n"
         "  aggregate text NOT NULL,\n"
         "  version bigint NOT NULL,\n"
         "  expected_version bigint NOT NULL,\n"
         "  digest text NOT NULL,\n"
         "  event_type text,\n"
         "  topic text NOT NULL,\n"
         "  kafka_partition integer NOT NULL,\n"
         "  kafka_offset bigint NOT NULL,\n"
         "  record_key text,\n"
         "  payload text,\n"
         "  headers jsonb NOT NULL,\n"
         "  deferred_at timestamptz NOT NULL DEFAULT now(),\n"
         "  PRIMARY KEY (tenant, event_id));\n"
         "CREATE INDEX IF NOT EXISTS deferred_aggregate ON " +
         s +
         ".deferred (tenant, aggregate, version);\n"
         "CREATE TABLE IF NOT EXISTS " +
         s +
         ".quarantine (\n"
         "  id bigserial PRIMARY KEY,\n"
         "  tenant text,\n"
         "  event_id text,\n"
         "  digest text,\n"
         "  aggregate text,\n"
         "  version bigint,\n"
         "  event_type text,\n"
         "  topic text NOT NULL,\n"
         "  kafka_partition integer NOT NULL,\n"
         "  kafka_offset bigint NOT NULL,\n"
         "  record_key bytea,\n"
         "  payload bytea,\n"
         "  headers jsonb,\n"
         "  reason text NOT NULL,\n"
         "  sqlstate text,\n"
         "  quarantined_at timestamptz NOT NULL DEFAULT now());\n"
         "CREATE TABLE IF NOT EXISTS " +
         s +
         ".events (\n"
         "  tenant text NOT NULL,\n"
         "  event_id text NOT NULL,\n"
         "  aggregate text,\n"
         "  version bigint,\n"
         "  event_type text,\n"
         "  payload jsonb,\n"
         "  digest text NOT NULL,\n"
         "  topic text NOT NULL,\n"
         "  kafka_partition integer NOT NULL,\n"
         "  kafka_offset bigint NOT NULL,\n"
         "  decision text NOT NULL DEFAULT 'APPLIED',\n"
         "  received_at timestamptz NOT NULL DEFAULT now(),\n"
         "  applied_at timestamptz NOT NULL DEFAULT now(),\n"
         "  PRIMARY KEY (tenant, event_id));\n" +
         app::audit_table_sql(s) + "COMMIT;\n";
}

}  // namespace walrelay::inbox
