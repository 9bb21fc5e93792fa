"""Debezium 3.6.1 beside walrelay: Kafka Connect standalone started with tests/debezium/connect.sh
(jars from Maven Central, cached), pgoutput, JsonConverter without schemas. JVM options:
WALRELAY_CONNECT_JVM_OPTS, default "-Xmx2g" here (the JVM's own GC choice).

Debezium's run ends when its topic holds every record it must publish (a fresh topic: the sum of
the partitions' high watermarks); its CPU and peak RSS are the Connect JVM's, from /proc.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from bench import ROOT, BenchError, Services, kcat_count, read_usage

CONNECT = ROOT / "tests/debezium/connect.sh"


def _records(workload, rows: int) -> int:
    """Records Debezium publishes for a workload: a DELETE is an event and a tombstone."""
    if workload.name == "mixed":
        return (rows // 10) * 11
    if workload.outbox:
        raise BenchError("the outbox workload needs Debezium's EventRouter SMT: not compared")
    return rows


def _run(svc: Services, work: Path, props: dict, topic: str, expected: int,
         timeout_s: float) -> dict:
    state = work / "connect"
    state.mkdir(exist_ok=True)
    worker = work / "worker.properties"
    worker.write_text(
        f"bootstrap.servers={svc.kafka}\n"
        "key.converter=org.apache.kafka.connect.json.JsonConverter\n"
        "value.converter=org.apache.kafka.connect.json.JsonConverter\n"
        "key.converter.schemas.enable=false\nvalue.converter.schemas.enable=false\n"
        f"offset.storage.file.filename={work}/offsets\noffset.flush.interval.ms=10000\n"
        "listeners=http://127.0.0.1:0\n")
    connector = work / "debezium.properties"
    base = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "127.0.0.1", "database.port": svc.param("port"),
            "database.user": svc.param("user"), "database.password": "unused",
            "database.dbname": svc.param("dbname"), "plugin.name": "pgoutput"}
    base.update(props)
    connector.write_text("".join(f"{k}={v}\n" for k, v in base.items()))
    env = dict(os.environ)
    env.setdefault("WALRELAY_CONNECT_JVM_OPTS", "-Xmx2g")
    t0 = time.monotonic()
    subprocess.run([str(CONNECT), "start", str(state), str(worker), str(connector)], check=True,
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = int((state / "connect.pid").read_text())
    first = None
    usage = None
    try:
        while True:
            n = kcat_count(svc.kafka, topic)
            now = time.monotonic()
            if first is None and n > 0:
                first = now
            try:
                usage = read_usage(pid)
            except (FileNotFoundError, ProcessLookupError):
                raise BenchError("the Connect JVM exited: " +
                                 (state / "connect.log").read_text()[-3000:])
            if n >= expected:
                break
            if now - t0 > timeout_s:
                raise BenchError(f"Debezium: {n} of {expected} records after {timeout_s:.0f}s")
            time.sleep(0.2)
        end = time.monotonic()
    finally:
        subprocess.run([str(CONNECT), "stop", str(state)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return {"from_start_s": end - t0, "first_to_last_s": end - (first or t0),
            "cpu_s": usage.cpu_s, "peak_rss_mb": usage.peak_rss_mb,
            "jvm_opts": env["WALRELAY_CONNECT_JVM_OPTS"]}


def stream(args, svc: Services, prefix: str, table: str, workload, work: Path) -> dict:
    """Debezium streaming the workload from its pgoutput slot `<prefix>_dbz` (made before the
    workload) and publication `<prefix>_pub`; no snapshot (snapshot.mode=no_data)."""
    expected = _records(workload, args.rows)
    r = _run(svc, work, {
        "name": f"{prefix}_dbz", "topic.prefix": f"{prefix}_dbz", "slot.name": f"{prefix}_dbz",
        "publication.name": f"{prefix}_pub", "publication.autocreate.mode": "disabled",
        "table.include.list": f"public.{table}", "snapshot.mode": "no_data"},
        f"{prefix}_dbz.public.{table}", expected, args.timeout)
    events = workload.events(args.rows)
    return {"debezium_records": expected,
            "debezium_eps_from_start": round(events / r["from_start_s"]),
            "debezium_eps_first_to_last": round(events / r["first_to_last_s"]),
            "debezium_cpu_s": round(r["cpu_s"], 2),
            "debezium_cpu_us_per_event": round(1e6 * r["cpu_s"] / events, 2),
            "debezium_peak_rss_mb": round(r["peak_rss_mb"], 1), "debezium_jvm_opts": r["jvm_opts"]}


def snapshot(args, svc: Services, prefix: str, table: str, work: Path) -> dict:
    """Debezium's initial snapshot of `table` (snapshot.mode=initial_only) to the local Kafka."""
    r = _run(svc, work, {
        "name": f"{prefix}_dbz", "topic.prefix": f"{prefix}_dbz", "slot.name": f"{prefix}_dbz",
        "publication.name": f"{prefix}_dbzpub", "publication.autocreate.mode": "filtered",
        "table.include.list": f"public.{table}", "snapshot.mode": "initial_only"},
        f"{prefix}_dbz.public.{table}", args.rows, args.timeout)
    svc.sql(f"SELECT pg_drop_replication_slot('{prefix}_dbz') FROM pg_replication_slots "
            f"WHERE slot_name = '{prefix}_dbz' AND NOT active")
    svc.sql(f"DROP PUBLICATION IF EXISTS {prefix}_dbzpub")
    return {"debezium_rows_s_from_start": round(args.rows / r["from_start_s"]),
            "debezium_rows_s_first_to_last": round(args.rows / r["first_to_last_s"]),
            "debezium_cpu_s": round(r["cpu_s"], 2), "debezium_peak_rss_mb": round(r["peak_rss_mb"], 1),
            "debezium_jvm_opts": r["jvm_opts"]}
