#!/usr/bin/env bash
# Installs every Debian 12 package needed to build walrelay and run its tests.
# Idempotent: apt-get is only touched when something is actually missing.
set -euo pipefail

packages=(
  # build toolchain
  g++ cmake ninja-build pkg-config clang-format clang-tidy bc ccache
  # fuzzing (scripts/fuzz.sh): clang 19 is the first whose __cpp_concepts lets libstdc++ 12 declare
  # std::expected; libclang-rt has libFuzzer and the sanitizer runtimes, llvm the symbolizer
  clang-19 libclang-rt-19-dev llvm-19
  # libraries
  libpq-dev librdkafka-dev libsimdjson-dev libboost-dev libboost-system-dev
  libspdlog-dev libyaml-cpp-dev libcli11-dev libgtest-dev libbenchmark-dev libssl-dev
  # real services for component/integration tests
  postgresql-15 postgresql-15-wal2json kcat
  # offline schema check of deploy/kubernetes/ (tests/CMakeLists.txt: kubernetes_manifests)
  python3-kubernetes python3-yaml
)
# Kafka runs from Maven jars: only pull in a JRE/Maven if none is on PATH
# (a hand-installed JDK is fine).
command -v java >/dev/null 2>&1 || packages+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || packages+=(maven)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo=()
if ((EUID != 0)); then sudo=(sudo); fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
# --no-install-recommends keeps CI images lean (e.g. no GUI bits pulled in by the JRE).
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
