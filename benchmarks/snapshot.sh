#!/usr/bin/env bash
# Snapshot throughput: what `COPY (SELECT * FROM t) TO STDOUT` reads to /dev/null versus walrelay
# reading the same table (snapshot.mode initial_only: a temporary slot's exported snapshot, in
# chunks) and publishing every row to Kafka until every row is acknowledged.
#
#   benchmarks/snapshot.sh [ROWS]        (default 1000000; 5 columns; builds the release preset)
#
# Starts its own PostgreSQL + Kafka (tests/services/start.sh) unless WALRELAY_TEST_PG_CONNINFO
# and WALRELAY_TEST_KAFKA_BOOTSTRAP are set. Prints rows/s for both, walrelay's CPU per row and
# peak RSS. Figures go into benchmarks/README.md by hand, with the date and machine.
set -euo pipefail
rows=${1:-1000000}
# shellcheck source=benchmarks/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
run_id="snapbench_$$"

make_snapshot_table "$run_id" "$rows"

# 1. COPY to /dev/null (warm: once to load the cache, then measured).
psql "$pg" -X -q -c "COPY (SELECT * FROM $run_id) TO STDOUT" >/dev/null
t0=$(date +%s.%N)
psql "$pg" -X -q -c "COPY (SELECT * FROM $run_id) TO STDOUT" >/dev/null
t1=$(date +%s.%N)
copy_secs=$(echo "$t1 - $t0" | bc -l)
echo "COPY to /dev/null: ${copy_secs}s = $(echo "$rows / $copy_secs" | bc) rows/s"

# 2. walrelay: initial_only snapshot until every row is acknowledged (it exits then).
cat > "$work/bench.yaml" <<YAML
name: $run_id
source:
  conninfo: "$pg"
  slot: $run_id
  state_dir: "$work/state"
kafka:
  bootstrap_servers: "$WALRELAY_TEST_KAFKA_BOOTSTRAP"
  properties: { linger.ms: 20, batch.size: 1000000, compression.type: lz4 }
tables:
  - name: public.$run_id
snapshot:
  mode: initial_only
  chunk_size: ${BENCH_CHUNK_SIZE:-8192}
heartbeat:
  enabled: false
log:
  progress_interval: 5s
YAML
t0=$(date +%s.%N)
/usr/bin/time -f "%e %U %S %M" -o "$work/time" ${BENCH_WRAP:-} "$bin" run --config "$work/bench.yaml" \
  > "$work/walrelay.log" 2>&1 || { cat "$work/walrelay.log"; exit 1; }
t1=$(date +%s.%N)
read -r _ user sys rss_kb < "$work/time"
wr_secs=$(echo "$t1 - $t0" | bc -l)
cpu_secs=$(echo "$user + $sys" | bc -l)
echo "walrelay snapshot to Kafka: ${wr_secs}s = $(echo "$rows / $wr_secs" | bc) rows/s" \
     "($(echo "100 * $copy_secs / $wr_secs" | bc)% of COPY's rate)"
echo "walrelay CPU: ${cpu_secs}s = $(echo "1000000 * $cpu_secs / $rows" | bc -l | cut -c1-5) µs per row;" \
     "peak RSS $((rss_kb / 1024)) MB"
sql "DROP TABLE $run_id"
rm -rf "$work"
