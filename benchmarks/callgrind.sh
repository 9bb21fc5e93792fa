#!/usr/bin/env bash
# Instructions per event of decode → route (callgrind counts: repeatable on a shared, noisy
# machine, unlike times). Builds the release preset with the benchmarks, then runs
# decode_route_count under callgrind, collecting only measure_events() (EVENTS events of one
# scenario, after a warm-up), and prints instructions per event for each scenario.
#
#   benchmarks/callgrind.sh [EVENTS]     (default 2000)
#   CALLGRIND_KEEP=DIR benchmarks/callgrind.sh   keeps callgrind.out.<scenario> in DIR for
#                                                callgrind_annotate
set -euo pipefail
events=${1:-2000}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cmake --preset release -DWALRELAY_BUILD_BENCHMARKS=ON >/dev/null
cmake --build --preset release --target decode_route_count >/dev/null
bin="$root/build/release/benchmarks/decode_route_count"
out="${CALLGRIND_KEEP:-$(mktemp -d)}"
mkdir -p "$out"
for scenario in $("$bin" all 1 | awk '{print $1}'); do
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*measure_events*' \
    --callgrind-out-file="$out/callgrind.out.$scenario" "$bin" "$scenario" "$events" \
    >"$out/stdout.$scenario" 2>"$out/stderr.$scenario"
  ir=$(awk '/^summary:/{print $2}' "$out/callgrind.out.$scenario")
  printf '%-26s %8d instructions/event  (%s)\n' "$scenario" "$((ir / events))" \
    "$(sed 's/^[^ ]* *//' "$out/stdout.$scenario")"
done
[[ -n "${CALLGRIND_KEEP:-}" ]] || rm -rf "$out"
