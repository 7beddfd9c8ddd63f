"""Regression tests for the replication-core findings, one per finding, named after
it. Each makes its interleaving happen deterministically: a log dir's executor is held by a
job waiting on a threading.Event, so the storage calls queued behind it run in a known order
relative to the LeaderAndIsr under test. No sleeps decide an outcome."""

from __future__ import annotations

import asyncio
import threading

from broker.replica_types import FetchPartitionRequest
from broker.servicer import leader_and_isr_request, stop_replica_request
from common.records import decode_all
from common.rpc import replog_pb2 as pb
from tests.broker.inprocess import TP, leader_and_isr, produce_req, wait_until
from tests.storage.helpers import batch


class HeldExecutor:
    """Holds a log dir's single executor thread until released: everything queued on that dir
    meanwhile runs afterwards, in order."""

    def __init__(self, node):
        self.dir = node.lm.log_dir_of(TP)
        self.gate = threading.Event()
        self.job = node.lm.run_in_dir(self.dir, self.gate.wait)

    def queued(self) -> int:
        return len(self.dir.pending)

    async def release(self):
        self.gate.set()
        await self.job


async def _yield_until(cond, rounds=100):
    for _ in range(rounds):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


async def test_new_leader_epoch_starts_at_leo_after_queued_truncation(nodes):
    """Finding 1. A follower of epoch 5 holding [(4,0),(5,10)] up to offset 20 has a truncation
    to 14 queued on its log dir when it becomes leader of epoch 7. Epoch 7 starts at 14 (the
    LEO once the truncation ran), not at the 20 read on the event loop before it."""
    a, _ = nodes
    log = a.lm.get_or_create_log(TP)
    for epoch in (4, 5):
        for i in range(5):
            log.append_as_leader(batch(2, tag=f"e{epoch}-{i}-"), epoch)
    assert a.rm.partitions == {}
    # follower of broker 2, whose address it does not know: its fetcher stays idle
    await a.rm.leader_and_isr(leader_and_isr_request(leader_and_isr(a, 2, 5, [1, 2], [1, 2], [])))
    held = HeldExecutor(a)
    truncation = asyncio.ensure_future(a.lm.run(TP, log.truncate_to, 14))
    await _yield_until(lambda: held.queued() == 1)
    becoming_leader = asyncio.ensure_future(
        a.rm.leader_and_isr(leader_and_isr_request(leader_and_isr(a, 1, 7, [1], [1, 2], []))))
    await _yield_until(lambda: a.rm.partitions[TP].leader_epoch == 7)
    await held.release()
    await truncation
    assert [e for _, e in await becoming_leader] == [0]
    assert log.epoch_cache.entries == [(4, 0), (5, 10), (7, 14)]
    assert a.rm.partitions[TP].leader_epoch_start_offset == 14
    # A replica that kept the old epoch-5 tail up to 20 is told to truncate to 14 now; with
    # the stale start (7, 20) it got no divergence and kept different bytes at 14..19.
    [r] = await a.rm.fetch(2, 102, 0, 1, 1 << 20, [FetchPartitionRequest(
        TP, 20, 1 << 20, current_leader_epoch=7, last_fetched_epoch=5)])
    assert r.diverging == (5, 14)


async def test_follower_behind_leaders_earliest_epoch_resets_to_log_start(nodes):
    """Finding 2. The leader's log starts at 100 in epoch 3 (retention took the rest); the
    follower holds offsets 0..4 of epoch 1, all below its HW. It must end with the leader's
    log, not spin on a divergence answer that truncates nothing."""
    a, b = nodes
    la = a.lm.get_or_create_log(TP)
    la.truncate_fully_and_start_at(100)
    la.append_as_leader(batch(5, tag="kept"), 3)
    lb = b.lm.get_or_create_log(TP)
    lb.append_as_leader(batch(5, tag="old"), 1)
    lb.high_watermark = 5  # committed in epoch 1, before the follower's long outage
    for n in nodes:
        await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 4, [1], [1, 2], nodes))
    await wait_until(lambda: lb.log_end_offset == la.log_end_offset == 105)
    assert lb.log_start_offset == 100
    assert lb.read(100, 1 << 20) == la.read(100, 1 << 20)
    assert lb.epoch_cache.entries == [(3, 100)]  # epoch 4 wrote nothing yet
    assert la.epoch_cache.entries == [(3, 100), (4, 105)]


async def test_fetcher_does_not_move_hw_of_partition_that_became_leader_during_append(nodes):
    """Finding 8. The follower's append of fetched records is queued behind a held executor
    when a LeaderAndIsr makes it leader. When the append completes the fetcher must not write
    the old leader's HW (0 here: a third ISR member never fetched) over the new leader's."""
    a, b = nodes
    for n in nodes:
        await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2, 3], [1, 2, 3], nodes))
    await a.stub.Produce(produce_req("x", acks=1))
    lb = b.lm.get_or_create_log(TP)
    await wait_until(lambda: lb.log_end_offset == 5)
    assert lb.high_watermark == 0
    held = HeldExecutor(b)
    await a.stub.Produce(produce_req("y", acks=1))
    await wait_until(lambda: held.queued() >= 1)  # the fetcher's append of 5..9 waits
    becoming_leader = asyncio.ensure_future(
        b.rm.leader_and_isr(leader_and_isr_request(leader_and_isr(b, 2, 1, [2], [1, 2, 3], nodes))))
    await _yield_until(lambda: b.rm.partitions[TP].is_leader)
    assert lb.high_watermark == 5  # the new leader, alone in its ISR, committed its LEO
    await held.release()
    assert [e for _, e in await becoming_leader] == [0]
    await _yield_until(lambda: b.rm.partitions[TP].leader_epoch_start_offset == 10)
    for _ in range(10):  # let the fetcher task finish its turn
        await asyncio.sleep(0)
    assert lb.high_watermark >= 5
    assert lb.epoch_cache.entries == [(0, 0), (1, 10)]
    assert [r.key for r in decode_all(lb.read(0, 1 << 20))][-1] == b"y4"


async def test_newer_broker_epoch_is_accepted_older_refused(nodes):
    """Broker epochs: only an older broker epoch is stale. On the commit before,
    a request carrying the broker's new registration epoch (which the controller saw before
    the broker recorded it) was refused as STALE_BROKER_EPOCH."""
    from common.errors import RequestError
    a, _ = nodes
    newer = leader_and_isr(a, 1, 0, [1], [1, 2], [])
    newer.broker_epoch = a.rm.broker_epoch + 5
    assert [e for _, e in await a.rm.leader_and_isr(leader_and_isr_request(newer))] == [0]
    older = leader_and_isr(a, 1, 1, [1], [1, 2], [])
    older.broker_epoch = a.rm.broker_epoch - 1
    try:
        await a.rm.leader_and_isr(leader_and_isr_request(older))
        raise AssertionError("an older broker epoch was accepted")
    except RequestError as e:
        assert "older" in str(e)


async def test_acks_all_survives_a_leader_epoch_bump_that_keeps_the_batch(nodes):
    """Produce: the leader is re-elected in a new epoch while an acks=all batch
    waits for its follower. It still leads and the batch is intact, so the produce succeeds
    once replicated; on the commit before it failed with NOT_LEADER_OR_FOLLOWER."""
    a, b = nodes
    for n in nodes:
        await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], nodes))
    b.rm.fetcher_manager.remove_partitions([TP])  # the follower stops fetching for a while
    produce = asyncio.ensure_future(a.stub.Produce(produce_req("p")))
    await wait_until(lambda: a.lm.get_log(TP).log_end_offset == 5)
    for n in nodes:  # same leader, new epoch; the follower fetches again
        await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 1, [1, 2], [1, 2], nodes))
    resp = await produce
    pr = resp.responses[0].partition_responses[0]
    assert (pr.error_code, pr.base_offset) == (0, 0)
    assert b.lm.get_log(TP).log_end_offset == 5


async def test_fetch_from_an_older_follower_incarnation_does_not_move_the_hw(nodes):
    """Follower fetch state: a fetch carrying an older broker epoch than the
    follower's known one is served but must not advance the HW (KIP-903)."""
    a, _ = nodes
    await a.rm.leader_and_isr(leader_and_isr_request(leader_and_isr(a, 1, 0, [1, 2], [1, 2], [])))

    async def fetch(offset, broker_epoch):
        [r] = await a.rm.fetch(2, broker_epoch, 0, 1, 1 << 20, [FetchPartitionRequest(
            TP, offset, 1 << 20, current_leader_epoch=0)])
        return r
    await fetch(0, 102)
    await a.rm.produce(1, 5000, [(TP, batch(5))])
    r = await fetch(5, 90)  # the old incarnation claims to have everything
    assert r.error == 0 and a.lm.get_log(TP).high_watermark == 0
    await fetch(5, 102)
    assert a.lm.get_log(TP).high_watermark == 5


async def test_fetcher_offset_reset_truncates_to_the_leaders_end(nodes):
    """The fetcher's OFFSET_OUT_OF_RANGE path (Kafka's handleOutOfRangeError): a follower
    ahead of the leader with no epoch to compare (its leader-epoch checkpoint was lost) asks
    the leader for its log end, truncates there (whole batches: the stray 10-record batch goes
    whole) and then copies the leader's log."""
    a, b = nodes
    la, lb = a.lm.get_or_create_log(TP), b.lm.get_or_create_log(TP)
    la.append_as_leader(batch(5, tag="leader"), 0)
    lb.append_as_leader(batch(10, tag="stray"), 0)
    lb.epoch_cache.clear()
    for n in nodes:
        await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 1, [1, 2], [1, 2], nodes))
    await a.stub.Produce(produce_req("more", n=3))
    assert lb.log_end_offset == la.log_end_offset == 8
    [reset] = [e for e in b.events_logged() if e["event"] == "fetch_offset_reset"]
    assert reset["leo"] == 0
    assert lb.read(0, 1 << 20) == la.read(0, 1 << 20)


async def test_stale_stop_replica_leaves_fetcher_and_failed_state_alone(nodes):
    """StopReplica: a StopReplica older than the partition's leader epoch is
    FENCED_LEADER_EPOCH and touches nothing. On the commit before, the fetcher dropped the
    partition and its KIP-461 failed state was cleared before the epoch was checked."""
    from common.errors import ErrorCode
    from common.rpc import replog_pb2 as pb
    _, b = nodes
    for n in nodes:
        await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 3, [1, 2], [1, 2], nodes))
    fm = b.rm.fetcher_manager
    assert any(TP in f.partitions for f in fm.fetchers.values())
    fm.failed_partitions.fail(TP, 3)
    stale = pb.StopReplicaRequest(controller_id=0, controller_epoch=1,
                                  broker_epoch=b.rm.broker_epoch, partition_states=[
                                      pb.StopReplicaPartitionState(topic=TP.topic,
                                                                   partition=TP.partition,
                                                                   leader_epoch=2)])
    [(_, code)] = await b.rm.stop_replica(stop_replica_request(stale))
    assert code == ErrorCode.FENCED_LEADER_EPOCH
    assert TP in fm.failed_partitions
    assert any(TP in f.partitions for f in fm.fetchers.values())


async def test_partition_that_became_leader_while_an_earlier_one_appended_is_not_truncated(nodes):
    """Finding 8, second half: one Fetch response carries records for t-0 and a diverging
    epoch for t-1. While t-0's append waits on the held executor, a LeaderAndIsr makes this
    broker t-1's leader. The divergence answer is from a leader it no longer follows: t-1
    must keep its log. (Without the check before each partition, the fetcher truncated the
    new leader's log to the old leader's end of epoch 0.)"""
    from common.names import TopicPartition
    a, b = nodes
    t1 = TopicPartition("t", 1)
    a1, b1 = a.lm.get_or_create_log(t1), b.lm.get_or_create_log(t1)
    a1.append_as_leader(batch(5, tag="both"), 0)
    b1.append_as_follower(a1.read(0, 1 << 20))
    b1.append_as_leader(batch(5, tag="b-only"), 1)  # epoch 1: a never had it
    for tp in (TP, t1):
        await a.stub.LeaderAndIsr(leader_and_isr(a, 1, 2, [1, 2], [1, 2], nodes, tp=tp))
    await a.stub.Produce(produce_req("t0", acks=1))
    b.lm.get_or_create_log(TP)  # HeldExecutor finds the log dir through t-0's log
    held = HeldExecutor(b)
    for tp in (TP, t1):
        await b.stub.LeaderAndIsr(leader_and_isr(b, 1, 2, [1, 2], [1, 2], nodes, tp=tp))
    await wait_until(lambda: held.queued() >= 1)  # t-0's append waits; t-1's divergence too
    becoming_leader = asyncio.ensure_future(
        b.rm.leader_and_isr(leader_and_isr_request(
            leader_and_isr(b, 2, 3, [2], [1, 2], nodes, tp=t1))))
    await _yield_until(lambda: b.rm.partitions[t1].is_leader)
    await held.release()
    assert [e for _, e in await becoming_leader] == [0]
    for _ in range(20):  # let the fetcher finish its turn
        await asyncio.sleep(0)
    assert b1.log_end_offset == 10
    assert b1.epoch_cache.entries == [(0, 0), (1, 5), (3, 10)]


async def test_reassignment_step_4_metadata_does_not_delete_a_replica_the_isr_names(nodes):
    """The stray rule at the broker: reassignment [1, 2] -> [2, 3] reaches step 4 (the
    UpdateMetadata carries replicas = TRS at a newer leader epoch) while ZooKeeper still lists
    broker 1 in the ISR - the controller died before step 5. Broker 1 keeps its log: only
    StopReplica(delete) after the ISR shrank may remove it. Once the metadata drops it from the
    ISR too, it is a stray and goes."""
    a, b = nodes[0], nodes[1]
    for n in (a, b):
        await n.stub.LeaderAndIsr(leader_and_isr(n, 2, 3, [1, 2], [1, 2], [a, b]))
    await b.stub.Produce(produce_req("acked", acks=-1))

    def metadata(isr):
        return pb.UpdateMetadataRequest(
            controller_id=0, controller_epoch=1, broker_epoch=a.rm.broker_epoch,
            live_brokers=[n.endpoint() for n in (a, b)], topic_ids={TP.topic: "id"},
            partition_states=[pb.UpdateMetadataPartitionState(
                topic=TP.topic, partition=TP.partition, controller_epoch=1, leader=2,
                leader_epoch=4, isr=isr, partition_epoch=4, replicas=[2, 3])])

    await a.stub.UpdateMetadata(metadata([2, 1, 3]))
    # the stray decision is taken (and logged) within UpdateMetadata; its deletion runs later
    assert not [e for e in a.events_logged() if e.get("event") == "stray_replicas"]
    assert a.lm.get_log(TP) is not None
    await a.stub.UpdateMetadata(metadata([2, 3]))
    await wait_until(lambda: a.lm.get_log(TP) is None, timeout=10)


async def test_deleting_one_partition_keeps_the_topics_overrides_for_the_others(nodes):
    """A finding of the cluster simulation (seed 811): StopReplica(delete) of t-0
    forgot topic t's overrides while the broker still held t-1, so the next broker-config
    refresh read t's override as *unknown* and t-1's min ISR became the replication factor."""
    from common.names import TopicPartition
    a = nodes[0]
    t1 = TopicPartition(TP.topic, 1)
    for tp in (TP, t1):
        await a.stub.LeaderAndIsr(leader_and_isr(a, 1, 1, [1], [1, 2, 3], [a], tp=tp))
    a.rm.apply_topic_config(TP.topic, {"min.insync.replicas": "1"})
    assert a.rm.partitions[t1].min_isr == 1
    await a.stub.StopReplica(pb.StopReplicaRequest(
        controller_id=0, controller_epoch=1, broker_epoch=a.rm.broker_epoch,
        partition_states=[pb.StopReplicaPartitionState(topic=TP.topic, partition=0,
                                                       delete_partition=True)]))
    assert a.lm.get_log(TP) is None
    a.rm.apply_broker_config({})
    assert a.rm.partitions[t1].min_isr == 1
