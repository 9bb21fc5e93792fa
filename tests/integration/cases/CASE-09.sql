-- CASE-09  Outbox rows that are legal SQL but awkward events (adapted: no slot/peek/drop)
CREATE TABLE outbox_event (
    event_id       uuid PRIMARY KEY,
    aggregate_type text NOT NULL,
    aggregate_id   text,
    event_type     text NOT NULL,
    payload        jsonb
);
CREATE TABLE outbox_event_text (
    event_id       uuid PRIMARY KEY,
    aggregate_type text NOT NULL,
    aggregate_id   text NOT NULL,
    event_type     text NOT NULL,
    payload        text
);
-- @@ workload
INSERT INTO outbox_event VALUES ('00000000-0000-0000-0000-0000000000a1','order','o-1','OrderPlaced','{"orderId": "o-1", "total": 12.50}');
INSERT INTO outbox_event VALUES ('00000000-0000-0000-0000-0000000000a2','order','o-2','OrderPurged',NULL);
INSERT INTO outbox_event VALUES ('00000000-0000-0000-0000-0000000000a3','order','o-3','OrderNoop','null');
INSERT INTO outbox_event VALUES
  ('00000000-0000-0000-0000-0000000000a4','order','o-4','LinesAdded','[{"sku": "A"}, {"sku": "B"}]'),
  ('00000000-0000-0000-0000-0000000000a5','order','o-4','NoteAdded','"just a string"'),
  ('00000000-0000-0000-0000-0000000000a6','order','o-4','CounterSet','42');
INSERT INTO outbox_event VALUES
  ('00000000-0000-0000-0000-0000000000a7','order','','OrderPlaced','{"orderId": ""}'),
  ('00000000-0000-0000-0000-0000000000a8','order',NULL,'','{"orderId": null}');
DELETE FROM outbox_event WHERE event_id = '00000000-0000-0000-0000-0000000000a1';
INSERT INTO outbox_event VALUES ('00000000-0000-0000-0000-0000000000a1','order','o-1','OrderPlaced','{"orderId": "o-1", "total": 13.00}');
INSERT INTO outbox_event VALUES ('00000000-0000-0000-0000-0000000000a2','order','o-2','OrderPurged',NULL)
  ON CONFLICT (event_id) DO NOTHING;
INSERT INTO outbox_event VALUES ('00000000-0000-0000-0000-0000000000a3','order','o-3','OrderNoop','{"v": 2}')
  ON CONFLICT (event_id) DO UPDATE SET payload = EXCLUDED.payload;
INSERT INTO outbox_event_text VALUES
  ('00000000-0000-0000-0000-0000000000b1','order','o-9','OrderPlaced','not json {'),
  ('00000000-0000-0000-0000-0000000000b2','order','o-9','OrderPlaced','{"a": 1} trailing'),
  ('00000000-0000-0000-0000-0000000000b3','order','o-9','OrderPlaced','{"a": 1}');
