-- BUG-10  What a DELETE/UPDATE carries under each REPLICA IDENTITY (adapted: no slot/peek/drop)
CREATE TABLE acct_default (acct_id int PRIMARY KEY, owner text, balance int);
CREATE TABLE acct_full    (acct_id int PRIMARY KEY, owner text, balance int);
ALTER TABLE acct_full REPLICA IDENTITY FULL;
CREATE TABLE acct_index   (acct_id int PRIMARY KEY, ext_ref text NOT NULL, balance int);
CREATE UNIQUE INDEX acct_index_ext ON acct_index (ext_ref);
ALTER TABLE acct_index REPLICA IDENTITY USING INDEX acct_index_ext;
CREATE TABLE acct_nothing (acct_id int PRIMARY KEY, owner text, balance int);
ALTER TABLE acct_nothing REPLICA IDENTITY NOTHING;
INSERT INTO acct_default VALUES (1, 'o1', 10);
INSERT INTO acct_full    VALUES (1, 'o1', 10);
INSERT INTO acct_index   VALUES (1, 'X-1', 10);
INSERT INTO acct_nothing VALUES (1, 'o1', 10);
-- @@ workload
UPDATE acct_default SET balance = 11;  DELETE FROM acct_default;
UPDATE acct_full    SET balance = 11;  DELETE FROM acct_full;
UPDATE acct_index   SET balance = 11;  DELETE FROM acct_index;
UPDATE acct_nothing SET balance = 11;  DELETE FROM acct_nothing;
