-- BUG-11  UPDATE that changes the primary key (adapted: no slot/peek/drop)
CREATE TABLE customer (
    region      text,
    customer_no int,
    name        text,
    PRIMARY KEY (region, customer_no)
);
INSERT INTO customer VALUES ('eu', 1, 'n1'), ('eu', 2, 'n2');
-- @@ workload
UPDATE customer SET customer_no = 10 WHERE region = 'eu' AND customer_no = 1;
UPDATE customer SET region = 'us', name = 'n2b' WHERE customer_no = 2;
BEGIN;
UPDATE customer SET customer_no = customer_no * 2 WHERE region = 'eu';
UPDATE customer SET customer_no = 10 WHERE region = 'us' AND customer_no = 2;
COMMIT;
