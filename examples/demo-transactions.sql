-- A few business transactions: each writes the business row and its outbox event atomically.
BEGIN;
INSERT INTO invoices VALUES (1001, '3f1c2a9e-0000-4000-8000-000000000001', 49.90, 'open');
INSERT INTO event_outbox (event_id, subscription_id, event_type, payload)
VALUES (md5('1001:created')::uuid, '3f1c2a9e-0000-4000-8000-000000000001', 'InvoiceCreated',
        '{"invoice_id": 1001, "amount": "49.90", "currency": "EUR"}');
COMMIT;

BEGIN;
UPDATE invoices SET status = 'paid' WHERE invoice_id = 1001;
-- Insert and delete in the same transaction keeps the outbox empty; the event is still published.
INSERT INTO event_outbox (event_id, subscription_id, event_type, payload)
VALUES (md5('1001:paid')::uuid, '3f1c2a9e-0000-4000-8000-000000000001', 'InvoicePaid',
        '{"invoice_id": 1001, "paid_amount": "49.90"}');
DELETE FROM event_outbox WHERE event_id = md5('1001:paid')::uuid;
COMMIT;

BEGIN;
INSERT INTO invoices VALUES (1002, '3f1c2a9e-0000-4000-8000-000000000002', 1234567890.99, 'open');
ROLLBACK;  -- never published

DELETE FROM invoices WHERE invoice_id = 1001;
