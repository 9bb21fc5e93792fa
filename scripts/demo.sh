#!/usr/bin/env bash
# The demo on a fresh Debian 12 machine: install dependencies, build walrelay, start a local
# PostgreSQL 15 (wal2json) and a single-node Kafka, create a billing schema with an outbox table,
# run walrelay, write a few business transactions and show the events as they arrive in Kafka.
# Everything is stopped at the end (WALRELAY_DEMO_KEEP=1 leaves it running and prints how to stop).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
section() { printf '\n===== %s =====\n' "$*"; }

if [[ "${WALRELAY_SKIP_INSTALL:-0}" != 1 ]]; then
  section "install dependencies"
  scripts/install-deps.sh
fi

section "build walrelay (release)"
cmake --preset release >/dev/null
cmake --build --preset release --target walrelay
bin="$root/build/release/src/walrelay"

section "start PostgreSQL 15 + wal2json and Kafka (KRaft)"
state="$(mktemp -d /tmp/walrelay-demo.XXXXXX)"
chmod 755 "$state"
walrelay_pid=""
finish() {
  local rc=$?
  if [[ "${WALRELAY_DEMO_KEEP:-0}" == 1 && $rc == 0 ]]; then
    echo "left running; stop with: kill $walrelay_pid; tests/services/stop.sh --clean $state"
    exit 0
  fi
  [[ -n "$walrelay_pid" ]] && kill -TERM "$walrelay_pid" 2>/dev/null && wait "$walrelay_pid" || true
  tests/services/stop.sh --clean "$state" >/dev/null 2>&1 || true
  exit "$rc"
}
trap finish EXIT
tests/services/start.sh "$state" >/dev/null
# shellcheck source=/dev/null
source "$state/env"
export DEMO_PG_CONNINFO="$WALRELAY_TEST_PG_CONNINFO"
export DEMO_KAFKA_BOOTSTRAP="$WALRELAY_TEST_KAFKA_BOOTSTRAP"
export DEMO_STATE_DIR="$state/walrelay-state"

section "create the demo schema (invoices + event_outbox)"
psql "$DEMO_PG_CONNINFO" -X -q -v ON_ERROR_STOP=1 -f examples/demo.sql

section "walrelay check"
"$bin" check --config examples/demo.yaml

section "walrelay run (log: $state/walrelay.log)"
"$bin" run --config examples/demo.yaml >"$state/walrelay.log" 2>&1 &
walrelay_pid=$!
for _ in $(seq 1 100); do
  grep -q "streaming:" "$state/walrelay.log" && break
  if ! kill -0 "$walrelay_pid" 2>/dev/null; then
    cat "$state/walrelay.log"
    echo "walrelay exited before streaming" >&2
    walrelay_pid=""
    exit 1
  fi
  sleep 0.2
done
cat "$state/walrelay.log"
grep -q "streaming:" "$state/walrelay.log" || { echo "walrelay is not streaming" >&2; exit 1; }

section "business transactions (examples/demo-transactions.sql)"
psql "$DEMO_PG_CONNINFO" -X -v ON_ERROR_STOP=1 -f examples/demo-transactions.sql

section "events in Kafka (topic | partition | key | headers | value)"
# Topics are created by walrelay's first record: retry until the expected count is there.
consume() {
  local out=""
  for _ in $(seq 1 60); do
    out="$(kcat -q -b "$DEMO_KAFKA_BOOTSTRAP" -C -t "$1" -o beginning -e -m 5 \
      -f '%t | p%p | %k | %h | %s\n' 2>/dev/null || true)"
    (($(grep -c . <<<"$out") >= $2)) && break
    sleep 0.5
  done
  printf '%s\n' "$out"
}
consume billing.public.invoices 4
consume outbox.event.InvoiceCreated 1
consume outbox.event.InvoicePaid 1

section "stop walrelay (SIGTERM: flush, confirm, exit 0)"
kill -TERM "$walrelay_pid"
wait "$walrelay_pid"
walrelay_pid=""
tail -n 3 "$state/walrelay.log"
psql "$DEMO_PG_CONNINFO" -X -A -c \
  "SELECT slot_name, plugin, confirmed_flush_lsn FROM pg_replication_slots"
