"""The leader's short path for idle, caught-up followers and its re-read of only the woken
partitions of a parked fetch (at 10k partitions the full per-partition path, and a
pass over every partition at each wake-up, were most of a leader's event loop).

Both must leave the leader exactly where the full path leaves it: the same answers, the same
follower states (LEO, caught-up and fetch times, the ISR-expiration verdict), the same HW.
Each test runs one scripted history of produces and follower fetches on two leaders, one with
the short path disabled, under the same injected clock, and compares them after every step.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

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
from common.records import ProducerRecord, build_batch, decode_all
from common.rpc import replog_pb2 as pb

TPS = [TopicPartition("t", i) for i in range(4)]
FOLLOWER_EPOCH = 11
LAG_MS = 30_000


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


async def _leader(tmp_path, name, clock, isr, read_pool=None, pending_reads=False,
                  short_path=True):
    cfg = build_config([("broker.id", "1", "test"),
                        ("follower.fetch.pending.reads.insync.enable",
                         str(pending_reads).lower(), "test")])
    lm = LogManager([str(tmp_path / name)], 1)
    lm.startup()
    events = configure_event_log(str(tmp_path / f"{name}.json"), "broker", broker=1)
    rm = ReplicaManager(1, cfg, lm, MetadataCache(), BrokerMetrics(1), events, clock=clock,
                        read_pool=read_pool, idle_fetch_short_path=short_path)
    rm.broker_epoch = 7
    req = pb.LeaderAndIsrRequest(controller_id=0, controller_epoch=1, broker_epoch=7,
                                 partition_states=[pb.LeaderAndIsrPartitionState(
                                     topic=tp.topic, partition=tp.partition, controller_epoch=1,
                                     leader=1, leader_epoch=0, partition_epoch=0, isr=isr,
                                     replicas=[1, 2]) for tp in TPS])
    assert {e for _, e in await rm.leader_and_isr(leader_and_isr_request(req))} == {0}
    return rm, lm


class Follower:
    """Broker 2's view: what it has of each partition, and its next fetch."""

    def __init__(self) -> None:
        self.leo = {tp: 0 for tp in TPS}
        self.last_epoch: dict[TopicPartition, int | None] = {tp: None for tp in TPS}

    def request(self, tps) -> list[FetchPartitionRequest]:
        return [FetchPartitionRequest(tp, self.leo[tp], 1 << 20, 0, self.last_epoch[tp], 0)
                for tp in tps]

    def take(self, tps, results) -> None:
        for tp, r in zip(tps, results):
            recs = decode_all(r.records)
            if recs:
                self.leo[tp] = recs[-1].offset + 1
                self.last_epoch[tp] = 0


def _state(rm: ReplicaManager, clock: Clock):
    out = {}
    for tp in TPS:
        p = rm.partitions[tp]
        f = p.followers.get(2)
        out[tp] = (p.high_watermark, p.log.log_end_offset,
                   dataclasses.astuple(f) if f is not None else None,
                   isr_rules.out_of_sync_replicas(p.isr, 1, p.followers, p.log.log_end_offset,
                                                  clock(), LAG_MS))
    return out


def _count_full_path(rm: ReplicaManager) -> list[TopicPartition]:
    """The partitions whose follower fetches took the full path, in order: it records the
    fetch through ``Partition.on_follower_fetch`` (the short path updates the follower
    state itself)."""
    seen: list[TopicPartition] = []
    for tp in TPS:
        p = rm.partitions[tp]

        def counting(*a, p=p, real=p.on_follower_fetch, **k):
            seen.append(p.tp)
            return real(*a, **k)
        p.on_follower_fetch = counting
    return seen


def _answers(results):
    return [(r.error, r.high_watermark, r.log_start_offset, r.records, r.diverging)
            for r in results]


@pytest.mark.parametrize("pending_reads", [False, True])
@pytest.mark.parametrize("isr", [[1, 2], [1]])
async def test_short_path_leaves_the_leader_where_the_full_path_does(tmp_path, isr,
                                                                     pending_reads):
    clock = Clock()
    fast, lm_fast = await _leader(tmp_path, "fast", clock, isr, pending_reads=pending_reads)
    full, lm_full = await _leader(tmp_path, "full", clock, isr, pending_reads=pending_reads,
                                  short_path=False)
    full_path = _count_full_path(fast)
    fetched = 0
    followers = {"fast": Follower(), "full": Follower()}
    try:
        # produce / fetch all / fetch all again at rest / time passes, ...
        script = ["p0", "f", "f", "f", "t", "f", "p1", "p1", "f", "f", "t", "t", "f", "p2",
                  "p3", "f", "f", "f", "t", "f"]
        for step in script:
            batch = build_batch([ProducerRecord(b"k", step.encode())])  # one for both
            for name, rm in (("fast", fast), ("full", full)):
                fl = followers[name]
                if step.startswith("p"):
                    tp = TPS[int(step[1])]
                    res = await rm.produce(1, 5000, [(tp, batch)])
                    assert res[0].error == 0
                elif step == "f":
                    results = await rm.fetch(2, FOLLOWER_EPOCH, 0, 1, 1 << 20,
                                             fl.request(TPS))
                    fetched += len(TPS) if rm is fast else 0
                    fl.take(TPS, results)
                    fl.answers = _answers(results)
            if step == "t":
                clock.ms += LAG_MS // 2 + 1
            if step == "f":
                assert followers["fast"].answers == followers["full"].answers, step
            assert _state(fast, clock) == _state(full, clock), step
        short = fetched - len(full_path)
        if 2 in isr:
            # the short path ran, not for every partition fetch; through the idle fetches
            # and the time passing the follower stayed in sync
            assert 0 < short < fetched
            assert all(s[3] == set() for s in _state(fast, clock).values())
        else:
            # a follower outside the ISR always takes the full path (ISR expansion is there)
            assert fetched and short == 0
    finally:
        lm_fast.shutdown()
        lm_full.shutdown()


async def test_a_woken_fetch_reads_again_only_the_partitions_that_woke(tmp_path):
    clock = Clock()
    rm, lm = await _leader(tmp_path, "b1", clock, [1, 2], short_path=False)
    reads = _count_full_path(rm)  # each partition the leader looks at again
    try:
        parked = asyncio.ensure_future(rm.fetch(2, FOLLOWER_EPOCH, 120_000, 1, 1 << 20, [
            FetchPartitionRequest(tp, 0, 1 << 20, 0) for tp in TPS]))
        await asyncio.sleep(0)
        while len(reads) < len(TPS):
            await asyncio.sleep(0.01)
        assert sorted(reads) == sorted(TPS)  # the first pass reads every partition
        reads.clear()
        res = await rm.produce(1, 5000, [(TPS[2], build_batch([ProducerRecord(b"k", b"v")]))])
        assert res[0].error == 0
        results = await asyncio.wait_for(parked, 60)
        assert [len(decode_all(r.records)) for r in results] == [0, 0, 1, 0]
        assert reads and set(reads) == {TPS[2]}
    finally:
        lm.shutdown()
