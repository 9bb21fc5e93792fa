-- BUG-04  Arrays arrive as PostgreSQL array literals inside a JSON string (adapted: no slot/peek/drop)
CREATE TABLE tagged_item (
    item_id     int PRIMARY KEY,
    tags        text[],
    scores      int[],
    matrix      int[][],
    flags       boolean[]
);
-- @@ workload
INSERT INTO tagged_item VALUES
 (1, ARRAY['plain', 'with space', 'comma,inside', 'quote"inside', 'back\slash', '{brace}', 'NULL', ''],
     ARRAY[1, NULL, 3], '{{1,2},{3,4}}', ARRAY[true, false, NULL]),
 (2, '{}', '{}', '{}', NULL),
 (3, ARRAY[NULL]::text[], '[0:2]={7,8,9}', '{{{1}},{{2}}}', '{t}'),
 (4, ARRAY['ünïcødé', E'tab\there', E'new\nline'], ARRAY[-2147483648, 2147483647], NULL, '{}');
