#!/usr/bin/env bash
# Stops or starts again the Kafka broker started by tests/services/start.sh STATE_DIR, keeping
# its configuration, data dir and ports (the reliability tests use it for a broker outage).
#   stop   SIGTERM the broker (controlled shutdown) and wait until it is gone (SIGKILL after 60 s).
#          Its command line is kept in STATE_DIR/kafka.cmdline for `start`.
#   start  start it again with the same command line and wait until it answers metadata
#          requests; a no-op when it is running.
# STATE_DIR/kafka.pid is kept up to date, so tests/services/stop.sh still stops it.
# Usage: tests/services/kafka-ctl.sh STATE_DIR stop|start
set -euo pipefail

if (($# != 2)) || [[ "$2" != stop && "$2" != start ]]; then
  echo "usage: $0 STATE_DIR stop|start" >&2
  exit 2
fi
state="$(cd "$1" && pwd)"
action="$2"
cd /

timeout_s=${WALRELAY_SERVICE_TIMEOUT:-90}
props="$state/kafka/server.properties"
kafka_log="$state/kafka.log"
cmdline_file="$state/kafka.cmdline"
log() { echo "kafka-ctl.sh: $*" >&2; }

[[ -f "$props" ]] || { log "$props missing: no broker started by start.sh in $state"; exit 1; }

# Same test as stop.sh: the pid is ours only if it still runs our broker (pids get reused).
is_our_kafka() {
  [[ -r "/proc/$1/cmdline" ]] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q "kafka.Kafka $props"
}
running_pid() {
  local pid
  [[ -f "$state/kafka.pid" ]] || return 1
  pid="$(cat "$state/kafka.pid")"
  is_our_kafka "$pid" || return 1
  echo "$pid"
}

# start.sh lists the PLAINTEXT listener first (then CONTROLLER, SASL_SSL): the probe uses it.
port="$(sed -n 's|^listeners=PLAINTEXT://[^:]*:\([0-9]*\),.*|\1|p' "$props")"

case "$action" in
  stop)
    pid="$(running_pid)" || { log "broker not running"; exit 0; }
    # Keep the exact command line (NUL-separated) to start the same broker again.
    cp "/proc/$pid/cmdline" "$cmdline_file"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 120); do
      is_our_kafka "$pid" || break
      sleep 0.5
    done
    if is_our_kafka "$pid"; then
      log "broker (pid $pid) ignored SIGTERM for 60 s; killing"
      kill -KILL "$pid" 2>/dev/null || true
      while is_our_kafka "$pid"; do sleep 0.1; done
    fi
    ;;
  start)
    if pid="$(running_pid)"; then
      log "broker already running (pid $pid)"
      exit 0
    fi
    if [[ -s "$cmdline_file" ]]; then
      mapfile -d '' cmd <"$cmdline_file"
    else
      # Not stopped by this script: rebuild start.sh's command line.
      cache="${WALRELAY_CACHE:-${HOME:-/tmp}/.cache/walrelay}"
      cmd=(java -Xms128m -Xmx512m -XX:+UseSerialGC -Djava.awt.headless=true
        -Dorg.slf4j.simpleLogger.defaultLogLevel="${WALRELAY_KAFKA_LOG_LEVEL:-warn}"
        -Dorg.slf4j.simpleLogger.showDateTime=true
        -Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd HH:mm:ss.SSS"
        -Dorg.slf4j.simpleLogger.log.kafka.server.KafkaRaftServer=info
        -cp "$cache/kafka-4.1.1/libs/*" kafka.Kafka "$props")
    fi
    echo "===== kafka-ctl.sh: start $(date '+%F %T') =====" >>"$kafka_log"
    setsid "${cmd[@]}" </dev/null >>"$kafka_log" 2>&1 &
    pid=$!
    echo "$pid" >"$state/kafka.pid"
    deadline=$((SECONDS + timeout_s))
    until kcat -b "127.0.0.1:$port" -L -m 2 2>/dev/null | grep -q '1 brokers'; do
      if ! kill -0 "$pid" 2>/dev/null; then
        log "kafka exited during startup; last log lines:"
        tail -n 50 "$kafka_log" >&2
        exit 1
      fi
      if ((SECONDS >= deadline)); then
        log "kafka not ready after ${timeout_s}s; last log lines:"
        tail -n 50 "$kafka_log" >&2
        exit 1
      fi
      sleep 0.5
    done
    ;;
esac
