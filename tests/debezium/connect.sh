#!/usr/bin/env bash
# Runs the real Debezium PostgreSQL connector in a Kafka Connect standalone worker, for the
# Debezium compatibility suite (debezium_compat_test.cpp).
#
#   connect.sh start STATE_DIR WORKER_PROPS CONNECTOR_PROPS...   start the worker in the background
#   connect.sh stop STATE_DIR                                     stop it (process group) and wait
#
# The jars (Debezium 3.6.1.Final, Connect 4.3.0, see pom.xml) are fetched with Maven once per
# machine into ${WALRELAY_CACHE:-$HOME/.cache/walrelay}/debezium-3.6.1.Final/libs. The worker logs
# to STATE_DIR/connect.log; its pid is in STATE_DIR/connect.pid.
set -euo pipefail

DEBEZIUM_VERSION=3.6.1.Final
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${WALRELAY_CACHE:-${HOME:-/tmp}/.cache/walrelay}"
libs="$cache/debezium-$DEBEZIUM_VERSION/libs"

log() { echo "connect.sh: $*" >&2; }
usage() {
  echo "usage: $0 start STATE_DIR WORKER_PROPS CONNECTOR_PROPS... | stop STATE_DIR" >&2
  exit 2
}

# Fetch the jars once per machine; flock + a temp dir renamed into place keeps concurrent runs
# from racing on the shared cache or seeing half a directory.
fetch_jars() {
  [[ -f "$libs/.complete" ]] && return 0
  mkdir -p "$(dirname "$libs")"
  (
    flock 9
    if [[ ! -f "$libs/.complete" ]]; then
      log "fetching Debezium $DEBEZIUM_VERSION + Kafka Connect jars with Maven into $libs"
      tmp="$(mktemp -d "$libs.tmp.XXXXXX")"
      mvn_log="$tmp.mvn.log"
      # Output goes to a log (mvn -q still prints ANSI noise); shown only on failure.
      if ! mvn -q -B -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$tmp" >"$mvn_log" 2>&1; then
        cat "$mvn_log" >&2
        rm -rf "$tmp" "$mvn_log"
        exit 1
      fi
      rm -f "$mvn_log"
      touch "$tmp/.complete"
      rm -rf "$libs"
      mv "$tmp" "$libs"
    fi
  ) 9>"$(dirname "$libs")/.lock"
}

start() {
  (($# >= 3)) || usage
  mkdir -p "$1"
  local state
  state="$(cd "$1" && pwd)"
  shift
  if [[ -f "$state/connect.pid" ]] && kill -0 "$(cat "$state/connect.pid")" 2>/dev/null; then
    log "Connect is already running in $state (pid $(cat "$state/connect.pid"))"
    exit 1
  fi
  fetch_jars
  # Tests start fast with C1 only and a small heap; benchmarks pass their own settings in
  # WALRELAY_CONNECT_JVM_OPTS (e.g. "-Xmx2g -XX:+UseG1GC", the JVM's defaults otherwise).
  local jvm_opts
  read -r -a jvm_opts <<<"${WALRELAY_CONNECT_JVM_OPTS:--Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1}"
  local java_opts=(
    "${jvm_opts[@]}" -Djava.awt.headless=true
    # A +05:30 client time zone on purpose: the published values must not depend on it.
    -Duser.timezone=Asia/Kolkata
    -Dorg.slf4j.simpleLogger.defaultLogLevel="${WALRELAY_CONNECT_LOG_LEVEL:-warn}"
    -Dorg.slf4j.simpleLogger.showDateTime=true
    -Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd HH:mm:ss.SSS"
    -cp "$libs/*"
  )
  log "starting Kafka Connect standalone (log: $state/connect.log)"
  # setsid: its own process group, so stop can end the JVM and anything it started; closed stdin
  # and stdout/stderr to the log, so it does not hold the caller's pipes open.
  setsid java "${java_opts[@]}" org.apache.kafka.connect.cli.ConnectStandalone "$@" \
    </dev/null >"$state/connect.log" 2>&1 &
  echo $! >"$state/connect.pid"
}

stop() {
  (($# == 1)) || usage
  local state="$1" pid
  [[ -f "$state/connect.pid" ]] || return 0
  pid="$(cat "$state/connect.pid")"
  if kill -0 "$pid" 2>/dev/null; then
    # setsid made the JVM a process group leader: its pid is the group id.
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "Connect (pid $pid) did not stop in 15 s; killing it"
      kill -KILL -- "-$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
    fi
  fi
  rm -f "$state/connect.pid"
}

(($# >= 1)) || usage
cmd="$1"
shift
case "$cmd" in
  start) start "$@" ;;
  stop) stop "$@" ;;
  *) usage ;;
esac
