-- Debezium compatibility suite, decimal.handling.mode=string and =double: the streaming workload
-- on decimals_setup.sql's table, run after every snapshot is published. Same conventions.

-- Every snapshot row once more as a streamed insert (key + 100; not the NaN key, NaN + 100 is NaN).
INSERT INTO decimals SELECT k + 100, n, n38, nu, m, na, na2 FROM decimals WHERE k <> 'NaN';

-- updates (REPLICA IDENTITY FULL: the old row has every value, NaN and Infinity too)
UPDATE decimals SET nu = 'NaN', n = n + 1, m = m * -1, na = '{NaN,1}' WHERE k = 1;
UPDATE decimals SET nu = 2.25, n = 'NaN' WHERE k = 2.5;
UPDATE decimals SET n38 = 'NaN', nu = '-Infinity' WHERE k = 103;

-- beyond a double's range: double mode gives "Infinity", -0.0 and 0.0 as Debezium does
INSERT INTO decimals (k, nu, na) VALUES (900, 1e400, '{1e-400}'), (901, -1e-400, NULL);

-- a key change: delete, tombstone, create (with the key headers)
UPDATE decimals SET k = 7.25 WHERE k = 3;

-- deletes (each followed by a tombstone)
DELETE FROM decimals WHERE k = -0.01;
DELETE FROM decimals WHERE k = 104;
