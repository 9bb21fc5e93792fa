-- BUG-17  Logical decoding messages, transactional and not (adapted: no slot/peek/drop; the
-- peek-right-away + pg_sleep(1) probe is left out: the test's marker transaction follows)
CREATE TABLE shipment (shipment_id int PRIMARY KEY, state text);
-- @@ workload
BEGIN;
INSERT INTO shipment VALUES (1, 'packed');
SELECT 'm1' FROM pg_logical_emit_message(true,  'outbox', '{"type":"ShipmentPacked","id":1}');
SELECT 'm2' FROM pg_logical_emit_message(false, 'audit',  'packed 1 (non-transactional)');
INSERT INTO shipment VALUES (2, 'packed');
COMMIT;

BEGIN;
SELECT 'm3' FROM pg_logical_emit_message(true,  'outbox', 'lost on rollback');
SELECT 'm4' FROM pg_logical_emit_message(false, 'audit',  'survives rollback');
ROLLBACK;

SELECT 'm5' FROM pg_logical_emit_message(true, 'outbox', E'say "hi"\nnext line – ü');
SELECT 'm6' FROM pg_logical_emit_message(true, 'bin', '\x41004243'::bytea);
SELECT 'm7' FROM pg_logical_emit_message(false, '', '');
