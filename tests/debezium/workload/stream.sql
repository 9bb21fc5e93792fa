-- Debezium compatibility suite: the streaming workload, run after both snapshots are published.
-- Same conventions as setup.sql. Each statement runs on its own (autocommit) unless it is inside
-- an explicit BEGIN ... COMMIT.

-- Every snapshot row once more as a streamed insert (id + 10): streamed values go through
-- wal2json / pgoutput, snapshot values through a query, so both paths are compared.
INSERT INTO ints SELECT id + 10, i2, i4, i8, o FROM ints;
INSERT INTO floats SELECT id + 10, r, d FROM floats;
INSERT INTO numerics SELECT id + 10, n, n0, nu, m FROM numerics;
INSERT INTO bools SELECT id + 10, b FROM bools;
INSERT INTO jsons SELECT id + 10, j, jb FROM jsons;
INSERT INTO arrays SELECT id + 10, ia, ta, na, eb FROM arrays;
INSERT INTO bytes SELECT id + 10, ba FROM bytes;
INSERT INTO times SELECT id + 10, dt, tm, tm0, tm3, tm6, tz, ts0, ts1, ts2, ts3, ts4, ts5, ts6, ts, tstz, tstz3 FROM times;
INSERT INTO intervals SELECT id + 10, iv FROM intervals;
INSERT INTO texts SELECT id + 10, u, t, vc, c, e, r4, rtz, ip, net, mac, x FROM texts;
INSERT INTO geoms SELECT id + 10, p, bx, ls, ci FROM geoms;
INSERT INTO composites SELECT id + 10, pr FROM composites;
INSERT INTO domains SELECT id + 10, dn, dvc, dts, dtm, dbt, darr, dd FROM domains;
INSERT INTO bits SELECT id + 10, b1, b8, vb, b4 FROM bits;
INSERT INTO hstores SELECT id + 10, h FROM hstores;
INSERT INTO names SELECT id + 10, nm FROM names;
INSERT INTO defaults SELECT id + 10, v, n FROM defaults;
INSERT INTO defaults (id) VALUES (20);
INSERT INTO generated (id, a) SELECT id + 10, a FROM generated;

-- updates of non-key columns (REPLICA IDENTITY DEFAULT: no old row)
UPDATE ints SET i2 = 0, o = 7 WHERE id = 1;
UPDATE floats SET d = 2.5 WHERE id = 2;
UPDATE numerics SET n = n + 1, m = m + 1::money WHERE id = 1;
UPDATE bools SET b = NOT b WHERE id = 1;
UPDATE times SET tstz = '2000-01-01 00:00:00+00' WHERE id = 1;
UPDATE texts SET e = 'ok', t = 'changed' WHERE id = 1;
UPDATE defaults SET v = NULL WHERE id = 2;
UPDATE generated SET a = 21 WHERE id = 1;
UPDATE names SET nm = 'pg_type' WHERE id = 1;
UPDATE ri_default SET v = 'uno', n = NULL WHERE id = 1;

-- REPLICA IDENTITY FULL: old rows, also with an unchanged out-of-line value
UPDATE ri_full SET v = 'uno' WHERE id = 1;
UPDATE ri_full SET big = (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 300)) WHERE id = 2;
UPDATE ri_full SET v = 'dos' WHERE id = 2;
DELETE FROM ri_full WHERE id = 3;

-- an unchanged TOASTed column (REPLICA IDENTITY DEFAULT), and a new row with a large value
UPDATE toasted SET v = 'uno' WHERE id = 1;
INSERT INTO toasted SELECT 2, 'two', string_agg(md5(random()::text), '') FROM generate_series(1, 300);
UPDATE toasted SET v = 'dos' WHERE id = 2;

-- primary-key changes: a delete of the old key, its tombstone and a create of the new key
UPDATE ri_default SET id = 10 WHERE id = 3;
UPDATE pk_ba SET a = 3 WHERE b = 'x';
UPDATE keycols SET a = 11 WHERE id = 1;
UPDATE keycols SET v = 'uno' WHERE id = 1;
UPDATE ri_index SET b = 'z' WHERE a = 2;
UPDATE ri_index SET v = 'uno' WHERE a = 1;
UPDATE ri_full SET id = 20 WHERE id = 2;
UPDATE text_keys SET k = k || '😀' WHERE v = 2;
INSERT INTO text_keys SELECT k || '+', v + 10 FROM text_keys WHERE v <> 2;
UPDATE text_keys SET k = k || '!' WHERE v IN (4, 5);
UPDATE typed_keys SET n = n + 1, v = 'uno' WHERE v = 'one';
UPDATE typed_keys SET v = 'dos' WHERE v = 'two';
INSERT INTO typed_keys VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 1, '2024-03-10 06:30:00+02', '2024-03-10', 'three');
UPDATE parted SET v = 'uno' WHERE id = 1;
UPDATE parted SET id = 20 WHERE id = 2;
-- a row moving to the other partition
UPDATE parted SET region = 'us' WHERE id = 1;

-- deletes (each followed by a tombstone)
DELETE FROM ints WHERE id = 3;
DELETE FROM ri_default WHERE id = 2;
DELETE FROM pk_ba WHERE a = 2;
DELETE FROM keycols WHERE id = 2;
DELETE FROM ri_index WHERE a = 1;
DELETE FROM parted WHERE id = 20;
DELETE FROM toasted WHERE id = 1;
DELETE FROM texts WHERE id = 13;
DELETE FROM text_keys WHERE v = 3;
DELETE FROM typed_keys WHERE v = 'dos';

-- TRUNCATE
TRUNCATE truncated;
INSERT INTO truncated VALUES (3, 'three');

-- multi-statement transactions over several tables
BEGIN;
INSERT INTO ri_default VALUES (4, 'four', 4);
UPDATE ri_default SET n = 40 WHERE id = 4;
INSERT INTO parted VALUES (3, 'eu', 'three'), (4, 'us', 'four');
UPDATE keycols SET v = 'in tx' WHERE id = 1;
DELETE FROM ri_full WHERE id = 1;
INSERT INTO ints VALUES (5, 5, 5, 5, 5);
COMMIT;
BEGIN;
UPDATE ri_default SET id = 5 WHERE id = 4;
DELETE FROM ri_default WHERE id = 5;
INSERT INTO ri_default VALUES (5, 'again', 5);
UPDATE pk_ba SET v = 'tx' WHERE a = 3;
COMMIT;
