-- CASE-05  REPLICA IDENTITY changed while changes are in flight (adapted: no slot/peek/drop; the
--          test stops walrelay before the workload and starts it after the last ALTER, so every
--          change is decoded after it, as in the case)
CREATE TABLE account (
    account_id int PRIMARY KEY,
    ext_ref    text NOT NULL,
    owner      text NOT NULL,
    balance    numeric(12,2) NOT NULL
);
INSERT INTO account VALUES (1,'A-1','ada',100), (2,'A-2','bob',200), (3,'A-3','cy',300),
                           (4,'A-4','dee',400), (5,'A-5','eve',500), (6,'A-6','fay',600);
-- @@ workload
UPDATE account SET balance = 101 WHERE account_id = 1;
DELETE FROM account WHERE account_id = 6;
ALTER TABLE account REPLICA IDENTITY FULL;
UPDATE account SET balance = 202 WHERE account_id = 2;
BEGIN;
UPDATE account SET balance = 303 WHERE account_id = 3;
ALTER TABLE account REPLICA IDENTITY DEFAULT;
UPDATE account SET balance = 304 WHERE account_id = 3;
COMMIT;
CREATE UNIQUE INDEX account_ext_ref_uk ON account (ext_ref);
ALTER TABLE account REPLICA IDENTITY USING INDEX account_ext_ref_uk;
UPDATE account SET ext_ref = 'A-4x', balance = 404 WHERE account_id = 4;
DROP INDEX account_ext_ref_uk;
UPDATE account SET balance = 505 WHERE account_id = 5;
DELETE FROM account WHERE account_id = 5;
ALTER TABLE account REPLICA IDENTITY NOTHING;
UPDATE account SET balance = 102 WHERE account_id = 1;
ALTER TABLE account REPLICA IDENTITY DEFAULT;
UPDATE account SET balance = 103 WHERE account_id = 1;
