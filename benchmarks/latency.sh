#!/usr/bin/env bash
# Latency and throughput of many small transactions, per delivery mode: a writer commits
# one-row transactions at a fixed rate while walrelay streams them; a read_committed consumer
# (kcat) stamps each record on arrival, and the latency of a record is its arrival time minus its
# Kafka timestamp (the PostgreSQL commit time walrelay sets). Prints p50/p99/max and the rate.
#
#   benchmarks/latency.sh [SECONDS [TXN_PER_SECOND]]       (default 20 s, 500 transactions/s)
#   BENCH_DELIVERY=exactly_once benchmarks/latency.sh       (README "Exactly-once delivery")
#
# Needs kcat and python3. Builds the release preset unless BENCH_BIN is set (common.sh).
set -euo pipefail
secs=${1:-20}
rate=${2:-500}
# shellcheck source=benchmarks/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
run_id="lat_$$"
delivery=${BENCH_DELIVERY:-at_least_once}

sql "CREATE TABLE $run_id (id bigint PRIMARY KEY, note text)"
cat > "$work/bench.yaml" <<YAML
name: $run_id
source:
  conninfo: "$pg"
  slot: $run_id
  state_dir: "$work/state"
kafka:
  bootstrap_servers: "$WALRELAY_TEST_KAFKA_BOOTSTRAP"
tables:
  - name: public.$run_id
snapshot:
  mode: never
delivery: $delivery
heartbeat:
  enabled: false
log:
  progress_interval: 5s
YAML
"$bin" run --config "$work/bench.yaml" > "$work/walrelay.log" 2>&1 &
pid=$!
until [[ "$(sql "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$run_id' AND active")" == 1 ]]; do
  sleep 0.2
  kill -0 "$pid" 2>/dev/null || { cat "$work/walrelay.log"; exit 1; }
done
topic="$run_id.public.$run_id"
# A first row creates the topic; the measurement reads from its end.
sql "INSERT INTO $run_id VALUES (0, 'warm-up')"
until kcat -b "$WALRELAY_TEST_KAFKA_BOOTSTRAP" -C -t "$topic" -o beginning -c 1 -e -q \
      -X isolation.level=read_committed >/dev/null 2>&1; do
  sleep 0.2
done
# Arrival time (ms) and Kafka timestamp of each record, read_committed.
python3 - "$WALRELAY_TEST_KAFKA_BOOTSTRAP" "$topic" "$work/arrivals" <<'PY' &
import signal, subprocess, sys, time
bootstrap, topic, out = sys.argv[1:4]
p = subprocess.Popen(["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "end", "-u", "-q",
                      "-X", "isolation.level=read_committed", "-X", "topic.metadata.refresh.interval.ms=200",
                      "-f", "%T\n"], stdout=subprocess.PIPE, text=True, bufsize=1)
signal.signal(signal.SIGTERM, lambda *_: (p.kill(), sys.exit(0)))  # ends its own kcat only
with open(out, "w", buffering=1) as f:
    for line in p.stdout:
        f.write(f"{time.time() * 1000:.1f} {line.strip()}\n")
PY
reader=$!
sleep 1
total=$((secs * rate))
python3 - "$pg" "$run_id" "$secs" "$rate" <<'PY'
import subprocess, sys, time
pg, table, secs, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# One psql session; each line is its own transaction (autocommit), paced.
p = subprocess.Popen(["psql", pg, "-X", "-q", "-v", "ON_ERROR_STOP=1"], stdin=subprocess.PIPE, text=True)
t0 = time.time()
for i in range(1, secs * rate + 1):
    p.stdin.write(f"INSERT INTO {table} VALUES ({i}, 'n{i}');\n")
    if i % 10 == 0:
        p.stdin.flush()
        delay = t0 + i / rate - time.time()
        if delay > 0:
            time.sleep(delay)
p.stdin.close()
p.wait()
PY
t_written=$(date +%s.%N)
until [[ -f "$work/arrivals" && $(wc -l < "$work/arrivals") -ge $total ]]; do
  sleep 0.2
  [[ $(echo "$(date +%s.%N) - $t_written > 120" | bc) == 1 ]] && break
done
kill "$reader" 2>/dev/null || true
wait "$reader" 2>/dev/null || true
kill -TERM "$pid"; wait "$pid" || true
echo "delivery: $delivery; $total one-row transactions at $rate/s"
python3 - "$work/arrivals" "$total" <<'PY'
import sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
lat = sorted(a - t for a, t in rows)
n = len(lat)
if n == 0:
    sys.exit("no records arrived")
q = lambda p: lat[min(n - 1, int(p * n))]
span = (max(a for a, _ in rows) - min(a for a, _ in rows)) / 1000
print(f"records {n} of {sys.argv[2]}; latency commit -> read_committed consumer: "
      f"p50 {q(0.5):.0f} ms, p99 {q(0.99):.0f} ms, max {lat[-1]:.0f} ms; "
      f"arrival rate {n / span if span > 0 else 0:.0f} records/s")
PY
sql "SELECT pg_drop_replication_slot('$run_id')" >/dev/null 2>&1 || true
sql "DROP TABLE $run_id"
rm -rf "$work"
