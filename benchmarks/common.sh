# Sourced by the benchmark scripts: builds the release walrelay ($bin), starts PostgreSQL + Kafka
# (tests/services/start.sh, stopped on exit) unless WALRELAY_TEST_PG_CONNINFO and
# WALRELAY_TEST_KAFKA_BOOTSTRAP are set, and defines $pg, sql() and a scratch directory $work.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cmake --preset release >/dev/null && cmake --build --preset release --target walrelay >/dev/null
bin="$root/build/release/src/walrelay"

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
