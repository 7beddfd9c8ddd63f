"""The AlterPartition manager against a real gRPC controller endpoint that records what it is
sent: proposals carry the state built at proposal time, stale ones are dropped, transport
errors retry, fenced answers drop the change.

The controller side is a recording servicer behind a real gRPC server: the controller's own
AlterPartition rules are tested in tests/controller with ZooKeeper; here what matters is what
the broker sends and how it takes the answers.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from broker.alter_partition import AlterPartitionManager
from broker.controller_client import ControllerClient
from broker.metrics import BrokerMetrics
from broker.partition import Partition
from common.errors import ErrorCode
from common.names import TopicPartition
from common.observability import configure_event_log
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc

TP = TopicPartition("t", 0)
MARKER = TopicPartition("marker", 0)  # another partition, proposed after


class RecordingController(replog_pb2_grpc.ControllerServicer):
    """Answers AlterPartition from a script of outcomes: "ok" applies the proposal (partition
    epoch + 1), "unavailable" fails the RPC, an ErrorCode answers that error."""

    def __init__(self):
        self.requests: list[pb.AlterPartitionRequest] = []
        self.script: list = []
        self.received = asyncio.Event()
        self.elr: list[int] = []  # the ELR the written state holds

    async def AlterPartition(self, request, context):
        self.requests.append(request)
        self.received.set()
        outcome = self.script.pop(0) if self.script else "ok"
        if outcome == "unavailable":
            await context.abort(grpc.StatusCode.UNAVAILABLE, "controller moving")
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                if outcome == "ok":
                    parts.append(pb.AlterPartitionPartitionResult(
                        partition=p.partition, leader_id=request.broker_id,
                        leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch + 1,
                        isr=[b.broker_id for b in p.new_isr_with_epochs], elr=self.elr))
                else:
                    parts.append(pb.AlterPartitionPartitionResult(partition=p.partition,
                                                                   error_code=outcome))
            topics.append(pb.AlterPartitionTopicResult(topic=t.topic, partitions=parts))
        return pb.AlterPartitionResponse(topics=topics)


@pytest.fixture
async def env(tmp_path):
    servicer = RecordingController()
    server = grpc.aio.server()
    replog_pb2_grpc.add_ControllerServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    client = ControllerClient()
    client.set_controller(0, f"127.0.0.1:{port}")
    metrics = BrokerMetrics(1)
    events = configure_event_log(str(tmp_path / "b1.json"), "broker", broker=1)
    mgr = AlterPartitionManager(1, lambda: 101, client, metrics, events)
    mgr.start()
    yield servicer, mgr, metrics
    await mgr.stop()
    await client.close()
    await server.stop(0)


def _leader(leader_epoch=3, partition_epoch=5, isr=(1, 2, 3), tp=TP):
    p = Partition(tp, 1)
    p.apply_state(leader=1, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                  controller_epoch=1, isr=isr, replicas=(1, 2, 3))
    p.followers = {}
    for b in (2, 3):
        p.record_follower_fetch(b, 0, 0, 0, broker_epoch=10 + b)
    return p


def _sent(servicer):
    return [(p.leader_epoch, p.partition_epoch,
             [(b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs])
            for r in servicer.requests for t in r.topics for p in t.partitions]


async def _settled(p):
    for _ in range(200):
        if p.pending_isr is None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the proposal for {p.tp} was never answered")


async def test_stale_alter_partition_proposal_is_not_sent_with_new_epochs(env):
    """Finding 3: a shrink proposed in leader epoch 3 and still queued when a LeaderAndIsr
    moves the partition to epoch 4 must not reach the controller stamped with epoch 4 (it
    would pass the controller's fencing and change an ISR the leader never decided on)."""
    servicer, mgr, _ = env
    p = _leader()
    mgr.shrink_isr(p, {3}, now_ms=0)
    # no await in between: the sender has not run yet when the new state arrives
    p.apply_state(leader=1, leader_epoch=4, partition_epoch=6, controller_epoch=1,
                  isr=(1, 2, 3), replicas=(1, 2, 3))
    mgr.expand_isr(_leader(leader_epoch=9, partition_epoch=9, isr=(1, 2), tp=MARKER), 3)
    await servicer.received.wait()  # one request: the marker, with or without p's proposal
    sent = _sent(servicer)
    assert (4, 6, [(1, -1), (2, 12)]) not in sent
    assert all(le != 4 for le, _, _ in sent), sent
    assert p.isr == (1, 2, 3) and p.pending_isr is None


async def test_proposal_carries_broker_epochs_from_proposal_time(env):
    servicer, mgr, _ = env
    p = _leader(isr=(1, 2))
    mgr.expand_isr(p, 3)
    p.record_follower_fetch(3, 0, 0, 1, broker_epoch=99)  # the follower re-registered later
    await _settled(p)
    assert _sent(servicer) == [(3, 5, [(1, -1), (2, 12), (3, 13)])]
    assert (p.isr, p.partition_epoch) == ((1, 2, 3), 6)


async def test_transport_error_retries_the_same_proposal(env):
    servicer, mgr, metrics = env
    servicer.script = ["unavailable", "ok"]
    p = _leader()
    mgr.shrink_isr(p, {3}, now_ms=0)
    await _settled(p)
    assert _sent(servicer) == [(3, 5, [(1, -1), (2, 12)])] * 2
    assert (p.isr, p.partition_epoch) == ((1, 2), 6)
    assert metrics.isr_shrinks._value.get() == 1


async def test_retry_after_a_new_leader_epoch_is_dropped(env):
    servicer, mgr, _ = env
    servicer.script = ["unavailable"]
    p = _leader()
    mgr.shrink_isr(p, {3}, now_ms=0)
    await servicer.received.wait()
    p.apply_state(leader=1, leader_epoch=4, partition_epoch=6, controller_epoch=1,
                  isr=(1, 2, 3), replicas=(1, 2, 3))
    marker = _leader(leader_epoch=9, partition_epoch=9, isr=(1, 2), tp=MARKER)
    mgr.expand_isr(marker, 3)
    await _settled(marker)
    assert [s[0] for s in _sent(servicer)] == [3, 9]  # the retry of epoch 3 was dropped
    assert p.isr == (1, 2, 3)


async def test_fenced_answer_drops_the_change(env):
    servicer, mgr, metrics = env
    servicer.script = [ErrorCode.FENCED_LEADER_EPOCH]
    p = _leader()
    mgr.shrink_isr(p, {3}, now_ms=0)
    await _settled(p)
    assert p.isr == (1, 2, 3) and p.partition_epoch == 5
    assert metrics.failed_isr_updates._value.get() == 1


async def test_a_follower_refused_as_ineligible_is_not_proposed_again_with_that_epoch(env):
    """KIP-841: INELIGIBLE_REPLICA (the follower is in controlled shutdown). Its later fetches
    with the same broker epoch propose nothing: a 10k-partition controlled shutdown made the
    new leaders propose the shutting-down broker back on every fetch, ~6,000 refusals/s.
    A new broker epoch, a new partition state or an isr-expiration round lets the
    leader propose it again."""
    servicer, mgr, metrics = env
    servicer.script = [ErrorCode.INELIGIBLE_REPLICA]
    p = _leader(isr=(1, 2))
    assert p.isr_expansion_candidate(3)
    mgr.expand_isr(p, 3)
    await _settled(p)
    assert p.isr == (1, 2) and p.refused_expansions == {3: 13}
    for _ in range(5):  # its fetches go on with the refused broker epoch
        p.record_follower_fetch(3, 0, 0, 1, broker_epoch=13)
        assert not p.isr_expansion_candidate(3)
    assert len(servicer.requests) == 1
    # restarted: a new broker epoch is proposed again
    p.record_follower_fetch(3, 0, 0, 2, broker_epoch=14)
    assert p.isr_expansion_candidate(3)
    # a new partition state also clears the refusal
    p.record_follower_fetch(3, 0, 0, 3, broker_epoch=13)
    assert not p.isr_expansion_candidate(3)
    p.apply_state(leader=1, leader_epoch=3, partition_epoch=6, controller_epoch=1,
                  isr=(1, 2), replicas=(1, 2, 3))
    assert p.isr_expansion_candidate(3)


async def test_other_refusals_do_not_hold_the_follower_back(env):
    servicer, mgr, _ = env
    servicer.script = [ErrorCode.INVALID_UPDATE_VERSION]
    p = _leader(isr=(1, 2))
    mgr.expand_isr(p, 3)
    await _settled(p)
    assert p.refused_expansions == {} and p.isr_expansion_candidate(3)


async def test_a_shrink_answer_carrying_an_elr_freezes_the_hw(env):
    """The controller put the replica the shrink removed in the ELR (its min ISR is
    higher than the one this leader has heard of yet); the answer says so and the leader keeps
    its HW frozen (Partition.maybe_advance_hw, tests/broker/test_hw_min_isr.py), so nothing the
    ELR member lacks is committed."""
    servicer, mgr, _ = env
    p = _leader(isr=(1, 2))
    servicer.elr = [2]
    mgr.shrink_isr(p, {2}, now_ms=0)
    await _settled(p)
    assert p.isr == (1,) and p.elr == (2,)
