"""Kafka clients against replog's own: librdkafka through the brokers' Kafka
listener and the ``replog`` CLI through gRPC, in the same run on the same cluster.

One ``LocalCluster`` of real processes (ZooKeeper, one controller, three brokers with two log
dirs each) shaped like a real one: idle RF 3 topics of 6, 12 and 24 partitions, and per round
four 12-partition topics with leaders spread over the brokers (``rotating_assignment``), all
created before the first round, so every broker leads and follows many partitions throughout.
Every client is a child process, as users run them; nothing is asserted. Tables (target beside
each figure) and one JSON line per figure are printed and saved to
``bench/results/kafka_clients.json``.

Per round, 1 KiB records, the same number of records in every produce:

(a) librdkafka's Producer (confluent-kafka; ``bench/rdkafka_load.py``): acks=all to a
    12-partition RF 3 topic (min.insync.replicas=2) and acks=1 to a 12-partition RF 1 topic;
    enable.idempotence=false (InitProducerId is not served), compression none, linger.ms 5,
    batch.size default (librdkafka's 1 MB); delivery reports for errors only.
(b) ``replog produce`` perf mode (kafka-producer-perf-test) acks=all to its own 12-partition RF 3
    topic, batch.size 16384 (its default) and 65536 (the README's headline figure). The four
    produce runs are interleaved, order rotated per round; ratios are medians of per-round
    ratios. Target: librdkafka acks=all RF 3 >= replog produce at 64 KiB, at less client CPU.
(c) Consumers reading the whole librdkafka RF 3 topic of the round from the beginning (the
    page cache holds it): librdkafka's Consumer with assign() (group.id set only because it is
    required, enable.auto.commit=false) through the Kafka listener, whose Fetch sends the
    segment bytes with sendfile, once with librdkafka's defaults and once with
    fetch.queue.backoff.ms=10 (``TUNED_CONSUMER`` says why); Debian's ``kcat -C`` (librdkafka
    in C, no Python in the client: what the listener serves when the client costs little);
    and ``replog consume --messages N`` (kafka-consumer-perf-test) through gRPC; order rotated
    per round. Target: librdkafka >= 4x replog's MB/s.

CPU seconds per GB (decimal; GB of acknowledged or consumed record values) for every phase and
process: the client child (``getrusage(RUSAGE_CHILDREN)`` around it, net of a one-record run of
the same tool in the same round, so start-up and imports do not count), each broker, and the
controller + ZooKeeper together (psutil, before and after). Each tool's own clock gives MB/s:
``replog produce``'s records/s line, ``replog consume``'s fetch.time.ms (its assign and
ListOffsets excluded), and ``rdkafka_load``'s span (module docstring). Dirty pages are written
back (``sync``) before every phase, so no phase pays for another's writeback.

Run: ``python -m bench kafka_clients [--quick] [--runs N] [--data-dir DIR]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from bench import MB, json_line, log, machine_info, median, save_results
from bench.bench_client import _CONSUME_LINE, _PERF_LINE, per_gb, settle_writeback
from bench.harness import (
    Brokers,
    isr_full,
    rotating_assignment,
    start_cluster,
    wait_partitions,
    zk_pid,
)
from bench.harness.cpu import PhaseCpu
from client import AdminClient
from harness.local_cluster import LocalCluster

NAME = "kafka_clients"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD_BYTES = 1024
PARTITIONS = 12
IDLE_TOPICS = {"idle-audit": 6, "idle-orders": 12, "idle-events": 24}
BASELINE_TOPIC = "startup"  # one-record runs measuring each tool's start-up CPU

TARGET_PRODUCE_RATIO = 1.0  # librdkafka acks=all RF 3 / replog produce acks=all RF 3 (64 KiB)
TARGET_CONSUME_RATIO = 4.0  # librdkafka consumer / replog consume

PRODUCERS = ("rd_rf3", "rd_rf1", "rl_rf3_b16k", "rl_rf3_b64k")
CONSUMERS = ("rd_consume", "rd_consume_tuned", "kcat_consume", "rl_consume")
# librdkafka's consumer stops fetching a partition while its queue holds queued.min.messages
# (100000) records - one queue for all partitions under assign() - and then waits
# fetch.queue.backoff.ms (1000 ms) before asking again ("Fetch backoff for 1000ms: Local: Queue
# full" in its fetch debug log). At 1 KiB that is ~100 MB, which three brokers send in a
# fraction of a second, so with the defaults most of a 200 MB read is those pauses. The tuned
# run shortens the pause (librdkafka's CONFIGURATION.md: "may need to be decreased if the queue
# thresholds are set low"); both are reported.
TUNED_CONSUMER = ("fetch.queue.backoff.ms=10",)
LABELS = {
    "rd_rf3": "librdkafka acks=all RF 3",
    "rd_rf1": "librdkafka acks=1 RF 1",
    "rl_rf3_b16k": "replog produce acks=all RF 3, 16 KiB",
    "rl_rf3_b64k": "replog produce acks=all RF 3, 64 KiB",
    "rd_consume": "librdkafka Consumer, assign(), defaults",
    "rd_consume_tuned": "librdkafka Consumer, backoff 10 ms",
    "kcat_consume": "kcat -C (librdkafka, C client)",
    "rl_consume": "replog consume --messages (gRPC)",
}


@dataclass
class Plan:
    rounds: int
    records: int


FULL = Plan(rounds=3, records=200_000)  # 204.8 MB per produce run
QUICK = Plan(rounds=1, records=20_000)  # 20.5 MB


def topic_of(key: str, r: int) -> str:
    return f"{key.replace('_', '-')}-{r}"


# ============================================================================ plumbing

class Meters(PhaseCpu):
    """CPU of every process of a phase: the client child (each phase runs one child to its
    end), each broker, and the controller + ZooKeeper together."""

    def __init__(self, c: LocalCluster):
        groups: dict[str, list[int | None]] = {f"broker{b}": [h.pid]
                                               for b, h in sorted(c.brokers.items())}
        groups["ctl_zk"] = [h.pid for h in c.controllers.values()] + [zk_pid(c)]
        super().__init__(groups)


def run_child(module: str, *args: str, timeout: float = 900.0) -> tuple[str, float]:
    """``python -m MODULE ARGS`` as a child process; (stdout, wall seconds). A failure raises
    with the child's stderr."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args[:1])} failed ({p.returncode}): "
                           f"{p.stderr.strip()[-500:]}")
    return p.stdout, wall


def measured(meters: Meters, module: str, *args: str) -> tuple[str, float, dict[str, float]]:
    meters.start()
    out, wall = run_child(module, *args)
    return out, wall, meters.stop()


def rd_produce_args(c: LocalCluster, topic: str, acks: str, n: int) -> list[str]:
    return ["produce", "--bootstrap-server", c.kafka_bootstrap_servers, "--topic", topic,
            "--num-records", str(n), "--record-size", str(RECORD_BYTES), "--acks", acks,
            "--linger-ms", "5"]


def rl_produce_args(c: LocalCluster, topic: str, batch_size: int, n: int) -> list[str]:
    return ["produce", "--bootstrap-server", c.bootstrap_servers, "--topic", topic,
            "--num-records", str(n), "--record-size", str(RECORD_BYTES), "--throughput", "-1",
            "--producer-props", "acks=all", f"batch.size={batch_size}"]


def rd_consume_args(c: LocalCluster, topic: str, n: int, tuned: bool = False) -> list[str]:
    return ["consume", "--bootstrap-server", c.kafka_bootstrap_servers, "--topic", topic,
            "--messages", str(n), "--timeout-ms", "30000",
            *(a for kv in (TUNED_CONSUMER if tuned else ()) for a in ("--consumer-property", kv))]


def rl_consume_args(c: LocalCluster, topic: str, n: int) -> list[str]:
    return ["consume", "--bootstrap-server", c.bootstrap_servers, "--topic", topic,
            "--messages", str(n), "--timeout", "30000"]


RD, RL = "bench.rdkafka_load", "admin.cli"


def kcat_consume_args(c: LocalCluster, topic: str, n: int) -> list[str]:
    # -f '%S\n': one line per record giving its value's size, so the run's bytes are counted
    # without the records themselves crossing the pipe.
    return ["kcat", "-C", "-b", c.kafka_bootstrap_servers, "-t", topic, "-o", "beginning",
            "-c", str(n), "-e", "-q", "-f", "%S\n"]


def run_kcat(meters: Meters, args: list[str], timeout: float = 900.0
             ) -> tuple[str, float, dict[str, float]]:
    """kcat as a child process: (stdout, wall seconds, CPU by process)."""
    meters.start()
    t = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.perf_counter() - t
    cpu = meters.stop()
    if p.returncode != 0:
        raise RuntimeError(f"kcat failed ({p.returncode}): {p.stderr.strip()[-500:]}")
    return p.stdout, wall, cpu


def startup_cpu(c: LocalCluster, meters: Meters) -> dict[str, float]:
    """Client CPU seconds of a one-record run of each tool and mode (interpreter start-up,
    imports, connections, metadata), subtracted from that tool's phases in the round."""
    out = {}
    for key, module, args in (
            ("rd_produce", RD, rd_produce_args(c, BASELINE_TOPIC, "all", 1)),
            ("rl_produce", RL, rl_produce_args(c, BASELINE_TOPIC, 16384, 1)),
            ("rd_consume", RD, rd_consume_args(c, BASELINE_TOPIC, 1)),
            ("rl_consume", RL, rl_consume_args(c, BASELINE_TOPIC, 1))):
        out[key] = round(measured(meters, module, *args)[2]["client"], 3)
    out["kcat_consume"] = round(
        run_kcat(meters, kcat_consume_args(c, BASELINE_TOPIC, 1))[2]["client"], 3)
    return out


def finish(cpu: dict[str, float], baseline: float, nbytes: int, **fig) -> dict:
    cpu = dict(cpu, client=max(cpu["client"] - baseline, 0.0))
    cpu["brokers"] = sum(v for k, v in cpu.items() if k.startswith("broker"))
    return {**fig, "bytes": nbytes, "cpu_s": {k: round(v, 3) for k, v in cpu.items()},
            "cpu_s_per_gb": per_gb(cpu, nbytes)}


# ============================================================================ phases

def rd_produce(c: LocalCluster, meters: Meters, topic: str, acks: str, n: int,
               baseline: float) -> dict:
    out, wall, cpu = measured(meters, RD, *rd_produce_args(c, topic, acks, n))
    r = json.loads(out.strip().splitlines()[-1])
    if r["failed"]:
        raise RuntimeError(f"librdkafka: {r['failed']} of {n} records failed to {topic}: "
                           f"{r['first_error']}")
    return finish(cpu, baseline, r["bytes"], records=r["records"],
                  mb_s=r["bytes"] / r["seconds"] / MB, seconds=r["seconds"], wall_s=wall)


def rl_produce(c: LocalCluster, meters: Meters, topic: str, batch_size: int, n: int,
               baseline: float) -> dict:
    out, wall, cpu = measured(meters, RL, *rl_produce_args(c, topic, batch_size, n))
    m = _PERF_LINE.search(out)
    if m is None:
        raise RuntimeError(f"no perf summary line in: {out[-300:]}")
    sent, rec_s = int(m.group(1)), float(m.group(2))
    return finish(cpu, baseline, sent * RECORD_BYTES, records=sent,
                  mb_s=rec_s * RECORD_BYTES / MB, seconds=sent / rec_s, wall_s=wall)


def rd_consume(c: LocalCluster, meters: Meters, topic: str, n: int, baseline: float,
               tuned: bool = False) -> dict:
    out, wall, cpu = measured(meters, RD, *rd_consume_args(c, topic, n, tuned))
    r = json.loads(out.strip().splitlines()[-1])
    if r["records"] < n:
        raise RuntimeError(f"librdkafka read {r['records']} of {n} records of {topic}")
    return finish(cpu, baseline, r["bytes"], records=r["records"],
                  mb_s=r["bytes"] / r["seconds"] / MB, seconds=r["seconds"], wall_s=wall)


def rl_consume(c: LocalCluster, meters: Meters, topic: str, n: int, baseline: float) -> dict:
    out, wall, cpu = measured(meters, RL, *rl_consume_args(c, topic, n))
    m = _CONSUME_LINE.search(out)
    if m is None:
        raise RuntimeError(f"no consumer-perf line in: {out[-300:]}")
    nmsg = int(m.group(3))
    if nmsg < n:
        raise RuntimeError(f"replog consume read {nmsg} of {n} records of {topic}")
    nbytes = round(float(m.group(1)) * 1024 * 1024)
    fetch_s = max(int(m.group(6)) / 1000, 1e-9)
    return finish(cpu, baseline, nbytes, records=nmsg, mb_s=nbytes / fetch_s / MB,
                  seconds=fetch_s, wall_s=wall)


def kcat_consume(c: LocalCluster, meters: Meters, topic: str, n: int, baseline: float) -> dict:
    """MB/s over kcat's wall time (its start-up and metadata included: tens of milliseconds
    against seconds of reading)."""
    out, wall, cpu = run_kcat(meters, kcat_consume_args(c, topic, n))
    sizes = [int(x) for x in out.split()]
    if len(sizes) < n:
        raise RuntimeError(f"kcat read {len(sizes)} of {n} records of {topic}")
    nbytes = sum(sizes)
    return finish(cpu, baseline, nbytes, records=len(sizes), mb_s=nbytes / wall / MB,
                  seconds=wall, wall_s=wall)


async def create_topics(c: LocalCluster, rounds: int) -> None:
    rf3 = {"min.insync.replicas": "2"}
    specs: list[tuple[str, dict, dict]] = [
        (name, rotating_assignment(n, 3), {}) for name, n in IDLE_TOPICS.items()]
    specs.append((BASELINE_TOPIC, rotating_assignment(1, 1), {}))
    for r in range(rounds):
        for key in PRODUCERS:
            rf = 1 if key == "rd_rf1" else 3
            specs.append((topic_of(key, r), rotating_assignment(PARTITIONS, rf),
                          rf3 if rf == 3 else {}))
    async with AdminClient(c.bootstrap_servers, default_api_timeout_ms=120000) as admin:
        for name, assignment, configs in specs:
            await admin.create_topic(name, replica_assignment=assignment, configs=configs)
    brokers = Brokers()
    try:
        for name, assignment, _ in specs:
            await wait_partitions(brokers, c, name, len(assignment), isr_full, "ISR full", 120.0)
    finally:
        await brokers.close()


def _rotate(items: list, r: int) -> list:
    k = r % len(items)
    return items[k:] + items[:k]


def run_rounds(c: LocalCluster, plan: Plan) -> dict:
    meters = Meters(c)
    raw: dict = {k: [] for k in (*PRODUCERS, *CONSUMERS)}
    raw["startup_cpu_s"] = []
    n = plan.records
    for r in range(plan.rounds):
        base = startup_cpu(c, meters)
        raw["startup_cpu_s"].append(base)
        log(f"[kafka_clients] round {r + 1}/{plan.rounds} start-up CPU s: {base}")
        for key in _rotate(list(PRODUCERS), r):
            topic = topic_of(key, r)
            settle_writeback()
            if key.startswith("rd_"):
                s = rd_produce(c, meters, topic, "1" if key == "rd_rf1" else "all", n,
                               base["rd_produce"])
            else:
                s = rl_produce(c, meters, topic, 65536 if key.endswith("64k") else 16384, n,
                               base["rl_produce"])
            raw[key].append(s)
            log(f"[kafka_clients] round {r + 1}/{plan.rounds} {key}: {s['mb_s']:.1f} MB/s, "
                f"CPU s/GB {s['cpu_s_per_gb']}")
        consumed = raw["rd_rf3"][-1]["records"]
        source = topic_of("rd_rf3", r)
        for key in _rotate(list(CONSUMERS), r):
            settle_writeback()
            if key == "rl_consume":
                s = rl_consume(c, meters, source, consumed, base["rl_consume"])
            elif key == "kcat_consume":
                s = kcat_consume(c, meters, source, consumed, base["kcat_consume"])
            else:
                s = rd_consume(c, meters, source, consumed, base["rd_consume"],
                               tuned=key == "rd_consume_tuned")
            raw[key].append(s)
            log(f"[kafka_clients] round {r + 1}/{plan.rounds} {key}: {s['mb_s']:.1f} MB/s, "
                f"CPU s/GB {s['cpu_s_per_gb']}")
    return raw


def _paired(a: list[dict], b: list[dict], key: str = "mb_s", sub: str | None = None) -> float:
    def v(x: dict) -> float:
        return x[key][sub] if sub else x[key]
    return round(median(v(x) / v(y) for x, y in zip(a, b) if v(y)), 3)


def summarize(raw: dict) -> dict:
    out: dict = {}
    for key in (*PRODUCERS, *CONSUMERS):
        rows = raw[key]
        mbs = [x["mb_s"] for x in rows]
        out[key] = {"mb_s": round(median(mbs), 1), "mb_s_min": round(min(mbs), 1),
                    "mb_s_max": round(max(mbs), 1), "records": rows[0]["records"],
                    "bytes": rows[0]["bytes"], "runs": len(rows),
                    "cpu_s_per_gb": {k: round(median(x["cpu_s_per_gb"][k] for x in rows), 2)
                                     for k in rows[0]["cpu_s_per_gb"]}}
    out["ratios"] = {
        "rd_rf3_over_rd_rf1": _paired(raw["rd_rf3"], raw["rd_rf1"]),
        "rd_rf3_over_rl_rf3_b64k": _paired(raw["rd_rf3"], raw["rl_rf3_b64k"]),
        "rd_rf3_over_rl_rf3_b16k": _paired(raw["rd_rf3"], raw["rl_rf3_b16k"]),
        "client_cpu_rd_rf3_over_rl_rf3_b64k": _paired(raw["rd_rf3"], raw["rl_rf3_b64k"],
                                                      "cpu_s_per_gb", "client"),
        "rd_consume_over_rl_consume": _paired(raw["rd_consume"], raw["rl_consume"]),
        "rd_consume_tuned_over_rl_consume": _paired(raw["rd_consume_tuned"],
                                                    raw["rl_consume"]),
        "kcat_consume_over_rl_consume": _paired(raw["kcat_consume"], raw["rl_consume"]),
    }
    out["startup_cpu_s"] = {k: round(median(b[k] for b in raw["startup_cpu_s"]), 3)
                            for k in raw["startup_cpu_s"][0]}
    return out


# ============================================================================ main

def main(opts: argparse.Namespace | None = None) -> dict:
    opts = opts or argparse.Namespace(quick=False, runs=None, data_dir=None)
    plan = Plan(**vars(QUICK if opts.quick else FULL))
    if opts.runs:
        plan.rounds = opts.runs
    parent = opts.data_dir or "/tmp"
    os.makedirs(parent, exist_ok=True)
    root = tempfile.mkdtemp(prefix="replog-bench-kafka-clients-", dir=parent)
    started = time.time()
    import confluent_kafka
    results: dict = {"bench": NAME, "quick": bool(opts.quick),
                     "when": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
                     "machine": machine_info(parent),
                     "clients": {"confluent_kafka": confluent_kafka.__version__,
                                 "librdkafka": confluent_kafka.libversion()[0]},
                     "record_bytes": RECORD_BYTES, "records_per_run": plan.records,
                     "targets": {"rd_rf3_over_rl_rf3_b64k": TARGET_PRODUCE_RATIO,
                                 "client_cpu_rd_rf3_over_rl_rf3_b64k": 1.0,
                                 "rd_consume_over_rl_consume": TARGET_CONSUME_RATIO,
                                 "rd_consume_tuned_over_rl_consume": TARGET_CONSUME_RATIO,
                                 "kcat_consume_over_rl_consume": TARGET_CONSUME_RATIO},
                     "tuned_consumer": list(TUNED_CONSUMER)}
    c = start_cluster(root, "kafka-clients")
    try:
        t = time.perf_counter()
        asyncio.run(create_topics(c, plan.rounds))
        log(f"[kafka_clients] topics created, ISRs full in {time.perf_counter() - t:.1f} s")
        raw = run_rounds(c, plan)
    finally:
        c.stop(graceful=False)
        shutil.rmtree(root, ignore_errors=True)
    results["figures"] = summarize(raw)
    results["raw"] = raw
    results["took_s"] = round(time.time() - started, 1)
    _print(results, plan)
    print(f"# saved {save_results(NAME, results)}")
    return results


def _verdict(good: bool) -> str:
    return "PASS" if good else "MISS"


def _print(results: dict, plan: Plan) -> None:
    f = results["figures"]
    m = results["machine"]
    cl = results["clients"]
    print(f"== kafka_clients: librdkafka {cl['librdkafka']} (confluent-kafka "
          f"{cl['confluent_kafka']}) through the Kafka listener against the replog CLI through "
          f"gRPC; 3 brokers (2 log dirs each) + 1 controller + ZooKeeper"
          f"{' (QUICK)' if results['quick'] else ''}; median of {plan.rounds} round(s)")
    print(f"   {m.get('cpus')} CPUs ({m.get('cpu_model', '?')}), Python {m['python']}; clients "
          f"and cluster share the CPUs; {plan.records} x {RECORD_BYTES} B records per run; "
          f"12-partition topics, leaders spread; idle RF 3 topics of "
          f"{', '.join(str(n) for n in IDLE_TOPICS.values())} partitions")
    print("   CPU s/GB: client = the tool's child process net of its one-record run "
          f"(start-up CPU s: {f['startup_cpu_s']})")
    print()
    print(f"    {'phase':<40}{'MB/s':>7}{'min-max':>13}{'client':>8}{'b1':>7}{'b2':>7}"
          f"{'b3':>7}{'ctl+zk':>8}")
    for key in (*PRODUCERS, *CONSUMERS):
        s = f[key]
        cpu = s["cpu_s_per_gb"]
        print(f"    {LABELS[key]:<40}{s['mb_s']:>7.1f}{s['mb_s_min']:>6.1f}-{s['mb_s_max']:<6.1f}"
              f"{cpu['client']:>8.1f}{cpu['broker1']:>7.1f}{cpu['broker2']:>7.1f}"
              f"{cpu['broker3']:>7.1f}{cpu['ctl_zk']:>8.1f}")
    r = f["ratios"]
    print()
    print("    ratios, paired per round:")
    print(f"    librdkafka acks=all RF 3 / acks=1 RF 1: {r['rd_rf3_over_rd_rf1']:.2f}")
    print(f"    librdkafka acks=all RF 3 / replog produce 16 KiB: "
          f"{r['rd_rf3_over_rl_rf3_b16k']:.2f}")
    x = r["rd_rf3_over_rl_rf3_b64k"]
    print(f"    librdkafka acks=all RF 3 / replog produce 64 KiB: {x:.2f}   target >= "
          f"{TARGET_PRODUCE_RATIO:.1f} {_verdict(x >= TARGET_PRODUCE_RATIO)}")
    x = r["client_cpu_rd_rf3_over_rl_rf3_b64k"]
    print(f"    client CPU s/GB, librdkafka / replog produce 64 KiB: {x:.2f}   target < 1 "
          f"{_verdict(x < 1.0)}")
    for k, label in (("rd_consume_over_rl_consume", "defaults"),
                     ("rd_consume_tuned_over_rl_consume", ", ".join(TUNED_CONSUMER)),
                     ("kcat_consume_over_rl_consume", "kcat -C")):
        x = r[k]
        print(f"    librdkafka consumer ({label}) / replog consume: {x:.2f}   target >= "
              f"{TARGET_CONSUME_RATIO:.0f} {_verdict(x >= TARGET_CONSUME_RATIO)}")
    print()
    for key in (*PRODUCERS, *CONSUMERS):
        print(json_line(NAME, key, f[key]))
    print(json_line(NAME, "ratios", r))


if __name__ == "__main__":
    from bench.__main__ import parse_args
    main(parse_args(["kafka_clients", *sys.argv[1:]]))
