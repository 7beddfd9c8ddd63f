"""The JBOD acceptance figure "intra-broker move MB/s against the throttle" (design.md#jbod,
KIP-113), through real processes.

A LocalCluster of one broker with two log dirs and one controller; a topic with one partition,
created in the broker's first dir, and a backlog of 1 KiB records produced to it. Then
``replica.alter.log.dirs.io.max.bytes.per.second`` is set on the broker (a dynamic broker
config, as an operator would with ``replog configs --entity-type brokers --entity-name 1``) and
AlterReplicaLogDirs moves the replica to the second dir. The future replica's size is read
through DescribeLogDirs every 0.2 s (``isFuture: true`` in ``replog log-dirs describe``) until
the move is done (the replica is in the second dir, no future left). The rate is the size gained
between 10% and 90% of the backlog over the time it took (leaving out the start and the swap),
in MB/s (10^6 bytes). Median of several runs, each on a fresh cluster, and one unthrottled run
for reference; every run ends with the swapped-in replica's size equal to the original's.

Records are 1 KiB because the copier swaps once the future replica is within 1000 offsets of
the log end (the tail is copied on the write path, unthrottled; broker/alter_log_dirs.py): with
1 KiB records that tail is 1 MB of a 24 MB backlog.

``python -m bench alter_log_dirs [--quick] [--runs N]`` or
``python -m bench.bench_alter_log_dirs [--quick] [--runs N] [--rate BYTES]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from bench import measured_rate
from bench.harness.runner import report, run_each

RATE = 2_000_000  # bytes/s
RECORD = 1024
KEY = "replica.alter.log.dirs.io.max.bytes.per.second"


async def sizes(admin) -> tuple[dict[str, int], dict[str, int]]:
    """(current replica's size by dir, future replica's size by dir) of t-0 on broker 1."""
    resp = (await admin.describe_log_dirs([1]))[1]
    current: dict[str, int] = {}
    future: dict[str, int] = {}
    for d in resp.results:
        for t in d.topics:
            for p in t.partitions:
                if t.topic == "t" and p.partition == 0:
                    (future if p.is_future else current)[d.log_dir] = p.size
    return current, future


async def one_run(data_dir: str, rate: int | None, backlog_bytes: int) -> dict:
    """One fresh cluster; ``rate`` None: no throttle (the reference run)."""
    from client.admin_client import AdminClient, AlterConfigOp
    from client.producer import Producer
    from harness.local_cluster import LocalCluster

    c = LocalCluster(data_dir, brokers=1, controllers=1, log_dirs_per_broker=2, overrides={
        "zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": "false"},
        startup_timeout_s=180.0)
    c.start()
    try:
        bs = c.bootstrap_servers
        first, second = (str(d) for d in c.broker(1).log_dirs)
        async with AdminClient(bs) as admin:
            await admin.create_topic("t", replica_assignment={0: [1]})
            async with Producer(bs, acks=1, linger_ms=5, batch_size=1 << 16) as p:
                futures = [await p.send("t", bytes([i % 251]) * RECORD, partition=0)
                           for i in range(backlog_bytes // RECORD)]
                for f in futures:
                    await f
            current, _ = await sizes(admin)
            assert list(current) == [first], current
            target = current[first]
            if rate is not None:
                errors = await admin.incremental_alter_configs(
                    {("brokers", "1"): [AlterConfigOp(KEY, "set", str(rate))]})
                assert set(errors.values()) == {None}, errors
            errors = await admin.alter_replica_log_dirs(1, {("t", 0): second})
            assert set(errors.values()) == {None}, errors
            started = time.monotonic()
            samples = []  # (seconds since the request, bytes of the future replica)
            limit = 5 * target / (rate or target) + 60
            done = None
            while time.monotonic() - started < limit:
                current, future = await sizes(admin)
                now = time.monotonic() - started
                if list(current) == [second] and not future:
                    done = now
                    samples.append((now, target))
                    break
                samples.append((now, future.get(second, 0)))
                await asyncio.sleep(0.2 if rate is not None else 0.05)
            moved = current.get(second)
        return {"target_bytes": target, "rate_Bps": measured_rate(samples, target),
                "moved_s": round(done, 2) if done is not None else None,
                "size_after_move": moved}
    finally:
        c.stop(graceful=False)


def main(opts) -> dict:
    rate = getattr(opts, "rate", None) or RATE
    backlog = (6 if opts.quick else 12) * rate  # ~6 s / 12 s of copying at the throttle
    results = run_each(opts, lambda d: one_run(d, rate, backlog), lambda i, _, r: (
        f"   run {i + 1}: {r['target_bytes'] / 1e6:.1f} MB moved in {r['moved_s']} s, "
        + (f"{r['rate_Bps'] / 1e6:.3f} MB/s between 10% and 90%" if r["rate_Bps"] is not None
           else f"no rate measured ({r})")))
    runs = len(results)
    rates = [r["rate_Bps"] for r in results if r["rate_Bps"] is not None]
    median_rate = statistics.median(rates) if rates else None
    with tempfile.TemporaryDirectory(dir=opts.data_dir) as d:
        raw = asyncio.run(one_run(d, None, backlog))
    figure = {
        "throttle_MBps": rate / 1e6,
        "measured_MBps_median": round(median_rate / 1e6, 3) if rates else None,
        "measured_MBps_runs": [round(x / 1e6, 3) for x in rates],
        "ratio": round(median_rate / rate, 3) if rates else None,
        "within_20_percent": bool(rates) and abs(median_rate / rate - 1) <= 0.2,
        "backlog_MB": round(backlog / 1e6, 1), "runs": runs,
        "moved_s_runs": [r["moved_s"] for r in results],
        "sizes_kept": all(r["size_after_move"] == r["target_bytes"] for r in results + [raw]),
        # Unthrottled, the move is over within a few polls: the figure is end to end (the
        # request to the first poll that sees it done), so a lower bound.
        "unthrottled_MBps_end_to_end": round(raw["target_bytes"] / raw["moved_s"] / 1e6, 1)
        if raw["moved_s"] else None,
        "unthrottled_moved_s": raw["moved_s"],
    }
    print(f"== intra-broker move (KIP-113): one replica of {figure['backlog_MB']} MB to the "
          f"broker's other log dir, {KEY}")
    print(f"   throttle {figure['throttle_MBps']:.3f} MB/s, measured "
          f"{figure['measured_MBps_median']} MB/s (median of {runs}: "
          f"{figure['measured_MBps_runs']}), ratio {figure['ratio']}, within +-20%: "
          f"{figure['within_20_percent']}; moves done in {figure['moved_s_runs']} s")
    print(f"   unthrottled: moved in {figure['unthrottled_moved_s']} s "
          f"(>= {figure['unthrottled_MBps_end_to_end']} MB/s end to end); swapped-in replica "
          f"the size of the original in every run: {figure['sizes_kept']}")
    return report("alter_log_dirs", "intra_broker_move_rate", figure, ())


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m bench.bench_alter_log_dirs",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="one run, a 6 s backlog")
    p.add_argument("--runs", type=int, default=None, help="runs (median taken); default 3")
    p.add_argument("--rate", type=int, default=RATE, help="throttle, bytes/s (default 2e6)")
    p.add_argument("--data-dir", default=None, help="parent dir for the clusters' data")
    main(p.parse_args())
