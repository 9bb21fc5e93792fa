#!/usr/bin/env bash
# Starts the real services the component/integration tests need, on free loopback ports:
#   - a throwaway PostgreSQL 15 cluster (wal_level=logical, wal2json available)
#   - a single-node Apache Kafka 4.1.1 broker (KRaft combined mode) run from Maven jars, with a
#     PLAINTEXT listener and a SASL_SSL one (SCRAM-SHA-512 and PLAIN; a server certificate signed
#     by a CA made here, STATE_DIR/kafka/tls/ca.crt)
# Usage: tests/services/start.sh STATE_DIR
# Writes STATE_DIR/env (source it) and pid files; stop with tests/services/stop.sh STATE_DIR.
set -euo pipefail

if (($# != 1)); then
  echo "usage: $0 STATE_DIR" >&2
  exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
state="$(cd "$1" && pwd)"
# Everything below uses absolute paths; run from / so commands executed as the
# postgres user don't trip over an unreadable cwd (e.g. /root).
cd /

PG_BIN=${WALRELAY_PG_BIN:-/usr/lib/postgresql/15/bin}
KAFKA_VERSION=4.1.1
cache="${WALRELAY_CACHE:-${HOME:-/tmp}/.cache/walrelay}"
kafka_libs="$cache/kafka-$KAFKA_VERSION/libs"
timeout_s=${WALRELAY_SERVICE_TIMEOUT:-90}

log() { echo "start.sh: $*" >&2; }

# Refuse to clobber services that are still running from this STATE_DIR.
if [[ -f "$state/kafka.pid" ]] && kill -0 "$(cat "$state/kafka.pid")" 2>/dev/null \
   || [[ -f "$state/pg.root" && -f "$(cat "$state/pg.root")/data/postmaster.pid" ]]; then
  echo "start.sh: services already running in $state; run tests/services/stop.sh $state first" >&2
  exit 1
fi

# Anything failing after this point tears down what was started, so a failed
# start never leaves stray postgres/java processes behind.
started=0
cleanup_on_failure() {
  if ((started == 0)); then
    log "failed; stopping whatever was started"
    "$here/stop.sh" "$state" >&2 || true
  fi
}
trap cleanup_on_failure EXIT

# ---------------------------------------------------------------- free ports
# Ask the kernel for four distinct free ports (bind to port 0) while holding all
# of them, so concurrent start.sh runs in other STATE_DIRs get different ones.
pick_ports() {
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
  else
    # Fallback: random high ports nobody answers on (bash /dev/tcp probe).
    local out=() p
    while ((${#out[@]} < $1)); do
      p=$((20000 + RANDOM % 30000))
      [[ " ${out[*]} " == *" $p "* ]] && continue
      (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
      out+=("$p")
    done
    echo "${out[*]}"
  fi
}
read -r pg_port kafka_port controller_port sasl_port < <(pick_ports 4)

# ---------------------------------------------------------------- PostgreSQL
# PostgreSQL refuses to run as root: as root, run it as the `postgres` OS user;
# as a normal user, just run it as that user.
if ((EUID == 0)); then
  as_pg=(runuser -u postgres --)
  pg_owner=postgres
else
  as_pg=()
  pg_owner=$(id -un)
fi

# The data dir must be reachable by $pg_owner (STATE_DIR may sit under a 0700
# root-owned dir such as /root) and the socket path must fit in sun_path
# (~107 bytes). Otherwise fall back to a private dir under /tmp.
pg_root="$state/pg"
rm -rf "$pg_root"
mkdir -p "$pg_root"
chown "$pg_owner" "$pg_root"
if ! "${as_pg[@]}" test -w "$pg_root" || ((${#pg_root} + 25 > 100)); then
  rm -rf "$pg_root"
  pg_root="$(mktemp -d /tmp/walrelay-pg.XXXXXX)"
  chown "$pg_owner" "$pg_root"
  log "postgres cannot use $state; using $pg_root for its data"
fi
echo "$pg_root" >"$state/pg.root"
pgdata="$pg_root/data"
pg_log="$state/postgresql.log"
: >"$pg_log"
chown "$pg_owner" "$pg_log"
if ! "${as_pg[@]}" test -w "$pg_log"; then
  pg_log="$pg_root/postgresql.log"
  ln -sfn "$pg_log" "$state/postgresql.log"
fi

log "initdb in $pgdata"
"${as_pg[@]}" "$PG_BIN/initdb" -D "$pgdata" -U postgres --auth=trust -E UTF8 --no-locale \
  >"$state/initdb.log" 2>&1 || { cat "$state/initdb.log" >&2; exit 1; }

cat >>"$pgdata/postgresql.conf" <<CONF
# --- walrelay test settings ---
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$pg_root'
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
wal_sender_timeout = 60s
max_prepared_transactions = 10
# durability is irrelevant for a throwaway test cluster; speed matters.
# NOT synchronous_commit=off: logical decoding only sees *flushed* WAL, so a test
# that commits and immediately reads the slot would race the WAL writer.
fsync = off
full_page_writes = off
shared_buffers = 64MB
logging_collector = off
log_min_messages = warning
log_line_prefix = '%m [%p] %q%u@%d '
CONF

cat >"$pgdata/pg_hba.conf" <<'HBA'
# Throwaway test cluster: trust everything, but only on the socket and loopback.
local   all          all                 trust
local   replication  all                 trust
host    all          all   127.0.0.1/32  trust
host    replication  all   127.0.0.1/32  trust
HBA

log "starting postgres on 127.0.0.1:$pg_port"
"${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$pgdata" -l "$pg_log" -w -t "$timeout_s" start >/dev/null \
  || { tail -n 50 "$pg_log" >&2; exit 1; }

psql_admin() { "${as_pg[@]}" psql -X -q -v ON_ERROR_STOP=1 -h "$pg_root" -p "$pg_port" -U postgres "$@"; }
psql_admin -d postgres -c "CREATE ROLE walrelay LOGIN REPLICATION SUPERUSER"
psql_admin -d postgres -c "CREATE DATABASE walrelay_test OWNER walrelay"
# Prove the TCP path the tests use works, and that wal2json can be loaded.
psql -X -q -v ON_ERROR_STOP=1 -At "host=127.0.0.1 port=$pg_port dbname=walrelay_test user=walrelay" \
  -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_create_logical_replication_slot('walrelay_start_probe', 'wal2json')" >/dev/null

# -------------------------------------------------------------------- Kafka
# Fetch the broker jars once per machine; flock + rename keeps concurrent
# start.sh runs from racing on the shared cache.
if [[ ! -f "$kafka_libs/.complete" ]]; then
  mkdir -p "$(dirname "$kafka_libs")"
  (
    flock 9
    if [[ ! -f "$kafka_libs/.complete" ]]; then
      log "fetching Kafka $KAFKA_VERSION jars with Maven into $kafka_libs"
      tmp="$(mktemp -d "$kafka_libs.tmp.XXXXXX")"
      # Output goes to a log (mvn -q still emits ANSI noise); shown only on failure.
      mvn -q -B -Dstyle.color=never -f "$here/kafka/pom.xml" -Dkafka.version="$KAFKA_VERSION" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" \
        >"$state/mvn.log" 2>&1 || { cat "$state/mvn.log" >&2; rm -rf "$tmp"; exit 1; }
      touch "$tmp/.complete"
      rm -rf "$kafka_libs"
      mv "$tmp" "$kafka_libs"
    fi
  ) 9>"$(dirname "$kafka_libs")/.lock"
fi

kafka_dir="$state/kafka"
rm -rf "$kafka_dir"
mkdir -p "$kafka_dir/data"
kafka_log="$state/kafka.log"

# TLS for the SASL_SSL listener: a throwaway CA and a server certificate for 127.0.0.1/localhost
# signed by it (EC P-256 keys: made in milliseconds). The broker reads key and chain from one PEM
# file (ssl.keystore.type=PEM, KIP-651; an unencrypted PKCS#8 key needs no ssl.key.password).
# They live under kafka/, which kafka-ctl.sh keeps, so a restarted broker presents the same
# certificate. Clients trust kafka/tls/ca.crt (WALRELAY_TEST_KAFKA_CA).
tls_dir="$kafka_dir/tls"
mkdir -p "$tls_dir"
(
  cd "$tls_dir"
  ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -days 30 -keyout ca.key -out ca.crt \
    -subj '/CN=walrelay test Kafka CA' \
    -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign'
  openssl req -new "${ec[@]}" -keyout server.key -out server.csr -subj '/CN=localhost'
  printf '%s\n' 'subjectAltName=DNS:localhost,IP:127.0.0.1' 'basicConstraints=critical,CA:FALSE' \
    'keyUsage=critical,digitalSignature' 'extendedKeyUsage=serverAuth' >server.ext
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" \
    -days 30 -extfile server.ext -out server.crt
  cat server.key server.crt >server.pem
  rm -f server.csr server.ext
) >"$state/openssl.log" 2>&1 || { cat "$state/openssl.log" >&2; exit 1; }

# Credentials of the SASL_SSL listener, new for every start: a SCRAM-SHA-512 user (stored in the
# cluster metadata at format time, KIP-900) and a PLAIN user (in the listener's JAAS config).
scram_user=walrelay
scram_password="scram-$(openssl rand -hex 12)"
plain_user=walrelay_plain
plain_password="plain-$(openssl rand -hex 12)"

cat >"$kafka_dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$kafka_port,CONTROLLER://127.0.0.1:$controller_port,SASL_SSL://127.0.0.1:$sasl_port
advertised.listeners=PLAINTEXT://127.0.0.1:$kafka_port,SASL_SSL://127.0.0.1:$sasl_port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$plain_user="$plain_password";
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$tls_dir/server.pem
controller.quorum.bootstrap.servers=127.0.0.1:$controller_port
log.dirs=$kafka_dir/data
num.partitions=3
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.flush.interval.messages=9223372036854775807
PROPS

# Kafka logs through SLF4J; slf4j-simple (from the pom) is configured with
# system properties: warnings and errors only, to the log file, with timestamps.
java_opts=(
  -Xms128m -Xmx512m -XX:+UseSerialGC -Djava.awt.headless=true
  -Dorg.slf4j.simpleLogger.defaultLogLevel="${WALRELAY_KAFKA_LOG_LEVEL:-warn}"
  -Dorg.slf4j.simpleLogger.showDateTime=true
  -Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd HH:mm:ss.SSS"
  -Dorg.slf4j.simpleLogger.log.kafka.server.KafkaRaftServer=info
  -cp "$kafka_libs/*"
)

cluster_id="$(java "${java_opts[@]}" kafka.tools.StorageTool random-uuid 2>/dev/null)"
java "${java_opts[@]}" kafka.tools.StorageTool format --standalone -t "$cluster_id" \
  -c "$kafka_dir/server.properties" \
  --add-scram "SCRAM-SHA-512=[name=$scram_user,password=$scram_password]" \
  >"$kafka_dir/format.log" 2>&1 \
  || { cat "$kafka_dir/format.log" >&2; exit 1; }

log "starting kafka on 127.0.0.1:$kafka_port (SASL_SSL $sasl_port, controller $controller_port)"
# setsid + closed stdio: the broker must outlive this script and must not hold
# the caller's stdout/stderr open (e.g. when start.sh runs inside $(...) or a pipe).
setsid java "${java_opts[@]}" kafka.Kafka "$kafka_dir/server.properties" \
  </dev/null >"$kafka_log" 2>&1 &
echo $! >"$state/kafka.pid"
kafka_pid=$!

# Ready = the broker answers a metadata request listing itself (-L without -t,
# so probing does not auto-create a topic).
deadline=$((SECONDS + timeout_s))
until kcat -b "127.0.0.1:$kafka_port" -L -m 2 2>/dev/null | grep -q '1 brokers'; do
  if ! kill -0 "$kafka_pid" 2>/dev/null; then
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

# Prove the SASL_SSL listener works with the CA and the PLAIN user (TLS handshake, SASL). Not with
# the SCRAM user: kcat's librdkafka is walrelay's, and before librdkafka 2.6.1 its SCRAM proof is
# refused by Kafka 4.x brokers (librdkafka CHANGELOG.md, v2.6.1);
# tests/integration/security/kafka_security_test.cpp checks what walrelay does with it.
kcat -b "127.0.0.1:$sasl_port" -L -m 10 -X security.protocol=SASL_SSL -X sasl.mechanisms=PLAIN \
  -X sasl.username="$plain_user" -X sasl.password="$plain_password" \
  -X ssl.ca.location="$tls_dir/ca.crt" 2>"$state/kcat-sasl.log" | grep -q '1 brokers' \
  || { log "the SASL_SSL listener refused PLAIN:"; cat "$state/kcat-sasl.log" >&2; exit 1; }

# ---------------------------------------------------------------------- env
cat >"$state/env" <<ENV
export WALRELAY_TEST_PG_CONNINFO="host=127.0.0.1 port=$pg_port dbname=walrelay_test user=walrelay"
export WALRELAY_TEST_PG_ADMIN_CONNINFO="host=127.0.0.1 port=$pg_port dbname=postgres user=walrelay"
export WALRELAY_TEST_KAFKA_BOOTSTRAP="127.0.0.1:$kafka_port"
export WALRELAY_TEST_KAFKA_SASL_BOOTSTRAP="127.0.0.1:$sasl_port"
export WALRELAY_TEST_KAFKA_CA="$tls_dir/ca.crt"
export WALRELAY_TEST_KAFKA_SASL_USER="$scram_user"
export WALRELAY_TEST_KAFKA_SASL_PASSWORD="$scram_password"
export WALRELAY_TEST_KAFKA_PLAIN_USER="$plain_user"
export WALRELAY_TEST_KAFKA_PLAIN_PASSWORD="$plain_password"
export WALRELAY_TEST_STATE_DIR="$state"
ENV
started=1
cat "$state/env"
