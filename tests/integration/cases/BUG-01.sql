-- BUG-01  Exact numeric and bigint values must survive JSON parsing (adapted: no slot/peek/drop)
CREATE TABLE ledger_entry (
    entry_id   bigint PRIMARY KEY,
    amount     numeric,
    rate       numeric(38,9),
    big_count  bigint
);
-- @@ workload
INSERT INTO ledger_entry VALUES (9007199254740993, 12345678901234567890.123456789, 1500, 9007199254740993);
INSERT INTO ledger_entry VALUES (2, 123456789012345678901234567890, 0.000000001, 9223372036854775807);
INSERT INTO ledger_entry VALUES (3, 1e-400, -99999999999999999999999999999.999999999, -9223372036854775808);
UPDATE ledger_entry SET amount = amount + 1 WHERE entry_id = 9007199254740993;
