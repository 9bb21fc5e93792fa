-- BUG-22  A change that does not fit into one Kafka message (adapted: no slot/peek/drop; values
-- scaled down 10x (160 kB body, 128 kB payload) and the producer's message.max.bytes set to
-- 100 000 in the test, so the same changes are oversized at a tenth of the cost)
CREATE TABLE contract_doc (doc_id int PRIMARY KEY, title text, body text);
ALTER TABLE contract_doc REPLICA IDENTITY FULL;
CREATE TABLE outbox_event (event_id uuid PRIMARY KEY, aggregate_id text NOT NULL,
                           event_type text NOT NULL, payload jsonb NOT NULL);
CREATE FUNCTION big_text(seed int, blocks int) RETURNS text LANGUAGE sql AS
$$ SELECT string_agg(md5((seed * 1000000 + g)::text), '') FROM generate_series(1, blocks) g $$;
-- @@ workload
INSERT INTO contract_doc VALUES (1, 'small', 'tiny body');
INSERT INTO contract_doc VALUES (2, 'large', big_text(2, 5000));
UPDATE contract_doc SET title = 'large v2' WHERE doc_id = 2;
INSERT INTO contract_doc VALUES (3, 'small after', 'tiny body');
INSERT INTO outbox_event VALUES ('00000000-0000-0000-0000-00000000b001', 'doc-2', 'DocumentStored',
       jsonb_build_object('doc_id', 2, 'text', big_text(3, 4000)));
