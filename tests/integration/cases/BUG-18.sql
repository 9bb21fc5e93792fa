-- BUG-18  Slot pins WAL while the watched database is idle and another database is busy
-- (adapted: no slot/peek/advance/drop, no CREATE DATABASE: the busy "other database" is the
-- existing `postgres` database, written by the test through the admin conninfo, 50 000 rows
-- instead of 200 000; see case_corpus_test.cpp)
CREATE TABLE watched (id int PRIMARY KEY);
-- @@ workload
-- heartbeat in the watched database: a transactional message (prefix not configured)
SELECT 'hb' FROM pg_logical_emit_message(true, 'heartbeat', '2024-01-01T00:00:00Z');
