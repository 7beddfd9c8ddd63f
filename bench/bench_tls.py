"""What mutual TLS costs: acks=all RF 3 throughput and end-to-end latency on a cluster with
mTLS on every listener (``security="mtls"``, what ``replog cluster up --security mtls`` runs:
clients, replication and controller traffic all over TLS with client certificates) against
the same cluster in plaintext, in one run. Both clusters are up for the whole run (one
controller, three brokers with two log dirs each, bench/harness/cluster.py's overrides); each
round measures both, order rotated per round, so they share the machine's state.

Figures (through the real ``replog`` CLI as a child process, the mTLS side with
``--command-config`` and the admin certificate):
- ``replog produce`` perf mode, 1 KiB records, batch.size 65536, unthrottled, acks=all to a
  60-partition RF 3 topic (min.insync.replicas=2) led by broker 1: MB/s, and CPU s/GB of the
  leader + followers (the TLS encryption and decryption land there and in the client);
- ``replog e2e-latency`` acks=all, 100 B records at a fixed 20 rec/s on a 60-partition RF 3
  topic with leadership spread: p50/p99/p99.9.
Medians over rounds; mTLS/plaintext ratios per round, then the median. Targets: mTLS keeps
>= 85% of the throughput and adds <= 1 ms of p99. Nothing is asserted.
Run: ``python -m bench tls [--quick] [--runs N] [--data-dir DIR]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import time

from bench import ab_run, json_line, log, median, save_results
from bench.bench_client import (
    _E2E_P,
    _PERF_LINE,
    LATENCY_RECORD_BYTES,
    LOW_RATE,
    PARTITIONS,
    RECORD_BYTES,
    Roles,
    per_gb,
    replog_cli,
    settle_writeback,
)
from bench.harness.cluster import CLUSTER_OVERRIDES, rotating_assignment
from client.admin_client import AdminClient
from client.transport import ChannelPool
from harness.local_cluster import LocalCluster

NAME = "tls"
MODES = ("mtls", "plaintext")
BATCH = 65536
TARGETS = {"throughput_ratio_min": 0.85, "p99_added_ms_max": 1.0}


def _start(root: str, mode: str) -> LocalCluster:
    c = LocalCluster(os.path.join(root, mode), brokers=3, controllers=1,
                     log_dirs_per_broker=2, overrides=CLUSTER_OVERRIDES,
                     startup_timeout_s=180.0,
                     security="mtls" if mode == "mtls" else None)
    t = time.perf_counter()
    c.start()
    log(f"[{NAME}] {mode} cluster up in {time.perf_counter() - t:.1f} s ({c.data_dir})")
    return c


def _security_args(c: LocalCluster) -> tuple[str, ...]:
    return ("--command-config", str(c.client_properties_path)) if c.security else ()


async def _create_topics(c: LocalCluster) -> None:
    async with AdminClient(c.bootstrap_servers, default_api_timeout_ms=120000,
                           pool=ChannelPool(c.channel_factory())) as admin:
        await admin.create_topic("lat60", replica_assignment=rotating_assignment(PARTITIONS, 3),
                                 configs={"min.insync.replicas": "2"})
        await admin.create_topic("tput-rf3", replica_assignment={p: [1, 2, 3]
                                                                  for p in range(PARTITIONS)},
                                 configs={"min.insync.replicas": "2"})


def _produce(c: LocalCluster, records: int) -> dict:
    roles = Roles(c)
    roles.start()
    out, wall = replog_cli("produce", "--bootstrap-server", c.bootstrap_servers, "--topic",
                           "tput-rf3", "--num-records", str(records), "--record-size",
                           str(RECORD_BYTES), "--throughput", "-1", "--producer-props",
                           "acks=all", f"batch.size={BATCH}", *_security_args(c))
    cpu = roles.stop()
    m = _PERF_LINE.search(out)
    if m is None:
        raise RuntimeError(f"no perf summary line in: {out[-300:]}")
    sent, rec_s = int(m.group(1)), float(m.group(2))
    return {"records": sent, "mb_s": rec_s * RECORD_BYTES / 1e6, "wall_s": wall,
            "cpu_s_per_gb": per_gb(cpu, sent * RECORD_BYTES)}


def _e2e(c: LocalCluster, records: int) -> dict:
    out, wall = replog_cli("e2e-latency", "--bootstrap-server", c.bootstrap_servers, "--topic",
                           "lat60", "--num-records", str(records), "--record-size",
                           str(LATENCY_RECORD_BYTES), "--producer-acks", "all",
                           "--throughput", f"{LOW_RATE:.1f}", *_security_args(c))
    p = _E2E_P.search(out)
    if p is None:
        raise RuntimeError(f"no Percentiles line in: {out[-300:]}")
    return {"p50_ms": float(p.group(1)), "p99_ms": float(p.group(2)),
            "p999_ms": float(p.group(3)), "wall_s": wall}


def _round(clusters: dict[str, LocalCluster], r: int, records: int, e2e_records: int) -> dict:
    out = {}
    for mode in MODES if r % 2 == 0 else MODES[::-1]:
        c = clusters[mode]
        settle_writeback()
        tput = _produce(c, records)
        settle_writeback()
        lat = _e2e(c, e2e_records)
        out[mode] = {"produce": tput, "e2e": lat}
        log(f"[{NAME}] round {r} {mode}: acks=all RF3 {tput['mb_s']:.1f} MB/s, e2e p99 "
            f"{lat['p99_ms']:.1f} ms")
    return out


def _figures(rounds: list[dict]) -> dict:
    figs: dict = {}
    for mode in MODES:
        rows = [r[mode] for r in rounds]
        figs[mode] = {
            "rf3_64k_mb_s": median([x["produce"]["mb_s"] for x in rows]),
            "rf3_broker_cpu_s_per_gb": median([x["produce"]["cpu_s_per_gb"]["leader"]
                                               + x["produce"]["cpu_s_per_gb"]["followers"]
                                               for x in rows]),
            "e2e_p50_ms": median([x["e2e"]["p50_ms"] for x in rows]),
            "e2e_p99_ms": median([x["e2e"]["p99_ms"] for x in rows]),
            "e2e_p999_ms": median([x["e2e"]["p999_ms"] for x in rows]),
        }
    figs["mtls_over_plaintext"] = {
        "rf3_64k_mb_s": median([r["mtls"]["produce"]["mb_s"] / r["plaintext"]["produce"]["mb_s"]
                                for r in rounds]),
        "e2e_p99_added_ms": median([r["mtls"]["e2e"]["p99_ms"] - r["plaintext"]["e2e"]["p99_ms"]
                                    for r in rounds])}
    return figs


def main(opts: argparse.Namespace | None = None) -> dict:
    opts = opts or argparse.Namespace(quick=False, runs=None, data_dir=None)
    run = ab_run(opts, NAME, "tls", TARGETS)
    rounds, records, root, results = run.rounds, run.records, run.root, run.results
    e2e_records = run.e2e_records
    clusters: dict[str, LocalCluster] = {}
    try:
        for mode in MODES:
            clusters[mode] = _start(root, mode)
            asyncio.run(_create_topics(clusters[mode]))
        raw = [_round(clusters, r, records, e2e_records) for r in range(rounds)]
    finally:
        for c in clusters.values():
            c.stop(graceful=False)
        shutil.rmtree(root, ignore_errors=True)
    results["figures"] = _figures(raw)
    results["raw"] = raw
    results["took_s"] = round(time.time() - run.started, 1)
    _print(results)
    print(f"# saved {save_results(NAME, results)}")
    return results


def _print(results: dict) -> None:
    f = results["figures"]
    ratio = f["mtls_over_plaintext"]
    print(f"# {NAME}: mutual TLS on every listener vs plaintext, {results['rounds']} round(s), "
          f"medians{' (--quick: one small round)' if results['quick'] else ''}")
    print(f"{'figure':42} {'mtls':>9} {'plain':>9}")
    for label, key in (("acks=all RF 3, 64 KiB batches, MB/s", "rf3_64k_mb_s"),
                       ("CPU s/GB leader + followers", "rf3_broker_cpu_s_per_gb"),
                       ("e2e acks=all p50 ms (20 rec/s)", "e2e_p50_ms"),
                       ("e2e acks=all p99 ms (20 rec/s)", "e2e_p99_ms"),
                       ("e2e acks=all p99.9 ms (20 rec/s)", "e2e_p999_ms")):
        print(f"{label:42} {f['mtls'][key]:9.2f} {f['plaintext'][key]:9.2f}")
        print(json_line(NAME, key, {"mtls": f["mtls"][key], "plaintext": f["plaintext"][key]}))
    t = results["targets"]
    tput_ok = ratio["rf3_64k_mb_s"] >= t["throughput_ratio_min"]
    p99_ok = ratio["e2e_p99_added_ms"] <= t["p99_added_ms_max"]
    print(f"mTLS / plaintext throughput: {ratio['rf3_64k_mb_s']:.2f} (target >= "
          f"{t['throughput_ratio_min']:g}: {'PASS' if tput_ok else 'MISS'})")
    print(f"mTLS added e2e p99: {ratio['e2e_p99_added_ms']:+.2f} ms (target <= "
          f"{t['p99_added_ms_max']:g} ms: {'PASS' if p99_ok else 'MISS'})")
    print(json_line(NAME, "mtls_over_plaintext", {**ratio, "targets": t}))
