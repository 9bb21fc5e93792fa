-- BUG-12  Tables without a usable key: no primary key, or a DEFERRABLE primary key
-- (adapted: no slot/peek/drop)
CREATE TABLE audit_log (happened_at timestamptz, actor text, detail text);
CREATE TABLE seat (
    flight text, seat_no text, holder text,
    PRIMARY KEY (flight, seat_no) DEFERRABLE INITIALLY DEFERRED
);
CREATE TABLE audit_log_full (happened_at timestamptz, actor text, detail text);
ALTER TABLE audit_log_full REPLICA IDENTITY FULL;
-- @@ workload
INSERT INTO audit_log VALUES ('2024-01-01 00:00:00+00', 'a1', 'd1'), ('2024-01-01 00:00:00+00', 'a1', 'd1');
UPDATE audit_log SET detail = 'd2';
DELETE FROM audit_log;

INSERT INTO seat VALUES ('XY1', '1A', 'h1');
UPDATE seat SET holder = 'h2';
DELETE FROM seat;

INSERT INTO audit_log_full VALUES ('2024-01-01 00:00:00+00', 'a1', 'd1'), ('2024-01-01 00:00:00+00', 'a1', 'd1');
UPDATE audit_log_full SET detail = 'd2';
DELETE FROM audit_log_full;
