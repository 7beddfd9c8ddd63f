"""``replog analyze`` on an hour of a busy cluster (design.md#c8's analytics benchmark).

Input, synthesized in the exporter's format (analytics/schema.py) with a fixed seed: 1 hour of
1 s samples from 3 brokers and 1 controller with 3,000 partitions (RF 3): every process's metric
series as replog exposes them (controller histogram buckets included), a scrape record per
process per second, and the event log of six faults — a broker SIGKILLed every 10 minutes
(offline elections for the ~1,000 partitions it led, its replicas dropped from ~2,000 ISRs,
restarted 20 s later and rejoining them all) — on top of the 3,000 first elections.

Figures, each the median of ``--runs`` fresh processes (1 with ``--quick``), so that every run
pays the JVM start as ``replog analyze`` does:

- ``spark_startup_s``: SparkSession (local[*]) up and a first trivial job done;
- ``analysis_s``: ``analytics.job.analyze`` without the HTML (read, compute, write 18 tables as
  CSV + Parquet), in the same process right after;
- ``report_s``: the HTML page (matplotlib) from the collected tables;
- ``analysis_vs_startup``: analysis_s / spark_startup_s, from the paired samples.

Run: ``python -m bench analyze [--quick] [--runs N] [--data-dir DIR]``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench import json_line, log, machine_info, median, save_results

BROKERS = (1, 2, 3)
CONTROLLER = 100
PARTITIONS = 3000
SECONDS = 3600
T0 = 1_700_000_000.0
TOPIC = "bench"
KILL_EVERY_S = 600
RESTART_AFTER_S = 20

BROKER_GAUGES = ("kafka_server_replicamanager_underreplicatedpartitions",
                 "kafka_server_replicamanager_underminisrpartitioncount",
                 "kafka_server_replicamanager_partitioncount",
                 "kafka_server_replicamanager_leadercount",
                 "kafka_server_replicamanager_offlinereplicacount")
BROKER_COUNTERS = ("kafka_server_brokertopicmetrics_bytesin_total",
                   "kafka_server_brokertopicmetrics_replicationbytesin_total",
                   "kafka_server_brokertopicmetrics_totalproducerequests_total",
                   "kafka_server_replicamanager_isrshrinks_total",
                   "kafka_server_replicamanager_isrexpands_total",
                   "kafka_server_replicamanager_failedisrupdates_total",
                   "replog_leadership_relinquished_total")
CONTROLLER_GAUGES = ("kafka_controller_kafkacontroller_activecontrollercount",
                     "kafka_controller_kafkacontroller_offlinepartitionscount",
                     "kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
                     "kafka_controller_kafkacontroller_globalpartitioncount",
                     "replog_controller_live_brokers", "replog_controller_event_queue_size")
BUCKETS = ("1.0", "5.0", "10.0", "25.0", "50.0", "100.0", "250.0", "500.0", "1000.0", "+Inf")


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def synthesize(out: Path, seed: int = 13) -> dict:
    """Write the export; returns its row counts."""
    rng = random.Random(seed)
    for sub in ("samples", "scrapes", "events"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    cid = "bench-cluster"
    (out / "manifest.json").write_text(json.dumps(
        {"format": "replog-export", "version": 1, "cluster_id": cid, "interval_ms": 1000,
         "started": T0}))
    replicas = {p: [BROKERS[(p + i) % 3] for i in range(3)] for p in range(PARTITIONS)}
    leader = {p: replicas[p][0] for p in range(PARTITIONS)}
    epoch = dict.fromkeys(range(PARTITIONS), 0)
    pepoch = dict.fromkeys(range(PARTITIONS), 0)
    isr = {p: list(replicas[p]) for p in range(PARTITIONS)}
    events: dict[str, list[str]] = {f"broker-{b}": [] for b in BROKERS}
    events[f"controller-{CONTROLLER}"] = []

    def ev(proc: str, ts: float, name: str, **f) -> None:
        role, node = proc.split("-")
        ident = {"broker": int(node)} if role == "broker" else {"controller_id": int(node)}
        events[proc].append(json.dumps({"event": name, "timestamp": _iso(ts), "process": role,
                                        **ident, **f, "cluster_id": cid},
                                       separators=(",", ":")))
    ctrl = f"controller-{CONTROLLER}"
    for p in range(PARTITIONS):
        t = T0 + 1 + p * 0.0005
        ev(ctrl, t, "leader_election", partition=f"{TOPIC}-{p}", old_leader=-1,
           new_leader=leader[p], leader_epoch=0, unclean=False, reason="new_partition",
           isr=isr[p], partition_epoch=0)
        ev(f"broker-{leader[p]}", t + 0.05, "become_leader", partition=f"{TOPIC}-{p}",
           leader_epoch=0, isr=isr[p], partition_epoch=0)
        for r in replicas[p][1:]:
            ev(f"broker-{r}", t + 0.05, "become_follower", partition=f"{TOPIC}-{p}",
               leader=leader[p], leader_epoch=0)
    down: dict[int, tuple[float, float]] = {}   # broker -> (killed, restarted)
    for k, t_kill in enumerate(range(KILL_EVERY_S // 2, SECONDS, KILL_EVERY_S)):
        victim = BROKERS[k % 3]
        kill = T0 + t_kill + rng.random()
        down[victim] = (kill, kill + RESTART_AFTER_S)
        detect = kill + 3.0 + rng.random()
        ev(ctrl, detect, "broker_failed", broker=victim, broker_epoch=k, bounced=False)
        for p in range(PARTITIONS):
            if victim not in isr[p]:
                continue
            tp = f"{TOPIC}-{p}"
            old = list(isr[p])
            isr[p] = [b for b in isr[p] if b != victim]
            pepoch[p] += 1
            t = detect + 0.2 + p * 0.0002
            if leader[p] == victim:
                epoch[p] += 1
                leader[p] = isr[p][0]
                ev(ctrl, t, "leader_election", partition=tp, old_leader=victim,
                   new_leader=leader[p], leader_epoch=epoch[p], unclean=False, reason="offline",
                   isr=isr[p], partition_epoch=pepoch[p])
                ev(f"broker-{leader[p]}", t + 0.03 + rng.random() * 0.05, "become_leader",
                   partition=tp, leader_epoch=epoch[p], isr=isr[p], partition_epoch=pepoch[p])
            ev(ctrl, t, "isr_change", partition=tp, leader=leader[p], leader_epoch=epoch[p],
               old_isr=old, new_isr=isr[p], partition_epoch=pepoch[p])
        back = kill + RESTART_AFTER_S
        ev(f"broker-{victim}", back, "broker_started", broker_epoch=k + 100)
        for p in range(PARTITIONS):
            if victim in replicas[p] and victim not in isr[p]:
                old = list(isr[p])
                isr[p] = old + [victim]
                pepoch[p] += 1
                ev(f"broker-{leader[p]}", back + 1 + rng.random() * 2, "isr_expand",
                   partition=f"{TOPIC}-{p}", leader_epoch=epoch[p], old_isr=old, isr=isr[p],
                   partition_epoch=pepoch[p], hw=0)
    for proc, lines in events.items():
        (out / "events" / f"{proc}.events.jsonl").write_text("\n".join(lines) + "\n")

    procs = [("controller", CONTROLLER)] + [("broker", b) for b in BROKERS]
    counters = {(b, m): 0.0 for b in BROKERS for m in BROKER_COUNTERS}
    n_samples = n_scrapes = 0
    with (out / "samples" / "samples-0.jsonl").open("w") as sf, \
            (out / "scrapes" / "scrapes-0.jsonl").open("w") as cf:
        for s in range(SECONDS):
            ts = T0 + s
            lines, scrapes = [], []
            for role, node in procs:
                base = f'"process":"{role}-{node}","role":"{role}","node_id":{node}'
                alive = not (role == "broker" and node in down and
                             any(k <= ts < r for k, r in [down[node]]))
                scrapes.append(f'{{"ts":{ts},{base},"pid":{1000 + node},"ok":'
                               f'{"true" if alive else "false"},"error":'
                               f'{"null" if alive else chr(34) + "ConnectionRefusedError" + chr(34)}'  # noqa: E501
                               f',"duration_ms":2.0}}')
                if not alive:
                    continue
                if role == "broker":
                    for m in BROKER_GAUGES:
                        lines.append(f'{{"ts":{ts},{base},"metric":"{m}","labels":{{}},'
                                     f'"value":{float(rng.randint(0, 5))}}}')
                    for m in BROKER_COUNTERS:
                        counters[(node, m)] += rng.uniform(0, 2e6)
                        lines.append(f'{{"ts":{ts},{base},"metric":"{m}","labels":{{}},'
                                     f'"value":{counters[(node, m)]:.1f}}}')
                    for cid_ in ("Replica", "ReplicaAlterLogDirs"):
                        lines.append(f'{{"ts":{ts},{base},"metric":'
                                     f'"kafka_server_replicafetchermanager_maxlag","labels":'
                                     f'{{"clientId":"{cid_}"}},"value":{float(rng.randint(0, 900))}}}')  # noqa: E501
                else:
                    for m in CONTROLLER_GAUGES:
                        lines.append(f'{{"ts":{ts},{base},"metric":"{m}","labels":{{}},'
                                     f'"value":1.0}}')
                    for le in BUCKETS:
                        lines.append(f'{{"ts":{ts},{base},"metric":'
                                     f'"kafka_controller_controllerstats_leaderelectionrateandtimems_bucket",'
                                     f'"labels":{{"le":"{le}"}},"value":6000.0}}')
            sf.write("\n".join(lines) + "\n")
            cf.write("\n".join(scrapes) + "\n")
            n_samples += len(lines)
            n_scrapes += len(scrapes)
    return {"samples": n_samples, "scrapes": n_scrapes,
            "events": sum(len(v) for v in events.values()),
            "bytes": sum(f.stat().st_size for f in out.rglob("*.jsonl"))}


CHILD = """
import json, sys, time
t = time.perf_counter()
from analytics.spark import session
spark = session("local[*]")
spark.range(1).count()
startup = time.perf_counter() - t
from analytics import job
t = time.perf_counter()
r = job.analyze(spark, sys.argv[1], sys.argv[2], render=False)
analysis = time.perf_counter() - t
from analytics.report import render_report
t = time.perf_counter()
import csv, pathlib
tables = pathlib.Path(sys.argv[2]) / "tables"
print(json.dumps({"startup": startup, "analysis": analysis, "tables": r["tables"]}))
spark.stop()
"""


def _report_time(input_dir: Path, out: Path) -> float:
    """The HTML alone, from the tables the run wrote (no Spark)."""
    import csv

    from analytics.job import TABLES, check_input
    from analytics.report import render_report

    def num(v: str):
        if v == "":
            return None
        try:
            return float(v) if any(c in v for c in ".eE") else int(v)
        except ValueError:
            return v
    data = {}
    for name in TABLES:
        with (out / "tables" / f"{name}.csv").open() as f:
            rows = [{k: num(v) for k, v in r.items()} for r in csv.DictReader(f)]
        data[name] = {"columns": list(rows[0]) if rows else [], "rows": rows}
    span = (T0, T0 + SECONDS)
    manifest = check_input(input_dir)["manifest"]
    t = time.perf_counter()
    render_report(out, manifest, [("bench", "synthesized")], data, span)
    return time.perf_counter() - t


def main(opts) -> None:
    runs = opts.runs or (1 if opts.quick else 3)
    root = Path(tempfile.mkdtemp(prefix="replog-bench-analyze-", dir=opts.data_dir))
    try:
        t = time.perf_counter()
        counts = synthesize(root / "export")
        log(f"synthesized {counts} in {time.perf_counter() - t:.1f} s")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                             env.get("PYTHONPATH", "")])
        samples = []
        for i in range(runs):
            out = root / f"out-{i}"
            r = subprocess.run([sys.executable, "-c", CHILD, str(root / "export"), str(out)],
                               capture_output=True, text=True, env=env, check=False)
            if r.returncode != 0:
                raise RuntimeError(f"analysis failed: {r.stderr[-2000:]}")
            got = json.loads(r.stdout.strip().splitlines()[-1])
            got["report"] = _report_time(root / "export", out)
            samples.append(got)
            log(f"run {i + 1}/{runs}: start-up {got['startup']:.1f} s, analysis "
                f"{got['analysis']:.1f} s, report {got['report']:.1f} s")
        res = {
            "input": {**counts, "partitions": PARTITIONS, "seconds": SECONDS,
                      "processes": 1 + len(BROKERS)},
            "spark_startup_s": round(median(s["startup"] for s in samples), 2),
            "analysis_s": round(median(s["analysis"] for s in samples), 2),
            "report_s": round(median(s["report"] for s in samples), 2),
            "analysis_vs_startup": round(median(s["analysis"] / s["startup"] for s in samples),
                                         2),
            "tables": samples[0]["tables"],
            "runs": runs,
            "machine": machine_info(str(root)),
        }
        print(f"{'figure':<34}{'value':>12}")
        print(f"{'input rows (samples/scrapes/events)':<34}"
              f"{counts['samples']}/{counts['scrapes']}/{counts['events']}")
        print(f"{'input size':<34}{counts['bytes'] / 1e6:>10.1f} MB")
        print(f"{'Spark start-up (local[*])':<34}{res['spark_startup_s']:>10.2f} s")
        print(f"{'analysis (read+compute+write)':<34}{res['analysis_s']:>10.2f} s")
        print(f"{'report.html':<34}{res['report_s']:>10.2f} s")
        print(f"{'analysis / start-up':<34}{res['analysis_vs_startup']:>10.2f} x")
        print(json_line("analyze", "hour_3_brokers_3k_partitions",
                        {k: v for k, v in res.items() if k != "machine"}))
        save_results("analyze", res)
    finally:
        shutil.rmtree(root, ignore_errors=True)
