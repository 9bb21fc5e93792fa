-- Debezium compatibility suite, decimal.handling.mode=string and =double: the table both modes'
-- connectors capture (two Debezium connectors and two walrelay instances), and the rows they
-- snapshot. It lives in a schema of its own, which the precise-mode connectors do not capture.
-- Same conventions as setup.sql.

-- numeric(p,s) (also as the key, so a key change is published), unconstrained numeric with
-- NaN/+-Infinity, more digits than a double holds, large and tiny magnitudes, money (negative
-- too), numeric arrays with NULL and special elements.
-- REPLICA IDENTITY FULL: updates and deletes carry every old value too. Rows in key order (NaN is
-- the greatest numeric), so Debezium's snapshot (heap order) and walrelay's (key order) agree on
-- the first and last rows.
CREATE TABLE decimals (k numeric(10,2) PRIMARY KEY, n numeric(10,2), n38 numeric(38,9),
  nu numeric, m money, na numeric[], na2 numeric(10,2)[]);
ALTER TABLE decimals REPLICA IDENTITY FULL;
INSERT INTO decimals VALUES
  (-0.01, -0.01, -0.000000001, 0.0000000001, -12.34, '{NaN,NULL,Infinity,-Infinity}',
   '{NaN,-0.01}'),
  (0, 0, 0, 0, 0, '{}', '{}'),
  (1, 12.5, 123456789.123456789, 1.5, 1234.5, '{1.5,NULL,-2}', '{1.5,NULL}'),
  (2.5, 'NaN', 'NaN', 'NaN', NULL, '{NULL}', NULL),
  (3, 99999999.99, 99999999999999999999999999999.999999999, 'Infinity', 92233720368547758.07,
   '{12345678901234567890.5,0.0000000001}', '{99999999.99}'),
  (4, -99999999.99, -1, '-Infinity', -92233720368547758.08, NULL, NULL),
  (5, NULL, NULL, 12345678901234567890.5, 0.01, '{0.000,100,1.500}', NULL),
  (6, 0.1, 1234567890.123456789, -1.500, -0.01, '{0.1}', '{0.1}'),
  (7, 100, 0.000000001, 100, 1000000, '{-12345678901234567890.5}', '{-1}'),
  (8, 1e-2, 1e20, 1e100, -1, '{1e-100}', '{1}'),
  (9, 2, 2, -1e-100, 2, '{}', '{}'),
  ('NaN', 1, 1, 1, 1, NULL, NULL);
