#!/usr/bin/env bash
# Stops the services started by tests/services/start.sh STATE_DIR.
# Never fails because something is already stopped.
# Usage: tests/services/stop.sh [--clean] STATE_DIR   (--clean also deletes all data and logs)
set -euo pipefail

clean=0
state=""
for arg in "$@"; do
  case "$arg" in
    --clean) clean=1 ;;
    -*) echo "usage: $0 [--clean] STATE_DIR" >&2; exit 2 ;;
    *) state="$arg" ;;
  esac
done
if [[ -z "$state" ]]; then
  echo "usage: $0 [--clean] STATE_DIR" >&2
  exit 2
fi
if [[ ! -d "$state" ]]; then
  exit 0 # nothing was ever started here
fi
state="$(cd "$state" && pwd)"
cd / # the postgres user may not be able to read the caller's cwd

PG_BIN=${WALRELAY_PG_BIN:-/usr/lib/postgresql/15/bin}

# ---------------------------------------------------------------- Kafka
# Only signal the pid if it still is our broker (pids get reused).
is_our_kafka() {
  [[ -r "/proc/$1/cmdline" ]] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q "kafka.Kafka $state/kafka/server.properties"
}
if [[ -f "$state/kafka.pid" ]]; then
  pid="$(cat "$state/kafka.pid")"
  if is_our_kafka "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    # A clean KRaft shutdown usually takes a few seconds; don't wait forever.
    for _ in $(seq 1 60); do
      is_our_kafka "$pid" || break
      sleep 0.5
    done
    if is_our_kafka "$pid"; then
      echo "stop.sh: kafka (pid $pid) ignored SIGTERM; killing" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$state/kafka.pid"
fi

# ---------------------------------------------------------------- PostgreSQL
pg_root=""
[[ -f "$state/pg.root" ]] && pg_root="$(cat "$state/pg.root")"
pgdata="$pg_root/data"
if [[ -n "$pg_root" && -f "$pgdata/postmaster.pid" ]]; then
  if ((EUID == 0)); then as_pg=(runuser -u postgres --); else as_pg=(); fi
  if ! "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$pgdata" -m fast -w -t 60 stop >/dev/null 2>&1; then
    # pg_ctl gave up (or the pid file is stale): make sure the postmaster is gone.
    pid="$(head -n 1 "$pgdata/postmaster.pid" 2>/dev/null || true)"
    if [[ -n "$pid" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "-D $pgdata"; then
      echo "stop.sh: postgres (pid $pid) did not stop; killing" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pgdata/postmaster.pid"
  fi
fi

if ((clean)); then
  # pg_root may live outside STATE_DIR (see start.sh); only remove it if start.sh made it.
  if [[ -n "$pg_root" && ( "$pg_root" == "$state/pg" || "$pg_root" == /tmp/walrelay-pg.* ) ]]; then
    rm -rf "$pg_root"
  fi
  rm -rf "$state"
fi
exit 0
