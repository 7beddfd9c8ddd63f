"""Reassignment throttles (design.md#reassignment): the rate of a throttled reassignment against the
throttle (KIP-73), through real processes. Target: within +-20% of the throttle.

A LocalCluster of two brokers and one controller; a topic with one partition on broker 1 and a
backlog produced to it. Two ways to make broker 2 copy it (``--method``):
- ``reassign`` (default): ``replog reassign --execute --throttle RATE`` moves the partition from
  broker 1 to broker 2 (a real AlterPartitionReassignments; the tool sets the rates on the
  brokers and the leader/follower throttled replicas as Kafka's tool does);
- ``catch-up``: the topic has replicas 1 and 2, broker 2 is stopped while the backlog is
  produced, the same throttles are written (both lists ``*``) and broker 2 is started: the
  same traffic, a replica out of the ISR copying the leader's log.
Broker 2's replica size is read through DescribeLogDirs every 0.2 s until it holds the whole
backlog; the rate is the size gained between 10% and 90% of the backlog over the time it took
(leaving out the start-up and the tail), in MB/s (10^6 bytes). Median of several runs, each on a
fresh cluster, and one unthrottled run for reference.
``python -m bench.reassign_throttle [--quick] [--runs N] [--rate BYTES] [--method M]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import json_line, log, machine_info, measured_rate, save_results
from harness.polling import async_wait_until

RATE = 1_000_000  # bytes/s: the "1 MB/s"
RECORD = 100_000
THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LIST_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
REPO = Path(__file__).resolve().parents[1]


async def reassign(bs: str, plan_file: str, rate: int | None) -> None:
    """``replog reassign --execute``: broker 1's replica of t-0 moves to broker 2."""
    Path(plan_file).write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [2]}]}))
    args = ["reassign", "--bootstrap-server", bs, "--execute",
            "--reassignment-json-file", plan_file]
    if rate is not None:
        args += ["--throttle", str(rate)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "admin.cli", *args, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"replog reassign failed: {err.decode().strip()} {out.decode()}")


async def replica_size(admin, broker: int) -> int:
    resp = (await admin.describe_log_dirs([broker]))[broker]
    return sum(p.size for d in resp.results for t in d.topics if t.topic == "t"
               for p in t.partitions if p.partition == 0 and not p.is_future)


def scrape(url: str, names: set[str]) -> dict[str, float]:
    """The samples of ``names`` a process serves, labels folded into the key."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    return {s.name + ("{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}"
                      if s.labels else ""): round(s.value)
            for f in text_string_to_metric_families(text) for s in f.samples
            if s.name in names}


LEADER_METRICS = {"kafka_server_replicamanager_reassigningpartitions",
                  "replog_reassignment_replica_lag_messages",
                  "kafka_server_brokertopicmetrics_reassignmentbytesout_total",
                  "kafka_server_leaderreplication_byte_rate"}
FOLLOWER_METRICS = {"kafka_server_brokertopicmetrics_reassignmentbytesin_total",
                    "kafka_server_followerreplication_byte_rate"}


async def wait_isr(admin, isr: set[int], timeout: float = 60) -> None:
    """Until t-0 is led by broker 1 with this ISR."""
    async def led_by_1() -> bool:
        info = (await admin.describe_topics(["t"]))["t"].partition(0)
        return info is not None and info.leader == 1 and set(info.isr) == isr

    await async_wait_until(led_by_1, timeout, interval=0.1, timed_out=lambda _: TimeoutError(
        f"ISR of t-0 never became {sorted(isr)}"))


async def one_run(data_dir: str, rate: int | None, backlog_bytes: int, method: str) -> dict:
    """One fresh cluster; ``rate`` None: no throttle (the reference run)."""
    from client.admin_client import AdminClient, AlterConfigOp
    from client.producer import Producer
    from harness.local_cluster import LocalCluster

    c = LocalCluster(data_dir, brokers=2, controllers=1, log_dirs_per_broker=1, overrides={
        "zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": "false"},
        startup_timeout_s=180.0)
    c.start()
    try:
        bs = c.bootstrap_servers
        async with AdminClient(bs) as admin:
            moving = method == "reassign"
            await admin.create_topic("t", replica_assignment={0: [1] if moving else [1, 2]})
            await wait_isr(admin, {1} if moving else {1, 2})
            if not moving:
                await c.broker(2).astop()
                await wait_isr(admin, {1})
            n = backlog_bytes // RECORD
            async with Producer(bs, acks=1, linger_ms=5, batch_size=1 << 20) as p:
                futures = [await p.send("t", bytes([i % 251]) * RECORD, partition=0)
                           for i in range(n)]
                for f in futures:
                    await f
            target = await replica_size(admin, 1)
            if moving:
                await reassign(bs, os.path.join(data_dir, "plan.json"), rate)
            elif rate is not None:
                errors = await admin.incremental_alter_configs({
                    ("brokers", ""): [AlterConfigOp(k, "set", str(rate)) for k in THROTTLES],
                    ("topics", "t"): [AlterConfigOp(k, "set", "*") for k in LIST_KEYS]})
                assert set(errors.values()) == {None}, errors
        if not moving:
            await c.broker(2).astart()
        started = time.monotonic()
        samples = []  # (seconds since the start, bytes of broker 2's replica)
        midway = {}  # both brokers' reassignment metrics at half the backlog
        limit = 5 * target / (rate or target) + 60
        async with AdminClient(bs) as admin:  # a new client: broker 2 has a new address
            while time.monotonic() - started < limit:
                size = await replica_size(admin, 2)
                samples.append((time.monotonic() - started, size))
                if not midway and size >= target / 2:
                    midway = {**scrape(c.broker(1).metrics_url, LEADER_METRICS),
                              **scrape(c.broker(2).metrics_url, FOLLOWER_METRICS)}
                if size >= target:
                    break
                await asyncio.sleep(0.2 if rate is not None else 0.02)
        done = samples[-1][0] if samples and samples[-1][1] >= target else None
        return {"target_bytes": target, "rate_Bps": measured_rate(samples, target),
                "caught_up_s": round(done, 2) if done is not None else None,
                "midway_metrics": midway}
    finally:
        c.stop(graceful=False)


def main(opts) -> dict:
    runs = opts.runs or (1 if opts.quick else 3)
    rate = getattr(opts, "rate", None) or RATE
    method = getattr(opts, "method", None) or "reassign"
    backlog = (12 if opts.quick else 24) * rate  # ~12 s / 24 s of catch-up at the throttle
    results = []
    for i in range(runs):
        with tempfile.TemporaryDirectory(dir=opts.data_dir) as d:
            r = asyncio.run(one_run(d, rate, backlog, method))
        results.append(r)
        got = r["rate_Bps"]
        log(f"   run {i + 1}: {r['target_bytes'] / 1e6:.1f} MB caught up in "
            f"{r['caught_up_s']} s, {got / 1e6:.3f} MB/s between 10% and 90%"
            if got is not None else f"   run {i + 1}: no rate measured ({r})")
    rates = [r["rate_Bps"] for r in results if r["rate_Bps"] is not None]
    median_rate = statistics.median(rates) if rates else None
    figure = {"throttle_MBps": rate / 1e6,
              "measured_MBps_median": round(median_rate / 1e6, 3) if rates else None,
              "measured_MBps_runs": [round(x / 1e6, 3) for x in rates],
              "ratio": round(median_rate / rate, 3) if rates else None,
              "within_20_percent": bool(rates) and abs(median_rate / rate - 1) <= 0.2,
              "backlog_MB": round(backlog / 1e6, 1), "runs": runs, "method": method}
    figure["midway_metrics_run_1"] = results[0]["midway_metrics"]
    with tempfile.TemporaryDirectory(dir=opts.data_dir) as d:
        raw = asyncio.run(one_run(d, None, backlog, method))
    figure["unthrottled_MBps"] = round(raw["rate_Bps"] / 1e6, 1) if raw["rate_Bps"] else None
    figure["unthrottled_caught_up_s"] = raw["caught_up_s"]
    what = ("a partition reassigned from broker 1 to broker 2" if method == "reassign" else
            "a restarted follower catching up")
    print(f"== reassignment throttle (KIP-73): {what}, {figure['backlog_MB']} MB "
          f"through leader and follower throttles")
    print(f"   throttle {figure['throttle_MBps']:.3f} MB/s, measured "
          f"{figure['measured_MBps_median']} MB/s (median of {runs}: "
          f"{figure['measured_MBps_runs']}), ratio {figure['ratio']}, within +-20%: "
          f"{figure['within_20_percent']}")
    print(f"   unthrottled, the same copy: {figure['unthrottled_caught_up_s']} s "
          f"({figure['unthrottled_MBps']} MB/s between 10% and 90%)")
    print(f"   metrics at half the backlog (run 1): {figure['midway_metrics_run_1']}")
    print(json_line("reassign_throttle", "throttled_catch_up_rate", figure))
    save_results("reassign_throttle", {"machine": machine_info(), "figure": figure})
    return figure


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m bench.reassign_throttle", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="one run, a 12 s backlog")
    p.add_argument("--runs", type=int, default=None, help="runs (median taken); default 3")
    p.add_argument("--rate", type=int, default=RATE, help="throttle, bytes/s (default 1e6)")
    p.add_argument("--data-dir", default=None, help="parent dir for the clusters' data")
    p.add_argument("--method", choices=("reassign", "catch-up"), default="reassign",
                   help="how broker 2 comes to copy the log (default: reassign)")
    main(p.parse_args())
