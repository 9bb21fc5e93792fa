#!/usr/bin/env bash
# The polling relay (`source.mode: poll`, docs/relay.md): drain rate of a backlog and
# commit → consumer latency, with both claims.
#
#   benchmarks/relay.sh [--rows N] [--keys K] [--batch N] [--instances 1,4] [--claims transaction,lease]
#                       [--rate R] [--seconds S] [--skip-drain] [--skip-latency]
#
# 1. Drain: N outbox rows (default 200,000 over K = 200 keys) written before the relay starts,
#    drained by each number of instances of --instances, for each claim: events/s from the first
#    instance's start to the last row's sent_at, CPU per event of the walrelay processes (user +
#    sys from /proc), their peak RSS (VmHWM; the largest of the instances) and PostgreSQL's CPU
#    (postmaster and backends) over the same run.
# 2. Latency: one relay (claim transaction), R rows/s (default 1,000) inserted by pgbench, each
#    its own one-row transaction, for S seconds (default 20): p50 / p99 / max of a kcat consumer's
#    receive time minus the row's created_at (clock_timestamp() at its INSERT), with notifications
#    on and with `notify_channel: ""` (poll only, poll_interval 200ms).
#
# Builds the release preset (BENCH_BIN for another binary) and starts its own PostgreSQL + Kafka
# unless WALRELAY_TEST_PG_CONNINFO and WALRELAY_TEST_KAFKA_BOOTSTRAP are set (benchmarks/common.sh).
# Figures go into benchmarks/RESULTS.md by hand, with the date, machine and load.
set -euo pipefail
rows=200000
keys=200
batch=200
instances=1,4
claims=transaction,lease
rate=1000
seconds=20
drain=1
latency=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rows) rows="$2"; shift 2 ;;
    --keys) keys="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --instances) instances="$2"; shift 2 ;;
    --claims) claims="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --skip-drain) drain=0; shift ;;
    --skip-latency) latency=0; shift ;;
    -h|--help) sed -n 2,20p "$0"; exit 0 ;;
    *) echo "relay.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
# shellcheck source=benchmarks/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bootstrap="$WALRELAY_TEST_KAFKA_BOOTSTRAP"
run_id="bench_relay_$(date +%s)_$$"
pids=()
consumer=""
cleanup() {
  local p
  for p in "${pids[@]}" $consumer; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql "$pg" -qAt -c "DROP SCHEMA IF EXISTS $run_id CASCADE" >/dev/null 2>&1 || true
  rm -rf "$work"
  if [[ -n "$state" ]]; then tests/services/stop.sh --clean "$state" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
sql "CREATE SCHEMA $run_id"
now() { date +%s.%N; }
# CPU seconds of the postmaster and its backends (benchmarks/harness/bench.py); with services
# shared with others it counts their work too.
pm_pid=$(head -1 "$(sql "SHOW data_directory")/postmaster.pid" 2>/dev/null || true)
pg_cpu() {
  [[ -n "$pm_pid" ]] || { echo 0; return; }
  python3 -c "import sys; sys.path.insert(0, 'benchmarks/harness'); import bench
print(bench.process_tree_cpu_s(int(sys.argv[1])))" "$pm_pid"
}

# A fresh outbox table NAME with the columns of both claims, the indexes `walrelay check`
# prints (the pending one for CLAIM) and the notify trigger.
make_outbox() {
  local t="$run_id.$1" claim="$2" claimable="status = 'pending'"
  [[ "$claim" == lease ]] && claimable="status IN ('pending', 'retry_wait', 'claimed')"
  sql "CREATE TABLE $t (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
       event_id uuid NOT NULL DEFAULT gen_random_uuid(), aggregate_id text NOT NULL,
       aggregate_type text NOT NULL, payload jsonb,
       created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
       status text NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0,
       sent_at timestamptz, claimed_by text, lease_until timestamptz)"
  sql "CREATE INDEX ON $t (id, event_id) WHERE $claimable"
  sql "CREATE INDEX ON $t (aggregate_id, id) WHERE status <> 'sent'"
  sql "CREATE OR REPLACE FUNCTION $t() RETURNS trigger LANGUAGE plpgsql AS
       \$\$ BEGIN PERFORM pg_notify('$run_id', ''); RETURN NULL; END \$\$"
  sql "CREATE TRIGGER notify AFTER INSERT ON $t FOR EACH STATEMENT EXECUTE FUNCTION $t()"
}

# The configuration of a relay of table NAME: CLAIM, NOTIFY channel ("" = poll only).
write_config() {
  local file="$1" name="$2" claim="$3" notify="$4" lease_keys="" poll_keys=""
  if [[ "$claim" == lease ]]; then
    lease_keys=$'\n  claim: lease\n  lease: 30s\n  ack_timeout: 10s'
    poll_keys=$'\n        owner: claimed_by\n        lease_until: lease_until'
  fi
  cat >"$file" <<EOF
name: $run_id
source:
  mode: poll
  conninfo: "$pg"
kafka:
  bootstrap_servers: "$bootstrap"
relay:
  batch: $batch
  poll_interval: 200ms
  notify_channel: "$notify"$lease_keys
metrics:
  listen: ""
log:
  level: warn
tables:
  - name: $run_id.$name
    outbox:
      event_id: event_id
      aggregate_id: aggregate_id
      aggregate_type: aggregate_type
      payload: payload
      timestamp: created_at
      topic: "$run_id.{aggregate_type}"
      poll:
        order_by: id$poll_keys
EOF
}

start_relays() {
  local n="$1" config="$2" label="$3" i
  pids=()
  for ((i = 0; i < n; i++)); do
    "$bin" run --config "$config" >"$work/$label.$i.log" 2>&1 &
    pids+=($!)
  done
}

# Bounded wait until TABLE has no row that is not sent; fails when a relay exits.
wait_drained() {
  local t="$run_id.$1" deadline=$((SECONDS + $2)) p
  while [[ "$(sql "SELECT count(*) FROM $t WHERE status <> 'sent'")" != 0 ]]; do
    for p in "${pids[@]}"; do
      kill -0 "$p" 2>/dev/null || { echo "relay $p exited early:" >&2; cat "$work"/*.log >&2; exit 1; }
    done
    ((SECONDS < deadline)) || { echo "relay.sh: not drained in $2 s" >&2; exit 1; }
    sleep 0.2
  done
}

# CPU seconds of the running relays (summed), their largest VmHWM in KiB; then stops them.
stop_relays() {
  local p cpu=0 rss=0 r
  for p in "${pids[@]}"; do
    cpu=$(awk -v c="$cpu" '{print c + ($14 + $15) / 100}' "/proc/$p/stat")
    r=$(awk '/VmHWM/ {print $2}' "/proc/$p/status")
    ((r > rss)) && rss=$r
  done
  for p in "${pids[@]}"; do kill -TERM "$p"; done
  for p in "${pids[@]}"; do wait "$p" || true; done
  pids=()
  relay_cpu=$cpu relay_rss=$rss
}

drain_run() {
  local claim="$1" n="$2" name="drain_${claim}_$n" t0 t_first t_end pg0 pg1
  make_outbox "$name" "$claim"
  sql "INSERT INTO $run_id.$name (aggregate_id, aggregate_type, payload)
       SELECT 'key-' || (g % $keys), 'ev', jsonb_build_object('n', g, 'amount', '12.50', 'customer', 'c-' || (g % 977))
       FROM generate_series(1, $rows) g"
  sql "VACUUM ANALYZE $run_id.$name"
  write_config "$work/$name.yaml" "$name" "$claim" "$run_id"
  pg0=$(pg_cpu)
  t0=$(now)
  start_relays "$n" "$work/$name.yaml" "$name"
  wait_drained "$name" 1800
  pg1=$(pg_cpu)
  stop_relays
  read -r t_first t_end < <(sql "SELECT extract(epoch FROM min(sent_at)), extract(epoch FROM max(sent_at))
                                 FROM $run_id.$name" | tr '|' ' ')
  python3 - "$claim" "$n" "$rows" "$t0" "$t_first" "$t_end" "$relay_cpu" "$relay_rss" "$pg0" "$pg1" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import sys
claim, n, rows, t0, t_first, t1, cpu, rss, pg0, pg1, load = sys.argv[1:]
rows, secs, cpu = int(rows), float(t1) - float(t0), float(cpu)
first = float(t1) - float(t_first)
print(f"drain claim={claim} instances={n}: {rows} rows in {secs:.2f} s = {rows / secs:,.0f} events/s "
      f"from the start ({rows / first:,.0f} from the first row sent, {first:.2f} s); "
      f"walrelay CPU {cpu:.2f} s ({cpu / rows * 1e6:.1f} µs/event), peak RSS {int(rss) / 1024:.1f} MiB; "
      f"PostgreSQL CPU {float(pg1) - float(pg0):.2f} s; load {load}")
EOF
  sql "DROP TABLE $run_id.$name"
}

latency_run() {
  local label="$1" notify="$2" name="lat_$1" t
  t="$run_id.$name"
  make_outbox "$name" transaction
  write_config "$work/$name.yaml" "$name" transaction "$notify"
  start_relays 1 "$work/$name.yaml" "$name"
  # One row first: the topic exists and the relay is connected before the timed inserts.
  sql "INSERT INTO $t (aggregate_id, aggregate_type, payload) VALUES ('warm-up', 'ev', '{}')"
  wait_drained "$name" 60
  # kcat's lines stamped with their receive time as they arrive.
  kcat -C -u -q -b "$bootstrap" -t "$run_id.ev" -o end -f '%h\n' -X fetch.wait.max.ms=10 \
    > >(python3 -u -c 'import sys, time
for line in sys.stdin:
    sys.stdout.write(f"{time.time():.6f}\t{line}")' >"$work/$name.recv") &
  consumer=$!
  sleep 3
  cat >"$work/$name.sql" <<EOF
\set k random(0, $((keys - 1)))
INSERT INTO $t (aggregate_id, aggregate_type, payload) VALUES ('key-' || :k, 'ev', '{"n": 1}');
EOF
  pgbench -n -c 2 -j 1 -R "$rate" -T "$seconds" -f "$work/$name.sql" "$pg" >"$work/$name.pgbench" 2>&1
  wait_drained "$name" 120
  sleep 1
  kill "$consumer" 2>/dev/null || true
  wait "$consumer" 2>/dev/null || true
  consumer=""
  sleep 0.5
  stop_relays
  sql "COPY (SELECT event_id, extract(epoch FROM created_at) FROM $t WHERE aggregate_id <> 'warm-up')
       TO STDOUT" >"$work/$name.rows"
  python3 - "$label" "$work/$name.rows" "$work/$name.recv" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import re, statistics, sys
label, rows_f, recv_f, load = sys.argv[1:]
created = {}
for line in open(rows_f):
    eid, t = line.split("\t")
    created[eid] = float(t)
lat = []
for line in open(recv_f):
    t, headers = line.rstrip("\n").split("\t", 1)
    m = re.search(r"(?:^|,)id=([0-9a-f-]{36})", headers)
    if m and m.group(1) in created:
        lat.append((float(t) - created.pop(m.group(1))) * 1000)
lat.sort()
if not lat:
    sys.exit(f"latency {label}: the consumer received none of the rows")
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"latency {label}: {len(lat)} rows received ({len(created)} not seen by the consumer); "
      f"p50 {q(0.50):.1f} ms, p99 {q(0.99):.1f} ms, max {lat[-1]:.1f} ms; load {load}")
EOF
}

echo "relay.sh: $bin at $(git rev-parse --short HEAD), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ "$drain" == 1 ]]; then
  for claim in ${claims//,/ }; do
    for n in ${instances//,/ }; do drain_run "$claim" "$n"; done
  done
fi
if [[ "$latency" == 1 ]]; then
  latency_run notify "$run_id"
  latency_run poll_only ""
fi
