-- BUG-15  Savepoints, rolled-back subtransactions, aborted transactions (adapted: no slot/peek/drop)
CREATE TABLE payment (payment_id int PRIMARY KEY, state text);
CREATE TABLE outbox_event (event_id uuid PRIMARY KEY, aggregate_id text NOT NULL,
                           event_type text NOT NULL, payload jsonb NOT NULL);
-- @@ workload
BEGIN;
INSERT INTO payment VALUES (1, 'new');
SAVEPOINT s1;
INSERT INTO payment VALUES (2, 'new');
INSERT INTO outbox_event VALUES ('00000000-0000-0000-0000-0000000000a2', 'p-2', 'PaymentCreated', '{"id":2}');
ROLLBACK TO SAVEPOINT s1;
SAVEPOINT s2;
UPDATE payment SET state = 'authorised' WHERE payment_id = 1;
RELEASE SAVEPOINT s2;
INSERT INTO outbox_event VALUES ('00000000-0000-0000-0000-0000000000a1', 'p-1', 'PaymentAuthorised', '{"id":1}');
COMMIT;

DO $$
BEGIN
  INSERT INTO payment VALUES (3, 'new');
  BEGIN
    INSERT INTO payment VALUES (4, 'new');
    INSERT INTO outbox_event VALUES ('00000000-0000-0000-0000-0000000000a4', 'p-4', 'PaymentCreated', '{"id":4}');
    PERFORM 1 / 0;
  EXCEPTION WHEN division_by_zero THEN NULL;
  END;
END $$;

BEGIN;
INSERT INTO payment VALUES (5, 'new');
INSERT INTO outbox_event VALUES ('00000000-0000-0000-0000-0000000000a5', 'p-5', 'PaymentCreated', '{"id":5}');
ROLLBACK;
