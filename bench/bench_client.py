"""What users see: latency and throughput through the real CLI and client library.

Every figure runs the ``replog`` CLI as a child process (``python -m admin.cli``) against a
``LocalCluster`` of real processes (ZooKeeper, one controller, three brokers with two log dirs
each) shaped like a real one: besides the measured topics, idle RF 3 topics of 12 and 24
partitions, so the brokers' fetchers and the consumers' Fetches carry many partitions per
leader. Nothing is asserted; tables (target beside each figure) and one JSON line per figure
are printed and saved to ``bench/results/client.json``.

(a) End-to-end latency, ``replog e2e-latency`` (kafka-e2e-latency): acks=all, RF 3
    (min.insync.replicas=2), a 60-partition topic with leadership spread over the brokers, 100 B
    records at a fixed 20 rec/s, and 1 KiB records at 50% of the peak rate that (b) measured for
    acks=all RF 3 with default batches in the same round (open loop: records are sent on
    schedule, not after the previous one arrived). p50/p99/p99.9/max are medians over rounds.
(b) Produce throughput, ``replog produce`` perf mode (kafka-producer-perf-test), 1 KiB records,
    unthrottled: acks=all RF 3 against acks=1 RF 1, with batch.size 16384 (default) and 65536,
    interleaved in each round (order rotated per round); the RF 3 / RF 1 ratio is the median of
    the per-round ratios. Both topics have 60 partitions all led by broker 1 (RF 3: followed by
    brokers 2 and 3), so CPU seconds per GB can be split by role: client (the CLI process,
    from getrusage of the waited-for child), leader (broker 1) and followers (brokers 2 + 3),
    from their own CPU times (psutil) before and after; controller + ZooKeeper apart. The
    client figure is net of the CLI's start-up CPU (a one-record run in the same round,
    printed). MB/s and GB are decimal over acknowledged record values (records/s from Kafka's
    line x 1024 B).
(c) Consumer throughput, ``replog consume --messages N`` (kafka-consumer-perf-test) from the
    beginning of the RF 3 throughput topic (60 partitions), CPU split the same way.

Before each run the page cache's dirty data is written back (``sync``, ``settle_writeback``),
so that one figure's writes are not flushed by the kernel in the middle of the next figure.

Run: ``python -m bench client [--quick] [--runs N] [--data-dir DIR]``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from bench import GB, MB, json_line, log, machine_info, median, save_results
from bench.harness import rotating_assignment, start_cluster, zk_pid
from bench.harness.cpu import PhaseCpu
from client import AdminClient
from harness.local_cluster import LocalCluster

NAME = "client"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD_BYTES = 1024
LATENCY_RECORD_BYTES = 100
LOW_RATE = 20.0
PARTITIONS = 60
IDLE_TOPICS = {"idle-orders": 12, "idle-events": 24}
BATCH_SIZES = (16384, 65536)

TARGET_P99_LOW_MS = 10.0
TARGET_RF3_64K_MB_S = 60.0
TARGET_RATIO = 0.6


@dataclass
class Plan:
    rounds: int
    low_rate_records: int
    half_peak_seconds: float
    produce_records: int


FULL = Plan(rounds=3, low_rate_records=400, half_peak_seconds=6.0, produce_records=60000)
QUICK = Plan(rounds=1, low_rate_records=100, half_peak_seconds=3.0, produce_records=15000)


# ============================================================================ plumbing

class Roles(PhaseCpu):
    """CPU meters for the roles of (b)/(c): leader = broker 1, followers = brokers 2 and 3,
    other = controller + ZooKeeper; the client is the CLI child."""

    def __init__(self, c: LocalCluster):
        super().__init__({
            "leader": [c.broker(1).pid],
            "followers": [c.broker(b).pid for b in c.brokers if b != 1],
            "other": [h.pid for h in c.controllers.values()] + [zk_pid(c)],
        })


def replog_cli(*args: str, timeout: float = 600.0) -> tuple[str, float]:
    """Run ``replog ARGS`` as a child process; (stdout, wall seconds). A failure raises with
    the command's stderr."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "admin.cli", *args], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"replog {' '.join(args[:1])} failed ({p.returncode}): "
                           f"{p.stderr.strip()[-500:]}")
    return p.stdout, wall


def per_gb(cpu: dict[str, float], nbytes: int) -> dict[str, float]:
    gb = nbytes / GB if nbytes else float("nan")
    return {k: round(v / gb, 2) for k, v in cpu.items()}


# ============================================================================ figures

_PERF_LINE = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), "
                        r"([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, "
                        r"(\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th\.")


def startup_cpu(c: LocalCluster, topic: str) -> float:
    """CPU seconds of a ``replog produce`` that sends one record: interpreter start-up,
    imports, metadata and channel set-up. Subtracted from the client's figure so that CPU s/GB
    is the per-byte cost (over tens of MB, start-up would otherwise be a large share)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    replog_cli("produce", "--bootstrap-server", c.bootstrap_servers, "--topic", topic,
               "--num-records", "1", "--record-size", str(RECORD_BYTES))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def produce_run(c: LocalCluster, topic: str, acks: str, batch_size: int, n: int,
                baseline: float, props: tuple[str, ...] = ()) -> dict:
    """One ``replog produce`` perf run; ``props``: more ``--producer-props`` (key=value)."""
    roles = Roles(c)
    roles.start()
    out, wall = replog_cli("produce", "--bootstrap-server", c.bootstrap_servers, "--topic",
                           topic, "--num-records", str(n), "--record-size", str(RECORD_BYTES),
                           "--throughput", "-1", "--producer-props", f"acks={acks}",
                           f"batch.size={batch_size}", *props)
    cpu = roles.stop()
    cpu["client"] = max(cpu["client"] - baseline, 0.0)
    m = _PERF_LINE.search(out)
    if m is None:
        raise RuntimeError(f"no perf summary line in: {out[-300:]}")
    sent, rec_s = int(m.group(1)), float(m.group(2))
    nbytes = sent * RECORD_BYTES
    return {"records": sent, "records_s": rec_s, "mb_s": rec_s * RECORD_BYTES / MB,
            "avg_latency_ms": float(m.group(4)), "p99_latency_ms": int(m.group(8)),
            "wall_s": wall, "cpu_s": cpu, "cpu_s_per_gb": per_gb(cpu, nbytes)}


_CONSUME_LINE = re.compile(r"^[\d-]+ [\d:]+, [\d-]+ [\d:]+, ([\d.]+), ([\d.]+), (\d+), "
                           r"([\d.]+), (\d+), (\d+), ([\d.]+), ([\d.]+)$", re.MULTILINE)


def consume_run(c: LocalCluster, topic: str, n: int, baseline: float) -> dict:
    roles = Roles(c)
    roles.start()
    out, wall = replog_cli("consume", "--bootstrap-server", c.bootstrap_servers, "--topic",
                           topic, "--messages", str(n), "--timeout", "30000")
    cpu = roles.stop()
    cpu["client"] = max(cpu["client"] - baseline, 0.0)
    m = _CONSUME_LINE.search(out)
    if m is None:
        raise RuntimeError(f"no consumer-perf line in: {out[-300:]}")
    nmsg = int(m.group(3))
    mib = float(m.group(1))
    nbytes = int(mib * 1024 * 1024)
    fetch_s = int(m.group(6)) / 1000
    return {"records": nmsg, "mb_s": nbytes / MB / max(fetch_s, 1e-9),
            "records_s": float(m.group(8)), "rebalance_ms": int(m.group(5)), "wall_s": wall,
            "cpu_s": cpu, "cpu_s_per_gb": per_gb(cpu, nbytes)}


_E2E_P = re.compile(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+), 99\.9th = ([\d.]+)")
_E2E_AVG = re.compile(r"Avg latency: ([\d.]+) ms")
_E2E_MAX = re.compile(r"Max latency: ([\d.]+) ms")


def e2e_run(c: LocalCluster, topic: str, rate: float, n: int, size: int) -> dict:
    t = time.perf_counter()
    out, wall = replog_cli("e2e-latency", "--bootstrap-server", c.bootstrap_servers, "--topic",
                           topic, "--num-records", str(n), "--record-size", str(size),
                           "--producer-acks", "all", "--throughput", f"{rate:.1f}")
    p = _E2E_P.search(out)
    if p is None:
        raise RuntimeError(f"no Percentiles line in: {out[-300:]}")
    return {"rate": round(rate, 1), "records": n, "record_bytes": size,
            "p50_ms": float(p.group(1)), "p99_ms": float(p.group(2)),
            "p999_ms": float(p.group(3)), "avg_ms": float(_E2E_AVG.search(out).group(1)),
            "max_ms": float(_E2E_MAX.search(out).group(1)), "wall_s": wall,
            "took_s": time.perf_counter() - t}


async def create_topics(c: LocalCluster) -> None:
    async with AdminClient(c.bootstrap_servers, default_api_timeout_ms=120000) as admin:
        await admin.create_topic("lat60", replica_assignment=rotating_assignment(PARTITIONS, 3),
                                 configs={"min.insync.replicas": "2"})
        await admin.create_topic("tput-rf3", replica_assignment={p: [1, 2, 3]
                                                                  for p in range(PARTITIONS)},
                                 configs={"min.insync.replicas": "2"})
        await admin.create_topic("tput-rf1", replica_assignment={p: [1]
                                                                  for p in range(PARTITIONS)})
        for name, n in IDLE_TOPICS.items():
            await admin.create_topic(name, replica_assignment=rotating_assignment(n, 3))


def settle_writeback() -> float:
    """Write the page cache's dirty data back before a figure starts (``sync``); returns the
    MB that were dirty. The kernel writes dirty pages back ~30 s after they were written
    (vm.dirty_expire_centisecs), so without this the throughput runs of one round were written
    back during the next round's figures: a 900 MB burst landing in an e2e run at 20 rec/s
    gave p99 68 ms against 7.8 after a sync (docs/profiles). Each figure then measures its own
    workload, not the previous one's writeback."""
    dirty = 0.0
    # psutil.virtual_memory() has no Dirty or Writeback field (total, available, used, free,
    # active, inactive, buffers, cached, shared, slab), so they are read from /proc/meminfo.
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(("Dirty:", "Writeback:")):
                    dirty += int(line.split()[1]) / 1024
    except OSError:
        pass
    os.sync()
    return round(dirty, 1)


def _rotate(items: list, r: int) -> list:
    k = r % len(items)
    return items[k:] + items[:k]


def run_rounds(c: LocalCluster, plan: Plan) -> dict:
    variants = [(f"rf{rf}_b{bs // 1024}k", topic, acks, bs)
                for bs in BATCH_SIZES
                for rf, topic, acks in ((3, "tput-rf3", "all"), (1, "tput-rf1", "1"))]
    produce: dict[str, list[dict]] = {v[0]: [] for v in variants}
    consume: list[dict] = []
    low: list[dict] = []
    half: list[dict] = []
    baselines: list[float] = []
    for r in range(plan.rounds):
        baseline = startup_cpu(c, "tput-rf1")
        baselines.append(baseline)
        for key, topic, acks, bs in _rotate(variants, r):
            settle_writeback()
            s = produce_run(c, topic, acks, bs, plan.produce_records, baseline)
            produce[key].append(s)
            log(f"[client] round {r + 1}/{plan.rounds} produce {key}: {s['mb_s']:.1f} MB/s, "
                f"CPU s/GB {s['cpu_s_per_gb']}")
        settle_writeback()
        s = consume_run(c, "tput-rf3", plan.produce_records, baseline)
        consume.append(s)
        log(f"[client] round {r + 1}/{plan.rounds} consume: {s['mb_s']:.1f} MB/s, "
            f"CPU s/GB {s['cpu_s_per_gb']}")
        dirty = settle_writeback()
        s = e2e_run(c, "lat60", LOW_RATE, plan.low_rate_records, LATENCY_RECORD_BYTES)
        s["dirty_mb_synced_before"] = dirty
        low.append(s)
        log(f"[client] round {r + 1}/{plan.rounds} e2e at {LOW_RATE:.0f} rec/s: p50 "
            f"{s['p50_ms']} p99 {s['p99_ms']} p99.9 {s['p999_ms']} ms")
        peak = produce["rf3_b16k"][-1]["records_s"]
        rate = max(peak / 2, LOW_RATE)
        settle_writeback()
        s = e2e_run(c, "lat60", rate, max(100, int(rate * plan.half_peak_seconds)),
                    RECORD_BYTES)
        half.append(s)
        log(f"[client] round {r + 1}/{plan.rounds} e2e at {rate:.0f} rec/s (50% of peak): "
            f"p50 {s['p50_ms']} p99 {s['p99_ms']} p99.9 {s['p999_ms']} ms")
    return {"produce": produce, "consume": consume, "e2e_low": low, "e2e_half_peak": half,
            "client_startup_cpu_s": baselines}


def _med(rows: list[dict], key: str) -> float:
    return round(median(r[key] for r in rows), 2)


def _med_cpu(rows: list[dict]) -> dict[str, float]:
    return {k: round(median(r["cpu_s_per_gb"][k] for r in rows), 2)
            for k in rows[0]["cpu_s_per_gb"]}


def summarize_rounds(raw: dict) -> dict:
    out: dict = {"produce": {}, "ratios": {}}
    for key, rows in raw["produce"].items():
        out["produce"][key] = {"mb_s": _med(rows, "mb_s"),
                               "mb_s_min": round(min(r["mb_s"] for r in rows), 2),
                               "mb_s_max": round(max(r["mb_s"] for r in rows), 2),
                               "records_s": _med(rows, "records_s"),
                               "avg_latency_ms": _med(rows, "avg_latency_ms"),
                               "cpu_s_per_gb": _med_cpu(rows), "runs": len(rows)}
    for bs in BATCH_SIZES:
        k3, k1 = f"rf3_b{bs // 1024}k", f"rf1_b{bs // 1024}k"
        out["ratios"][f"b{bs // 1024}k"] = round(median(
            a["mb_s"] / b["mb_s"] for a, b in zip(raw["produce"][k3], raw["produce"][k1])), 3)
    out["client_startup_cpu_s"] = round(median(raw["client_startup_cpu_s"]), 3)
    c = raw["consume"]
    out["consume"] = {"mb_s": _med(c, "mb_s"), "records_s": _med(c, "records_s"),
                      "cpu_s_per_gb": _med_cpu(c), "runs": len(c)}
    for k in ("e2e_low", "e2e_half_peak"):
        rows = raw[k]
        out[k] = {m: _med(rows, m) for m in ("rate", "p50_ms", "p99_ms", "p999_ms", "avg_ms",
                                             "max_ms")}
        out[k].update(records=rows[0]["records"], record_bytes=rows[0]["record_bytes"],
                      runs=len(rows))
    return out


# ============================================================================ main

def main(opts: argparse.Namespace | None = None) -> dict:
    opts = opts or argparse.Namespace(quick=False, runs=None, data_dir=None)
    plan = QUICK if opts.quick else FULL
    if opts.runs:
        plan.rounds = opts.runs
    parent = opts.data_dir or "/tmp"
    os.makedirs(parent, exist_ok=True)
    root = tempfile.mkdtemp(prefix="replog-bench-client-", dir=parent)
    started = time.time()
    results: dict = {"bench": NAME, "quick": bool(opts.quick),
                     "when": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
                     "machine": machine_info(parent),
                     "targets": {"e2e_p99_20rps_ms": TARGET_P99_LOW_MS,
                                 "rf3_64k_mb_s": TARGET_RF3_64K_MB_S,
                                 "ratio_rf3_rf1": TARGET_RATIO}}
    c = start_cluster(root, "client")
    try:
        import asyncio
        asyncio.run(create_topics(c))
        raw = run_rounds(c, plan)
    finally:
        c.stop(graceful=False)
        shutil.rmtree(root, ignore_errors=True)
    results["figures"] = summarize_rounds(raw)
    results["raw"] = raw
    results["took_s"] = round(time.time() - started, 1)
    _print(results, plan)
    print(f"# saved {save_results(NAME, results)}")
    return results


def _ok(good: bool) -> str:
    return "ok" if good else "MISSED"


def _print(results: dict, plan: Plan) -> None:
    f = results["figures"]
    m = results["machine"]
    print(f"== client: the replog CLI (a child process) against 3 brokers (2 log dirs each) + 1 "
          f"controller + ZooKeeper{' (QUICK)' if results['quick'] else ''}; "
          f"median of {plan.rounds} round(s)")
    print(f"   {m.get('cpus')} CPUs ({m.get('cpu_model', '?')}), Python {m['python']}; client "
          f"and cluster share the CPUs; topics: lat60 (60 p, leaders spread), tput-rf3 / "
          f"tput-rf1 (60 p, all led by broker 1), idle 12 p + 24 p RF 3")
    print()
    print("(a) end-to-end latency, replog e2e-latency, acks=all RF 3 minISR 2, 60 partitions")
    print(f"    {'schedule':<34}{'rate':>8}{'p50 ms':>9}{'p99 ms':>9}{'p99.9 ms':>10}"
          f"{'max ms':>9}  target")
    for k, label in (("e2e_low", f"fixed {LOW_RATE:.0f} rec/s, {LATENCY_RECORD_BYTES} B"),
                     ("e2e_half_peak", f"50% of peak (b), {RECORD_BYTES} B")):
        s = f[k]
        tgt = (f"p99 <= {TARGET_P99_LOW_MS:.0f} ms {_ok(s['p99_ms'] <= TARGET_P99_LOW_MS)}"
               if k == "e2e_low" else "")
        print(f"    {label:<34}{s['rate']:>8.0f}{s['p50_ms']:>9.2f}{s['p99_ms']:>9.2f}"
              f"{s['p999_ms']:>10.2f}{s['max_ms']:>9.2f}  {tgt}")
    print()
    print(f"(b) produce throughput, replog produce perf mode, {RECORD_BYTES} B records, "
          f"{plan.produce_records} per run; CPU s/GB by process (GB of acknowledged values);")
    print(f"    client = the CLI process minus its start-up ({f['client_startup_cpu_s']:.2f} CPU s:"
          f" a one-record run)")
    print(f"    {'variant':<30}{'MB/s':>7}{'min-max':>13}{'client':>8}{'leader':>8}"
          f"{'follow':>8}{'ctl+zk':>8}  target")
    labels = {"rf3_b16k": "acks=all RF 3, batch 16 KiB", "rf1_b16k": "acks=1 RF 1, batch 16 KiB",
              "rf3_b64k": "acks=all RF 3, batch 64 KiB", "rf1_b64k": "acks=1 RF 1, batch 64 KiB"}
    for k, label in labels.items():
        s = f["produce"][k]
        cpu = s["cpu_s_per_gb"]
        tgt = (f">= {TARGET_RF3_64K_MB_S:.0f} MB/s {_ok(s['mb_s'] >= TARGET_RF3_64K_MB_S)}"
               if k == "rf3_b64k" else "")
        print(f"    {label:<30}{s['mb_s']:>7.1f}{s['mb_s_min']:>6.1f}-{s['mb_s_max']:<6.1f}"
              f"{cpu['client']:>8.1f}{cpu['leader']:>8.1f}{cpu['followers']:>8.1f}"
              f"{cpu['other']:>8.1f}  {tgt}")
    for bs, r in f["ratios"].items():
        print(f"    ratio RF 3 acks=all / RF 1 acks=1, {bs[1:]} batches (paired per round): "
              f"{r:.2f}   target >= {TARGET_RATIO} {_ok(r >= TARGET_RATIO)}")
    print()
    s = f["consume"]
    cpu = s["cpu_s_per_gb"]
    print("(c) consumer throughput, replog consume --messages (60 partitions, from the "
          "beginning, fetch.* defaults)")
    print(f"    {s['mb_s']:.1f} MB/s (fetch time, decimal MB), {s['records_s']:.0f} rec/s; CPU "
          f"s/GB client {cpu['client']:.1f}, leader {cpu['leader']:.1f}, followers "
          f"{cpu['followers']:.1f}, ctl+zk {cpu['other']:.1f}")
    print()
    for k in ("e2e_low", "e2e_half_peak", "consume"):
        print(json_line(NAME, k, f[k]))
    for k, v in f["produce"].items():
        print(json_line(NAME, f"produce_{k}", v))
    print(json_line(NAME, "ratios", f["ratios"]))


if __name__ == "__main__":
    from bench.__main__ import parse_args
    main(parse_args(["client", *sys.argv[1:]]))
