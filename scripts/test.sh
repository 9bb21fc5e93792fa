#!/usr/bin/env bash
# The full test run on a fresh Debian 12 machine:
#   install deps -> build debug + asan-ubsan -> start real PostgreSQL/Kafka ->
#   all tests on debug -> benchmark harness smoke run -> unit+component tests on asan-ubsan ->
#   fuzzers (scripts/fuzz.sh).
# Env: WALRELAY_SKIP_INSTALL=1 skips the apt step.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Each section's wall time, printed as a table at the end (the CI budget is per tier).
timings=()
section_name=""
section_start=$SECONDS
section() {
  if [[ -n "$section_name" ]]; then
    timings+=("$(printf '%5ds  %s' $((SECONDS - section_start)) "$section_name")")
  fi
  section_name="$*"
  section_start=$SECONDS
  printf '\n===== %s [%s] =====\n' "$*" "$(date +%T)"
}
print_timings() {
  section "end"
  echo "===== time per section ====="
  printf '%s\n' "${timings[@]}"
}

if [[ "${WALRELAY_SKIP_INSTALL:-0}" != 1 ]]; then
  section "install dependencies"
  scripts/install-deps.sh
fi

# Build everything before starting services, so a compile error fails fast and
# the compilers don't compete with the JVM for memory.
section "build: debug"
cmake --preset debug
cmake --build --preset debug

section "build: asan-ubsan"
cmake --preset asan-ubsan
cmake --build --preset asan-ubsan

section "start test services"
state="$(mktemp -d /tmp/walrelay-services.XXXXXX)"
chmod 755 "$state" # mktemp makes it 0700; the postgres user must reach its data dir in here
finish() {
  local rc=$?
  section "stop test services"
  if ((rc == 0)); then
    tests/services/stop.sh --clean "$state" || true
  else
    tests/services/stop.sh "$state" || true
    # Keep the logs of a failed run and show their tails right here in the CI log.
    for f in "$state/postgresql.log" "$state/kafka.log"; do
      [[ -f "$f" ]] && { echo "--- tail of $f"; tail -n 40 "$f"; }
    done
    echo "service state and logs kept in $state"
  fi
  exit "$rc"
}
trap finish EXIT
tests/services/start.sh "$state"
# shellcheck source=/dev/null
source "$state/env"

# Make UBSan findings fail the test instead of only printing a warning.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Run both suites even if the first fails, so one CI run reports everything.
failed=0
section "format check (scripts/format-check.sh: clang-format, .clang-format)"
scripts/format-check.sh || failed=1

section "tests: debug (unit, component, integration; the long variants run with: WALRELAY_LONG_TESTS=1 ctest -L long)"
ctest --test-dir build/debug --output-on-failure --no-tests=error -j2 -LE long || failed=1

section "benchmark harness smoke run (benchmarks/smoke.sh: every mode, tiny workloads, debug build)"
benchmarks/smoke.sh || failed=1

section "tests: asan-ubsan (unit, component)"
ctest --test-dir build/asan --output-on-failure --no-tests=error -L 'unit|component' || failed=1

section "fuzzing (each target ${WALRELAY_FUZZ_SECONDS:-30}s, build/fuzz)"
scripts/fuzz.sh || failed=1

print_timings
if ((failed)); then
  section "FAILED"
else
  section "ALL TESTS PASSED"
fi
exit "$failed"
