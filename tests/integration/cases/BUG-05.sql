-- BUG-05  json/jsonb values and control characters in text (adapted: no slot/peek/drop)
CREATE TABLE doc_store (
    doc_id   int PRIMARY KEY,
    body_j   json,
    body_jb  jsonb,
    note     text
);
-- @@ workload
INSERT INTO doc_store VALUES
 (1, '{"b":1, "a":2, "a":3}', '{"b":1, "a":2, "a":3}', 'plain'),
 (2, '{"nul":"x\u0000y", "emoji":"\ud83d\ude00", "esc":"q\"b\\s"}',
     '{"emoji":"\ud83d\ude00", "esc":"q\"b\\s", "n":12345678901234567890.5}',
     E'ctl:\x01\x1f del:\x7f ls:\u2028 tab:\t nl:\n cr:\r quote:" bs:\\'),
 (3, '[1, 2.50, 1e400]', '[1, 2.50, 1e2]', ''),
 (4, 'null', 'null', NULL),
 (5, '"just a string"', '"just a string"', '😀'),
 (6, '{"lone":"\ud83d"}', '{"big": 1e40, "int": 123456789012345678901234567890}', NULL);
-- jsonb cannot store a NUL code point at all: this statement fails, nothing is decoded
DO $$ BEGIN
  INSERT INTO doc_store VALUES (7, NULL, '{"nul":"x\u0000y"}', NULL);
EXCEPTION WHEN others THEN RAISE NOTICE 'jsonb rejected: %', SQLERRM;
END $$;
