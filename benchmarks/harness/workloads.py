"""The workloads of issue "Performance", each a table (or outbox) and a SQL writer.

  narrow   N INSERTs in 1,000-row transactions: bigint key, two ints, ~100-byte text, timestamptz
  mixed    N/10 transactions of 10 mixed INSERT/UPDATE/DELETE on a 20-column table of mixed types
           (numeric, jsonb, arrays, timestamps, uuid, bytea, ...)
  outbox   N/2 outbox events with ~1 KB jsonb payloads over 10,000 aggregate ids, 100 a transaction
  bigtxn   one transaction of N INSERTs into the narrow table

The writer is a psql script of DO blocks with COMMIT inside (PostgreSQL 11+ transaction control),
each covering at most 500 transactions (one DO block per thousands of COMMITs gets slower with
every COMMIT), with synchronous_commit off (no WAL flush wait per commit; the WAL decoded is the
same). `events(N)` is the number of change events the workload produces.
"""
from __future__ import annotations

from dataclasses import dataclass

BLOCK = 500  # transactions per DO block


@dataclass
class Workload:
    name: str
    create: str       # DDL; {t} is the table
    body: str         # one transaction's statements; {t} table, x the transaction number (1..)
    outbox: bool = False

    def transactions(self, n: int) -> int:
        return {"narrow": (n + 999) // 1000, "bigtxn": 1, "mixed": n // 10,
                "outbox": (n // 2 + 99) // 100}[self.name]

    def events(self, n: int) -> int:
        return {"narrow": n, "bigtxn": n, "mixed": (n // 10) * 10, "outbox": n // 2}[self.name]

    def ddl(self, prefix: str) -> str:
        return self.create.format(t=f"{prefix}_{self.name}")

    def writer(self, prefix: str, n: int) -> str:
        """The psql script that writes the workload for size `n`."""
        t = f"{prefix}_{self.name}"
        if self.name == "bigtxn":
            return (f"INSERT INTO {t} SELECT g, g % 1000, g % 97, rpad('note ' || g, 100, '.'), "
                    f"now() FROM generate_series(1, {n}) g;\n")
        txns = self.transactions(n)
        body = self.body.format(t=t, n=n)
        script = "SET synchronous_commit = off;\n"
        for lo in range(1, txns + 1, BLOCK):
            hi = min(txns, lo + BLOCK - 1)
            script += (f"DO $$\nBEGIN\n  FOR x IN {lo} .. {hi} LOOP\n{body}\n    COMMIT;\n"
                       f"  END LOOP;\nEND $$;\n")
        return script


NARROW_DDL = """CREATE TABLE {t} (id bigint PRIMARY KEY, account int NOT NULL, quantity int NOT NULL,
  note text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())"""

WORKLOADS = {
    "narrow": Workload("narrow", NARROW_DDL, """\
    INSERT INTO {t} SELECT g, g % 1000, g % 97, rpad('note ' || g, 100, '.'), now()
      FROM generate_series((x - 1) * 1000 + 1, least(x * 1000, {n})) g;"""),
    "bigtxn": Workload("bigtxn", NARROW_DDL, ""),
    # 6 inserts, 3 updates of rows inserted earlier in the transaction, 1 delete.
    "mixed": Workload("mixed", """CREATE TABLE {t} (id bigint PRIMARY KEY, c_int int,
  c_small smallint, c_num numeric(18,4), c_big numeric, c_real real, c_double double precision,
  c_bool boolean, c_text text, c_varchar varchar(64), c_date date, c_ts timestamp,
  c_tstz timestamptz, c_interval interval, c_uuid uuid, c_jsonb jsonb, c_int_arr int[],
  c_text_arr text[], c_bytea bytea, c_time time)""", """\
    INSERT INTO {t} SELECT k, k % 1000, (k % 300)::smallint, k / 7.0, k * 1234567.891,
        k / 3.0, k / 9.0, k % 2 = 0, 'text ' || k, 'v' || k, date '2026-01-01' + (k % 365)::int,
        timestamp '2026-01-01' + k * interval '1 s', now(), k * interval '1 min',
        md5(k::text)::uuid, jsonb_build_object('k', k, 'tags', jsonb_build_array('a', 'b')),
        ARRAY[k::int, 2, 3], ARRAY['x', 'y' || k], decode(md5(k::text), 'hex'), time '12:00'
      FROM generate_series((x - 1) * 6 + 1, x * 6) k;
    UPDATE {t} SET c_int = c_int + 1, c_jsonb = c_jsonb || '{{"u": 1}}', c_tstz = now()
      WHERE id BETWEEN x * 6 - 5 AND x * 6 - 3;
    DELETE FROM {t} WHERE id = x * 6 - 2;"""),
    "outbox": Workload("outbox", """CREATE TABLE {t} (id uuid PRIMARY KEY, aggregate_type text
  NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL)""", """\
    INSERT INTO {t} SELECT md5(g::text)::uuid, 'order', 'order-' || (g % 10000), 'OrderPlaced',
        jsonb_build_object('order', g, 'customer', g % 10000, 'lines',
          (SELECT jsonb_agg(jsonb_build_object('sku', 'SKU-' || l, 'qty', l, 'price', l * 1.25,
             'text', rpad('line', 40, '.'))) FROM generate_series(1, 10) l))
      FROM generate_series((x - 1) * 100 + 1, least(x * 100, {n} / 2)) g;""", outbox=True),
}


def walrelay_table_yaml(w: Workload, prefix: str) -> str:
    """The walrelay `tables:` entry of a workload."""
    name = f"public.{prefix}_{w.name}"
    if not w.outbox:
        return f"  - name: {name}\n"
    return (f"  - name: {name}\n    outbox:\n      event_id: id\n      aggregate_id: aggregate_id\n"
            f"      aggregate_type: aggregate_type\n      event_type: event_type\n"
            f"      payload: payload\n      topic: \"{prefix}.outbox.{{aggregate_type}}\"\n")
