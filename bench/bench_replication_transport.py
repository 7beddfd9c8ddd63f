"""Follower fetch over a long-lived gRPC stream (FetchStream) against a unary Fetch per request,
A/B on one cluster in one run: ``replica.fetch.stream.enable`` is a dynamic broker config, set
on the brokers' default entity between figures (order rotated per round).

The cluster and the figures are bench/bench_client.py's (the real ``replog`` CLI as a child
process; idle RF 3 topics beside the measured ones; CPU split into client, leader = broker 1,
followers = brokers 2 + 3):
- ``replog produce`` perf mode, 1 KiB records, batch.size 65536: acks=all to a 60-partition
  RF 3 topic led by broker 1, and acks=1 to a 60-partition RF 1 topic, and their ratio;
- ``replog e2e-latency`` at 20 rec/s, 100 B records, acks=all RF 3, 60 partitions with
  leadership spread over the brokers (p99 over rounds).
Figures are medians over rounds; stream/unary ratios are per round, then the median.
Run: ``python -m bench replication_transport [--quick] [--runs N] [--data-dir DIR]``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import time

from bench import ab_run, json_line, log, median, save_results
from bench.bench_client import (
    LATENCY_RECORD_BYTES,
    LOW_RATE,
    create_topics,
    e2e_run,
    produce_run,
    settle_writeback,
    startup_cpu,
)
from bench.harness import start_cluster
from client import AdminClient
from client.admin_client import AlterConfigOp

NAME = "replication_transport"
BATCH = 65536
MODES = ("stream", "unary")
# the targets for the gRPC streams (the figures they replace were measured on unary calls)
TARGETS = {"rf3_64k_mb_s": 100.0, "ratio_rf3_rf1": 0.65, "e2e_p99_ms": 8.0,
           "broker_cpu_s_per_gb": 8.0}


async def _set_transport(bootstrap: str, stream: bool) -> None:
    async with AdminClient(bootstrap) as admin:
        await admin.incremental_alter_configs({("brokers", ""): [AlterConfigOp(
            "replica.fetch.stream.enable", "set", "true" if stream else "false")]})
    await asyncio.sleep(2.0)  # every broker has reloaded the entity and its fetchers switched


def _round(c, r: int, records: int, e2e_records: int) -> dict:
    out = {}
    baseline = startup_cpu(c, "tput-rf1")
    order = MODES if r % 2 == 0 else MODES[::-1]
    for mode in order:
        asyncio.run(_set_transport(c.bootstrap_servers, mode == "stream"))
        settle_writeback()
        rf3 = produce_run(c, "tput-rf3", "all", BATCH, records, baseline)
        settle_writeback()
        rf1 = produce_run(c, "tput-rf1", "1", BATCH, records, baseline)
        e2e = e2e_run(c, "lat60", LOW_RATE, e2e_records, LATENCY_RECORD_BYTES)
        out[mode] = {"rf3": rf3, "rf1": rf1, "e2e": e2e}
        log(f"[{NAME}] round {r} {mode}: acks=all RF3 {rf3['mb_s']:.1f} MB/s, acks=1 RF1 "
            f"{rf1['mb_s']:.1f} MB/s, e2e p99 {e2e['p99_ms']:.2f} ms")
    return out


def _figures(rounds: list[dict]) -> dict:
    figs: dict = {}
    for mode in MODES:
        rows = [r[mode] for r in rounds]
        cpu = [x["rf3"]["cpu_s_per_gb"] for x in rows]
        figs[mode] = {
            "rf3_64k_mb_s": median([x["rf3"]["mb_s"] for x in rows]),
            "rf1_64k_mb_s": median([x["rf1"]["mb_s"] for x in rows]),
            "ratio_rf3_rf1": median([x["rf3"]["mb_s"] / x["rf1"]["mb_s"] for x in rows]),
            "e2e_p99_ms": median([x["e2e"]["p99_ms"] for x in rows]),
            "broker_cpu_s_per_gb": median([c["leader"] + c["followers"] for c in cpu]),
            "leader_cpu_s_per_gb": median([c["leader"] for c in cpu]),
            "followers_cpu_s_per_gb": median([c["followers"] for c in cpu]),
            "client_cpu_s_per_gb": median([c["client"] for c in cpu]),
        }
    figs["stream_over_unary"] = {
        k: median([r["stream"][a][b] / r["unary"][a][b] for r in rounds])
        for k, (a, b) in {"rf3_64k_mb_s": ("rf3", "mb_s"), "rf1_64k_mb_s": ("rf1", "mb_s"),
                          "e2e_p99_ms": ("e2e", "p99_ms")}.items()}
    return figs


def main(opts: argparse.Namespace | None = None) -> dict:
    opts = opts or argparse.Namespace(quick=False, runs=None, data_dir=None)
    run = ab_run(opts, NAME, "transport", TARGETS)
    rounds, records, root, results = run.rounds, run.records, run.root, run.results
    e2e_records = run.e2e_records
    c = start_cluster(root, NAME)
    try:
        asyncio.run(create_topics(c))
        raw = [_round(c, r, records, e2e_records) for r in range(rounds)]
    finally:
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
    print(f"# {NAME}: follower fetch over a stream vs unary, {results['rounds']} round(s), "
          f"medians{' (--quick: one small round)' if results['quick'] else ''}")
    print(f"{'figure':42} {'stream':>9} {'unary':>9} {'ratio':>7} {'target':>8}")
    rows = [("acks=all RF 3, 64 KiB batches, MB/s", "rf3_64k_mb_s", ">="),
            ("acks=1 RF 1, 64 KiB batches, MB/s", "rf1_64k_mb_s", None),
            ("acks=all RF 3 / acks=1 RF 1", "ratio_rf3_rf1", ">="),
            ("e2e p99 at 20 rec/s, 60 partitions, ms", "e2e_p99_ms", "<="),
            ("CPU s/GB leader + followers (acks=all)", "broker_cpu_s_per_gb", "<="),
            ("  leader", "leader_cpu_s_per_gb", None),
            ("  followers", "followers_cpu_s_per_gb", None),
            ("  client", "client_cpu_s_per_gb", None)]
    lines = []
    for label, key, op in rows:
        s, u = f["stream"][key], f["unary"][key]
        ratio = f["stream_over_unary"].get(key)
        target = results["targets"].get(key)
        verdict = ""
        if op and target is not None:
            ok = s >= target if op == ">=" else s <= target
            verdict = f"{op}{target:g} {'PASS' if ok else 'MISS'}"
        print(f"{label:42} {s:9.2f} {u:9.2f} "
              f"{'' if ratio is None else f'{ratio:7.2f}':>7} {verdict}")
        lines.append(json_line(NAME, key, {"stream": s, "unary": u,
                                           "stream_over_unary": ratio, "target": target}))
    print("\n".join(lines))
