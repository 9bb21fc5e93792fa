"""Building blocks of the benchmark harness (benchmarks/run.sh): services, SQL, processes.

Benchmark tooling only (nothing of the product). Every figure comes from /proc and wall clocks of
this machine; nothing here asserts a speed.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HZ = os.sysconf("SC_CLK_TCK")


class BenchError(RuntimeError):
    pass


# ------------------------------------------------------------------------------------ services
class Services:
    """PostgreSQL + Kafka: the ones named by WALRELAY_TEST_* or a fresh pair (tests/services)."""

    def __init__(self, need_kafka: bool = True):
        self.state = None
        if not os.environ.get("WALRELAY_TEST_PG_CONNINFO") or (
            need_kafka and not os.environ.get("WALRELAY_TEST_KAFKA_BOOTSTRAP")):
            self.state = tempfile.mkdtemp(prefix="walrelay-bench.")
            os.chmod(self.state, 0o755)
            subprocess.run([str(ROOT / "tests/services/start.sh"), self.state], check=True,
                           stdout=subprocess.DEVNULL)
            for line in Path(self.state, "env").read_text().splitlines():
                m = re.match(r'export (\w+)="(.*)"', line)
                if m:
                    os.environ[m.group(1)] = m.group(2)
        self.conninfo = os.environ["WALRELAY_TEST_PG_CONNINFO"]
        self.kafka = os.environ.get("WALRELAY_TEST_KAFKA_BOOTSTRAP", "")
        # The unix-socket form of the same database (transport "unix").
        sockdir = self.sql("SHOW unix_socket_directories").split(",")[0].strip()
        self.unix_conninfo = re.sub(r"host=\S+", f"host={sockdir}", self.conninfo)

    def conninfo_for(self, transport: str) -> str:
        return self.unix_conninfo if transport == "unix" else self.conninfo

    def sql(self, query: str, conninfo: str | None = None) -> str:
        r = subprocess.run(["psql", conninfo or self.conninfo, "-X", "-q", "-At", "-v",
                            "ON_ERROR_STOP=1", "-c", query], capture_output=True, text=True)
        if r.returncode != 0:
            raise BenchError(f"psql: {r.stderr.strip()}\n  in: {query[:200]}")
        return r.stdout.strip()

    def script(self, sql: str, conninfo: str | None = None):
        """Runs a psql script (statements one after the other, not in one transaction)."""
        r = subprocess.run(["psql", conninfo or self.conninfo, "-X", "-q", "-v", "ON_ERROR_STOP=1",
                            "-f", "-"], input=sql, capture_output=True, text=True)
        if r.returncode != 0:
            raise BenchError(f"psql: {r.stderr.strip()}\n  in: {sql[:300]}")

    def param(self, key: str) -> str:
        m = re.search(rf"{key}=(\S+)", self.conninfo)
        return m.group(1) if m else ""

    def close(self):
        if self.state:
            subprocess.run([str(ROOT / "tests/services/stop.sh"), "--clean", self.state],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.state = None


class MockBroker:
    """benchmarks/mock_broker: a librdkafka mock cluster in a process of its own."""

    def __init__(self, binary: Path, topics: list[str]):
        args = [str(binary)]
        for t in topics:
            args += ["--topic", t]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.bootstrap = self.proc.stdout.readline().strip()
        if not self.bootstrap:
            raise BenchError("mock_broker printed no bootstrap servers")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# ----------------------------------------------------------------------------------- processes
@dataclass
class Usage:
    """What a process used: wall seconds, CPU seconds (user + system, all threads), peak RSS."""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    user_s: float = 0.0
    sys_s: float = 0.0
    peak_rss_mb: float = 0.0
    threads: dict = field(default_factory=dict)  # thread kind → CPU seconds


def read_usage(pid: int, per_thread: bool = False) -> Usage:
    """CPU and peak RSS of a live process from /proc (call it before the process exits)."""
    u = Usage()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    u.user_s, u.sys_s = int(fields[11]) / HZ, int(fields[12]) / HZ
    u.cpu_s = u.user_s + u.sys_s
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            u.peak_rss_mb = int(line.split()[1]) / 1024
    if per_thread:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                name = re.sub(r"\d+$", "", (task / "comm").read_text().strip())
                f = (task / "stat").read_text().rsplit(")", 1)[1].split()
                u.threads[name] = u.threads.get(name, 0.0) + (int(f[11]) + int(f[12])) / HZ
            except (FileNotFoundError, ProcessLookupError):
                pass
    return u


def process_tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process, its reaped children (cutime, cstime) and its live children: for
    the postmaster, every backend's CPU, including those of connections already closed. Read it
    before and after a run; the difference includes whatever else used the server meanwhile."""
    def stat(p) -> list[str]:
        return Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
    f = stat(pid)
    total = sum(int(x) for x in f[11:15])
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            g = stat(d.name)
            if int(g[1]) == pid:
                total += int(g[11]) + int(g[12])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            pass
    return total / HZ


def postmaster_pid(svc) -> int | None:
    """The local server's postmaster PID (from postmaster.pid), None when it is not readable."""
    try:
        data = svc.sql("SHOW data_directory").strip()
        return int((Path(data) / "postmaster.pid").read_text().split()[0])
    except (BenchError, OSError, ValueError, IndexError, subprocess.CalledProcessError):
        return None


def current_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def wait_for(predicate, proc: subprocess.Popen | None, timeout_s: float, what: str,
             log: Path | None = None, step_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            raise BenchError(f"{what}: process exited with {proc.returncode}\n{tail}")
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: timed out after {timeout_s:.0f}s")
        time.sleep(step_s)


def stop(proc: subprocess.Popen, sig=signal.SIGTERM, timeout_s: float = 30):
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ----------------------------------------------------------------------------------------- slots
def lsn_int(lsn: str) -> int:
    hi, lo = lsn.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def confirmed_at_least(svc: Services, slot: str, lsn: str) -> bool:
    return svc.sql(f"SELECT coalesce(confirmed_flush_lsn >= '{lsn}', false) FROM "
                   f"pg_replication_slots WHERE slot_name = '{slot}'") == "t"


def drop_slot(svc: Services, slot: str):
    svc.sql(f"SELECT pg_drop_replication_slot('{slot}') FROM pg_replication_slots "
            f"WHERE slot_name = '{slot}' AND NOT active")


WAL2JSON_OPTIONS = [  # as walrelay asks for them (src/replication)
    ("format-version", "2"), ("include-xids", "1"), ("include-timestamp", "1"),
    ("include-lsn", "1"), ("include-pk", "1"), ("include-transaction", "1"),
    ("include-type-oids", "1"), ("include-types", "0")]


def recvlogical(svc: Services, transport: str, slot: str, end_lsn: str, plugin: str,
                extra: list[tuple[str, str]]) -> Usage:
    """PostgreSQL's own decode of a slot up to `end_lsn` with pg_recvlogical to /dev/null: the
    ceiling any consumer of that plugin can reach over that transport."""
    conninfo = svc.conninfo_for(transport)
    args = ["pg_recvlogical", "-d", conninfo, "--slot", slot, "--start", "-f", "/dev/null",
            "-E", end_lsn, "--no-loop", "-F", "1", "-s", "1"]
    opts = (WAL2JSON_OPTIONS if plugin == "wal2json" else []) + extra
    for k, v in opts:
        args += ["-o", f"{k}={v}"]
    t0 = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True)
    u = Usage(wall_s=time.monotonic() - t0)
    if r.returncode != 0:
        raise BenchError(f"pg_recvlogical: {r.stderr.strip()}")
    return u


def write_json(path: Path, data: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def kcat_count(bootstrap: str, topic: str) -> int:
    """Records in a fresh topic: the sum of its partitions' high watermarks."""
    r = subprocess.run(["kcat", "-b", bootstrap, "-L", "-t", topic, "-J"], capture_output=True,
                       text=True)
    try:
        parts = json.loads(r.stdout)["topics"][0]["partitions"]
    except (ValueError, KeyError, IndexError):
        return 0
    total = 0
    for p in parts:
        q = subprocess.run(["kcat", "-b", bootstrap, "-Q", "-t",
                            f"{topic}:{p['partition']}:-1"], capture_output=True, text=True)
        m = re.search(r"(-?\d+)\s*$", q.stdout.strip())
        total += max(0, int(m.group(1))) if m else 0
    return total


def which(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise BenchError(f"{name} not found")
    return path
