#!/usr/bin/env bash
# PNG charts (throughput per workload, latency per rate) from benchmarks/run.sh's JSON results:
#   benchmarks/chart.sh [RESULTS_DIR]      (default benchmarks/results; needs matplotlib)
exec python3 "$(dirname "${BASH_SOURCE[0]}")/harness/chart.py" "$@"
