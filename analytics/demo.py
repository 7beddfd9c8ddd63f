"""``replog demo`` / ``make demo``: a seeded fault scenario worth analysing, then its report.

A local cluster (ZooKeeper, a controller, 3 brokers with 2 log dirs each, every broker watching
its fault-injection file) with the exporter sampling every 250 ms; topic ``demo`` (6
partitions, RF 3, min.insync.replicas 2) under a steady acks=all load and read by a consumer;
topic ``moves`` (1 partition on two brokers) filled once. Then, with the seed choosing the
victims:

1. SIGKILL of a broker that leads partitions -> offline elections (failover, cause
   broker_down); restarted once every partition has a leader again -> it rejoins the ISRs
   (recovery, cause restart);
2. SIGSTOP of that broker, now a follower only (automatic preferred elections are off), for
   longer than ``replica.lag.time.max.ms`` and shorter than the ZooKeeper session -> the leaders
   shrink it out of their ISRs; SIGCONT -> it catches up and rejoins (recovery, cause resumed);
3. a log-dir failure: EIO on every write and fsync under one log dir of a broker leading a
   partition in it, through the broker's fault-injection file (broker/fault_injection.py, the
   seam chaos/nemesis.py's EioNemesis uses; no root needed) -> the broker takes the dir offline,
   the controller restarts the partitions it held (failover, cause log_dir_offline), they are
   re-created in its other dir and rejoin the ISRs (log-dir failures; recovery, cause
   recreated). The rule is then cleared; the dir stays offline until the broker restarts
   (Kafka's rule);
4. a reassignment (AlterPartitionReassignments, KIP-455) of ``moves``-0 to the third broker:
   its log is copied there (reassignments, with the bytes moved).

Each step waits for a positive signal (leaders present, ISRs full, the dir offline, the move
done), not for a fixed time; ``Pace`` only spaces the steps, and ``QUICK`` is the short form
the tests run.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from analytics.export import Exporter
from client import AdminClient, Consumer, KafkaError, Producer
from common.errors import ReplogError
from harness.local_cluster import LocalCluster
from harness.polling import async_wait_until

TOPIC = "demo"
PARTITIONS = 6
MOVES = "moves"           # the reassigned topic: one partition, RF 2
MOVES_BYTES = 4 << 20     # written to it before the faults: what the reassignment copies
SESSION_TIMEOUT_MS = 4000
LAG_TIME_MS = 1500
PAUSE_S = 3.0   # between LAG_TIME_MS and SESSION_TIMEOUT_MS: an ISR shrink, no broker failure


@dataclass(frozen=True)
class Pace:
    """How far apart the steps are (each step itself waits for its own signal)."""
    baseline_s: float = 3.0   # load before the first fault
    gap_s: float = 1.0        # between two steps, plus up to as much again (seeded)
    tail_s: float = 2.0       # load after the last step


FULL = Pace()
QUICK = Pace(baseline_s=1.0, gap_s=0.3, tail_s=0.5)


def _say(msg: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


async def _until(check, what: str, timeout: float = 60.0, interval: float = 0.2):
    # A broker down mid-question (ReplogError, KafkaError, OSError): ask again.
    return await async_wait_until(
        check, timeout, interval=interval, ignore=(ReplogError, KafkaError, OSError),
        timed_out=lambda _: ReplogError(f"demo: {what} not reached within {timeout:.0f}s"))


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


async def _consume(bootstrap: str, stop: asyncio.Event) -> int:
    """Reads ``demo`` from the start as it is written (the brokers' bytes out)."""
    read = 0
    async with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=200,
                        request_timeout_ms=3000) as c:
        await c.assign_topic(TOPIC)
        while not stop.is_set():
            try:
                read += len(await c.poll(timeout_ms=200))
            except (KafkaError, OSError):
                await asyncio.sleep(0.2)  # a leader gone mid-fetch: the next poll asks again
    return read


async def _fill_moves(bootstrap: str) -> None:
    async with Producer(bootstrap, acks="all", linger_ms=5) as p:
        chunk = b"m" * (64 << 10)
        await asyncio.gather(*[await p.send(MOVES, chunk, partition=0)
                               for _ in range(MOVES_BYTES // len(chunk))])


def _fail_log_dir(fault_file: Path, log_dir: Path | None) -> None:
    """EIO on every write and fsync under ``log_dir`` (None: clear), as EioNemesis does."""
    rules = [] if log_dir is None else [{"path": str(log_dir),
                                         "errno": errno.errorcode[errno.EIO],
                                         "ops": ["write", "fsync"]}]
    tmp = fault_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(rules))
    os.replace(tmp, fault_file)  # the broker never reads half a file


def _logged(path: Path, event: str) -> list[dict]:
    """The broker's event-log records of ``event`` so far."""
    out = []
    with contextlib.suppress(FileNotFoundError), path.open(encoding="utf-8") as f:
        for line in f:
            with contextlib.suppress(ValueError):  # the line being written
                rec = json.loads(line)
                if rec.get("event") == event:
                    out.append(rec)
    return out


async def _log_dir_victim(cluster: LocalCluster, rng: random.Random) -> tuple[int, Path]:
    """A (broker, log dir) where that broker leads a partition of ``demo`` whose replica is
    in that dir: its failure then restarts a leader (a failover) and followers."""
    parts = await _partitions(cluster.bootstrap_servers)
    choices = sorted({(p.leader, d) for p in parts if p.leader >= 0
                      for d in cluster.broker(p.leader).log_dirs
                      if (d / f"{TOPIC}-{p.partition}").is_dir()})
    if not choices:
        raise ReplogError("demo: no leader's replica found in a log dir")
    return rng.choice(choices)


async def _moved(bs: str, target: list[int]) -> bool:
    async with AdminClient(bs, request_timeout_ms=3000) as admin:
        if await admin.list_partition_reassignments([(MOVES, 0)]):
            return False
        [p] = (await admin.describe_topics([MOVES]))[MOVES].partitions
    return list(p.replicas) == target and sorted(p.isr) == sorted(target)


async def scenario(data_dir: Path, export_dir: Path, seed: int, interval_ms: int,
                   pace: Pace = FULL) -> dict:
    """Run the scenario; returns what it did (victims, the failed dir, the move)."""
    rng = random.Random(seed)
    faults = data_dir / "faults"
    faults.mkdir(parents=True, exist_ok=True)
    brokers = (1, 2, 3)
    cluster = LocalCluster(data_dir, brokers=len(brokers), log_dirs_per_broker=2, overrides={
        "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
        "replica.lag.time.max.ms": LAG_TIME_MS,
        # The SIGSTOPped broker must stay a follower: no preferred election gives it leaders.
        "auto.leader.rebalance.enable": "false"},
        per_broker_overrides={b: {"fault.injection.file": str(faults / f"broker-{b}.json")}
                              for b in brokers})
    _say(f"starting a cluster in {data_dir} (seed {seed})")
    await asyncio.to_thread(cluster.start)
    stop_export, stop_load = asyncio.Event(), asyncio.Event()
    exporter = Exporter(data_dir, export_dir, interval_ms)
    export = asyncio.create_task(exporter.run(stop_export))
    done: dict = {"seed": seed}
    clients: list[asyncio.Task] = []

    async def gap() -> None:
        await asyncio.sleep(pace.gap_s * (1 + rng.random()))
    try:
        bs = cluster.bootstrap_servers
        move_from = rng.sample(brokers, 2)
        move_to = [move_from[1], next(b for b in brokers if b not in move_from)]
        async with AdminClient(bs) as admin:
            await admin.create_topic(TOPIC, PARTITIONS, 3,
                                     configs={"min.insync.replicas": "2"})
            await admin.create_topic(MOVES, replica_assignment={0: move_from})
        await _fill_moves(bs)
        load = asyncio.create_task(_load(bs, stop_load))
        consume = asyncio.create_task(_consume(bs, stop_load))
        clients = [load, consume]
        await asyncio.sleep(pace.baseline_s)  # a baseline of load before any fault

        parts = await _partitions(bs)
        leaders = sorted({p.leader for p in parts if p.leader >= 0})
        victim = done["killed"] = rng.choice(leaders)
        _say(f"SIGKILL broker {victim} (leads {sum(p.leader == victim for p in parts)} of "
             f"{PARTITIONS} partitions)")
        await cluster.broker(victim).akill()
        await _until(lambda: _all_led_without(bs, victim), "new leaders for every partition")
        await gap()
        _say(f"restarting broker {victim}")
        await cluster.broker(victim).astart()
        await _until(lambda: _isrs_full(bs), "full ISRs after the restart")

        await gap()
        _say(f"SIGSTOP broker {victim} (a follower now) for {PAUSE_S:.0f} s")
        cluster.broker(victim).pause()
        await asyncio.sleep(PAUSE_S)
        cluster.broker(victim).resume()
        _say(f"SIGCONT broker {victim}")
        await _until(lambda: _isrs_full(bs), "full ISRs after the pause")

        await gap()
        b, log_dir = await _log_dir_victim(cluster, rng)
        done["log_dir"] = (b, str(log_dir))
        _say(f"EIO on every write under broker {b}'s {log_dir.name}")
        _fail_log_dir(faults / f"broker-{b}.json", log_dir)
        events = cluster.broker(b).event_log_file

        async def offline() -> list[dict]:
            return [r for r in await asyncio.to_thread(_logged, events, "log_dir_offline")
                    if r.get("log_dir") == str(log_dir)]
        lost = set((await _until(offline, f"broker {b} taking {log_dir.name} offline",
                                 timeout=30))[0]["partitions"])
        _say(f"broker {b} took {log_dir.name} offline, with {len(lost)} replicas: re-creating "
             f"them in its other dir")

        async def recreated() -> bool:
            back = await asyncio.to_thread(_logged, events, "replica_recreated")
            return lost <= {r["partition"] for r in back} and await _isrs_full(bs)
        await _until(recreated, "the lost replicas re-created and back in the ISRs", timeout=90)
        _fail_log_dir(faults / f"broker-{b}.json", None)

        await gap()
        done["moved"] = (move_from, move_to)
        _say(f"reassigning {MOVES}-0 from brokers {move_from} to {move_to}")
        async with AdminClient(bs) as admin:
            errors = await admin.alter_partition_reassignments({(MOVES, 0): move_to})
        if errors.get((MOVES, 0)) is not None:
            raise ReplogError(f"demo: the reassignment was refused: {errors[(MOVES, 0)]}")
        await _until(lambda: _moved(bs, move_to), f"{MOVES}-0 on brokers {move_to}")

        await asyncio.sleep(pace.tail_s)
        stop_load.set()
        done["sent"], done["read"] = await load, await consume
        _say(f"load stopped: {done['sent']} records sent, {done['read']} read")
    finally:
        stop_load.set()
        for task in clients:  # after a failed step: let them close their connections
            with contextlib.suppress(Exception):
                await task
        stop_export.set()
        with contextlib.suppress(Exception):
            await export
        _say("stopping the cluster")
        await asyncio.to_thread(cluster.stop)
    return done


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
