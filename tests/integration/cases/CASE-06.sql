-- CASE-06  Tables renamed, moved, dropped and re-created, and new tables created after start
--          (adapted: schemas @S@_app / @S@_archive instead of app / archive, renamed to
--          @S@_billing; no slot/peek/drop; the test stops walrelay for the workload, so every
--          line is decoded after the last DDL, as in the case)
CREATE SCHEMA @S@_app;
CREATE SCHEMA @S@_archive;
CREATE TABLE @S@_app.invoice (invoice_id int PRIMARY KEY, customer text NOT NULL, total numeric(10,2));
CREATE TABLE @S@_app.outbox_event (event_id uuid PRIMARY KEY, aggregate_type text NOT NULL,
                               aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb);
-- @@ workload
INSERT INTO @S@_app.invoice VALUES (1, 'ada', 10.00);
ALTER TABLE @S@_app.invoice RENAME TO invoice_2023;
INSERT INTO @S@_app.invoice_2023 VALUES (2, 'bob', 20.00);
CREATE TABLE @S@_app.invoice (invoice_no text PRIMARY KEY, customer_id bigint NOT NULL, issued_on date);
INSERT INTO @S@_app.invoice VALUES ('INV-3', 3, '2024-01-03');
ALTER TABLE @S@_app.invoice_2023 SET SCHEMA @S@_archive;
INSERT INTO @S@_archive.invoice_2023 VALUES (4, 'dee', 40.00);
BEGIN;
CREATE TABLE @S@_app.credit_note (credit_note_id int PRIMARY KEY, invoice_no text NOT NULL, amount numeric(10,2));
INSERT INTO @S@_app.credit_note VALUES (5, 'INV-3', 1.50);
COMMIT;
INSERT INTO @S@_app.credit_note VALUES (6, 'INV-3', 2.50);
DROP TABLE @S@_app.credit_note;
ALTER TABLE @S@_app.outbox_event RENAME TO outbox_event_old;
CREATE TABLE @S@_app.outbox_event_new (event_id uuid PRIMARY KEY, aggregate_type text NOT NULL,
                                   aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb,
                                   trace_id text);
ALTER TABLE @S@_app.outbox_event_new RENAME TO outbox_event;
INSERT INTO @S@_app.outbox_event VALUES ('00000000-0000-0000-0000-000000000007', 'invoice', 'INV-3',
                                     'InvoiceIssued', '{"no": "INV-3"}', 'trace-7');
INSERT INTO @S@_app.outbox_event_old VALUES ('00000000-0000-0000-0000-000000000008', 'invoice', 'INV-3',
                                     'InvoiceVoided', '{"no": "INV-3"}');
ALTER SCHEMA @S@_app RENAME TO @S@_billing;
INSERT INTO @S@_billing.invoice VALUES ('INV-9', 9, '2024-01-09');
