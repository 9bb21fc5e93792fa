#!/usr/bin/env bash
# Fails when a tracked C++ file is not formatted as .clang-format says (Debian 12's clang-format,
# installed by scripts/install-deps.sh). Fix with: scripts/format-check.sh --fix
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! out=$(clang-format --dry-run "${files[@]}" 2>&1) || [[ -n "$out" ]]; then
  echo "$out" | grep -E '^[^ ].*: (warning|error):' | cut -d: -f1 | sort | uniq -c
  echo "format-check: the files above differ from .clang-format (fix: scripts/format-check.sh --fix)"
  exit 1
fi
echo "format-check: ${#files[@]} files formatted as .clang-format says"
