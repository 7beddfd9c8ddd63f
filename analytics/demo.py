"""``replog demo`` / ``make demo``: a seeded fault scenario worth analysing, then its report.

A local cluster (ZooKeeper, a controller, 3 brokers with 2 log dirs each) with the exporter
sampling every 250 ms; topic ``demo`` (6 partitions, RF 3, min.insync.replicas 2) under a steady
acks=all load; then, with the seed choosing the victim:

1. SIGKILL of a broker that leads partitions -> offline elections (failover, cause
   broker_down); restarted once every partition has a leader again -> it rejoins the ISRs
   (recovery, cause restart);
2. SIGSTOP of that broker, now a follower only (automatic preferred elections are off), for
   longer than ``replica.lag.time.max.ms`` and shorter than the ZooKeeper session -> the leaders
   shrink it out of their ISRs; SIGCONT -> it catches up and rejoins (recovery, cause resumed).

A log-dir failure (C5) and a reassignment (C6) join the scenario when those features land.
Each step waits for a positive signal (leaders present, ISRs full), not for a fixed time.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import time
from pathlib import Path

from admin.client import AdminClient, KafkaError, Producer
from admin.local_cluster import LocalCluster
from analytics.export import Exporter
from common.errors import ReplogError

TOPIC = "demo"
PARTITIONS = 6
SESSION_TIMEOUT_MS = 4000
LAG_TIME_MS = 1500
PAUSE_S = 3.0   # between LAG_TIME_MS and SESSION_TIMEOUT_MS: an ISR shrink, no broker failure


def _say(msg: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


async def _until(check, what: str, timeout: float = 60.0, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = await check()
        except (ReplogError, KafkaError, OSError):
            got = None  # a broker down mid-question: ask again
        if got:
            return got
        if time.monotonic() > deadline:
            raise ReplogError(f"demo: {what} not reached within {timeout:.0f}s")
        await asyncio.sleep(interval)


async def _partitions(bootstrap: str):
    async with AdminClient(bootstrap, request_timeout_ms=3000) as admin:
        return (await admin.describe_topics([TOPIC]))[TOPIC].partitions


async def _load(bootstrap: str, stop: asyncio.Event, rate: int = 200) -> int:
    """acks=all load at about ``rate`` records/s; failures during faults are expected."""
    sent = 0
    async with Producer(bootstrap, acks="all", linger_ms=5, delivery_timeout_ms=10000,
                        retry_backoff_ms=50, retry_backoff_max_ms=200) as p:
        value = b"x" * 1024
        pending: set[asyncio.Future] = set()
        while not stop.is_set():
            for _ in range(rate // 20):
                pending.add(await p.send(TOPIC, value, key=str(sent).encode()))
                sent += 1
            done = {f for f in pending if f.done()}
            for f in done:
                f.exception()  # retrieved: a failed delivery is part of the scenario
            pending -= done
            await asyncio.sleep(0.05)
        for f in pending:
            with contextlib.suppress(Exception):
                await f
    return sent


async def scenario(data_dir: Path, export_dir: Path, seed: int, interval_ms: int) -> None:
    rng = random.Random(seed)
    cluster = LocalCluster(data_dir, brokers=3, log_dirs_per_broker=2, overrides={
        "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
        "replica.lag.time.max.ms": LAG_TIME_MS,
        # The SIGSTOPped broker must stay a follower: no preferred election gives it leaders.
        "auto.leader.rebalance.enable": "false"})
    _say(f"starting a cluster in {data_dir} (seed {seed})")
    await asyncio.to_thread(cluster.start)
    stop_export, stop_load = asyncio.Event(), asyncio.Event()
    exporter = Exporter(data_dir, export_dir, interval_ms)
    export = asyncio.create_task(exporter.run(stop_export))
    try:
        bs = cluster.bootstrap_servers
        async with AdminClient(bs) as admin:
            await admin.create_topic(TOPIC, PARTITIONS, 3,
                                     configs={"min.insync.replicas": "2"})
        load = asyncio.create_task(_load(bs, stop_load))
        await asyncio.sleep(3.0)  # a baseline of load before any fault

        parts = await _partitions(bs)
        leaders = sorted({p.leader for p in parts if p.leader >= 0})
        victim = rng.choice(leaders)
        _say(f"SIGKILL broker {victim} (leads {sum(p.leader == victim for p in parts)} of "
             f"{PARTITIONS} partitions)")
        await cluster.broker(victim).akill()
        await _until(lambda: _all_led_without(bs, victim), "new leaders for every partition")
        await asyncio.sleep(1.0 + rng.random())
        _say(f"restarting broker {victim}")
        await cluster.broker(victim).astart()
        await _until(lambda: _isrs_full(bs), "full ISRs after the restart")

        await asyncio.sleep(1.0 + rng.random())
        _say(f"SIGSTOP broker {victim} (a follower now) for {PAUSE_S:.0f} s")
        cluster.broker(victim).pause()
        await asyncio.sleep(PAUSE_S)
        cluster.broker(victim).resume()
        _say(f"SIGCONT broker {victim}")
        await _until(lambda: _isrs_full(bs), "full ISRs after the pause")
        await asyncio.sleep(2.0)
        stop_load.set()
        sent = await load
        _say(f"load stopped: {sent} records sent")
    finally:
        stop_export.set()
        with contextlib.suppress(Exception):
            await export
        _say("stopping the cluster")
        await asyncio.to_thread(cluster.stop)


async def _all_led_without(bs: str, dead: int) -> bool:
    parts = await _partitions(bs)
    return all(p.leader >= 0 and p.leader != dead for p in parts)


async def _isrs_full(bs: str) -> bool:
    parts = await _partitions(bs)
    return all(len(p.isr) == len(p.replicas) for p in parts)


def run(data_dir: str, output: str | None, seed: int = 1, interval_ms: int = 250) -> int:
    d = Path(data_dir).resolve()
    if d.exists() and any(d.iterdir()):
        if not (d / "cluster.json").exists():
            raise ReplogError(f"{d} is not empty and holds no demo cluster: choose another "
                              f"--data-dir")
        shutil.rmtree(d)  # a previous demo's data: each run starts from scratch
    d.mkdir(parents=True)
    export_dir = d / "export"
    out = Path(output).resolve() if output else d / "report"
    asyncio.run(scenario(d, export_dir, seed, interval_ms))
    _say(f"analysing {export_dir}")
    from analytics.job import main
    return main(str(export_dir), str(out))
