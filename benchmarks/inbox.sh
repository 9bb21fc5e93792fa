#!/usr/bin/env bash
# `walrelay inbox` throughput and memory (docs/inbox.md): N events already in a topic, one inbox
# with a trivial effect (no handlers: a row of the events table each; `--handler` for a handler
# `select 1`), timed from its first committed batch to the last event decided and committed.
#
#   benchmarks/inbox.sh [--events N] [--batch N] [--handler] [--duplicates]
#
# Prints events/s (and from the process's start, group join included), CPU seconds and peak RSS
# (VmHWM) of the inbox. --duplicates decides every event a second time (the offsets forgotten:
# every event a DUPLICATE). One partition (the broker's auto-created topic). Uses
# build/release/src/walrelay (BENCH_BIN for another binary) and the
# services of WALRELAY_TEST_PG_CONNINFO / WALRELAY_TEST_KAFKA_BOOTSTRAP (tests/services/start.sh
# writes them); produces with kcat (event id = record key, no headers: the digest is the value's
# SHA-256, router/payload_digest.hpp).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
events=100000
batch=500
handler=0
duplicates=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --events) events="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --handler) handler=1; shift ;;
    --duplicates) duplicates=1; shift ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *) echo "inbox.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
bin="${BENCH_BIN:-$root/build/release/src/walrelay}"
: "${WALRELAY_TEST_PG_CONNINFO:?source the env file of tests/services/start.sh}"
: "${WALRELAY_TEST_KAFKA_BOOTSTRAP:?source the env file of tests/services/start.sh}"
[[ -x "$bin" ]] || { echo "inbox.sh: no $bin (cmake --build --preset release --target walrelay)" >&2; exit 2; }

run_id="bench_inbox_$(date +%s)_$$"
topic="$run_id.events"
schema="$run_id"
work="$(mktemp -d /tmp/inbox-bench.XXXX)"
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
  psql "$WALRELAY_TEST_PG_CONNINFO" -qAt -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

psql_value() { psql "$WALRELAY_TEST_PG_CONNINFO" -qAt -c "$1"; }

# The topic, then N records: key = the event id, a small JSON value.
kcat -b "$WALRELAY_TEST_KAFKA_BOOTSTRAP" -L >/dev/null
python3 - "$events" >"$work/records" <<'EOF'
import sys
n = int(sys.argv[1])
out = sys.stdout
for i in range(n):
    out.write(f'ev-{i}\t{{"invoice":{i},"amount":"12.50","customer":"c-{i % 977}"}}\n')
EOF
t_produce=$(date +%s.%N)
kcat -P -b "$WALRELAY_TEST_KAFKA_BOOTSTRAP" -t "$topic" -K $'\t' -X linger.ms=50 -l "$work/records"
echo "produced $events records to $topic in $(python3 -c "import time;print(round(time.time()-$t_produce,1))") s"

handlers=""
if [[ "$handler" == 1 ]]; then
  handlers=$'  handlers:\n    - topic: '"$topic"$'\n      sql: "select 1"\n'
fi
cat >"$work/inbox.yaml" <<EOF
kafka:
  bootstrap_servers: "$WALRELAY_TEST_KAFKA_BOOTSTRAP"
log:
  level: warn
metrics:
  listen: ""
inbox:
  conninfo: "$WALRELAY_TEST_PG_CONNINFO"
  group_id: $run_id
  topics: [$topic]
  event_id: key
  schema: $schema
  batch: {max_events: $batch, max_wait: 20ms}
$handlers
EOF

# One pass: starts the inbox, waits until `want` ledger decisions (APPLIED rows plus duplicates)
# are committed, prints the figures, stops it.
one_pass() {
  local want="$1" label="$2"
  local t0 t_first="" t_end n rss cpu
  t0=$(date +%s.%N)
  "$bin" inbox --config "$work/inbox.yaml" >"$work/$label.log" 2>&1 &
  pid=$!
  while :; do
    n=$(psql_value "SELECT coalesce(count(*) + sum(duplicates), 0) FROM $schema.ledger" 2>/dev/null || echo 0)
    n=${n:-0}
    if [[ -z "$t_first" && "$n" -gt "$base" ]]; then t_first=$(date +%s.%N); first_n=$n; fi
    [[ "$n" -ge "$want" ]] && break
    kill -0 "$pid" 2>/dev/null || { echo "inbox exited early:"; cat "$work/$label.log"; exit 1; }
    sleep 0.1
  done
  t_end=$(date +%s.%N)
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  cpu=$(awk '{print ($14 + $15) / 100}' "/proc/$pid/stat")
  kill -TERM "$pid"; wait "$pid" || true; pid=""
  python3 - "$label" "$t0" "$t_first" "$t_end" "$first_n" "$want" "$base" "$rss" "$cpu" <<'EOF'
import sys
label, t0, t1, t2, first_n, want, base, rss, cpu = sys.argv[1:]
t0, t1, t2 = float(t0), float(t1), float(t2)
first_n, want, base = int(first_n), int(want), int(base)
decided = want - base
steady = (want - first_n) / (t2 - t1) if t2 > t1 else float("nan")
print(f"{label}: {decided} events decided and committed; {steady:,.0f} events/s after the first "
      f"batch ({t2 - t1:.2f} s), {decided / (t2 - t0):,.0f} events/s from the start "
      f"({t2 - t0:.2f} s, group join included); CPU {float(cpu):.2f} s; peak RSS {int(rss) / 1024:.1f} MiB")
EOF
}

base=0
one_pass "$events" "first"
if [[ "$duplicates" == 1 ]]; then
  psql_value "DELETE FROM $schema.offsets" >/dev/null
  base=$events
  one_pass $((2 * events)) "duplicates"
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; binary $bin; worktree at $(git -C "$root" rev-parse --short HEAD)"
