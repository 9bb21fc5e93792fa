#!/usr/bin/env bash
# Initial snapshot of one table, walrelay beside the real Debezium 3.6.1 (Kafka Connect 4.3
# standalone, pgoutput, JsonConverter without schemas; tests/debezium/connect.sh), same database,
# same local Kafka broker, run one after the other on an idle machine:
#   - walrelay: snapshot.mode initial_only, until every row is acknowledged (it exits then);
#   - Debezium: snapshot.mode initial_only, from starting the worker until the topic holds every
#     row (its JVM start included, reported separately: first record to last record).
# Prints rows/s, CPU seconds (whole process: walrelay; the Connect JVM), peak RSS.
#
#   benchmarks/debezium_snapshot.sh [ROWS]      (default 1000000; the snapshot.sh table)
#
# Starts its own PostgreSQL + Kafka unless WALRELAY_TEST_* are set (benchmarks/common.sh).
# Figures go into benchmarks/README.md by hand, with the date and machine.
set -euo pipefail
rows=${1:-1000000}
# shellcheck source=benchmarks/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
run_id="dbzbench_$$"
connect_state="$work/connect"
cleanup_bench() {
  tests/debezium/connect.sh stop "$connect_state" >/dev/null 2>&1 || true
  sql "SELECT pg_drop_replication_slot('${run_id}_dbz') WHERE EXISTS (SELECT 1 FROM
       pg_replication_slots WHERE slot_name = '${run_id}_dbz')" >/dev/null 2>&1 || true
  sql "DROP PUBLICATION IF EXISTS ${run_id}_dbz" >/dev/null 2>&1 || true
  sql "DROP TABLE IF EXISTS $run_id" >/dev/null 2>&1 || true
}
trap 'cleanup_bench; [[ -n "$state" ]] && tests/services/stop.sh --clean "$state" >/dev/null 2>&1; rm -rf "$work"' EXIT

make_snapshot_table "$run_id" "$rows"
psql "$pg" -X -q -c "COPY (SELECT * FROM $run_id) TO STDOUT" >/dev/null  # warm the cache

# Sum of a topic's high watermarks (its record count: a fresh topic).
topic_count() {
  kcat -b "$WALRELAY_TEST_KAFKA_BOOTSTRAP" -Q -t "$1:0:-1" -t "$1:1:-1" -t "$1:2:-1" 2>/dev/null |
    awk '{ s += $NF } END { print s + 0 }'
}
# CPU seconds (user + system) of a process and its threads, from /proc.
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
rss_of() { awk '/VmHWM/ { print int($2 / 1024) }' "/proc/$1/status"; }

# ---- walrelay
cat > "$work/walrelay.yaml" <<YAML
name: ${run_id}_wr
source:
  conninfo: "$pg"
  slot: ${run_id}_wr
  state_dir: "$work/state"
kafka:
  bootstrap_servers: "$WALRELAY_TEST_KAFKA_BOOTSTRAP"
topics:
  prefix: ${run_id}_wr
events:
  value_format: debezium
tables:
  - name: public.$run_id
snapshot:
  mode: initial_only
heartbeat:
  enabled: false
YAML
t0=$(date +%s.%N)
/usr/bin/time -f "%e %U %S %M" -o "$work/time" "$bin" run --config "$work/walrelay.yaml" \
  > "$work/walrelay.log" 2>&1 || { cat "$work/walrelay.log"; exit 1; }
t1=$(date +%s.%N)
read -r _ user sys rss_kb < "$work/time"
wr_secs=$(echo "$t1 - $t0" | bc -l)
wr_cpu=$(echo "$user + $sys" | bc -l)
echo "walrelay:  ${wr_secs}s = $(echo "$rows / $wr_secs" | bc) rows/s, CPU ${wr_cpu}s," \
     "peak RSS $((rss_kb / 1024)) MB"

# ---- Debezium
port=$(echo "$pg" | sed -n 's/.*port=\([0-9]*\).*/\1/p')
dbname=$(echo "$pg" | sed -n 's/.*dbname=\([^ ]*\).*/\1/p')
user=$(echo "$pg" | sed -n 's/.*user=\([^ ]*\).*/\1/p')
mkdir -p "$connect_state"
cat > "$work/worker.properties" <<PROPS
bootstrap.servers=$WALRELAY_TEST_KAFKA_BOOTSTRAP
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=false
value.converter.schemas.enable=false
offset.storage.file.filename=$work/offsets
offset.flush.interval.ms=10000
listeners=http://127.0.0.1:0
PROPS
cat > "$work/debezium.properties" <<PROPS
name=${run_id}_dbz
connector.class=io.debezium.connector.postgresql.PostgresConnector
database.hostname=127.0.0.1
database.port=$port
database.user=$user
database.password=unused
database.dbname=$dbname
topic.prefix=${run_id}_dbz
plugin.name=pgoutput
slot.name=${run_id}_dbz
publication.name=${run_id}_dbz
publication.autocreate.mode=filtered
table.include.list=public.$run_id
snapshot.mode=initial_only
PROPS
topic="${run_id}_dbz.public.$run_id"
t0=$(date +%s.%N)
WALRELAY_CONNECT_JVM_OPTS="${WALRELAY_CONNECT_JVM_OPTS:--Xmx2g}" \
  tests/debezium/connect.sh start "$connect_state" "$work/worker.properties" \
  "$work/debezium.properties"
pid=$(cat "$connect_state/connect.pid")
first=""
while :; do
  n=$(topic_count "$topic")
  if [[ -z "$first" && "$n" -gt 0 ]]; then first=$(date +%s.%N); fi
  [[ "$n" -ge "$rows" ]] && break
  kill -0 "$pid" 2>/dev/null || { tail -n 30 "$connect_state/connect.log"; exit 1; }
  sleep 0.2
done
t1=$(date +%s.%N)
dbz_cpu=$(cpu_of "$pid")
dbz_rss=$(rss_of "$pid")
tests/debezium/connect.sh stop "$connect_state"
dbz_secs=$(echo "$t1 - $t0" | bc -l)
dbz_snap=$(echo "$t1 - $first" | bc -l)
echo "Debezium:  ${dbz_secs}s = $(echo "$rows / $dbz_secs" | bc) rows/s (first to last record" \
     "${dbz_snap}s = $(echo "$rows / $dbz_snap" | bc) rows/s), CPU ${dbz_cpu}s, peak RSS ${dbz_rss} MB"
echo "walrelay / Debezium: $(echo "scale=2; $dbz_secs / $wr_secs" | bc)x faster end to end," \
     "$(echo "scale=2; $dbz_snap / $wr_secs" | bc)x against Debezium's records alone;" \
     "$(echo "scale=1; $dbz_cpu / $wr_cpu" | bc)x less CPU"
