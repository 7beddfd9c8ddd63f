"""design.md#kip-501 on the leader: a follower's fetch is *pending* from the moment the leader
takes it until the whole Fetch is answered, for every partition it carries - not only while that
partition's own log read runs.

The seed: "Fetch requests are added as pending requests before reading the logs ... This replica
is always considered to be insync as long as there are pending requests ... Pending fetch
request will be removed once the respective fetch request is completed". A follower cannot send
its next Fetch before this one is answered, so a partition with nothing to read in a request
that waits on another partition's slow read is held up exactly as long. The lab's kip-501 runs
found the difference: with the pending entry dropped as soon as the idle partition was looked at,
the slow leader's second partition shrank its ISR to the leader alone, throwing out both healthy
followers, before the leader gave that partition up.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from broker import isr as isr_rules
from broker.metadata_cache import MetadataCache
from broker.metrics import BrokerMetrics
from broker.replica_manager import ReplicaManager
from broker.replica_types import FetchPartitionRequest
from broker.servicer import leader_and_isr_request
from broker.storage.log_manager import LogManager
from common.config import build_config
from common.names import TopicPartition
from common.observability import configure_event_log
from common.records import ProducerRecord, build_batch
from common.rpc import replog_pb2 as pb
from tests.broker.test_idle_follower_fetch import Clock

IDLE, BUSY = TopicPartition("t", 0), TopicPartition("t", 1)
LAG_MS = 2000
FOLLOWER, FOLLOWER_EPOCH = 2, 11


class GatedPool(ThreadPoolExecutor):
    """The leader's read pool with a gate: while it is closed every read waits (a slow disk)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.gate = threading.Event()
        self.gate.set()

    def submit(self, fn, /, *args, **kwargs):
        def gated():
            self.gate.wait()
            return fn(*args, **kwargs)
        return super().submit(gated)


async def _leader(tmp_path, clock, pool, pending_reads: bool, process_time_max_ms: int = 500):
    cfg = build_config([("broker.id", "1", "test"),
                        ("replica.lag.time.max.ms", str(LAG_MS), "test"),
                        ("follower.fetch.process.time.max.ms", str(process_time_max_ms), "test"),
                        ("follower.fetch.pending.reads.insync.enable",
                         str(pending_reads).lower(), "test")])
    lm = LogManager([str(tmp_path / "b1")], 1)
    lm.startup()
    events = configure_event_log(str(tmp_path / "b1.json"), "broker", broker=1)
    rm = ReplicaManager(1, cfg, lm, MetadataCache(), BrokerMetrics(1), events, clock=clock,
                        read_pool=pool)
    rm.broker_epoch = 7
    req = pb.LeaderAndIsrRequest(controller_id=0, controller_epoch=1, broker_epoch=7,
                                 partition_states=[pb.LeaderAndIsrPartitionState(
                                     topic=tp.topic, partition=tp.partition, controller_epoch=1,
                                     leader=1, leader_epoch=0, partition_epoch=0, isr=[1, 2],
                                     replicas=[1, 2]) for tp in (IDLE, BUSY)])
    assert {e for _, e in await rm.leader_and_isr(leader_and_isr_request(req))} == {0}
    return rm, lm


async def _append(rm, tp) -> int:
    r = (await rm.produce(1, 5000, [(tp, build_batch([ProducerRecord(b"k", b"v" * 100)]))]))[0]
    assert r.error == 0
    return rm.partitions[tp].log.log_end_offset


def _fetch(rm, offsets: dict[TopicPartition, int]):
    return rm.fetch(FOLLOWER, FOLLOWER_EPOCH, 0, 1, 1 << 20,
                    [FetchPartitionRequest(tp, o, 1 << 20, 0, 0, 0) for tp, o in offsets.items()])


async def _one_batch_behind_on_busy(rm) -> tuple[int, int]:
    """The follower reads IDLE and BUSY to their LEOs, then BUSY takes a batch more. Returns the
    follower's fetch offsets: IDLE's LEO and BUSY's previous one."""
    idle_leo = await _append(rm, IDLE)
    await _append(rm, BUSY)
    await _fetch(rm, {IDLE: 0, BUSY: 0})
    busy_leo = rm.partitions[BUSY].log.log_end_offset
    await _append(rm, BUSY)
    return idle_leo, busy_leo


def _out_of_sync(rm, tp, clock) -> set[int]:
    p = rm.partitions[tp]
    return isr_rules.out_of_sync_replicas(p.isr, 1, p.followers, p.log.log_end_offset, clock(),
                                          LAG_MS, rm.pending_reads_in_sync)


async def _held_up_idle_partition(tmp_path, pending_reads: bool):
    """The follower has everything of IDLE and is one batch behind on BUSY; its Fetch of both
    waits on BUSY's read while IDLE takes a record and the lag limit passes. Returns what the
    ISR-expiration check says of IDLE then, and after the Fetch is answered."""
    clock, pool = Clock(), GatedPool()
    rm, lm = await _leader(tmp_path, clock, pool, pending_reads)
    try:
        idle_leo, busy_leo = await _one_batch_behind_on_busy(rm)

        pool.gate.clear()  # the leader's disk turns slow
        fetch = asyncio.ensure_future(_fetch(rm, {IDLE: idle_leo, BUSY: busy_leo}))
        for _ in range(20):  # the Fetch reaches the read pool and waits there
            await asyncio.sleep(0)
        assert not fetch.done()
        await _append(rm, IDLE)  # IDLE moves on: the follower is no longer at its LEO
        clock.ms += LAG_MS + 1
        during = _out_of_sync(rm, IDLE, clock)

        pool.gate.set()
        await fetch
        answered_at = clock.ms
        after = _out_of_sync(rm, IDLE, clock)
        f = rm.partitions[IDLE].followers[FOLLOWER]
        return during, after, f, answered_at
    finally:
        pool.gate.set()
        pool.shutdown()
        lm.shutdown()


async def test_a_fetch_held_up_by_another_partitions_slow_read_keeps_the_follower_in_sync(
        tmp_path):
    during, after, f, answered_at = await _held_up_idle_partition(tmp_path, True)
    assert during == set(), "the follower's Fetch was still being answered"
    assert after == set()
    # Answered: no longer pending, and caught up as of the answer (design.md#kip-501: the completion
    # time, not the request's).
    assert f.pending_fetches == {}
    assert f.last_caught_up_time_ms == answered_at


async def test_without_the_flag_the_held_up_follower_falls_out_as_in_kafka(tmp_path):
    during, _after, f, _ = await _held_up_idle_partition(tmp_path, False)
    assert during == {FOLLOWER}
    assert f.pending_fetches == {}


class AlterPartitionSpy:
    """The leader's AlterPartition sender, recording what it is asked to send."""

    def __init__(self) -> None:
        self.relinquished: list[TopicPartition] = []

    def enqueue(self, p, proposal) -> None:
        pass

    def relinquish(self, p) -> None:
        self.relinquished.append(p.tp)


async def test_a_slow_fetch_gives_up_every_partition_it_holds_up(tmp_path):
    """design.md#kip-501's relinquish is of the fetch request: IDLE had nothing to read, but its
    followers wait on the same answer as BUSY's, so the leader gives up both, at once."""
    clock, pool, spy = Clock(), GatedPool(), AlterPartitionSpy()
    rm, lm = await _leader(tmp_path, clock, pool, True, process_time_max_ms=20)
    rm.alter_partition = spy
    try:
        idle_leo, busy_leo = await _one_batch_behind_on_busy(rm)
        assert spy.relinquished == []

        pool.gate.clear()
        fetch = asyncio.ensure_future(_fetch(rm, {IDLE: idle_leo, BUSY: busy_leo}))
        while not spy.relinquished:  # follower.fetch.process.time.max.ms passes
            await asyncio.sleep(0.01)
        assert not fetch.done()
        assert sorted(spy.relinquished) == [IDLE, BUSY]
        pool.gate.set()
        await fetch
        assert sorted(spy.relinquished) == [IDLE, BUSY]  # once per leader epoch
    finally:
        pool.gate.set()
        pool.shutdown()
        lm.shutdown()


async def test_a_fetch_waiting_for_data_is_not_slow(tmp_path):
    """Long polling (max_wait) is the follower's choice, not the leader's slowness: a fetch
    that waited for data past follower.fetch.process.time.max.ms gives nothing up."""
    clock, pool, spy = Clock(), GatedPool(), AlterPartitionSpy()
    rm, lm = await _leader(tmp_path, clock, pool, True, process_time_max_ms=20)
    rm.alter_partition = spy
    try:
        leo = await _append(rm, IDLE)
        await _fetch(rm, {IDLE: 0, BUSY: 0})
        answer = await rm.fetch(FOLLOWER, FOLLOWER_EPOCH, 200, 1, 1 << 20,
                                [FetchPartitionRequest(IDLE, leo, 1 << 20, 0, 0, 0)])
        assert answer[0].records == b""
        assert spy.relinquished == []
    finally:
        pool.shutdown()
        lm.shutdown()
