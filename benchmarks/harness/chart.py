"""benchmarks/chart.sh [RESULTS_DIR]: PNG charts from benchmarks/run.sh's JSON (the newest file of
each mode and transport in RESULTS_DIR, default benchmarks/results/):

  throughput.png  events/s per system and workload (medians): PostgreSQL's decode ceilings
                  (wal2json, pgoutput), walrelay to the mock broker and to Kafka, Debezium
  latency.png     commit → consumer latency p50 / p99 / max per commit rate

Needs matplotlib (pip install matplotlib); benchmark tooling only.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("chart: matplotlib is missing (pip install matplotlib)")

ROOT = Path(__file__).resolve().parents[2]


def newest(results: Path) -> dict[tuple[str, str], dict]:
    """The newest result of each (mode, transport), runs with walrelay's default settings only."""
    found: dict[tuple[str, str], dict] = {}
    for f in sorted(results.glob("*.json")):  # names start with the UTC start time
        d = json.loads(f.read_text())
        if d["meta"].get("options", {}).get("tuned") == "True":
            continue  # the charts show walrelay's defaults
        found[(d["meta"]["mode"], f.stem.rsplit("-", 1)[-1])] = d
    return found


def med(row: dict, field: str):
    v = row.get(field)
    return v["median"] if isinstance(v, dict) else v


def throughput(found: dict, out: Path) -> bool:
    series: dict[str, dict[str, float]] = {}  # label → workload → events/s

    def put(label, workload, value):
        if value:
            series.setdefault(label, {})[workload] = value
    for (mode, transport), d in found.items():
        for r in d["summary"]:
            w = r.get("workload")
            if w is None:
                continue
            if mode in ("mock", "kafka", "debezium", "ceiling"):
                put(f"wal2json ceiling ({transport})", w, med(r, "wal2json_ceiling_eps"))
            if mode in ("debezium", "ceiling"):
                put(f"pgoutput ceiling ({transport})", w, med(r, "pgoutput_ceiling_eps"))
            if mode in ("mock", "kafka"):
                put(f"walrelay → {mode} ({transport})", w, med(r, "walrelay_eps"))
            if mode == "debezium":
                put(f"walrelay → kafka, debezium format ({transport})", w, med(r, "walrelay_eps"))
                put(f"Debezium 3.6 → kafka, warm ({transport})", w,
                    med(r, "debezium_eps_first_to_last"))
    if not series:
        return False
    workloads = sorted({w for s in series.values() for w in s})
    labels = sorted(series)
    fig, ax = plt.subplots(figsize=(11, 5.5))
    width = 0.8 / len(labels)
    for i, label in enumerate(labels):
        xs = [j + i * width for j in range(len(workloads))]
        ax.bar(xs, [series[label].get(w, 0) for w in workloads], width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(workloads))], workloads)
    ax.set_ylabel("events/s (median)")
    ax.set_title("Throughput per workload (benchmarks/run.sh)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return True


def latency(found: dict, out: Path) -> bool:
    runs = [d for (mode, _), d in found.items() if mode == "latency"]
    if not runs:
        return False
    rows = runs[-1]["summary"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    rates = [str(r["rate_rows_s"]) for r in rows]
    for j, p in enumerate(["p50_ms", "p99_ms", "max_ms"]):
        ax.bar([i + j * 0.27 for i in range(len(rows))], [r[p] for r in rows], 0.27, label=p)
    ax.set_xticks([i + 0.27 for i in range(len(rows))], rates)
    ax.set_xlabel("commit rate, rows/s")
    ax.set_ylabel("commit → consumer, ms")
    ax.set_yscale("log")
    ax.set_title("walrelay latency (benchmarks/run.sh latency)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return True


def main() -> int:
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "benchmarks/results"
    found = newest(results)
    for name, fn in (("throughput.png", throughput), ("latency.png", latency)):
        if fn(found, results / name):
            print(f"written: {results / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
