#!/usr/bin/env bash
# Output check for optimisations: every record route_dump makes of a corpus of wal2json lines, in
# both value formats, with and without transaction metadata, written to OUTDIR. Run it before and
# after a change and `diff -r` the two directories: nothing but the processing time (masked) may
# differ, so any difference is a changed output byte.
#
#   benchmarks/golden.sh OUTDIR [CORPUS_DIR]
#
# The corpus (made once into CORPUS_DIR, default OUTDIR/corpus, and reused when present):
#   - tests/debezium/workload's setup + stream + decimals workload as wal2json 2 prints it (every
#     type of README's value-mapping table, updates, key changes, deletes, REPLICA IDENTITY FULL),
#     captured from a scratch database on the test PostgreSQL (WALRELAY_TEST_PG_ADMIN_CONNINFO),
#     with that database's pg_type and pg_attribute rows for the router's catalog;
#   - the decoder fuzz corpus and tests/fixtures/wal2json (odd and malformed lines, no catalog).
set -euo pipefail
out=${1:?usage: golden.sh OUTDIR [CORPUS_DIR]}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
corpus=${2:-$out/corpus}
mkdir -p "$out" "$corpus"
cd "$root"
cmake --preset release -DWALRELAY_BUILD_BENCHMARKS=ON >/dev/null
cmake --build --preset release --target route_dump >/dev/null
dump="$root/build/release/benchmarks/route_dump"

if [[ ! -s "$corpus/workload.jsonl" ]]; then
  admin=${WALRELAY_TEST_PG_ADMIN_CONNINFO:?source the test services env first}
  db="walrelay_golden_$$"
  psql "$admin" -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" >/dev/null
  conn="$admin dbname=$db"
  q() { psql "$conn" -X -q -At -v ON_ERROR_STOP=1 "$@"; }
  trap 'q -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                WHERE database = current_database()" >/dev/null 2>&1 || true
        psql "$admin" -X -q -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true' EXIT
  q -c "CREATE EXTENSION hstore SCHEMA public; CREATE SCHEMA w; CREATE SCHEMA d" >/dev/null
  q -c "SELECT 1 FROM pg_create_logical_replication_slot('golden', 'wal2json')" >/dev/null
  w=tests/debezium/workload
  { echo "SET search_path TO w, public;"; cat "$w/setup.sql" "$w/stream.sql"
    echo "SET search_path TO d, public;"; cat "$w/decimals_setup.sql" "$w/decimals_stream.sql"
    # Characters outside the BMP (Jackson's surrogate-pair escapes) in keys and values.
    echo "CREATE TABLE d.emoji (k text PRIMARY KEY, t text, j jsonb, a text[], h hstore);"
    echo "INSERT INTO d.emoji VALUES ('k😀', 'a 😀 b 𝄞', '{\"😀\": \"𝄞\"}', '{😀,x}', 'a=>😀');"
    echo "UPDATE d.emoji SET k = 'k2😀', t = 'é😀' WHERE k = 'k😀';"
    echo "DELETE FROM d.emoji;"
  } | q -f - >/dev/null
  # The output functions run in the decoding session: walrelay's pinned settings.
  q -c "SET DateStyle = ISO; SET TimeZone = UTC; SET IntervalStyle = iso_8601;
        SET extra_float_digits = 3; SET bytea_output = hex; SET lc_monetary = 'C';
        SELECT data FROM pg_logical_slot_get_changes('golden', NULL, NULL, 'format-version', '2',
        'include-xids', '1', 'include-timestamp', '1', 'include-lsn', '1', 'include-pk', '1',
        'include-transaction', '1', 'include-type-oids', '1', 'include-types', '0')" \
    > "$corpus/workload.jsonl"
  q -F $'\t' -c "SELECT t.oid, format_type(t.oid, NULL), t.typcategory, t.typtype, t.typelem,
        t.typbasetype, t.typdelim, t.typtypmod FROM pg_type t" > "$corpus/types.tsv"
  q -F $'\t' -c "SELECT n.nspname, c.relname, a.attname, a.atttypid, a.atttypmod, a.attnotnull,
        t.typlen = -1 AND a.attstorage <> 'p',
        coalesce(array_position(i.indkey::int2[], a.attnum), 0), c.relreplident
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_type t ON t.oid = a.atttypid
      LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
      WHERE n.nspname IN ('w', 'd') AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY n.nspname, c.relname, a.attnum" > "$corpus/columns.tsv"
fi
if [[ ! -s "$corpus/odd.jsonl" ]]; then
  for f in tests/fuzz/corpus/decoder/* tests/fixtures/wal2json/*.jsonl; do
    cat "$f"; echo
  done | grep -v '^$' > "$corpus/odd.jsonl"
fi

for format in native debezium native+txn debezium+txn; do
  "$dump" "$format" "$corpus/types.tsv" "$corpus/columns.tsv" < "$corpus/workload.jsonl" \
    > "$out/workload.$format.out"
  "$dump" "$format" < "$corpus/odd.jsonl" > "$out/odd.$format.out"
done
wc -l "$out"/*.out | tail -1
