-- BUG-14  One big transaction (adapted: no slot/peek/drop; 20 000 rows instead of 1 000 000 to
-- keep CI time low: 20 000 INSERTs + 1 000 UPDATEs in one transaction)
CREATE TABLE meter_sample (sample_id bigint PRIMARY KEY, meter_id int, reading numeric(12,3), note text);
-- @@ workload
BEGIN;
INSERT INTO meter_sample
SELECT g, g % 1000, g / 7.0, repeat('x', 100)
FROM generate_series(1, 20000) g;
UPDATE meter_sample SET note = 'y' WHERE sample_id <= 1000;
COMMIT;
