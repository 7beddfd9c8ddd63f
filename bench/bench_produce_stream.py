"""Producer requests pipelined on one long-lived gRPC stream per broker (Broker.ProduceStream)
against a unary Produce call per request, A/B in one run on one cluster: the client's
``produce.stream.enable`` property, per figure (order rotated per round). Followers fetch as the
brokers are configured (FetchStream by default) in both.

The cluster and the figures are bench/bench_client.py's (the real ``replog`` CLI as a child
process; idle RF 3 topics beside the measured ones; CPU split into client, leader = broker 1,
followers = brokers 2 + 3): ``replog produce`` perf mode, 1 KiB records, batch.size 65536,
acks=all to a 60-partition RF 3 topic led by broker 1, and acks=1 to a 60-partition RF 1 topic,
and their ratio - the stream targets' first two figures. Figures are medians over rounds; stream/unary
ratios are per round, then the median. On a shared machine the figures are noisy: read the
same-round ratios rather than absolute MB/s.
Run: ``python -m bench produce_stream [--quick] [--runs N] [--data-dir DIR]``.
"""  # noqa: E501

from __future__ import annotations

import argparse
import asyncio
import shutil
import time

from bench import ab_run, json_line, log, median, save_results
from bench.bench_client import create_topics, produce_run, settle_writeback, startup_cpu
from bench.harness import start_cluster

NAME = "produce_stream"
BATCH = 65536
MODES = ("stream", "unary")
# the targets for the gRPC streams (the figures they replace were measured on unary calls)
TARGETS = {"rf3_64k_mb_s": 100.0, "ratio_rf3_rf1": 0.65}


def _round(c, r: int, records: int) -> dict:
    out = {}
    baseline = startup_cpu(c, "tput-rf1")
    for mode in MODES if r % 2 == 0 else MODES[::-1]:
        props = (f"produce.stream.enable={'true' if mode == 'stream' else 'false'}",)
        settle_writeback()
        rf3 = produce_run(c, "tput-rf3", "all", BATCH, records, baseline, props)
        settle_writeback()
        rf1 = produce_run(c, "tput-rf1", "1", BATCH, records, baseline, props)
        out[mode] = {"rf3": rf3, "rf1": rf1}
        log(f"[{NAME}] round {r} {mode}: acks=all RF3 {rf3['mb_s']:.1f} MB/s, acks=1 RF1 "
            f"{rf1['mb_s']:.1f} MB/s")
    return out


def _figures(rounds: list[dict]) -> dict:
    figs: dict = {}
    for mode in MODES:
        rows = [r[mode] for r in rounds]
        figs[mode] = {
            "rf3_64k_mb_s": median([x["rf3"]["mb_s"] for x in rows]),
            "rf1_64k_mb_s": median([x["rf1"]["mb_s"] for x in rows]),
            "ratio_rf3_rf1": median([x["rf3"]["mb_s"] / x["rf1"]["mb_s"] for x in rows]),
            "rf3_broker_cpu_s_per_gb": median([x["rf3"]["cpu_s_per_gb"]["leader"]
                                               + x["rf3"]["cpu_s_per_gb"]["followers"]
                                               for x in rows]),
            "rf3_client_cpu_s_per_gb": median([x["rf3"]["cpu_s_per_gb"]["client"]
                                               for x in rows]),
            "rf1_leader_cpu_s_per_gb": median([x["rf1"]["cpu_s_per_gb"]["leader"]
                                               for x in rows]),
            "rf1_client_cpu_s_per_gb": median([x["rf1"]["cpu_s_per_gb"]["client"]
                                               for x in rows]),
        }
    figs["stream_over_unary"] = {
        k: median([r["stream"][a]["mb_s"] / r["unary"][a]["mb_s"] for r in rounds])
        for k, a in (("rf3_64k_mb_s", "rf3"), ("rf1_64k_mb_s", "rf1"))}
    return figs


def main(opts: argparse.Namespace | None = None) -> dict:
    opts = opts or argparse.Namespace(quick=False, runs=None, data_dir=None)
    run = ab_run(opts, NAME, "produce-stream", TARGETS)
    rounds, records, root, results = run.rounds, run.records, run.root, run.results
    c = start_cluster(root, NAME)
    try:
        asyncio.run(create_topics(c))
        raw = [_round(c, r, records) for r in range(rounds)]
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
    print(f"# {NAME}: replog produce over a stream vs unary, {results['rounds']} round(s), "
          f"medians{' (--quick: one small round)' if results['quick'] else ''}")
    print(f"{'figure':42} {'stream':>9} {'unary':>9} {'ratio':>7} {'target':>8}")
    rows = [("acks=all RF 3, 64 KiB batches, MB/s", "rf3_64k_mb_s"),
            ("acks=1 RF 1, 64 KiB batches, MB/s", "rf1_64k_mb_s"),
            ("acks=all RF 3 / acks=1 RF 1", "ratio_rf3_rf1"),
            ("CPU s/GB leader + followers (acks=all)", "rf3_broker_cpu_s_per_gb"),
            ("CPU s/GB client (acks=all)", "rf3_client_cpu_s_per_gb"),
            ("CPU s/GB leader (acks=1 RF 1)", "rf1_leader_cpu_s_per_gb"),
            ("CPU s/GB client (acks=1 RF 1)", "rf1_client_cpu_s_per_gb")]
    for label, key in rows:
        s, u = f["stream"][key], f["unary"][key]
        ratio = f["stream_over_unary"].get(key)
        target = results["targets"].get(key)
        verdict = "" if target is None else \
            f">={target:g} {'PASS' if s >= target else 'MISS'}"
        print(f"{label:42} {s:9.2f} {u:9.2f} "
              f"{'' if ratio is None else f'{ratio:7.2f}':>7} {verdict}")
        print(json_line(NAME, key, {"stream": s, "unary": u, "stream_over_unary": ratio,
                                    "target": target}))
