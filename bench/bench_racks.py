"""What racks 20 ms apart cost acks=all: produce latency at a low rate on a cluster on real hosts
(``replog cluster up --hosts``, one network namespace per process) with its brokers on 2 racks
20 ms apart (one way, harness/netdelay.py), against the same cluster with 0 ms between the racks,
in one run. Both clusters: one ZooKeeper, one controller, 4 brokers round-robin over rack-1 and
rack-2; a 6-partition RF 3 topic placed by the rack-aware assignment (every partition on both
racks, so every acks=all write waits for a follower across the racks), min.insync.replicas=2.

Figures (through the real client: ``replog produce`` perf mode, 100 B records at 10 and at 50
records/s, acks=all, each record its own request at those rates): p50 and p99 of the
acknowledgement latency for both, the expectation for 20 ms (2 x 20 ms: the follower's parked
fetch brings the record across the racks, and its next fetch tells the leader it has it; plus
the 0 ms figure), and the ISR shrinks and expands of every broker during the measurement (from
/metrics, kafka_server_replicamanager_isrshrinks/isrexpands: 0 means the ISR did not flap).
Why two rates: a follower has one fetch in flight to a leader (Kafka's fetcher thread too).
While records reach a leader less often than once per round trip between the racks (40 ms),
the follower's fetch is parked there when one arrives, and it costs 2 x 20 ms; when they come
about as often (50 records/s over 6 partitions), a record often arrives while that fetch is on
its way back, and waits for the next one to arrive: up to one more round trip.
Rounds alternate the order; medians over rounds. Nothing is asserted.

Root only (network namespaces); otherwise one line saying so.
Run: ``python -m bench racks [--quick] [--runs N] [--data-dir DIR]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import time
import urllib.request

from bench import ab_run, json_line, log, median, save_results
from bench.bench_client import _PERF_LINE, LATENCY_RECORD_BYTES, replog_cli
from bench.harness.cluster import CLUSTER_OVERRIDES
from client.admin_client import AdminClient
from harness import hosts as hostlib
from harness.cluster_hosts import HostsOptions
from harness.local_cluster import LocalCluster

NAME = "racks"
DELAYS_MS = (20.0, 0.0)
RATES = (10, 50)  # records/s: low against one 40 ms round trip, and not
PARTITIONS = 6
TARGETS = {"p99_20ms_near": "2 x 20 ms + the 0 ms p99", "isr_changes": 0}
ISR_COUNTERS = ("kafka_server_replicamanager_isrshrinks_total",
                "kafka_server_replicamanager_isrexpands_total")


def _label(delay: float) -> str:
    return f"{delay:g}ms"


def _start(root: str, delay: float) -> LocalCluster:
    c = LocalCluster(os.path.join(root, _label(delay)), brokers=4, controllers=1,
                     log_dirs_per_broker=1, overrides=CLUSTER_OVERRIDES,
                     startup_timeout_s=180.0, hosts=HostsOptions(racks=2, latency_ms=delay))
    t = time.perf_counter()
    c.start()
    log(f"[{NAME}] cluster with {delay:g} ms between racks up in "
        f"{time.perf_counter() - t:.1f} s ({c.data_dir})")
    return c


async def _create_topic(c: LocalCluster) -> None:
    async with AdminClient(c.bootstrap_servers, default_api_timeout_ms=120000) as admin:
        await admin.create_topic("lat", PARTITIONS, 3, configs={"min.insync.replicas": "2"})
        info = (await admin.describe_topics(["lat"]))["lat"]
    racks = {b: h.rack for b, h in c.brokers.items()}
    for p in info.partitions:
        if len({racks[r] for r in p.replicas}) < 2:
            raise RuntimeError(f"lat-{p.partition} has replicas {p.replicas} on one rack")


def _isr_changes(c: LocalCluster) -> dict[str, float]:
    """Every broker's ISR shrinks and expands so far, summed over the brokers."""
    from prometheus_client.parser import text_string_to_metric_families
    out = dict.fromkeys(ISR_COUNTERS, 0.0)
    for h in c.brokers.values():
        with urllib.request.urlopen(h.metrics_url, timeout=5) as resp:
            text = resp.read().decode()
        for f in text_string_to_metric_families(text):
            for s in f.samples:
                if s.name in out:
                    out[s.name] += s.value
    return out


def _measure(c: LocalCluster, rate: int, seconds: int) -> dict:
    before = _isr_changes(c)
    out, wall = replog_cli("produce", "--bootstrap-server", c.bootstrap_servers, "--topic",
                           "lat", "--num-records", str(rate * seconds), "--record-size",
                           str(LATENCY_RECORD_BYTES), "--throughput", str(rate),
                           "--producer-props", "acks=all")
    after = _isr_changes(c)
    m = _PERF_LINE.search(out)
    if m is None:
        raise RuntimeError(f"no perf summary line in: {out[-300:]}")
    return {"records": int(m.group(1)), "avg_ms": float(m.group(4)),
            "p50_ms": float(m.group(6)), "p99_ms": float(m.group(8)), "wall_s": wall,
            "isr_shrinks": after[ISR_COUNTERS[0]] - before[ISR_COUNTERS[0]],
            "isr_expands": after[ISR_COUNTERS[1]] - before[ISR_COUNTERS[1]]}


def _key(delay: float, rate: int) -> str:
    return f"{delay:g}ms_{rate}rps"


def main(opts: argparse.Namespace | None = None) -> dict:
    opts = opts or argparse.Namespace(quick=False, runs=None, data_dir=None)
    why = hostlib.unavailable()
    if why is not None:
        print(f"# {NAME}: skipped: {why}")
        return {}
    run = ab_run(opts, NAME, NAME, TARGETS)
    load_before = os.getloadavg()[0]
    seconds = 8 if opts.quick else 20
    clusters: dict[float, LocalCluster] = {}
    raw = []
    try:
        for delay in DELAYS_MS:
            clusters[delay] = _start(run.root, delay)
            asyncio.run(_create_topic(clusters[delay]))
        for r in range(run.rounds):
            row = {}
            for delay in DELAYS_MS if r % 2 == 0 else DELAYS_MS[::-1]:
                for rate in RATES:
                    row[_key(delay, rate)] = x = _measure(clusters[delay], rate, seconds)
                    log(f"[{NAME}] round {r} {delay:g} ms {rate}/s: p50 {x['p50_ms']:g} ms, "
                        f"p99 {x['p99_ms']:g} ms, ISR shrinks {x['isr_shrinks']:g} expands "
                        f"{x['isr_expands']:g}")
            raw.append(row)
    finally:
        for c in clusters.values():
            c.stop(graceful=False)
        shutil.rmtree(run.root, ignore_errors=True)
    results = run.results
    results["figures"] = figs = {}
    for key in raw[0]:
        rows = [r[key] for r in raw]
        figs[key] = {k: median([x[k] for x in rows]) for k in ("p50_ms", "p99_ms", "avg_ms")}
        figs[key].update({k: sum(x[k] for x in rows) for k in ("isr_shrinks", "isr_expands")})
    far = DELAYS_MS[0]
    for rate in RATES:
        figs[f"expected_p99_ms_{rate}rps"] = 2 * far + figs[_key(0.0, rate)]["p99_ms"]
    results["raw"] = raw
    results["took_s"] = round(time.time() - run.started, 1)
    results["load_average_before"] = round(load_before, 2)
    print(f"# {NAME}: acks=all RF 3 over 2 racks, {run.rounds} round(s) of {seconds} s per "
          f"figure, medians; load average before the run {load_before:.2f} (p99 is the first "
          f"figure a busy machine moves)")
    for rate in RATES:
        for delay in DELAYS_MS:
            f = figs[_key(delay, rate)]
            print(f"{rate:3d} records/s, {delay:4g} ms between racks: p50 {f['p50_ms']:6.1f} ms  "
                  f"p99 {f['p99_ms']:6.1f} ms  ISR shrinks {f['isr_shrinks']:g}  expands "
                  f"{f['isr_expands']:g}")
            print(json_line(NAME, _key(delay, rate), f))
        expected = figs[f"expected_p99_ms_{rate}rps"]
        print(f"{rate:3d} records/s: expected p99 with {far:g} ms ~{expected:.1f} ms (2 x {far:g} "
              f"+ {figs[_key(0.0, rate)]['p99_ms']:g}); measured "
              f"{figs[_key(far, rate)]['p99_ms']:.1f} ms")
        print(json_line(NAME, f"expected_p99_ms_{rate}rps", {"value": expected}))
    print(f"# saved {save_results(NAME, results)}")
    return results
