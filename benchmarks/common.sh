# Sourced by the benchmark scripts: builds the release walrelay ($bin, or $BENCH_BIN), starts PostgreSQL + Kafka
# (tests/services/start.sh, stopped on exit) unless WALRELAY_TEST_PG_CONNINFO and
# WALRELAY_TEST_KAFKA_BOOTSTRAP are set, and defines $pg, sql() and a scratch directory $work.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# BENCH_BIN: use that walrelay binary instead (e.g. a debug build, for a ratio between modes).
if [[ -n "${BENCH_BIN:-}" ]]; then
  bin="$BENCH_BIN"
else
  cmake --preset release >/dev/null && cmake --build --preset release --target walrelay >/dev/null
  bin="$root/build/release/src/walrelay"
fi

state=""
if [[ -z "${WALRELAY_TEST_PG_CONNINFO:-}" || -z "${WALRELAY_TEST_KAFKA_BOOTSTRAP:-}" ]]; then
  state="$(mktemp -d /tmp/walrelay-bench.XXXXXX)"
  chmod 755 "$state"
  trap 'tests/services/stop.sh --clean "$state" >/dev/null 2>&1 || true' EXIT
  tests/services/start.sh "$state" >/dev/null
  # shellcheck source=/dev/null
  source "$state/env"
fi
pg="$WALRELAY_TEST_PG_CONNINFO"
sql() { psql "$pg" -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
work="$(mktemp -d)"

# The snapshot benchmarks' table: NAME with ROWS rows of 5 columns (~65 bytes a row), analyzed.
make_snapshot_table() {
  local name=$1 rows=$2
  sql "CREATE TABLE $name (id bigint PRIMARY KEY, account int NOT NULL, amount numeric(12,2),
       note text, created_at timestamptz NOT NULL DEFAULT now())"
  sql "INSERT INTO $name SELECT g, g % 1000, (g % 100000) / 100.0, 'note ' || g, now()
       FROM generate_series(1, $rows) g"
  sql "VACUUM ANALYZE $name"
  echo "table: $rows rows, $(sql "SELECT pg_size_pretty(pg_table_size('$name'))")"
}
