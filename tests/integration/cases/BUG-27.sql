-- BUG-27  Outbox rows deleted in the same transaction, updated, odd payloads
-- (adapted: no slot/peek/drop)
CREATE TABLE outbox_event (
    event_id       uuid PRIMARY KEY,
    aggregate_type text NOT NULL,
    aggregate_id   text NOT NULL,
    event_type     text NOT NULL,
    payload        jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT '2024-05-01 10:00:00+00'
);
CREATE TABLE customer_order (order_id bigint PRIMARY KEY, total numeric(12,2));
-- @@ workload
BEGIN;
INSERT INTO customer_order VALUES (9007199254740993, 99.90);
INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES
 ('11111111-1111-1111-1111-111111111111', 'order', '9007199254740993', 'OrderPlaced',
  '{"orderId": 9007199254740993, "total": 99.90, "note": "näive \"quoted\"", "lines": [{"sku":"A-1","qty":2}]}');
DELETE FROM outbox_event WHERE event_id = '11111111-1111-1111-1111-111111111111';
COMMIT;

BEGIN;
INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES
 ('22222222-2222-2222-2222-222222222222', 'order', '9007199254740993', 'OrderPaid',    '{"paid": true}'),
 ('33333333-3333-3333-3333-333333333333', 'order', '9007199254740993', 'OrderShipped', '{"carrier": null}');
COMMIT;

UPDATE outbox_event SET payload = '{"paid": false}' WHERE event_id = '22222222-2222-2222-2222-222222222222';
DELETE FROM outbox_event;
