-- BUG-20  Which LSN to confirm; change LSNs are not monotonic (adapted: no slot/peek/advance/
-- drop, no dblink: the test interleaves sessions A and B with two libpq connections, exactly as
-- the script does through dblink: A BEGIN + INSERT 1, B INSERT 2 (autocommit), A INSERT 3 + COMMIT)
CREATE TABLE stock_move (move_id int PRIMARY KEY, qty int);
-- @@ workload
-- (driven from case_corpus_test.cpp)
