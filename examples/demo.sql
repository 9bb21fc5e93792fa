-- Demo schema: a billing service with one business table and a transactional outbox
-- (shared/design/seeds/outbox-billing-events.txt).
CREATE TABLE IF NOT EXISTS invoices (
    invoice_id      bigint PRIMARY KEY,
    subscription_id uuid NOT NULL,
    amount          numeric(12, 2) NOT NULL,
    status          text NOT NULL
);
CREATE TABLE IF NOT EXISTS event_outbox (
    outbox_id       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    event_id        uuid NOT NULL UNIQUE,
    subscription_id uuid NOT NULL,
    event_type      text NOT NULL,
    payload         jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
