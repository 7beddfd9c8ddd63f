"""KIP-966's Unclean Recovery Manager (design.md#kip-966): the pure task bookkeeping
(decisions/recovery.py) table-tested, then the whole loop through the controller's shell against
a real ZooKeeper and fake brokers (real gRPC servers answering GetReplicaLogInfo).

The core's handling - tasks started by offline elections, the strategies' waits, a broker dying
mid-query or coming back, a failover, deletion and reassignment dropping a task, ElectLeaders
UNCLEAN - is scripted in testdata/unclean_recovery.txt and elr.txt; test_crash_after.py kills
the controller after every effect of a recovery; test_elr.py's seeded run answers queries at
random and checks that every recovery elected the best answer."""

from __future__ import annotations

import dataclasses

import grpc
import pytest

from common.errors import ErrorCode
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from common.zk_layout import BrokerRegistration, LeaderAndIsr, TopicAssignment
from controller import decisions as D
from controller.context import ControllerContext
from controller.decisions.recovery import PROACTIVE_WAIT_MS, RETRY_BACKOFF_MS
from controller.elr import ElrConfig
from controller.selectors import UncleanRecoveryStrategy as U
from tests.controller.fakes import wait_for
from tests.controller.test_controller_zk import active_controller, create, state, stub

R = D.ReplicaLogInfo


def tps(n: int, topic: str = "t") -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(n)]


def leaderless_ctx(n: int = 1000, brokers=(1, 2, 3)) -> ControllerContext:
    """n leaderless partitions spread over `brokers` (RF 3), nobody in ISR or ELR."""
    ctx = ControllerContext(9, epoch=1, elr=ElrConfig(enabled=True))
    for b in brokers:
        ctx.add_broker(BrokerRegistration(b, "h", 1000 + b, epoch=10 + b))
    bs = list(brokers)
    ctx.add_topic(TopicAssignment("t", "tid", {
        p: [bs[(p + i) % len(bs)] for i in range(3)] for p in range(n)}), {})
    for tp in tps(n):
        ctx.leadership[tp] = LeaderAndIsr(-1, 5, (), 1, 7)
    ctx.reset_states()
    return ctx


def started(ctx: ControllerContext, strategy=U.PROACTIVE, now=0.0, **kw):
    urm = D.UncleanRecoveryManager(10_000)
    for tp in ctx.all_partitions():
        urm.start(tp, strategy, ctx.replicas(tp), now, **kw)
    return urm


def epochs(ctx: ControllerContext) -> dict[int, int]:
    return {b: r.epoch for b, r in ctx.live_brokers.items()}


def test_one_query_per_broker_for_every_partition():
    ctx = leaderless_ctx(1000)
    urm = started(ctx)
    qs = urm.queries(epochs(ctx), 0.0)
    assert [(q.broker_id, q.broker_epoch, len(q.partitions)) for q in qs] == \
        [(1, 11, 1000), (2, 12, 1000), (3, 13, 1000)]
    assert urm.queries(epochs(ctx), 0.0) == []  # nothing is asked twice


def test_answers_choose_the_best_log_once_every_replica_answered():
    ctx = leaderless_ctx(2)
    urm = started(ctx)
    q1, q2, q3 = urm.queries(epochs(ctx), 0.0)
    urm.answered(q1.query_id, 1, 11, {tp: R(3, 10) for tp in q1.partitions}, 1.0)
    urm.answered(q2.query_id, 2, 12, {tp: R(3, 20 + tp.partition * 100)
                                      for tp in q2.partitions}, 1.0)
    assert urm.choices(ctx, 1.0) == []  # 3 has not answered, and 5 s have not passed
    urm.answered(q3.query_id, 3, 13, {tp: R(2, 999) for tp in q3.partitions}, 2.0)
    got = {c.task.tp.partition: (c.leader, c.offsets_discarded) for c in urm.choices(ctx, 2.0)}
    # epoch before length: 3's longer log is from an older leader epoch, and what it has
    # beyond 2's log end is counted as discarded (the metric: best LEO - chosen LEO)
    assert got == {0: (2, 999 - 20), 1: (2, 999 - 120)}


def test_proactive_takes_what_arrived_within_5_s_or_the_first_after():
    ctx = leaderless_ctx(1)
    urm = started(ctx)
    qs = {q.broker_id: q for q in urm.queries(epochs(ctx), 0.0)}
    assert urm.next_deadline_ms(0.0) == PROACTIVE_WAIT_MS
    urm.answered(qs[2].query_id, 2, 12, {TopicPartition("t", 0): R(1, 5)}, 10.0)
    assert urm.choices(ctx, PROACTIVE_WAIT_MS - 1) == []
    assert [c.leader for c in urm.choices(ctx, PROACTIVE_WAIT_MS)] == [2]
    assert urm.next_deadline_ms(PROACTIVE_WAIT_MS) is None  # nothing left to wake for
    late = started(ctx)
    qs = {q.broker_id: q for q in late.queries(epochs(ctx), 0.0)}
    assert late.choices(ctx, 60_000) == []  # no answer yet: the first one after 5 s
    late.answered(qs[3].query_id, 3, 13, {TopicPartition("t", 0): R(1, 1)}, 60_000)
    assert [c.leader for c in late.choices(ctx, 60_000)] == [3]


def test_a_dead_broker_answer_never_counts_and_its_new_incarnation_is_asked():
    ctx = leaderless_ctx(1)
    urm = started(ctx)
    qs = {q.broker_id: q for q in urm.queries(epochs(ctx), 0.0)}
    tp = TopicPartition("t", 0)
    urm.answered(qs[1].query_id, 1, 11, {tp: R(9, 900)}, 1.0)
    urm.broker_gone(1)
    ctx.remove_broker(1)
    assert urm.tasks[tp].replies == {}
    # a late answer of the dead incarnation's query is ignored
    urm.answered(qs[1].query_id, 1, 11, {tp: R(9, 900)}, 2.0)
    assert urm.tasks[tp].replies == {}
    ctx.add_broker(BrokerRegistration(1, "h", 1001, epoch=99))
    (q,) = urm.queries(epochs(ctx), 3.0)
    assert (q.broker_id, q.broker_epoch) == (1, 99)
    # an answer naming another broker epoch than the one asked is ignored
    urm.answered(q.query_id, 1, 100, {tp: R(1, 1)}, 4.0)
    assert 1 not in urm.tasks[tp].replies


def test_a_failed_query_is_asked_again_after_a_back_off():
    ctx = leaderless_ctx(3)
    urm = started(ctx)
    qs = {q.broker_id: q for q in urm.queries(epochs(ctx), 0.0)}
    urm.answered(qs[2].query_id, 2, 12, None, 100.0)
    assert urm.queries(epochs(ctx), 100.0 + RETRY_BACKOFF_MS - 1) == []
    assert urm.next_deadline_ms(100.0) == 100.0 + RETRY_BACKOFF_MS
    (q,) = urm.queries(epochs(ctx), 100.0 + RETRY_BACKOFF_MS)
    assert q.broker_id == 2 and len(q.partitions) == 3


def test_balanced_waits_for_last_known_elr_then_the_timeout():
    ctx = leaderless_ctx(1, brokers=(1, 2, 3, 4))
    tp = TopicPartition("t", 0)  # replicas 1, 2, 3
    ctx.leadership[tp] = LeaderAndIsr(-1, 5, (), 1, 7, (), (2, 3))
    urm = started(ctx, U.BALANCED)
    qs = {q.broker_id: q for q in urm.queries(epochs(ctx), 0.0)}
    assert sorted(qs) == [1, 2, 3]  # 4 is not a replica
    urm.answered(qs[1].query_id, 1, 11, {tp: R(4, 400)}, 1.0)
    urm.answered(qs[2].query_id, 2, 12, {tp: R(4, 100)}, 1.0)
    assert urm.choices(ctx, 20_000) == []  # LastKnownELR member 3 has not answered
    urm.answered(qs[3].query_id, 3, 13, {tp: R(4, 200)}, 2.0)
    assert [(c.leader, c.offsets_discarded) for c in urm.choices(ctx, 2.0)] == [(1, 0)]


def test_forced_recoveries_end_when_nobody_can_answer():
    ctx = leaderless_ctx(2)
    urm = started(ctx, U.MANUAL, forced=True)
    qs = urm.queries(epochs(ctx), 0.0)
    for q in qs:
        urm.answered(q.query_id, q.broker_id, q.broker_epoch,
                     {tp: R(-1, -1, ErrorCode.KAFKA_STORAGE_ERROR) for tp in q.partitions},
                     1.0)
    assert {t.tp for t in urm.exhausted(ctx.live_ids)} == set(tps(2))
    assert started(ctx, U.BALANCED).exhausted(ctx.live_ids) == []  # automatic ones wait
    assert len(started(ctx, U.MANUAL, forced=True).exhausted(set())) == 2  # no replica live


def test_a_replica_lost_with_its_log_dir_is_asked_again_and_its_recreated_log_counts():
    """KAFKA_STORAGE_ERROR: the replica was lost with a log dir; the restart re-creates it
    within the same broker epoch, so the task asks again after the backoff (cluster
    simulation jbod seed 40: an automatic task waited for ever)."""
    ctx = leaderless_ctx(1)
    urm = started(ctx, U.BALANCED)
    qs = urm.queries(epochs(ctx), 0.0)
    for q in qs:
        urm.answered(q.query_id, q.broker_id, q.broker_epoch,
                     {tp: R(-1, -1, ErrorCode.KAFKA_STORAGE_ERROR) for tp in q.partitions}, 1.0)
    assert urm.queries(epochs(ctx), 2.0) == []  # not before the backoff
    assert urm.next_deadline_ms(2.0) == 1.0 + RETRY_BACKOFF_MS
    again = urm.queries(epochs(ctx), 1.0 + RETRY_BACKOFF_MS)
    assert {q.broker_id for q in again} == {q.broker_id for q in qs}
    for q in again:
        urm.answered(q.query_id, q.broker_id, q.broker_epoch,
                     {tp: R(-1, 0) for tp in q.partitions}, 600.0)
    assert len(urm.choices(ctx, 600.0)) == 1


def test_obsolete_tasks():
    ctx = leaderless_ctx(2)
    urm = started(ctx)
    t0, t1 = (urm.tasks[tp] for tp in tps(2))
    assert D.obsolete(ctx, t0) is None
    ctx.leadership[t0.tp] = dataclasses.replace(ctx.leadership[t0.tp], elr=(2,))
    assert D.obsolete(ctx, t0) == ("broker 2 can lead it cleanly", True)
    ctx.leadership[t1.tp] = dataclasses.replace(ctx.leadership[t1.tp], leader=3, isr=(3,))
    assert D.obsolete(ctx, t1) == ("broker 3 leads it", False)
    ctx.topics_to_delete.add("t")
    assert D.obsolete(ctx, t1) == ("the partition is being deleted", False)


def test_an_answer_to_a_dropped_tasks_query_never_counts_for_the_next_task():
    """Cluster simulation seed 11797 (24 steps): a query went to broker 1 for a task on
    [1, 2, 3]; a cancel sent broker 1 StopReplica(delete) and dropped the task; a new move
    re-added 1 and its task asked 1 again at the same broker epoch. The first query's late
    answer - broker 1's log before the delete - was credited to the new task, which elected 1;
    the delete then reached it and it led an empty log. Only the answer to the query the
    task is waiting for counts."""
    ctx = leaderless_ctx(1)
    tp = TopicPartition("t", 0)
    urm = started(ctx)
    old = {q.broker_id: q for q in urm.queries(epochs(ctx), 0.0)}
    urm.drop(tp)  # the partition was reassigned: its election is decided again
    urm.start(tp, U.PROACTIVE, ctx.replicas(tp), 1.0)
    new = {q.broker_id: q for q in urm.queries(epochs(ctx), 1.0)}
    assert new[1].broker_epoch == old[1].broker_epoch  # the same incarnation is asked again
    urm.answered(old[1].query_id, 1, 11, {tp: R(9, 900)}, 2.0)
    assert urm.tasks[tp].replies == {}, "the dropped task's answer counted for the new task"
    urm.answered(new[1].query_id, 1, 11, {tp: R(3, 30)}, 3.0)
    assert urm.tasks[tp].replies == {1: R(3, 30)}


# ================================================================ through the shell, real ZK


def unclean(b) -> BrokerRegistration:
    return dataclasses.replace(b.registration(), clean_shutdown=False)


@pytest.mark.integration
async def test_recovery_through_real_zookeeper_and_grpc(controllers, fake_brokers,
                                                        broker_sessions, zk):
    brokers = await fake_brokers(1, 2, 3)
    srv = await active_controller(controllers, eligible_leader_replicas_enable="true",
                                  min_insync_replicas="2",
                                  unclean_recovery_strategy="Balanced",
                                  unclean_recovery_timeout_ms="600000")
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    await create(srv, "t", assignments={0: [1, 2, 3], 1: [2, 3, 1]})
    for b in (1, 2, 3):  # every replica dies; the last ones stay in the ELR
        broker_sessions.kill(b)
        await wait_for(lambda b=b: b not in srv.controller.context.live_brokers)
    await wait_for(lambda: state(zk, "t", 0)["leader"] == -1 and state(zk, "t", 0)["elr"])
    logs = {1: {0: (2, 10), 1: (2, 10)}, 2: {0: (2, 30), 1: (2, 70)},
            3: {0: (2, 50), 1: (2, 50)}}
    for b in brokers:
        b.logs = {("t", p): v for p, v in logs[b.broker_id].items()}
        b.received.clear()
        b.epoch = broker_sessions.register(unclean(b))  # back after an unclean shutdown
    await wait_for(lambda: state(zk, "t", 0)["leader"] == 3 and state(zk, "t", 1)["leader"] == 2,
                   what="recovered leaders")
    for p, leader in ((0, 3), (1, 2)):
        s = state(zk, "t", p)
        assert (s["isr"], s["elr"], s["last_known_elr"], s["leader_recovery_state"]) == \
            ([leader], [], [], 1)  # alone, RECOVERING (KIP-704), ELR and LastKnownELR cleared
    for b in brokers:  # one GetReplicaLogInfo per broker, for both partitions
        (q,) = b.of("GetReplicaLogInfo")
        assert q.broker_epoch == b.epoch
        assert sorted(p for t in q.topic_partitions for p in t.partitions) == [0, 1]
    # The finished records (and their counters) follow the state write the wait above saw.
    await wait_for(lambda: len(srv.log.named("unclean_recovery_finished")) == 2,
                   what="both recoveries recorded")
    m = srv.metrics.registry.get_sample_value
    assert m("replog_unclean_recoveries_total",
             {"strategy": "Balanced", "outcome": "elected"}) == 2
    assert m("replog_unclean_recovery_offsets_discarded_total") == 0
    assert m("replog_controller_getreplicaloginfo_requests_total") == 3
    done = {e["partition"]: e for e in srv.log.named("unclean_recovery_finished")}
    assert done["t-0"]["answers"]["2"] == {"last_written_leader_epoch": 2,
                                           "log_end_offset": 30, "error": "NONE"}
    assert [e["reason"] for e in srv.log.named("leader_election")
            if e["unclean"]] == ["unclean_recovery", "unclean_recovery"]


@pytest.mark.integration
async def test_manual_recovery_answers_elect_leaders_after_the_choice(
        controllers, fake_brokers, broker_sessions, zk):
    brokers = await fake_brokers(1, 2)
    srv = await active_controller(controllers, eligible_leader_replicas_enable="true",
                                  min_insync_replicas="2", unclean_recovery_strategy="Manual")
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 2)
    await create(srv, "m", assignments={0: [1, 2]})
    for b in (1, 2):
        broker_sessions.kill(b)
        await wait_for(lambda b=b: b not in srv.controller.context.live_brokers)
    for b in brokers:
        b.logs = {("m", 0): (4, 10 * b.broker_id)}
        b.epoch = broker_sessions.register(unclean(b))
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 2)
    await wait_for(lambda: state(zk, "m", 0)["last_known_elr"] == [1, 2])
    assert state(zk, "m", 0)["leader"] == -1  # Manual: no leader until the operator asks
    assert not any(b.of("GetReplicaLogInfo") for b in brokers)
    r = await stub(srv).ElectLeaders(pb.ElectLeadersRequest(
        election_type=pb.UNCLEAN, topic_partitions=[pb.TopicPartitions(
            topic="m", partitions=[0])], timeout_ms=5000), timeout=30)
    assert [(x.partition, x.error_code) for x in r.replica_election_results] == [(0, 0)]
    s = state(zk, "m", 0)
    assert (s["leader"], s["isr"], s["leader_recovery_state"]) == (2, [2], 1)


@pytest.mark.integration
async def test_elect_unclean_with_no_replica_to_ask_fails_at_once(
        controllers, fake_brokers, broker_sessions, zk):
    await fake_brokers(1, 2)
    srv = await active_controller(controllers, eligible_leader_replicas_enable="true",
                                  unclean_recovery_strategy="Manual")
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 2)
    await create(srv, "m", assignments={0: [1]})
    broker_sessions.kill(1)
    await wait_for(lambda: state(zk, "m", 0)["leader"] == -1)
    r = await stub(srv).ElectLeaders(pb.ElectLeadersRequest(
        election_type=pb.UNCLEAN, topic_partitions=[pb.TopicPartitions(
            topic="m", partitions=[0])], timeout_ms=5000), timeout=30)
    (res,) = r.replica_election_results
    assert res.error_code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert "no live replica" in res.error_message
    with pytest.raises(grpc.aio.AioRpcError):  # the servicer still validates as before
        await stub(srv).ElectLeaders(pb.ElectLeadersRequest(election_type=7), timeout=5)
