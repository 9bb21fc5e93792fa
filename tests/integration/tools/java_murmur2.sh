#!/usr/bin/env bash
# Runs Murmur2Partition.java (next to this script) with the kafka-clients jars that
# tests/services/start.sh fetched: ${WALRELAY_CACHE:-$HOME/.cache/walrelay}/kafka-<version>/libs.
# Arguments are passed through: <numPartitions> <hex key bytes>...
# Exit 77 (and a message on stderr) when java or the jars are not available.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${WALRELAY_CACHE:-${HOME:-/tmp}/.cache/walrelay}"
if ! command -v java >/dev/null 2>&1; then
  echo "java_murmur2.sh: no java on PATH" >&2
  exit 77
fi
libs=""
for d in "$cache"/kafka-*/libs; do
  if [[ -f "$d/.complete" ]] && compgen -G "$d/kafka-clients-*.jar" >/dev/null; then
    libs="$d"
  fi
done
if [[ -z "$libs" ]]; then
  echo "java_murmur2.sh: no kafka-clients jars under $cache/kafka-*/libs (run tests/services/start.sh)" >&2
  exit 77
fi
exec java -Xshare:auto -XX:+UseSerialGC -cp "$libs/*" "$here/Murmur2Partition.java" "$@"
