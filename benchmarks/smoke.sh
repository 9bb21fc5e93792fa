#!/usr/bin/env bash
# CI smoke run of the benchmark harness (scripts/test.sh): every mode of benchmarks/run.sh on a
# tiny workload with the debug build, results to a scratch directory. It fails only when the
# harness itself breaks; its figures mean nothing (debug build, sanitizer-free but -O0).
#   BENCH_BUILD=build/debug benchmarks/smoke.sh      (services from WALRELAY_TEST_*, or its own)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export BENCH_BUILD="${BENCH_BUILD:-build/debug}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
run() { echo "--- benchmarks/run.sh $*"; benchmarks/run.sh "$@" --out "$out" --repeat 1; }
run ceiling --rows 2000 --workloads narrow
run mock --rows 5000 --workloads narrow,mixed,outbox,bigtxn --transport unix
run kafka --rows 5000 --workloads narrow
run snapshot --rows 5000 --broker mock
run backlog-snapshot --rows 5000 --workloads narrow --broker mock
run latency --rates 200 --commits-per-second 200 --seconds 2 --delivery exactly_once
run memory --rows 5000 --idle-seconds 1 --broker mock
run debezium --rows 2000 --workloads narrow
# The polling relay's benchmark (no JSON; ~16 s in debug with the services given).
echo "--- benchmarks/relay.sh (tiny)"
BENCH_BIN="$BENCH_BUILD/src/walrelay" benchmarks/relay.sh --rows 1000 --instances 1,2 --claims lease \
  --seconds 1 --rate 100
n=$(find "$out" -name '*.json' | wc -l)
[[ $n == 8 ]] || { echo "smoke: expected 8 result files, found $n" >&2; exit 1; }
echo "benchmark harness smoke run: ok ($n result files)"
