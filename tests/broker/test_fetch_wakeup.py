"""A parked multi-partition Fetch completes as soon as *one* of its partitions can add bytes
(Kafka's DelayedFetch.tryComplete runs on every partition's append / HW change).

Regression: ``ReplicaManager.fetch`` waited with ``asyncio.wait``'s default
ALL_COMPLETED, so a fetch carrying several partitions - every follower fetcher's, every
consumer's - woke only when every partition had new data or max_wait ran out: each acks=all
produce waited up to replica.fetch.wait.max.ms.

No durations are asserted: the long-polling fetch (max_wait 120 s) must complete *before* a
second, single-partition fetch on an idle partition times out (max_wait 3 s). With the bug the
order is the other way round.
"""

from __future__ import annotations

import asyncio

import pytest

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
from tests.broker.fetch_stream_fake import stream_stream
from tests.broker.inprocess import Node, leader_and_isr
from tests.polling import async_wait_until

T0, T1, IDLE = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("idle", 0)
LONG_MS, SHORT_MS = 120_000, 3_000


def _state(tp, replicas):
    return pb.LeaderAndIsrPartitionState(
        topic=tp.topic, partition=tp.partition, controller_epoch=1, leader=1, leader_epoch=0,
        partition_epoch=0, isr=replicas, replicas=replicas)


@pytest.fixture
async def leader(tmp_path):
    cfg = build_config([("broker.id", "1", "test")])
    lm = LogManager([str(tmp_path / "d0")], 1)
    lm.startup()
    events = configure_event_log(str(tmp_path / "b1.json"), "broker", broker=1)
    rm = ReplicaManager(1, cfg, lm, MetadataCache(), BrokerMetrics(1), events)
    rm.broker_epoch = 7
    yield rm, lm
    lm.shutdown()


async def _lead(rm, replicas):
    req = pb.LeaderAndIsrRequest(controller_id=0, controller_epoch=1, broker_epoch=7,
                                 partition_states=[_state(tp, replicas)
                                                   for tp in (T0, T1, IDLE)])
    assert [e for _, e in await rm.leader_and_isr(leader_and_isr_request(req))] == [0, 0, 0]


def _fetch(rm, replica_id, tps, max_wait_ms):
    return asyncio.ensure_future(rm.fetch(
        replica_id, 11 if replica_id >= 0 else -1, max_wait_ms, 1, 1 << 20,
        [FetchPartitionRequest(tp, 0, 1 << 20, current_leader_epoch=0) for tp in tps]))


async def _first_done(*tasks):
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    return done


async def _produce_one(rm, tp, acks):
    res = await rm.produce(acks, 5000, [(tp, build_batch([ProducerRecord(b"k", b"v")]))])
    assert res[0].error == 0


async def test_consumer_fetch_of_two_partitions_wakes_on_one(leader):
    rm, _ = leader
    await _lead(rm, [1])
    long_poll = _fetch(rm, -1, [T0, T1], LONG_MS)
    await asyncio.sleep(0)  # parked: nothing to read yet
    assert not long_poll.done()
    marker = _fetch(rm, -1, [IDLE], SHORT_MS)
    await _produce_one(rm, T1, acks=1)  # RF 1: the HW moves with the append
    done = await _first_done(long_poll, marker)
    assert long_poll in done and marker not in done, \
        "the two-partition fetch waited out max_wait instead of waking on T1's data"
    r0, r1 = long_poll.result()
    assert r0.records == b""
    assert [r.value for r in decode_all(r1.records)] == [b"v"]
    marker.cancel()


async def test_follower_fetch_of_two_partitions_wakes_on_one(leader):
    rm, _ = leader
    await _lead(rm, [1, 2])
    long_poll = _fetch(rm, 2, [T0, T1], LONG_MS)
    await asyncio.sleep(0)
    assert not long_poll.done()
    marker = _fetch(rm, 2, [IDLE], SHORT_MS)
    await _produce_one(rm, T0, acks=1)  # the LEO moves: a follower may read it at once
    done = await _first_done(long_poll, marker)
    assert long_poll in done and marker not in done, \
        "the follower's two-partition fetch waited out max_wait instead of waking on T0"
    r0, r1 = long_poll.result()
    assert [r.value for r in decode_all(r0.records)] == [b"v"]
    assert r1.records == b""
    marker.cancel()


async def test_partition_joining_a_parked_follower_fetcher_is_fetched_at_once(tmp_path):
    """A follower fetcher parked in a long poll (replica.fetch.wait.max.ms = 60 s) for t-0
    gains t-1 (a LeaderAndIsr made this broker its follower). On the commit before, t-1 was
    not fetched until the parked Fetch returned, so an acks=all produce to t-1 waited out the
    long poll; now the fetcher reissues its Fetch with t-1 at once. Ordering, not durations:
    the produce completes before a 3 s marker fetch on an idle partition does."""
    from tests.broker.inprocess import Node, leader_and_isr, produce_req
    slow = [("replica.fetch.wait.max.ms", "60000")]  # the most a Fetch may ask for
    a, b = Node(1, tmp_path, overrides=slow), Node(2, tmp_path, overrides=slow)
    for n in (a, b):
        await n.start()
    try:
        for tp in (T0, IDLE):
            for n in (a, b):
                await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], [a, b], tp=tp))
        await a.stub.Produce(produce_req("warm", tp=T0))  # b's fetcher is parked from now on
        await a.stub.LeaderAndIsr(leader_and_isr(a, 1, 0, [1, 2], [1, 2], [a, b], tp=T1))
        await b.stub.LeaderAndIsr(leader_and_isr(b, 1, 0, [1, 2], [1, 2], [a, b], tp=T1))
        marker = _fetch(a.rm, -1, [IDLE], SHORT_MS)
        produce = asyncio.ensure_future(a.stub.Produce(produce_req("x", tp=T1,
                                                                   timeout_ms=60000)))
        done = await _first_done(produce, marker)
        assert produce in done and marker not in done, \
            "t-1 waited for the follower's parked Fetch to return"
        assert produce.result().responses[0].partition_responses[0].error_code == 0
        marker.cancel()
    finally:
        for n in (a, b):
            await n.stop()


class _CallSlowToCancel:
    """A Fetch call that never answers and, cancelled, takes a while to wind down (a gRPC
    call's cancellation is not instantaneous either)."""

    def __init__(self):
        self.cancelling = asyncio.Event()
        self.release = asyncio.Event()

    def cancel(self):
        return True

    def __await__(self):
        return self._run().__await__()

    async def _run(self):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelling.set()
            await self.release.wait()
            raise


class _FetchChannel:
    def __init__(self):
        self.calls: list[_CallSlowToCancel] = []

    def unary_unary(self, path, *args, **kwargs):
        def invoke(request, timeout=None, **kw):
            assert path.endswith("/Fetch"), path
            return self._fetch(request)
        return invoke

    def stream_stream(self, path, *args, **kwargs):
        return stream_stream(path, self._fetch)

    def _fetch(self, request):
        self.calls.append(_CallSlowToCancel())
        return self.calls[-1]

    async def close(self):
        pass


async def test_a_fetcher_stopped_while_it_gives_up_a_fetch_stops(tmp_path):
    # The fetcher gives up a parked Fetch when it gains a partition, and waits for the call's
    # cancellation to finish. A stop() arriving in that wait was swallowed with the call's own
    # CancelledError: the stopped fetcher went on and sent another Fetch (found looking for
    # why a broker hung after its controlled shutdown in the soak). Replayed in order: the
    # stop arrives while the given-up call is still winding down.
    channel = _FetchChannel()
    follower = Node(2, tmp_path, channel_factory=lambda address, options: channel)
    leader = Node(1, tmp_path)
    leader.endpoint = lambda: pb.BrokerEndpoint(broker_id=1, host="127.0.0.1", port=1)
    rm = follower.rm
    for tp in (T0, T1):
        await rm.leader_and_isr(leader_and_isr_request(leader_and_isr(
            follower, 1, 0, [1, 2], [1, 2], [leader], tp=tp)))
        if tp == T0:
            await async_wait_until(lambda: channel.calls, what="the first Fetch in flight")
    await async_wait_until(lambda: channel.calls[0].cancelling.is_set(),
                     what="the first Fetch given up for the new partition")
    fetchers = list(rm.fetcher_manager.fetchers.values())
    stopping = asyncio.ensure_future(rm.fetcher_manager.shutdown())
    await asyncio.sleep(0)  # stop() has cancelled the fetcher's task
    channel.calls[0].release.set()
    await asyncio.wait_for(stopping, 30)
    assert fetchers and all(f.task.done() for f in fetchers)
    assert len(channel.calls) == 1  # before: a second Fetch after stop()
    follower.lm.shutdown()
    leader.lm.shutdown()
