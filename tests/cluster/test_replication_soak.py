"""A seeded replication scenario with real processes: acks=all load while brokers are killed
and paused in an order drawn from a seed, then two checks that hold whatever the order:

- no divergence: below the HW, every replica of a partition holds the same bytes (leader
  epoch and CRC included) at every offset, and every acknowledged record is read back at its
  offset;
- no stuck follower: every replica is back in every ISR and at the leader's log end.

`make test` runs it once with seed 1; `make soak` (tools/soak.py) loops it, with the other
integration tests, on random seeds for 30 minutes. ``REPLOG_SEED`` picks the seed; a failure
prints it, so the run can be replayed.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal

import pytest

from client.admin_client import AdminClient
from client.consumer import Consumer
from client.errors import KafkaError
from client.producer import Producer
from tests.cluster.helpers import eventually, replica_batches

pytestmark = pytest.mark.integration

TOPIC, PARTITIONS, LAG_MS = "soak", 6, 2000


def _seed() -> int:
    return int(os.environ.get("REPLOG_SEED", "1"))


async def test_seeded_faults_leave_no_divergence_and_no_stuck_follower(cluster_factory):
    seed = _seed()
    rng = random.Random(seed)
    print(f"REPLOG_SEED={seed}")
    c = cluster_factory(brokers=3, overrides={
        "replica.lag.time.max.ms": LAG_MS, "replica.fetch.wait.max.ms": 200,
        "zookeeper.session.timeout.ms": 4000, "unclean.leader.election.enable": "false"})
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        await admin.create_topic(TOPIC, num_partitions=PARTITIONS, replication_factor=3,
                                 configs={"min.insync.replicas": "2"})
    await eventually(lambda: _all_isrs_full(bs), timeout=60, what="full ISRs")

    acked: dict[tuple[int, int], bytes] = {}
    stop = asyncio.Event()
    writer = asyncio.ensure_future(_produce(bs, acked, stop))
    try:
        await _faults(c, bs, rng, seed, acked)
    finally:
        stop.set()
        await writer
    await _check(c, bs, seed, acked)


async def _faults(c, bs, rng, seed, acked) -> None:
    for step in range(3):
        victim = rng.choice([1, 2, 3])
        fault = rng.choice(["kill", "pause"])
        print(f"step {step}: {fault} broker {victim}")
        h = c.broker(victim)
        if fault == "kill":
            h.kill(signal.SIGKILL)
            await asyncio.sleep(rng.uniform(0.5, 3.0))
            h.start()
        else:
            h.pause()
            await asyncio.sleep(LAG_MS / 1000 + rng.uniform(0.5, 2.0))
            h.resume()
        await eventually(lambda: _all_isrs_full(bs), timeout=90,
                         what=f"every replica back in every ISR after step {step} (seed {seed})")
        before = len(acked)
        await eventually(lambda before=before: len(acked) >= before + 60, timeout=60,
                         what=f"acks=all produce going on after step {step} (seed {seed})")


async def _check(c, bs, seed, acked) -> None:
    # no stuck follower: all replicas at the leader's end
    await eventually(lambda: _replicas_level(c), timeout=60,
                     what=f"every replica at its leader's log end (seed {seed})")
    # no divergence: identical bytes at every offset on every replica
    for p in range(PARTITIONS):
        logs = {b: replica_batches(c, b, TOPIC, p, 1 << 62) for b in (1, 2, 3)}
        assert logs[1] == logs[2] == logs[3], f"replicas of {TOPIC}-{p} diverge (seed {seed})"
    # every acknowledged record is there, at its offset
    got = await _read_all(bs)
    lost = [k for k, v in acked.items() if got.get(k) != v]
    assert not lost, f"acknowledged records lost (seed {seed}): {lost[:5]}"


async def _produce(bs, acked, stop):
    async with Producer(bs, acks="all", linger_ms=2, delivery_timeout_ms=5000,
                        request_timeout_ms=3000) as p:
        i = 0
        while not stop.is_set():
            value = f"soak-{i}".encode()
            try:
                md = await p.send_and_wait(TOPIC, value, partition=i % PARTITIONS)
                acked[(md.partition, md.offset)] = value
            except KafkaError:
                await asyncio.sleep(0.1)  # unacknowledged: may or may not be in the log
            i += 1


async def _all_isrs_full(bs) -> bool:
    try:
        async with AdminClient(bs, request_timeout_ms=5000) as admin:
            info = (await admin.describe_topics([TOPIC]))[TOPIC]
    except KafkaError:
        # e.g. a restarted broker answered before its first UpdateMetadata: "unknown topic"
        return False
    return all(info.partition(p) is not None and len(info.partition(p).isr) == 3
               for p in range(PARTITIONS))


def _replicas_level(c) -> bool:
    for p in range(PARTITIONS):
        ends = {b: max((last for _, last, _ in replica_batches(c, b, TOPIC, p, 1 << 62)),
                       default=-1) for b in (1, 2, 3)}
        if len(set(ends.values())) != 1:
            return False
    return True


async def _read_all(bs) -> dict[tuple[int, int], bytes]:
    got = {}
    async with Consumer(bs, auto_offset_reset="earliest") as cons:
        tps = [(TOPIC, p) for p in range(PARTITIONS)]
        await cons.assign(tps)
        for tp in tps:
            cons.seek_to_beginning(tp)
        idle = 0
        while idle < 3:
            batch = await cons.poll(1000)
            idle = 0 if batch else idle + 1
            for r in batch:
                got[(r.partition, r.offset)] = r.value
    return got
