-- Debezium compatibility suite: the tables and the rows both connectors snapshot.
-- Run with search_path set to the test's own schema first, then public (hstore lives there).
-- One statement per `;` at the end of a line; comments are `--` lines.
-- Every row of docs/events.md's "Value mapping" table has a table here (see
-- debezium_compat_test.cpp).

CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE pair AS (x int, label text);
CREATE DOMAIN d_num AS numeric(12,3);
CREATE DOMAIN d_vc AS varchar(10);
CREATE DOMAIN d_ts AS timestamp(3);
CREATE DOMAIN d_time AS time(2);
CREATE DOMAIN d_bit AS bit(4);
CREATE DOMAIN d_pos AS int CHECK (VALUE > 0);
CREATE DOMAIN d_pos2 AS d_pos CHECK (VALUE < 1000);

-- smallint, integer, bigint, oid
CREATE TABLE ints (id int PRIMARY KEY, i2 smallint, i4 int, i8 bigint, o oid);
INSERT INTO ints VALUES
  (1, -32768, -2147483648, -9223372036854775808, 0),
  (2, 32767, 2147483647, 9223372036854775807, 4294967295),
  (3, NULL, NULL, NULL, NULL);

-- real, double precision
CREATE TABLE floats (id int PRIMARY KEY, r real, d double precision);
INSERT INTO floats VALUES
  (1, '-0', '-0'), (2, 1.0, 1.0), (3, 1e21, 1e21), (4, 1.4e-45, 1.4e-45),
  (5, 3.141592653589793, 3.141592653589793), (6, 'NaN', 'NaN'), (7, 'Infinity', 'Infinity'),
  (8, '-Infinity', '-Infinity'), (9, NULL, NULL);

-- numeric(p,s), unconstrained numeric, money
CREATE TABLE numerics (id int PRIMARY KEY, n numeric(12,3), n0 numeric(5,0), nu numeric, m money);
INSERT INTO numerics VALUES
  (1, 123456789.125, 12345, 1.5, 1234.50),
  (2, -0.001, -99999, 0.000000000000000000001, -12.34),
  (3, 0, 0, 0, 0),
  (4, 'NaN', 'NaN', 'NaN', NULL),
  (5, 1, 1, 'Infinity', 92233720368547758.07),
  (6, NULL, NULL, '-Infinity', -92233720368547758.08),
  (7, 999999999.999, 1, 12345678901234567890123456789012345678901234567890.123456789012345678901234567890, 0.01);

-- boolean
CREATE TABLE bools (id int PRIMARY KEY, b boolean);
INSERT INTO bools VALUES (1, true), (2, false), (3, NULL);

-- json, jsonb
CREATE TABLE jsons (id int PRIMARY KEY, j json, jb jsonb);
INSERT INTO jsons VALUES
  (1, '{"k": [1, 2.50, null], "s": "é\t"}', '{"k": [1, 2.50, null], "s": "é\t"}'),
  (2, 'null', 'null'),
  (3, '[1,  2 ]', '"str"'),
  (4, NULL, NULL);

-- arrays: NULL elements, empty, explicit bounds
CREATE TABLE arrays (id int PRIMARY KEY, ia int[], ta text[], na numeric[], eb int[]);
INSERT INTO arrays VALUES
  (1, '{1,NULL,3}', '{"a b",NULL,"c,d","NULL"}', '{1.5,NULL,-2}', '[0:2]={7,8,9}'),
  (2, '{}', '{}', '{}', '{1,2}'),
  (3, NULL, NULL, NULL, NULL);

-- bytea
CREATE TABLE bytes (id int PRIMARY KEY, ba bytea);
INSERT INTO bytes VALUES (1, '\x00ff10'), (2, ''), (3, NULL);

-- date, time, timetz, timestamp(0..6), timestamp, timestamptz: infinity, BC, before the epoch
CREATE TABLE times (id int PRIMARY KEY, dt date, tm time, tm0 time(0), tm3 time(3), tm6 time(6),
  tz timetz, ts0 timestamp(0), ts1 timestamp(1), ts2 timestamp(2), ts3 timestamp(3),
  ts4 timestamp(4), ts5 timestamp(5), ts6 timestamp(6), ts timestamp, tstz timestamptz,
  tstz3 timestamptz(3));
INSERT INTO times VALUES
  (1, '2024-02-29', '23:59:59.999999', '12:00:00', '12:00:00.123', '12:00:00.123456',
   '06:30:00.25+05:30', '2024-03-10 06:30:00', '2024-03-10 06:30:00.1', '2024-03-10 06:30:00.12',
   '2024-03-10 06:30:00.123', '2024-03-10 06:30:00.1234', '2024-03-10 06:30:00.12345',
   '2024-03-10 06:30:00.123456', '2024-03-10 06:30:00.123456', '2024-03-10 06:30:00.123456+02',
   '2024-03-10 06:30:00.123+02'),
  (2, 'infinity', '00:00:00', '00:00:00', '00:00:00', '00:00:00', '00:00:00+00', 'infinity',
   'infinity', 'infinity', 'infinity', 'infinity', 'infinity', 'infinity', 'infinity', 'infinity',
   'infinity'),
  (3, '-infinity', '24:00:00', '24:00:00', '24:00:00', '24:00:00', '23:59:59-12', '-infinity',
   '-infinity', '-infinity', '-infinity', '-infinity', '-infinity', '-infinity', '-infinity',
   '-infinity', '-infinity'),
  (4, '0044-03-15 BC', '01:02:03', '01:02:03', '01:02:03', '01:02:03', '01:02:03-08',
   '0044-03-15 12:00:00 BC', '0044-03-15 12:00:00.5 BC', '0044-03-15 12:00:00.25 BC',
   '0044-03-15 12:00:00.125 BC', '0044-03-15 12:00:00 BC', '0044-03-15 12:00:00 BC',
   '0044-03-15 12:00:00.000001 BC', '0044-03-15 12:00:00 BC', '0044-03-15 12:00:00+00 BC',
   '0001-01-01 00:00:00+00 BC'),
  (5, '1969-12-31', '00:00:00.000001', '00:00:00', '00:00:00.001', '00:00:00.000001',
   '00:00:00.000001+14', '1969-12-31 23:59:59', '1969-12-31 23:59:59.9',
   '1969-12-31 23:59:59.99', '1969-12-31 23:59:59.999', '1969-12-31 23:59:59.9999',
   '1969-12-31 23:59:59.99999', '1969-12-31 23:59:59.999999', '1970-01-01 00:00:00',
   '1969-12-31 23:59:59.5+00', '1970-01-01 00:00:00+00'),
  (6, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL);

-- interval
CREATE TABLE intervals (id int PRIMARY KEY, iv interval);
INSERT INTO intervals VALUES
  (1, '1 year 2 mons 3 days 04:05:06.5'), (2, '-1 day -00:00:00.000001'), (3, '0'),
  (4, '1 mon'), (5, '-178000000 years'), (6, NULL);

-- uuid, text, varchar(n), char(n), enum, ranges, inet/cidr/macaddr, xml
CREATE TABLE texts (id int PRIMARY KEY, u uuid, t text, vc varchar(10), c char(3), e mood,
  r4 int4range, rtz tstzrange, ip inet, net cidr, mac macaddr, x xml);
INSERT INTO texts VALUES
  (1, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'tab	here "q" \ é 😀 ' || chr(1), 'abc', 'x',
   'happy', '[1,5)', '[2024-03-10 06:30:00+02,2024-03-11 00:00:00+00)', '192.168.0.1/24',
   '10.0.0.0/8', '08:00:2b:01:02:03', '<a>x &amp; y</a>'),
  (2, '00000000-0000-0000-0000-000000000000', '', '', '', 'sad', 'empty', '(,)', '::1',
   '2001:db8::/32', 'ff:ff:ff:ff:ff:ff', ''),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

-- geometric types
CREATE TABLE geoms (id int PRIMARY KEY, p point, bx box, ls lseg, ci circle);
INSERT INTO geoms VALUES
  (1, '(1.5,-2)', '((0,0),(1,1))', '[(0,0),(1,1)]', '<(0,0),2.5>'),
  (2, '(0,0)', '((-1,-1),(1e10,3))', '[(1,2),(3,4)]', '<(1,1),0>'),
  (3, NULL, NULL, NULL, NULL);

-- a composite type
CREATE TABLE composites (id int PRIMARY KEY, pr pair);
INSERT INTO composites VALUES (1, ROW(1, 'one')), (2, ROW(NULL, 'a "b", c')), (3, NULL);

-- domains (typmods of the base type, an array of a domain, a domain over a domain)
CREATE TABLE domains (id int PRIMARY KEY, dn d_num, dvc d_vc, dts d_ts, dtm d_time, dbt d_bit,
  darr d_pos[], dd d_pos2);
INSERT INTO domains VALUES
  (1, 123.456, 'ten chars!', '2024-03-10 06:30:00.123', '06:30:00.12', B'1010', '{1,2,NULL}', 7),
  (2, -0.5, '', '1969-12-31 23:59:59.5', '00:00:00', B'0000', '{}', 999),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

-- bit(1), bit(8), varbit, B'0000'
CREATE TABLE bits (id int PRIMARY KEY, b1 bit(1), b8 bit(8), vb varbit, b4 bit(4));
INSERT INTO bits VALUES
  (1, B'1', B'10100101', B'101', B'0000'),
  (2, B'0', B'00000001', B'', B'1000'),
  (3, NULL, NULL, NULL, NULL);

-- hstore (the extension is created by the test in the database)
CREATE TABLE hstores (id int PRIMARY KEY, h hstore);
INSERT INTO hstores VALUES (1, 'a=>1, "b c"=>NULL, d=>"x\"y"'), (2, ''), (3, NULL);

-- name
CREATE TABLE names (id int PRIMARY KEY, nm name);
INSERT INTO names VALUES (1, 'pg_class'), (2, NULL);

-- a column with a DEFAULT that gets an explicit NULL
CREATE TABLE defaults (id int PRIMARY KEY, v text DEFAULT 'dflt', n int DEFAULT 42);
INSERT INTO defaults VALUES (1, NULL, NULL), (2, DEFAULT, DEFAULT), (3, 'set', 7);

-- a generated column
CREATE TABLE generated (id int PRIMARY KEY, a int, g int GENERATED ALWAYS AS (a * 2) STORED);
INSERT INTO generated (id, a) VALUES (1, 10), (2, NULL);

-- composite primary key declared in another order than the columns
CREATE TABLE pk_ba (a int, b text, v text, PRIMARY KEY (b, a));
INSERT INTO pk_ba VALUES (1, 'x', 'one'), (2, 'y', 'two');

-- key columns from the configuration (Debezium message.key.columns), listed as (c, a)
CREATE TABLE keycols (id int, a int NOT NULL, b text, c text NOT NULL, v text);
ALTER TABLE keycols REPLICA IDENTITY FULL;
INSERT INTO keycols VALUES (1, 10, 'b1', 'c1', 'one'), (2, 20, 'b2', 'c2', 'two');

-- REPLICA IDENTITY USING INDEX over (b, a)
CREATE TABLE ri_index (a int NOT NULL, b text NOT NULL, v text);
CREATE UNIQUE INDEX ri_index_ba ON ri_index (b, a);
ALTER TABLE ri_index REPLICA IDENTITY USING INDEX ri_index_ba;
INSERT INTO ri_index VALUES (1, 'x', 'one'), (2, 'y', 'two');

-- REPLICA IDENTITY DEFAULT (with a primary key) and FULL
CREATE TABLE ri_default (id int PRIMARY KEY, v text, n int);
INSERT INTO ri_default VALUES (1, 'one', 1), (2, 'two', 2), (3, 'three', 3);
CREATE TABLE ri_full (id int PRIMARY KEY, v text, n int, big text);
ALTER TABLE ri_full REPLICA IDENTITY FULL;
ALTER TABLE ri_full ALTER COLUMN big SET STORAGE EXTERNAL;
INSERT INTO ri_full VALUES (1, 'one', 1, NULL), (2, 'two', 2, NULL), (3, 'three', 3, NULL);

-- a TOASTed text column (out of line, uncompressed), left unchanged by an UPDATE
CREATE TABLE toasted (id int PRIMARY KEY, v text, big text);
ALTER TABLE toasted ALTER COLUMN big SET STORAGE EXTERNAL;
INSERT INTO toasted SELECT 1, 'one', string_agg(md5(random()::text), '') FROM generate_series(1, 400);

-- a partitioned table with two leaf partitions
CREATE TABLE parted (id int, region text, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE parted_eu PARTITION OF parted FOR VALUES IN ('eu');
CREATE TABLE parted_us PARTITION OF parted FOR VALUES IN ('us');
INSERT INTO parted VALUES (1, 'eu', 'one'), (2, 'us', 'two');

-- keys whose JSON needs escaping or holds characters outside the BMP (the key's bytes are its
-- partition), and a key of mapped types (Decimal bytes, ISO timestamp, uuid, epoch days)
CREATE TABLE text_keys (k text PRIMARY KEY, v int);
INSERT INTO text_keys VALUES ('plain', 1), ('é', 2), ('😀', 3), ('a/b "q" \ ' || chr(9) || chr(1), 4),
  ('del' || chr(127) || ' ls' || chr(8232), 5);
CREATE TABLE typed_keys (u uuid, n numeric(10,2), ts timestamptz, d date, v text,
  PRIMARY KEY (u, n, ts, d));
INSERT INTO typed_keys VALUES
  ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 12.5, '2024-03-10 06:30:00.5+02', '2024-03-10', 'one'),
  ('00000000-0000-0000-0000-000000000000', -0.01, '1969-12-31 23:59:59+00', '1969-12-31', 'two');

-- TRUNCATEd while streaming
CREATE TABLE truncated (id int PRIMARY KEY, v text);
INSERT INTO truncated VALUES (1, 'one'), (2, 'two');
