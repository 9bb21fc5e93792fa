-- CASE-01  Database encoding is not UTF8 (LATIN1, SQL_ASCII) (adapted: no CREATE/DROP DATABASE,
--          slot, peek or drop: case01 in case_corpus_test.cpp creates the two databases with
--          unique names, runs each part in the test's schema of its database, lets walrelay
--          create and read its own slot and reads what reached Kafka. The script is cut at four
--          lines `-- @@ ...`: part 1 set-up, part 1 workload, part 2 set-up, part 2 workload.
--          Own additions: supplier 3, which exists before the slot (read by the initial
--          snapshot, whose connection asks the server for UTF-8), and note 4, written after the
--          invalid rows (streaming goes on under errors.policy dead_letter).)
------------------------------------------------------------------ part 1: LATIN1
SET client_encoding = 'UTF8';          -- this psql session sends and receives UTF-8
CREATE TABLE supplier (
    supplier_id int PRIMARY KEY,
    trade_name  text NOT NULL,
    city        varchar(40)
);
CREATE TABLE outbox_event (
    event_id       uuid PRIMARY KEY,
    aggregate_type text NOT NULL,
    aggregate_id   text NOT NULL,
    event_type     text NOT NULL,
    payload        jsonb
);
INSERT INTO supplier VALUES (3, 'Weiß & Söhne', 'Köln');
-- @@ workload
SET client_encoding = 'UTF8';
-- characters that exist in LATIN1 (stored as one byte each: é = 0xE9, ñ = 0xF1, ü = 0xFC, ß = 0xDF)
INSERT INTO supplier VALUES (1, 'Café Müller & Söhne', 'Besançon');
INSERT INTO supplier VALUES (2, 'Peña Ibáñez', 'A Coruña');
INSERT INTO outbox_event VALUES
  ('00000000-0000-0000-0000-0000000000e1', 'supplier', 'Größe-7', 'SupplierRenamed',
   '{"old": "Cafe Muller", "new": "Café Müller & Söhne"}');
-- @@ part 2 set-up
------------------------------------------------------------------ part 2: SQL_ASCII
SET client_encoding = 'SQL_ASCII';     -- no conversion at all: bytes go in as written
CREATE TABLE note (note_id int PRIMARY KEY, body text);
-- @@ part 2 workload
SET client_encoding = 'SQL_ASCII';
-- one row in UTF-8 bytes, one in LATIN1 bytes, one with a byte that is valid in neither (0xFF)
INSERT INTO note VALUES (1, E'na\xC3\xAFve UTF-8');
INSERT INTO note VALUES (2, E'na\xEFve LATIN1');
INSERT INTO note VALUES (3, E'raw \xFF byte');
