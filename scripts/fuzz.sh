#!/usr/bin/env bash
# Builds the libFuzzer targets (preset `fuzz`, clang++-19 + ASan/UBSan) and runs each for a
# bounded time from its seed corpus in tests/fuzz/corpus/<target>/. Exits non-zero on any crash,
# leak, sanitizer report, timeout or out-of-memory; the offending input is printed (hex) and kept.
#
# Usage: scripts/fuzz.sh [target...]      (default: decoder wire config)
# Env:   WALRELAY_FUZZ_SECONDS   seconds per target (default 30)
#        WALRELAY_FUZZ_SKIP_BUILD=1  use the existing build/fuzz
# Reproduce a finding: build/fuzz/tests/fuzz/fuzz_<target> <crash file>
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

seconds="${WALRELAY_FUZZ_SECONDS:-30}"
targets=("$@")
((${#targets[@]})) || targets=(decoder wire config)

if [[ "${WALRELAY_FUZZ_SKIP_BUILD:-0}" != 1 ]]; then
  cmake --preset fuzz
  cmake --build --preset fuzz
fi

# Symbolized stacks; UBSan findings abort (the preset also compiles with
# -fno-sanitize-recover=all); leaks are checked at exit of every input run.
symbolizer=/usr/lib/llvm-19/bin/llvm-symbolizer
[[ -x "$symbolizer" ]] && export ASAN_SYMBOLIZER_PATH="$symbolizer"
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

work="$(mktemp -d /tmp/walrelay-fuzz.XXXXXX)"
failed=()
for t in "${targets[@]}"; do
  bin="build/fuzz/tests/fuzz/fuzz_$t"
  seeds="tests/fuzz/corpus/$t"
  [[ -x "$bin" ]] || { echo "fuzz: no binary $bin" >&2; exit 2; }
  [[ -d "$seeds" ]] || { echo "fuzz: no seed corpus $seeds" >&2; exit 2; }
  # Work on a copy: libFuzzer adds new inputs to its corpus dir, the repo's stays as is.
  corpus="$work/$t/corpus"
  artifacts="$work/$t/artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp -r "$seeds/." "$corpus/"
  log="$work/$t/fuzz.log"
  # Known findings first (tests/fuzz/crashes/<target>/): each must now run clean, so a bug the
  # fuzzer once found fails this script deterministically until it is fixed, and stays fixed.
  shopt -s nullglob
  known=("tests/fuzz/crashes/$t"/*)
  shopt -u nullglob
  for f in "${known[@]}"; do
    if "$bin" -timeout=5 -rss_limit_mb=2048 "$f" >"$work/$t/replay.log" 2>&1; then
      echo "fuzz $t: known finding $f: fixed"
    else
      failed+=("$t:$(basename "$f")")
      echo "fuzz $t: known finding $f: STILL FAILS"
      sed -n '/^==[0-9]*==\|runtime error\|deadly signal\|check failed/,/^SUMMARY/p' \
        "$work/$t/replay.log" | head -n 60
    fi
  done
  printf '\n--- fuzz %s: %ss from %s seeds (log %s)\n' "$t" "$seconds" "$(ls "$seeds" | wc -l)" "$log"
  rc=0
  # -timeout: one input taking >10 s is a hang; -rss_limit_mb: libFuzzer's default of 2 GB.
  "$bin" "$corpus" -max_total_time="$seconds" -detect_leaks=1 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" >"$log" 2>&1 || rc=$?
  grep -E '^(#[0-9]+ +DONE|Done [0-9]+ runs)|stat::number_of_executed_units|stat::peak_rss_mb' \
    "$log" || true
  shopt -s nullglob
  found=("$artifacts"/*)
  shopt -u nullglob
  if ((rc != 0 || ${#found[@]} != 0)); then
    failed+=("$t")
    echo "fuzz $t: FAILED (exit $rc)"
    # The report: from the sanitizer/libFuzzer banner to the end of the log.
    sed -n '/^==[0-9]*==\|runtime error\|^INFO: libFuzzer: \|deadly signal\|check failed/,$p' \
      "$log" | head -n 150
    for f in "${found[@]}"; do
      echo "--- artifact $f ($(stat -c %s "$f") bytes):"
      head -c 2048 "$f" | od -A d -c | head -n 40
    done
  else
    echo "fuzz $t: ok"
  fi
done

if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]} (logs and artifacts kept in $work)"
  exit 1
fi
rm -rf "$work"
echo "fuzz: all ${#targets[@]} targets ran ${seconds}s without a finding"
