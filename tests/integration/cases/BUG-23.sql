-- BUG-23  Kafka acks out of order relative to LSN order (adapted: no slot/peek/drop; partitions
-- and slow/down brokers cannot be forced against the shared real Kafka: see case_corpus_test.cpp)
CREATE TABLE account_move (account_id int, move_no int, amount int, PRIMARY KEY (account_id, move_no));
-- @@ workload
INSERT INTO account_move VALUES (1, 1, 100);
INSERT INTO account_move VALUES (2, 1, 200);
BEGIN;
INSERT INTO account_move VALUES (1, 2, -50);
INSERT INTO account_move VALUES (2, 2, 50);
COMMIT;
