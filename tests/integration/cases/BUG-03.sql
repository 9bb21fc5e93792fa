-- BUG-03  Date/time, interval and money text (adapted: no slot/peek/drop).
-- The original peeks under two session settings; here walrelay's *replication connection* gets
-- hostile settings instead (the test puts DateStyle=SQL,DMY, TimeZone=America/New_York,
-- IntervalStyle=sql_standard, extra_float_digits=0, bytea_output=escape into the conninfo's
-- `options`), which is what the pg_recvlogical PGOPTIONS step of the case shows.
-- Added from that step: table `reading` with 0.1+0.2 (float8) and '\xdeadbeef' (bytea).
CREATE TABLE booking (
    booking_id   int PRIMARY KEY,
    starts_at    timestamptz,
    local_time   timestamp,
    valid_from   date,
    opens        time,
    opens_tz     timetz,
    duration     interval,
    fee          money
);
CREATE TABLE reading (reading_id int PRIMARY KEY, f float8, b bytea);
-- @@ workload
SET TimeZone = 'UTC';
SET lc_monetary = 'C';
INSERT INTO booking VALUES
 (1, '2024-03-10 06:30:00+00', '2024-03-10 06:30:00', '2024-03-10', '06:30', '06:30+02', '1 day 02:03:04.5', 1234.5),
 (2, '2024-03-10 06:30:00.120000+00', '2024-03-10 06:30:00.000001', '0044-03-15 BC', '24:00', '00:00-14:59', '-1 year -2 mons', -0.01),
 (3, 'infinity', '-infinity', 'infinity', '00:00', '12:00+00', '0', 92233720368547758.07),
 (4, '0044-03-15 12:00:00+00 BC', '294276-12-31 23:59:59.999999', '5874897-12-31', '23:59:59.999999', '23:59:59.999999+15:59', '178000000 years', -92233720368547758.08);
INSERT INTO reading VALUES (1, 0.1::float8 + 0.2::float8, '\xdeadbeef');
