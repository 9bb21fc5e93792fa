#!/usr/bin/env bash
# One command per comparison (issue "Performance"):
#   benchmarks/run.sh ceiling|mock|kafka|debezium|latency|memory|snapshot|backlog-snapshot [--rows N]
#                     [--transport tcp|unix] [--workloads narrow,mixed,outbox,bigtxn] [--repeat N]
# Prints a table and writes JSON to benchmarks/results/; benchmarks/chart.sh turns the JSON into
# PNG charts. `benchmarks/run.sh --help` lists every option. Builds the release preset with the
# benchmarks (or uses BENCH_BUILD, e.g. build/debug for the CI smoke run). Starts its own
# PostgreSQL + Kafka unless WALRELAY_TEST_PG_CONNINFO and WALRELAY_TEST_KAFKA_BOOTSTRAP are set.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [[ -z "${BENCH_BUILD:-}" && "${1:-}" != "--help" && "${1:-}" != "-h" ]]; then
  cmake --preset release -DWALRELAY_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build --preset release --target walrelay mock_broker >/dev/null
fi
exec python3 benchmarks/harness/run.py "$@"
