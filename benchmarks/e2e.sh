#!/usr/bin/env bash
# End-to-end throughput: PostgreSQL's own logical decoding of N rows (wal2json, as walrelay asks
# for it) versus walrelay delivering the same WAL to Kafka and confirming it.
#
#   benchmarks/e2e.sh [ROWS]            (default 1000000; builds the release preset)
#   BENCH_KAFKA_PROPERTIES='linger.ms: 100, compression.type: snappy' benchmarks/e2e.sh [ROWS]
#                                       (kafka.properties; default linger 20 ms, lz4)
#   BENCH_DELIVERY=exactly_once benchmarks/e2e.sh [ROWS]   (Kafka transactions, docs/delivery.md
#                                       "Exactly-once delivery"; default at_least_once)
#
# Starts its own PostgreSQL + Kafka (tests/services/start.sh) unless WALRELAY_TEST_PG_CONNINFO
# and WALRELAY_TEST_KAFKA_BOOTSTRAP are set. Prints rows/s for both and walrelay's CPU time per
# event and peak RSS. Figures go into benchmarks/README.md by hand, with the date and machine.
set -euo pipefail
rows=${1:-1000000}
# shellcheck source=benchmarks/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
run_id="bench_$$"

sql "CREATE TABLE $run_id (id bigint PRIMARY KEY, account int NOT NULL, amount numeric(12,2),
     note text, created_at timestamptz NOT NULL DEFAULT now())"
# Two slots made before the workload: one for PostgreSQL's own decode, one for walrelay.
sql "SELECT 1 FROM pg_create_logical_replication_slot('${run_id}_peek', 'wal2json')" >/dev/null
sql "SELECT 1 FROM pg_create_logical_replication_slot('${run_id}', 'wal2json')" >/dev/null
start_lsn=$(sql "SELECT pg_current_wal_lsn()")
sql "INSERT INTO $run_id SELECT g, g % 1000, (g % 100000) / 100.0, 'note ' || g
     FROM generate_series(1, $rows) g"
end_lsn=$(sql "SELECT pg_current_wal_lsn()")
echo "workload: $rows rows in one transaction, WAL $start_lsn .. $end_lsn"

# 1. PostgreSQL decoding alone, with walrelay's wal2json options.
t0=$(date +%s.%N)
decoded=$(sql "SELECT count(*) FROM pg_logical_slot_get_changes('${run_id}_peek', NULL, NULL,
  'format-version','2','include-xids','1','include-timestamp','1','include-lsn','1',
  'include-pk','1','include-transaction','1','include-type-oids','1','include-types','0',
  'add-tables','public.$run_id')")
t1=$(date +%s.%N)
pg_secs=$(echo "$t1 - $t0" | bc -l)
echo "postgres decode: $decoded lines in ${pg_secs}s = $(echo "$rows / $pg_secs" | bc) rows/s"

# 2. walrelay: from start to the slot confirming the transaction.
cat > "$work/bench.yaml" <<YAML
name: $run_id
source:
  conninfo: "$pg"
  slot: $run_id
  state_dir: "$work/state"
  status_interval: 200ms              # confirm promptly: the measurement waits for the slot
kafka:
  bootstrap_servers: "$WALRELAY_TEST_KAFKA_BOOTSTRAP"
  properties: { ${BENCH_KAFKA_PROPERTIES:-linger.ms: 20, batch.size: 1000000, compression.type: lz4} }
  max_in_flight_events: ${BENCH_MAX_IN_FLIGHT_EVENTS:-100000}
  max_in_flight_bytes: ${BENCH_MAX_IN_FLIGHT_BYTES:-64MiB}
tables:
  - name: public.$run_id
delivery: ${BENCH_DELIVERY:-at_least_once}
snapshot:
  mode: never                         # the slot exists before the workload: stream only
heartbeat:
  enabled: false
log:
  progress_interval: 5s
YAML
t0=$(date +%s.%N)
${BENCH_WRAP:-} "$bin" run --config "$work/bench.yaml" > "$work/walrelay.log" 2>&1 &
pid=$!
until [[ "$(sql "SELECT confirmed_flush_lsn >= '$end_lsn' FROM pg_replication_slots
              WHERE slot_name = '$run_id'")" == "t" ]]; do
  sleep 0.2
  kill -0 "$pid" 2>/dev/null || { cat "$work/walrelay.log"; exit 1; }
done
t1=$(date +%s.%N)
hwm_kb=$(awk '/VmHWM/{print $2}' "/proc/$pid/status")
ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
# CPU per thread kind (walrelay's own thread, librdkafka's broker threads, ...), same clock ticks:
# user + system seconds.
threads=$(for t in /proc/"$pid"/task/*; do
            name=$(sed 's/[0-9]*$//; s/\/.*//' "$t/comm")   # rdk:broker1 → rdk:broker
            echo "$name $(sed 's/.*) //' "$t/stat" | awk '{print $12, $13}')"
          done | awk -v hz="$(getconf CLK_TCK)" '{u[$1] += $2; k[$1] += $3} END {
            for (n in u) printf "%s %.2fs (user %.2f + sys %.2f), ", n, (u[n] + k[n]) / hz,
                                u[n] / hz, k[n] / hz }')
kill -TERM "$pid"; wait "$pid" || true
wr_secs=$(echo "$t1 - $t0" | bc -l)
cpu_secs=$(echo "$ticks / $(getconf CLK_TCK)" | bc -l)
echo "delivery: ${BENCH_DELIVERY:-at_least_once}"
echo "walrelay end to end: ${wr_secs}s = $(echo "$rows / $wr_secs" | bc) rows/s" \
     "($(echo "100 * $pg_secs / $wr_secs" | bc)% of PostgreSQL's decode rate)"
echo "walrelay CPU: ${cpu_secs}s = $(echo "1000000 * $cpu_secs / $rows" | bc -l | cut -c1-5) µs per event;" \
     "peak RSS $((hwm_kb / 1024)) MB"
echo "walrelay CPU by thread: ${threads%, }"
sql "SELECT pg_drop_replication_slot('${run_id}_peek'), pg_drop_replication_slot('${run_id}')" \
  >/dev/null
sql "DROP TABLE $run_id"
rm -rf "$work"
