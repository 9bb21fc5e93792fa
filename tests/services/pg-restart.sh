#!/usr/bin/env bash
# Restarts the PostgreSQL cluster started by tests/services/start.sh STATE_DIR
# (`pg_ctl restart -m fast`: every session, walsenders included, is terminated).
# With `immediate`, `pg_ctl restart -m immediate`: no shutdown checkpoint, so the server comes
# back through crash recovery and a logical slot's confirmed_flush_lsn as of its last save
# (slot positions confirmed only in memory are lost).
# Used by the reliability tests (tests/integration/reliability/); the cluster keeps
# its data dir, port and settings. Waits until the server accepts connections again.
# Usage: tests/services/pg-restart.sh STATE_DIR [fast|immediate]
set -euo pipefail

if (($# < 1 || $# > 2)) || [[ "${2:-fast}" != fast && "${2:-fast}" != immediate ]]; then
  echo "usage: $0 STATE_DIR [fast|immediate]" >&2
  exit 2
fi
mode="${2:-fast}"
state="$(cd "$1" && pwd)"
cd / # the postgres user may not be able to read the caller's cwd

PG_BIN=${WALRELAY_PG_BIN:-/usr/lib/postgresql/15/bin}
timeout_s=${WALRELAY_SERVICE_TIMEOUT:-90}

if [[ ! -f "$state/pg.root" ]]; then
  echo "pg-restart.sh: $state/pg.root missing: no cluster started by start.sh there" >&2
  exit 1
fi
pg_root="$(cat "$state/pg.root")"
pgdata="$pg_root/data"
# start.sh logs to STATE_DIR/postgresql.log, or (when postgres cannot write there) to a file
# under pg_root that STATE_DIR/postgresql.log links to.
pg_log="$(readlink -f "$state/postgresql.log")"

if ((EUID == 0)); then as_pg=(runuser -u postgres --); else as_pg=(); fi
"${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$pgdata" -l "$pg_log" -m "$mode" -w -t "$timeout_s" restart \
  >/dev/null || { tail -n 30 "$pg_log" >&2; exit 1; }
