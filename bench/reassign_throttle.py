"""Issue 9 acceptance "Throttle": the catch-up rate of a throttled follower against the throttle
(KIP-73), through real processes. Target: within +-20% of the throttle.

Method (until AlterPartitionReassignments lands, the same traffic a reassignment makes: a
replica out of the ISR copying the leader's log): a LocalCluster of two brokers and one
controller; a topic with one partition on brokers 1 (leader) and 2; broker 2 is stopped, a
backlog is produced to broker 1, the throttles ``replog reassign execute --throttle`` sets are
written (both rates on every broker, both throttled-replica lists ``*``), and broker 2 is
started. Its replica's size is read through DescribeLogDirs every 0.2 s until it has the whole
backlog; the rate is the size gained between 10% and 90% of the backlog over the time it took
(leaving out the start-up and the tail), in MB/s (10^6 bytes). Median of several runs, each on a
fresh cluster. ``python -m bench.reassign_throttle [--quick] [--runs N] [--rate BYTES]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from bench import json_line, log, machine_info, save_results

RATE = 1_000_000  # bytes/s: the "1 MB/s"
RECORD = 100_000
THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LIST_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


async def replica_size(admin, broker: int) -> int:
    resp = (await admin.describe_log_dirs([broker]))[broker]
    return sum(p.size for d in resp.results for t in d.topics if t.topic == "t"
               for p in t.partitions if p.partition == 0 and not p.is_future)


async def wait_isr(admin, isr: set[int], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = (await admin.describe_topics(["t"]))["t"].partition(0)
        if info is not None and info.leader == 1 and set(info.isr) == isr:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"ISR of t-0 never became {sorted(isr)}")


async def one_run(data_dir: str, rate: int | None, backlog_bytes: int) -> dict:
    """One fresh cluster; ``rate`` None: no throttle (the reference run)."""
    from admin.client.admin_client import AdminClient, AlterConfigOp
    from admin.client.producer import Producer
    from admin.local_cluster import LocalCluster

    c = LocalCluster(data_dir, brokers=2, controllers=1, log_dirs_per_broker=1, overrides={
        "zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": "false"},
        startup_timeout_s=180.0)
    c.start()
    try:
        bs = c.bootstrap_servers
        async with AdminClient(bs) as admin:
            await admin.create_topic("t", replica_assignment={0: [1, 2]})
            await wait_isr(admin, {1, 2})
            await c.broker(2).astop()
            await wait_isr(admin, {1})
            n = backlog_bytes // RECORD
            async with Producer(bs, acks=1, linger_ms=5, batch_size=1 << 20) as p:
                futures = [await p.send("t", bytes([i % 251]) * RECORD, partition=0)
                           for i in range(n)]
                for f in futures:
                    await f
            target = await replica_size(admin, 1)
            if rate is not None:
                errors = await admin.incremental_alter_configs({
                    ("brokers", ""): [AlterConfigOp(k, "set", str(rate)) for k in THROTTLES],
                    ("topics", "t"): [AlterConfigOp(k, "set", "*") for k in LIST_KEYS]})
                assert set(errors.values()) == {None}, errors
        await c.broker(2).astart()
        started = time.monotonic()
        samples = []  # (seconds since the start, bytes of broker 2's replica)
        limit = 5 * target / (rate or target) + 60
        async with AdminClient(bs) as admin:  # a new client: broker 2 has a new address
            while time.monotonic() - started < limit:
                size = await replica_size(admin, 2)
                samples.append((time.monotonic() - started, size))
                if size >= target:
                    break
                await asyncio.sleep(0.2 if rate is not None else 0.02)
        done = samples[-1][0] if samples and samples[-1][1] >= target else None
        return {"target_bytes": target, "rate_Bps": measured_rate(samples, target),
                "caught_up_s": round(done, 2) if done is not None else None}
    finally:
        c.stop(graceful=False)


def measured_rate(samples: list[tuple[float, int]], target: int) -> float | None:
    """Bytes/s between the first sample at >= 10% of ``target`` and the first at >= 90%."""
    lo = next(((t, s) for t, s in samples if s >= 0.1 * target), None)
    hi = next(((t, s) for t, s in samples if s >= 0.9 * target), None)
    if lo is None or hi is None or hi[0] <= lo[0]:
        return None
    return (hi[1] - lo[1]) / (hi[0] - lo[0])


def main(opts) -> dict:
    runs = opts.runs or (1 if opts.quick else 3)
    rate = getattr(opts, "rate", None) or RATE
    backlog = (12 if opts.quick else 24) * rate  # ~12 s / 24 s of catch-up at the throttle
    results = []
    for i in range(runs):
        with tempfile.TemporaryDirectory(dir=opts.data_dir) as d:
            r = asyncio.run(one_run(d, rate, backlog))
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
              "backlog_MB": round(backlog / 1e6, 1), "runs": runs}
    with tempfile.TemporaryDirectory(dir=opts.data_dir) as d:
        raw = asyncio.run(one_run(d, None, backlog))
    figure["unthrottled_MBps"] = round(raw["rate_Bps"] / 1e6, 1) if raw["rate_Bps"] else None
    figure["unthrottled_caught_up_s"] = raw["caught_up_s"]
    print(f"== reassignment throttle (KIP-73): a follower catching up {figure['backlog_MB']} MB "
          f"through leader and follower throttles")
    print(f"   throttle {figure['throttle_MBps']:.3f} MB/s, measured "
          f"{figure['measured_MBps_median']} MB/s (median of {runs}: "
          f"{figure['measured_MBps_runs']}), ratio {figure['ratio']}, within +-20%: "
          f"{figure['within_20_percent']}")
    print(f"   unthrottled, the same catch-up: {figure['unthrottled_caught_up_s']} s "
          f"({figure['unthrottled_MBps']} MB/s between 10% and 90%)")
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
    main(p.parse_args())
