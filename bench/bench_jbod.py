"""JBOD log-dir failure (design.md#jbod): a log dir holding ~1k partition replicas fails; how
long until new leaders serve, and until every lost replica is back in the ISR (re-created in
the broker's healthy dir and caught up from the leaders).

Real processes: a LocalCluster of one controller and three brokers with two log dirs each;
broker 2's second dir is an ext4 image loop-mounted ``errors=remount-ro`` (as root; otherwise
the dir fails through the file-operation seam with EIO on every operation - same handler,
same path after the error). Topic ``jbod``: PARTITIONS partitions of RF 3, min.insync.replicas
2, so broker 2 holds every partition and about half of them in the failed dir; RECORDS small
records are produced (acks=all) before the fault so that re-replication copies data.

Per run, from the moment the fault is made (``trigger_fs_error`` / the rules file written):

- **detected**: the broker's ``log_dir_offline`` event (the error surfaces at the dir's next
  write: with no produce load after the fault, that is the next checkpoint, up to
  replica.high.watermark.checkpoint.interval.ms = 5 s later - what Kafka would see too);
- **leaders moved**: every lost partition broker 2 led has another leader (Metadata, polled
  every 50 ms), and a produce to each of them is acknowledged (acks=all);
- **back in ISR**: every lost partition's ISR holds all three replicas again, and the
  /restart_partitions queue is empty.

The figures are the median over runs (default 3; 1 with ``--quick``, which also uses 200
partitions instead of 2000). ``python -m bench jbod [--quick] [--runs N] [--data-dir DIR]``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from bench import log, median
from bench.harness.runner import report, run_each

FULL_PARTITIONS = 2000
QUICK_PARTITIONS = 200
RECORDS_PER_PARTITION = 20
VICTIM = 2
OVERRIDES = {"zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": "false",
             "replica.lag.time.max.ms": 10000, "replica.fetch.wait.max.ms": 200}


async def _describe(admin, topic: str):
    return (await admin.describe_topics([topic]))[topic].partitions


def _in_dir(path) -> set[int]:
    try:
        return {int(n.rsplit("-", 1)[1]) for n in os.listdir(path)
                if n.startswith("jbod-") and n.rsplit("-", 1)[1].isdigit()}
    except OSError:
        return set()


async def _until(cond, timeout: float, what: str, interval: float = 0.05) -> float:
    t0 = time.monotonic()
    while True:
        if await cond():
            return time.monotonic()
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(interval)


def _detected_at(event_log) -> float:
    """Wall-clock time of the broker's first ``log_dir_offline`` event."""
    from datetime import datetime
    with open(event_log, encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "log_dir_offline":
                return datetime.fromisoformat(e["timestamp"]).timestamp()
    raise RuntimeError("the broker never took the dir offline")


async def one_run(data_dir: str, partitions: int) -> dict:
    from chaos import disk
    from client.admin_client import AdminClient
    from client.producer import Producer
    from harness.cluster_view import ClusterView
    from harness.local_cluster import LocalCluster

    rules = Path(data_dir) / "faults.json"
    rules.write_text("[]")
    c = LocalCluster(Path(data_dir) / "cluster", brokers=3, controllers=1,
                     log_dirs_per_broker=2, overrides=OVERRIDES, startup_timeout_s=180.0,
                     per_broker_overrides={VICTIM: {"fault.injection.file": str(rules)}})
    failed_dir = c.broker(VICTIM).log_dirs[1]
    real = disk.unavailable() is None
    mounted = None
    if real:
        mounted = disk.LoopMountedLogDir(failed_dir, Path(data_dir) / "dir.img")
        mounted.create_and_mount()
    try:
        c.start()
        bs = c.bootstrap_servers
        async with AdminClient(bs, default_api_timeout_ms=180000) as admin:
            await admin.create_topic("jbod", partitions, 3,
                                     configs={"min.insync.replicas": "2"})

            async def full_isr(tps=None):
                ps = await _describe(admin, "jbod")
                return all(len(p.isr) == 3 and p.leader >= 0 for p in ps
                           if tps is None or p.partition in tps)
            await _until(full_isr, 300, "jbod fully replicated", 0.5)
            async with Producer(bs, acks="all", linger_ms=5) as prod:
                futs = [await prod.send("jbod", b"x" * 100, partition=p)
                        for p in range(partitions) for _ in range(RECORDS_PER_PARTITION)]
                await asyncio.gather(*futs)
            lost = _in_dir(failed_dir)
            led = {p.partition for p in await _describe(admin, "jbod")
                   if p.leader == VICTIM and p.partition in lost}
            log(f"[jbod] {len(lost)} replicas in the failing dir, broker {VICTIM} leads "
                f"{len(led)} of them; fault: {'ext4 error' if real else 'EIO (seam)'}")

            t0, wall0 = time.monotonic(), time.time()
            if real:
                mounted.trigger_error()
            else:
                rules.write_text(json.dumps([{"path": str(failed_dir), "errno": "EIO"}]))

            async def leaders_moved():
                ps = {p.partition: p for p in await _describe(admin, "jbod")}
                return all(ps[x].leader not in (VICTIM, -1) for x in led)
            t_moved = await _until(leaders_moved, 300, "new leaders")
            async with Producer(bs, acks="all", linger_ms=5) as prod:
                await asyncio.gather(*[await prod.send("jbod", b"after", partition=p)
                                       for p in sorted(led)])
            t_serving = time.monotonic()

            async def back():
                return not ClusterView(c).restart_entries() and \
                    await full_isr(lost)
            t_back = await _until(back, 600, "lost replicas back in the ISR", 0.2)
        detected = _detected_at(c.broker(VICTIM).event_log_file) - wall0
        return {"lost": len(lost), "led": len(led), "real_fault": real,
                "detected_s": detected,
                "leaders_moved_s": t_moved - t0, "leaders_serving_s": t_serving - t0,
                "back_in_isr_s": t_back - t0}
    finally:
        c.stop(graceful=False)
        if mounted is not None:
            mounted.unmount()


def main(opts) -> dict:
    partitions = QUICK_PARTITIONS if opts.quick else FULL_PARTITIONS
    results = run_each(opts, lambda d: one_run(d, partitions), lambda i, n, r: (
        f"[jbod] run {i + 1}/{n}: {r['lost']} lost replicas, new leaders after "
        f"{r['leaders_moved_s']:.2f} s (serving {r['leaders_serving_s']:.2f} s), all back "
        f"in the ISR after {r['back_in_isr_s']:.2f} s"))
    runs = len(results)
    figure = {
        "partitions": partitions, "runs": runs,
        "lost_replicas": median([r["lost"] for r in results]),
        "lost_leaders": median([r["led"] for r in results]),
        "real_fault": all(r["real_fault"] for r in results),
        "detected_s": round(median([r["detected_s"] for r in results]), 2),
        "leaders_moved_s": round(median([r["leaders_moved_s"] for r in results]), 2),
        "detected_to_leaders_moved_s": round(median(
            [r["leaders_moved_s"] - r["detected_s"] for r in results]), 2),
        "detected_to_back_in_isr_s": round(median(
            [r["back_in_isr_s"] - r["detected_s"] for r in results]), 2),
        "leaders_serving_s": round(median([r["leaders_serving_s"] for r in results]), 2),
        "back_in_isr_s": round(median([r["back_in_isr_s"] for r in results]), 2),
        "back_in_isr_runs_s": [round(r["back_in_isr_s"], 2) for r in results],
    }
    return report("jbod", "log_dir_failure", figure, [
        f"== log dir failure: {figure['lost_replicas']} replicas in the failed dir of broker "
          f"{VICTIM} ({figure['lost_leaders']} of them leaders), {partitions} partitions RF 3, "
          f"{'a real ext4 error' if figure['real_fault'] else 'EIO through the seam'} "
          f"(median of {runs})",
        f"   fault -> broker takes the dir offline {figure['detected_s']:>7} s (at the dir's "
          f"next write)",
        f"   fault -> new leaders in metadata   {figure['leaders_moved_s']:>7} s "
          f"({figure['detected_to_leaders_moved_s']} s after the detection)",
        f"   fault -> new leaders acknowledge   {figure['leaders_serving_s']:>7} s "
          f"(acks=all produce to each)",
        f"   fault -> every lost replica re-created and back in the ISR "
          f"{figure['back_in_isr_s']:>7} s ({figure['detected_to_back_in_isr_s']} s after the "
          f"detection)   runs {figure['back_in_isr_runs_s']}",
    ], opts.data_dir, runs=results)


if __name__ == "__main__":  # the same options as ``python -m bench jbod``
    from bench.__main__ import main as run_benchmarks
    sys.exit(run_benchmarks(["jbod", *sys.argv[1:]]))
