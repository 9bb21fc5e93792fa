-- Runs once in the compose PostgreSQL: a replication role and the demo schema.
CREATE ROLE walrelay LOGIN REPLICATION PASSWORD 'walrelay';
GRANT ALL ON SCHEMA public TO walrelay;
\i /docker-entrypoint-initdb.d/demo.sql.inc
GRANT SELECT ON ALL TABLES IN SCHEMA public TO walrelay;
