-- BUG-24  Partitioned tables: events name the leaf partition (adapted: no slot/peek/drop)
CREATE TABLE order_event (
    order_id   bigint,
    created_on date,
    status     text,
    PRIMARY KEY (order_id, created_on)
) PARTITION BY RANGE (created_on);
CREATE TABLE order_event_2024_01 PARTITION OF order_event FOR VALUES FROM ('2024-01-01') TO ('2024-02-01');
CREATE TABLE order_event_2024_02 PARTITION OF order_event FOR VALUES FROM ('2024-02-01') TO ('2024-03-01');
CREATE TABLE order_event_other   PARTITION OF order_event DEFAULT;
-- @@ workload
INSERT INTO order_event VALUES (1, '2024-01-15', 'new'), (2, '2024-02-10', 'new'), (3, '2030-01-01', 'new');
UPDATE order_event SET status = 'paid' WHERE order_id = 1;
UPDATE order_event SET created_on = '2024-02-20' WHERE order_id = 1;
DELETE FROM order_event WHERE order_id = 3;
CREATE TABLE order_event_2024_03 PARTITION OF order_event FOR VALUES FROM ('2024-03-01') TO ('2024-04-01');
INSERT INTO order_event VALUES (4, '2024-03-05', 'new');
