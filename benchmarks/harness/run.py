"""benchmarks/run.sh MODE [options]: one command per comparison (issue "Performance").

Modes (each prints a table and writes JSON to --out, default benchmarks/results/):
  ceiling   PostgreSQL's own decode rate (pg_recvlogical to /dev/null): wal2json with walrelay's
            options, and pgoutput (Debezium's plugin) for the same WAL
  mock      walrelay to a librdkafka mock cluster in another process (benchmarks/mock_broker)
            against the wal2json ceiling of the same WAL, same transport, same run; stream only
            (snapshot.mode never: its slot exists before the workload, so it would otherwise
            read the table by an incremental snapshot too)
  kafka     the same, to the local single-node Kafka
  backlog-snapshot
            the stream modes' workload as a backlog while walrelay reads the same table by an
            incremental snapshot (the slot existed first; walrelay's defaults): peak RSS and CPU
            through the backlog, and until the snapshot is done (--broker mock|kafka)
  debezium  walrelay and Debezium 3.6.1 (Kafka Connect standalone, pgoutput, JsonConverter without
            schemas, no snapshot) on the same WAL and broker, with both ceilings
  latency   commits at fixed rates (--rates, rows/s; --commits-per-second, default 100) for
            --seconds: per event, the time a consumer (kcat: read_committed, librdkafka's default)
            receives it minus its source commit time (source.ts_us); p50 / p99 / max
  every mode: --delivery at_least_once|exactly_once (walrelay's `delivery`)
  memory    idle RSS (streaming, nothing to do) and peak RSS through one --rows-row transaction,
            default settings
  snapshot  walrelay's initial snapshot of a 5-column --rows-row table to the broker (--broker
            mock|kafka) against COPY (SELECT * ...) TO STDOUT to /dev/null; with --debezium also
            Debezium's snapshot of the same table to the local Kafka

Fairness (issue "Performance"): every consumer's slot exists before the workload is written, so all
decode the same WAL; walrelay's run ends when its slot's confirmed_flush_lsn reaches the workload's
end LSN, Debezium's when the last record is in its topics; each figure is repeated --repeat times
(median and range) and each ratio is taken within one repetition.
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import (ROOT, BenchError, MockBroker, Services, Usage, confirmed_at_least,  # noqa: E402
                   current_rss_mb, drop_slot, kcat_count, postmaster_pid, process_tree_cpu_s,
                   read_usage, recvlogical, stop, wait_for,
                   write_json)
from workloads import WORKLOADS, walrelay_table_yaml  # noqa: E402
import debezium  # noqa: E402

# --tuned: larger batches (walrelay's defaults otherwise: librdkafka's, with lz4 compression).
KAFKA_TUNING = {"linger.ms": 20, "batch.size": 1000000}


def walrelay_yaml(prefix: str, conninfo: str, bootstrap: str, tables: str, work: Path,
                  extra: str = "", tuned: bool = False) -> str:
    props = ("  properties: { " + ", ".join(f"{k}: {v}" for k, v in KAFKA_TUNING.items()) + " }\n"
             if tuned else "")
    for key in ("max_in_flight_events", "max_in_flight_bytes"):  # --max-in-flight-*
        if os.environ.get(f"BENCH_{key.upper()}"):
            props += f"  {key}: {os.environ[f'BENCH_{key.upper()}']}\n"
    return (f"name: {prefix}\nsource:\n  conninfo: \"{conninfo}\"\n  slot: {prefix}_wr\n"
            f"  state_dir: \"{work}/state\"\nkafka:\n  bootstrap_servers: \"{bootstrap}\"\n"
            f"{props}topics:\n  prefix: {prefix}\ntables:\n{tables}heartbeat:\n  enabled: false\n"
            f"metrics:\n  listen: \"\"\nlog:\n  progress_interval: 10s\n"
            f"delivery: {os.environ.get('BENCH_DELIVERY', 'at_least_once')}\n{extra}")


def start_walrelay(args, cfg: Path, log: Path) -> subprocess.Popen:
    """`walrelay run --config cfg`, its output to `log`."""
    with open(log, "w") as out:
        # BENCH_WRAP, e.g. "perf record -g -o /tmp/w.perf": profile the run (the CPU and RSS
        # figures are then the wrapper's).
        return subprocess.Popen(shlex.split(os.environ.get("BENCH_WRAP", "")) +
                                [str(args.walrelay), "run", "--config", str(cfg)], stdout=out,
                                stderr=subprocess.STDOUT)


def run_walrelay_until(args, svc: Services, cfg: Path, slot: str, end_lsn: str,
                       work: Path) -> Usage:
    """Starts walrelay, waits until its slot confirms `end_lsn`, returns what it used."""
    log = work / "walrelay.log"
    t0 = time.monotonic()
    proc = start_walrelay(args, cfg, log)
    try:
        wait_for(lambda: confirmed_at_least(svc, slot, end_lsn), proc, args.timeout,
                 "walrelay to confirm the workload", log, 0.05)
        wall = time.monotonic() - t0
        u = read_usage(proc.pid, per_thread=True)
        u.wall_s = wall
        return u
    finally:
        stop(proc)


def ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else 0.0


# ------------------------------------------------------------------------------ streaming modes
def one_stream_run(args, svc: Services, wname: str, rep: int) -> dict:
    w = WORKLOADS[wname]
    prefix = f"b{os.getpid()}_{w.name[0]}{rep}"
    table = f"{prefix}_{w.name}"
    work = Path(args.work) / prefix
    work.mkdir(parents=True)
    events = w.events(args.rows)
    svc.sql(w.ddl(prefix))
    with_dbz = args.mode == "debezium"
    slots = [(f"{prefix}_ceil", "wal2json"), (f"{prefix}_wr", "wal2json")]
    if with_dbz:
        svc.sql(f"ALTER TABLE {table} REPLICA IDENTITY DEFAULT")
        svc.sql(f"CREATE PUBLICATION {prefix}_pub FOR TABLE {table}")
        slots += [(f"{prefix}_pgo", "pgoutput"), (f"{prefix}_dbz", "pgoutput")]
    for slot, plugin in slots:
        svc.sql(f"SELECT 1 FROM pg_create_logical_replication_slot('{slot}', '{plugin}')")
    mock = None
    try:
        t0 = time.monotonic()
        svc.script(w.writer(prefix, args.rows))
        write_s = time.monotonic() - t0
        end_lsn = svc.sql("SELECT pg_current_wal_lsn()")
        row = {"workload": wname, "rows": args.rows, "events": events, "transport":
               args.transport, "write_s": round(write_s, 2), "repeat": rep}

        ceil = recvlogical(svc, args.transport, f"{prefix}_ceil", end_lsn, "wal2json",
                           [("add-tables", f"public.{table}")])
        row["wal2json_ceiling_eps"] = round(events / ceil.wall_s)
        if with_dbz:
            pgo = recvlogical(svc, args.transport, f"{prefix}_pgo", end_lsn, "pgoutput",
                              [("proto_version", "1"), ("publication_names", f"{prefix}_pub")])
            row["pgoutput_ceiling_eps"] = round(events / pgo.wall_s)

        if args.mode == "mock" or (args.mode == "backlog-snapshot" and args.broker == "mock"):
            mock = MockBroker(args.mock_broker, [])
            bootstrap = mock.bootstrap
        else:
            bootstrap = svc.kafka
        cfg = work / "walrelay.yaml"
        extra = "events:\n  value_format: debezium\n" if with_dbz else ""
        if args.mode == "backlog-snapshot":
            cfg.write_text(walrelay_yaml(prefix, svc.conninfo_for(args.transport), bootstrap,
                                         walrelay_table_yaml(w, prefix), work, extra,
                                         tuned=args.tuned))
            row.update(backlog_snapshot_run(args, svc, cfg, prefix, table, end_lsn, work, events))
            return row
        # Stream only: the slot exists before the workload, which walrelay would otherwise take
        # as a slot owing its initial snapshot (an incremental one, of the same rows).
        cfg.write_text(walrelay_yaml(prefix, svc.conninfo_for(args.transport), bootstrap,
                                     walrelay_table_yaml(w, prefix), work,
                                     extra + "snapshot:\n  mode: never\n", tuned=args.tuned))
        u = run_walrelay_until(args, svc, cfg, f"{prefix}_wr", end_lsn, work)
        row.update(walrelay_eps=round(events / u.wall_s), walrelay_cpu_us_per_event=round(
            1e6 * u.cpu_s / events, 2), walrelay_peak_rss_mb=round(u.peak_rss_mb, 1),
                   walrelay_cpu_s_total=round(u.cpu_s, 2),
                   walrelay_threads_cpu_s={k: round(v, 2) for k, v in u.threads.items()},
                   ratio_to_wal2json_ceiling=ratio(events / u.wall_s, events / ceil.wall_s))
        if with_dbz:
            d = debezium.stream(args, svc, prefix, table, w, work)
            row.update(d)
            row["walrelay_over_debezium_warm"] = ratio(row["walrelay_eps"],
                                                       d["debezium_eps_first_to_last"])
            row["walrelay_over_debezium_cold"] = ratio(row["walrelay_eps"],
                                                       d["debezium_eps_from_start"])
            row["debezium_over_walrelay_cpu"] = ratio(d["debezium_cpu_s"], u.cpu_s)
        return row
    finally:
        if mock:
            mock.close()
        for slot, _ in slots:
            drop_slot(svc, slot)
        if with_dbz:
            svc.sql(f"DROP PUBLICATION IF EXISTS {prefix}_pub")
        svc.sql(f"DROP TABLE IF EXISTS {table}")


def backlog_snapshot_run(args, svc: Services, cfg: Path, prefix: str, table: str, end_lsn: str,
                         work: Path, events: int) -> dict:
    """walrelay through a backlog of `events` changes while an incremental snapshot reads the
    same table (its slot existed before walrelay): usage when the stream has confirmed the
    backlog, and when the snapshot is done (every chunk confirmed)."""
    slot = f"{prefix}_wr"
    log = work / "walrelay.log"
    t0 = time.monotonic()
    proc = start_walrelay(args, cfg, log)
    try:
        wait_for(lambda: confirmed_at_least(svc, slot, end_lsn), proc, args.timeout,
                 "walrelay to confirm the backlog", log, 0.05)
        backlog_s = time.monotonic() - t0
        at_backlog = read_usage(proc.pid, per_thread=True)
        wait_for(lambda: f"incremental snapshot: public.{table} done" in log.read_text(), proc,
                 args.timeout, "the incremental snapshot to be done", log, 0.1)
        done_s = time.monotonic() - t0
        at_done = read_usage(proc.pid, per_thread=True)
    finally:
        stop(proc)
    if "existed before walrelay" not in log.read_text():
        raise BenchError("walrelay took no incremental snapshot during the backlog")
    return {"backlog_s": round(backlog_s, 2), "snapshot_done_s": round(done_s, 2),
            "peak_rss_mb_through_backlog": round(at_backlog.peak_rss_mb, 1),
            "peak_rss_mb_until_done": round(at_done.peak_rss_mb, 1),
            "cpu_us_per_record": round(1e6 * at_done.cpu_s / (2 * events), 2),
            "walrelay_threads_cpu_s": {k: round(v, 2) for k, v in at_done.threads.items()}}


# -------------------------------------------------------------------------------------- latency
def latency(args, svc: Services) -> list[dict]:
    rows = []
    for rate in args.rates:
        prefix = f"b{os.getpid()}_l{rate}"
        table = f"{prefix}_narrow"
        work = Path(args.work) / prefix
        work.mkdir(parents=True)
        svc.sql(WORKLOADS["narrow"].ddl(prefix))
        cfg = work / "walrelay.yaml"
        cfg.write_text(walrelay_yaml(prefix, svc.conninfo_for(args.transport), svc.kafka,
                                     walrelay_table_yaml(WORKLOADS["narrow"], prefix), work,
                                     "events:\n  value_format: debezium\n", tuned=args.tuned))
        log = work / "walrelay.log"
        with open(log, "w") as out:
            proc = subprocess.Popen([str(args.walrelay), "run", "--config", str(cfg)],
                                    stdout=out, stderr=subprocess.STDOUT)
        topic = f"{prefix}.public.{table}"
        lat_us: list[int] = []
        try:
            wait_for(lambda: "streaming:" in log.read_text(), proc, 60, "walrelay to stream", log)
            # One row first, so the topic exists before the consumer subscribes to its end.
            svc.sql(f"INSERT INTO {table} VALUES (0, 0, 0, 'warm-up', now())")
            wait_for(lambda: kcat_count(svc.kafka, topic) >= 1, proc, 60, "the warm-up row", log)
            # A consumer that stamps each record when it arrives (kcat, unbuffered).
            kc = subprocess.Popen(["kcat", "-b", svc.kafka, "-C", "-t", topic, "-o", "end", "-u",
                                   "-q", "-f", "%s\n"],
                                  stdout=subprocess.PIPE, text=True, bufsize=1)
            ts_re = re.compile(r'"ts_us":(\d+)')

            def consume():
                for line in kc.stdout:
                    now_us = time.time_ns() // 1000
                    m = ts_re.search(line.split('"source":', 1)[-1])
                    if m:
                        lat_us.append(now_us - int(m.group(1)))
            reader = threading.Thread(target=consume, daemon=True)
            reader.start()
            time.sleep(2)  # the consumer has its assignment
            cps = args.commits_per_second
            per_commit = max(1, rate // cps)
            commits = args.seconds * cps
            t0 = time.time() + 0.5
            # synchronous_commit stays on: the walsender sends only flushed WAL, so with it off
            # the WAL writer's delay (up to 3 × wal_writer_delay) would be measured too.
            script = ""
            for lo in range(1, commits + 1, 500):
                hi = min(commits, lo + 499)
                script += f"""DO $$
BEGIN
  FOR c IN {lo} .. {hi} LOOP
    INSERT INTO {table} SELECT g, g % 1000, g % 97, rpad('note ' || g, 100, '.'), now()
      FROM generate_series((c - 1) * {per_commit} + 1, c * {per_commit}) g;
    COMMIT;
    PERFORM pg_sleep(greatest(0, extract(epoch FROM to_timestamp({t0}) + c * interval '{1000 / cps} ms'
                                                   - clock_timestamp())));
  END LOOP;
END $$;
"""
            svc.script(script)
            expected = commits * per_commit
            deadline = time.monotonic() + 120
            while len(lat_us) < expected and time.monotonic() < deadline:
                time.sleep(0.2)
            kc.terminate()
        finally:
            stop(proc)
            drop_slot(svc, f"{prefix}_wr")
            svc.sql(f"DROP TABLE IF EXISTS {table}")
        if not lat_us:
            raise BenchError(f"latency at {rate} rows/s: no record consumed")
        lat_us.sort()
        q = lambda p: lat_us[min(len(lat_us) - 1, int(p * len(lat_us)))] / 1000  # noqa: E731
        rows.append({"rate_rows_s": rate, "commits_s": args.commits_per_second,
                     "delivery": args.delivery, "seconds": args.seconds, "events": len(lat_us),
                     "expected": expected, "p50_ms": q(0.50), "p99_ms": q(0.99),
                     "max_ms": lat_us[-1] / 1000})
    return rows


# --------------------------------------------------------------------------------------- memory
def memory(args, svc: Services) -> list[dict]:
    w = WORKLOADS["bigtxn"]
    prefix = f"b{os.getpid()}_m"
    table = f"{prefix}_bigtxn"
    work = Path(args.work) / prefix
    work.mkdir(parents=True)
    svc.sql(w.ddl(prefix))
    mock = MockBroker(args.mock_broker, []) if args.broker == "mock" else None
    cfg = work / "walrelay.yaml"
    cfg.write_text(walrelay_yaml(prefix, svc.conninfo_for(args.transport),
                                 mock.bootstrap if mock else svc.kafka,
                                 walrelay_table_yaml(w, prefix), work))
    log = work / "walrelay.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(args.walrelay), "run", "--config", str(cfg)], stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "streaming:" in log.read_text(), proc, 60, "walrelay to stream", log)
        time.sleep(args.idle_seconds)
        idle = current_rss_mb(proc.pid)
        svc.script(w.writer(prefix, args.rows))
        end_lsn = svc.sql("SELECT pg_current_wal_lsn()")
        wait_for(lambda: confirmed_at_least(svc, f"{prefix}_wr", end_lsn), proc, args.timeout,
                 "walrelay to confirm the transaction", log, 0.1)
        u = read_usage(proc.pid)
    finally:
        stop(proc)
        if mock:
            mock.close()
        drop_slot(svc, f"{prefix}_wr")
        svc.sql(f"DROP TABLE IF EXISTS {table}")
    return [{"broker": args.broker, "rows_in_one_transaction": args.rows,
             "idle_rss_mb": round(idle, 1), "peak_rss_mb": round(u.peak_rss_mb, 1),
             "settings": "defaults"}]


# ------------------------------------------------------------------------------------- snapshot
def snapshot_read_seconds(log: Path) -> float | None:
    """From walrelay's log: the first table's "snapshot: reading" line to "snapshot: complete"
    (every row acknowledged). The wall time from the process start also holds the connections and
    CREATE_REPLICATION_SLOT, which waits for every transaction open on the server to end
    (PostgreSQL docs, "Exported Snapshots"): on a busy shared server that wait dominates."""
    start = end = None
    for line in log.read_text(errors="replace").splitlines():
        if "snapshot: reading " in line and start is None:
            start = line.split(" ", 1)[0]
        elif "snapshot: complete" in line:
            end = line.split(" ", 1)[0]
    if not start or not end:
        return None
    return (datetime.datetime.fromisoformat(end) -
            datetime.datetime.fromisoformat(start)).total_seconds() or None


def per_row_us(cpu_s: float | None, rows: int) -> float | None:
    return round(1e6 * cpu_s / rows, 2) if cpu_s is not None else None


def snapshot(args, svc: Services, rep: int) -> dict:
    prefix = f"b{os.getpid()}_s{rep}"
    table = f"{prefix}_snap"
    work = Path(args.work) / prefix
    work.mkdir(parents=True)
    svc.sql(f"""CREATE TABLE {table} (id bigint PRIMARY KEY, account int NOT NULL,
      amount numeric(12,2), note text, created_at timestamptz NOT NULL DEFAULT now())""")
    svc.sql(f"""INSERT INTO {table} SELECT g, g % 1000, (g % 100000) / 100.0, 'note ' || g, now()
      FROM generate_series(1, {args.rows}) g""")
    svc.sql(f"VACUUM ANALYZE {table}")
    conninfo = svc.conninfo_for(args.transport)
    copy = ["psql", conninfo, "-X", "-q", "-c", f"COPY (SELECT * FROM {table}) TO STDOUT"]
    subprocess.run(copy, stdout=subprocess.DEVNULL, check=True)  # warm the cache
    # PostgreSQL's CPU (every backend, from the postmaster) for COPY and for walrelay's reads: what
    # the server spends per row, and with walrelay's and the broker's the whole machine's budget.
    pm = postmaster_pid(svc)
    pg0 = process_tree_cpu_s(pm) if pm else None
    t0 = time.monotonic()
    subprocess.run(copy, stdout=subprocess.DEVNULL, check=True)
    copy_s = time.monotonic() - t0
    copy_pg_cpu = process_tree_cpu_s(pm) - pg0 if pm else None
    mock = MockBroker(args.mock_broker, []) if args.broker == "mock" else None
    try:
        cfg = work / "walrelay.yaml"
        cfg.write_text(walrelay_yaml(prefix, conninfo, mock.bootstrap if mock else svc.kafka,
                                     f"  - name: public.{table}\n", work,
                                     "snapshot:\n  mode: initial_only\n" +
                                     ("events:\n  value_format: debezium\n" if args.debezium
                                      else ""), tuned=args.tuned))
        pg0 = process_tree_cpu_s(pm) if pm else None
        t0 = time.monotonic()
        proc = subprocess.Popen(shlex.split(os.environ.get("BENCH_WRAP", "")) +  # as above
                                [str(args.walrelay), "run", "--config", str(cfg)],
                                stdout=open(work / "walrelay.log", "w"), stderr=subprocess.STDOUT)
        usage = None
        while proc.poll() is None:  # initial_only: it exits once every row is acknowledged
            try:
                u = read_usage(proc.pid, per_thread=True)
                if u.peak_rss_mb > 0:  # 0: already a zombie (no memory figures left)
                    usage = u
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                break
            time.sleep(0.05)
        proc.wait()
        wall = time.monotonic() - t0
        time.sleep(0.2)  # the snapshot connections' backends exit and are reaped
        walrelay_pg_cpu = process_tree_cpu_s(pm) - pg0 if pm else None
        mock_cpu = read_usage(mock.proc.pid).cpu_s if mock else None
        if proc.returncode != 0:
            raise BenchError(f"walrelay snapshot exited {proc.returncode}: "
                             f"{(work / 'walrelay.log').read_text()[-2000:]}")
        read_s = snapshot_read_seconds(work / "walrelay.log")
        row = {"rows": args.rows, "broker": args.broker, "transport": args.transport,
               "repeat": rep, "copy_rows_s": round(args.rows / copy_s),
               "walrelay_rows_s": round(args.rows / wall),
               "walrelay_read_rows_s": round(args.rows / read_s) if read_s else None,
               "ratio_to_copy": ratio(copy_s, wall),
               "read_ratio_to_copy": ratio(copy_s, read_s) if read_s else None,
               "walrelay_cpu_us_per_row": round(1e6 * usage.cpu_s / args.rows, 2) if usage else None,
               "walrelay_peak_rss_mb": round(usage.peak_rss_mb, 1) if usage else None,
               "walrelay_threads_cpu_s": {k: round(v, 2) for k, v in usage.threads.items()}
               if usage else None,
               "copy_postgres_cpu_us_per_row": per_row_us(copy_pg_cpu, args.rows),
               "snapshot_postgres_cpu_us_per_row": per_row_us(walrelay_pg_cpu, args.rows),
               "mock_broker_cpu_us_per_row": per_row_us(mock_cpu, args.rows)}
        if args.debezium:
            d = debezium.snapshot(args, svc, prefix, table, work)
            row.update(d)
            row["walrelay_over_debezium"] = ratio(row["walrelay_rows_s"],
                                                  d["debezium_rows_s_from_start"])
            row["walrelay_over_debezium_records_only"] = ratio(
                row["walrelay_rows_s"], d["debezium_rows_s_first_to_last"])
        return row
    finally:
        if mock:
            mock.close()
        drop_slot(svc, f"{prefix}_wr")
        svc.sql(f"DROP TABLE IF EXISTS {table}")


# ----------------------------------------------------------------------------------------- main
def summarize(rows: list[dict], key_fields: list[str], value_fields: list[str]) -> list[dict]:
    """Median and range of each value field over the repetitions of one key."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get(k) for k in key_fields), []).append(r)
    out = []
    for key, rs in groups.items():
        s = dict(zip(key_fields, key))
        for f in value_fields:
            vals = [r[f] for r in rs if isinstance(r.get(f), (int, float))]
            if vals:
                s[f] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
        out.append(s)
    return out


def print_table(rows: list[dict], fields: list[str]):
    def cell(v):
        if isinstance(v, dict) and "median" in v:
            return (f"{v['median']:g} ({v['min']:g}–{v['max']:g})" if v["min"] != v["max"]
                    else f"{v['median']:g}")
        return str(v)
    print("| " + " | ".join(fields) + " |")
    print("|" + " --- |" * len(fields))
    for r in rows:
        print("| " + " | ".join(cell(r.get(f, "")) for f in fields) + " |")


def main() -> int:
    # SIGTERM ends the run like Ctrl-C: the finally blocks drop the run's slots and tables.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(prog="benchmarks/run.sh", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["ceiling", "mock", "kafka", "debezium", "latency", "memory",
                                     "snapshot", "backlog-snapshot"])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workloads", default="narrow,mixed,outbox",
                    help="comma list of narrow, mixed, outbox, bigtxn")
    ap.add_argument("--transport", choices=["tcp", "unix"], default="tcp")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--broker", choices=["mock", "kafka"], default="mock",
                    help="memory, snapshot and backlog-snapshot modes")
    ap.add_argument("--debezium", action="store_true", help="snapshot mode: Debezium too")
    ap.add_argument("--max-in-flight-events", help="kafka.max_in_flight_events (default: walrelay's)")
    ap.add_argument("--max-in-flight-bytes", help="kafka.max_in_flight_bytes, e.g. 32MiB")
    ap.add_argument("--tuned", action="store_true",
                    help=f"walrelay with kafka.properties {KAFKA_TUNING} (default: its defaults)")
    ap.add_argument("--rates", default="1000,10000,50000", help="latency mode, rows/s")
    ap.add_argument("--seconds", type=int, default=60, help="latency mode")
    ap.add_argument("--commits-per-second", type=int, default=100,
                    help="latency mode: transactions a second (each of rate/this rows)")
    ap.add_argument("--delivery", choices=["at_least_once", "exactly_once"],
                    default="at_least_once", help="walrelay's delivery mode")
    ap.add_argument("--idle-seconds", type=int, default=10, help="memory mode")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per measured run")
    ap.add_argument("--build", default=os.environ.get("BENCH_BUILD", "build/release"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    args = ap.parse_args()
    args.rates = [int(r) for r in args.rates.split(",")]
    os.environ["BENCH_DELIVERY"] = args.delivery
    for key in ("max_in_flight_events", "max_in_flight_bytes"):
        if getattr(args, key):
            os.environ[f"BENCH_{key.upper()}"] = getattr(args, key)
    args.walrelay = ROOT / args.build / "src/walrelay"
    args.mock_broker = ROOT / args.build / "benchmarks/mock_broker"
    # A directory of this run's own (a PID can be reused by a later run; it is kept, with
    # walrelay's logs, only when the run fails).
    args.work = tempfile.mkdtemp(prefix="walrelay-bench-")

    svc = Services()
    started = datetime.datetime.now(datetime.timezone.utc)
    meta = {"mode": args.mode, "started": started.isoformat(timespec="seconds"),
            "machine": f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at start",
            "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                     capture_output=True, text=True).stdout.strip(),
            "kafka_properties": KAFKA_TUNING if args.tuned else "walrelay's defaults", "options": {k: str(v) for k, v in vars(args).items()}}
    try:
        if args.mode in ("ceiling", "mock", "kafka", "debezium", "backlog-snapshot"):
            raw = []
            for wname in args.workloads.split(","):
                for rep in range(args.repeat):
                    if args.mode == "ceiling":
                        raw.append(ceiling(args, svc, wname, rep))
                    else:
                        raw.append(one_stream_run(args, svc, wname, rep))
                    print(f"  {wname} #{rep + 1}: {raw[-1]}", file=sys.stderr)
            fields = ["wal2json_ceiling_eps", "walrelay_eps", "ratio_to_wal2json_ceiling",
                      "walrelay_cpu_us_per_event", "walrelay_peak_rss_mb"]
            if args.mode in ("mock", "kafka", "debezium"):
                print("stream only (snapshot.mode: never): every figure is of streamed events")
            if args.mode == "backlog-snapshot":
                fields = ["wal2json_ceiling_eps", "backlog_s", "snapshot_done_s",
                          "peak_rss_mb_through_backlog", "peak_rss_mb_until_done",
                          "cpu_us_per_record"]
                print("a backlog of the workload while an incremental snapshot reads the same "
                      "table (walrelay's defaults); cpu_us_per_record: over streamed + snapshot "
                      "records")
            if args.mode == "debezium":
                fields += ["pgoutput_ceiling_eps", "debezium_eps_first_to_last",
                           "debezium_eps_from_start", "walrelay_over_debezium_warm",
                           "walrelay_over_debezium_cold", "walrelay_cpu_s_total",
                           "debezium_cpu_s", "debezium_over_walrelay_cpu",
                           "debezium_peak_rss_mb"]
            if args.mode == "ceiling":
                fields = ["wal2json_ceiling_eps", "pgoutput_ceiling_eps"]
            summary = summarize(raw, ["workload", "transport"], fields)
            print_table(summary, ["workload", "transport"] + fields)
        elif args.mode == "latency":
            raw = latency(args, svc)
            summary = raw
            print_table(raw, ["rate_rows_s", "commits_s", "delivery", "seconds", "events", "p50_ms",
                              "p99_ms", "max_ms"])
        elif args.mode == "memory":
            raw = summary = memory(args, svc)
            print_table(raw, ["broker", "rows_in_one_transaction", "idle_rss_mb", "peak_rss_mb"])
        else:
            raw = [snapshot(args, svc, rep) for rep in range(args.repeat)]
            fields = ["copy_rows_s", "walrelay_rows_s", "walrelay_read_rows_s", "ratio_to_copy",
                      "read_ratio_to_copy", "walrelay_cpu_us_per_row",
                      "walrelay_peak_rss_mb", "copy_postgres_cpu_us_per_row",
                      "snapshot_postgres_cpu_us_per_row", "mock_broker_cpu_us_per_row"]
            if args.debezium:
                fields += ["debezium_rows_s_from_start", "debezium_rows_s_first_to_last",
                           "walrelay_over_debezium", "walrelay_over_debezium_records_only",
                           "debezium_cpu_s", "debezium_peak_rss_mb"]
            summary = summarize(raw, ["rows", "broker", "transport"], fields)
            print_table(summary, ["rows", "broker", "transport"] + fields)
        meta["machine"] += f", load {os.getloadavg()[0]:.2f} at end"
        out = Path(args.out) / f"{started:%Y%m%dT%H%M%S}-{args.mode}-{args.transport}.json"
        write_json(out, {"meta": meta, "summary": summary, "runs": raw})
        print(f"\nwritten: {out}")
        shutil.rmtree(args.work, ignore_errors=True)
        return 0
    except BenchError as e:
        print(f"benchmark failed: {e}", file=sys.stderr)
        return 1
    finally:
        svc.close()


def ceiling(args, svc: Services, wname: str, rep: int) -> dict:
    """Both plugins' decode rate of one workload's WAL (no walrelay)."""
    w = WORKLOADS[wname]
    prefix = f"b{os.getpid()}_c{w.name[0]}{rep}"
    table = f"{prefix}_{w.name}"
    svc.sql(w.ddl(prefix))
    svc.sql(f"CREATE PUBLICATION {prefix}_pub FOR TABLE {table}")
    slots = [(f"{prefix}_ceil", "wal2json"), (f"{prefix}_pgo", "pgoutput")]
    for slot, plugin in slots:
        svc.sql(f"SELECT 1 FROM pg_create_logical_replication_slot('{slot}', '{plugin}')")
    try:
        svc.script(w.writer(prefix, args.rows))
        end_lsn = svc.sql("SELECT pg_current_wal_lsn()")
        events = w.events(args.rows)
        a = recvlogical(svc, args.transport, f"{prefix}_ceil", end_lsn, "wal2json",
                        [("add-tables", f"public.{table}")])
        b = recvlogical(svc, args.transport, f"{prefix}_pgo", end_lsn, "pgoutput",
                        [("proto_version", "1"), ("publication_names", f"{prefix}_pub")])
        return {"workload": wname, "transport": args.transport, "events": events, "repeat": rep,
                "wal2json_ceiling_eps": round(events / a.wall_s),
                "pgoutput_ceiling_eps": round(events / b.wall_s)}
    finally:
        for slot, _ in slots:
            drop_slot(svc, slot)
        svc.sql(f"DROP PUBLICATION IF EXISTS {prefix}_pub")
        svc.sql(f"DROP TABLE IF EXISTS {table}")


if __name__ == "__main__":
    sys.exit(main())
