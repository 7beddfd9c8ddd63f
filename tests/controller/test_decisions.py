"""Decision functions: invariants over random event sequences (hypothesis), plus targeted
checks the scenario scripts do not spell out."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.assignment import BrokerMetadata, assign_replicas
from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import NO_LEADER, BrokerRegistration, ControllerInfo, TopicAssignment
from controller import decisions as D
from controller.context import ControllerContext
from controller.request_batch import build_requests
from controller.state_machine import PartitionState

CTL = ControllerInfo(9, "127.0.0.1", 1)
N_BROKERS = 5


class Cluster:
    def __init__(self, seed: int, unclean: bool):
        self.ctx = ControllerContext(9, epoch=1, unclean_leader_election_default=unclean)
        self.czxid = 0
        self.dead: set[int] = set()
        for b in range(N_BROKERS):
            self.register(b)
        rng = random.Random(seed)
        for t in range(2):
            a = assign_replicas([BrokerMetadata(b) for b in range(N_BROKERS)], 4,
                                rng.randint(1, 3), rng=rng)
            self.ctx.add_topic(TopicAssignment(f"t{t}", f"id{t}", a), {})
            self.run(D.on_new_partitions(self.ctx, self.ctx.partitions_of(f"t{t}")))

    def register(self, b: int) -> None:
        self.czxid += 1
        self.ctx.add_broker(BrokerRegistration(b, "h", 1000 + b, epoch=self.czxid))

    def run(self, d: D.Decision) -> D.Decision:
        before = dict(self.ctx.leadership)
        D.apply(self.ctx, d)
        check_writes(self.ctx, d, before)
        check_requests(self.ctx, d)
        check_invariants(self.ctx)
        return d


def check_writes(ctx, d, before):
    for tp, w in d.writes.items():
        old = before.get(tp)
        assert w.old == old
        if old is None:
            assert w.new.partition_epoch == 0 and w.new.leader_epoch == 0
            continue
        assert w.new.partition_epoch == old.partition_epoch + 1
        assert w.new.leader_epoch >= old.leader_epoch
        if w.new.leader != old.leader:
            assert w.new.leader_epoch == old.leader_epoch + 1
        assert w.new.controller_epoch == ctx.epoch
    for e in d.elections:
        old = before.get(e.tp)
        if e.new_leader != NO_LEADER and old is not None and not e.unclean:
            assert e.new_leader in old.isr  # clean elections only pick ISR members
        if e.unclean:
            assert ctx.unclean_allowed(e.tp.topic) or e.reason == D.ElectionReason.OFFLINE


def check_requests(ctx, d):
    for broker, bb in build_requests(ctx, d, CTL).items():
        assert broker in ctx.live_brokers
        assert bb.broker_epoch == ctx.live_brokers[broker].epoch
        for req in bb.leader_and_isr:
            assert req.controller_epoch == ctx.epoch and req.broker_epoch == bb.broker_epoch
            for s in req.partition_states:
                tp = TopicPartition(s.topic, s.partition)
                assert broker in ctx.replicas(tp)  # only replicas hear LeaderAndIsr
                assert s.leader == ctx.leadership[tp].leader
                assert s.partition_epoch == ctx.leadership[tp].partition_epoch
            assert {e.broker_id for e in req.live_leaders} <= set(ctx.live_brokers)
        for req in bb.update_metadata:
            assert [b.broker_id for b in req.live_brokers] == sorted(ctx.live_brokers)


def check_invariants(ctx: ControllerContext):
    for tp in ctx.all_partitions():
        s = ctx.leadership.get(tp)
        state = ctx.partition_sm.state(tp)
        if s is None:
            assert state is PartitionState.NewPartition
            continue
        replicas = ctx.replicas(tp)
        assert s.isr, f"{tp}: the ISR never becomes empty"
        assert len(set(s.isr)) == len(s.isr) and set(s.isr) <= set(replicas)
        if s.leader != NO_LEADER:
            assert s.leader in s.isr, f"{tp}: leader {s.leader} not in ISR {s.isr}"
            assert s.leader in ctx.live_brokers, f"{tp}: dead leader {s.leader} survives"
            assert state is PartitionState.OnlinePartition
        else:
            assert state is PartitionState.OfflinePartition
            assert len(s.isr) == 1 or all(b in ctx.live_brokers for b in s.isr)
            # an offline partition really has no eligible ISR member (else it was elected),
            # unless only the unclean path could help and it is off
            assert not set(s.isr) & ctx.eligible_ids
        dead_in_isr = [b for b in s.isr if b not in ctx.live_brokers]
        assert not dead_in_isr or (s.leader == NO_LEADER and len(s.isr) == 1), \
            f"{tp}: dead {dead_in_isr} left in ISR {s.isr}"


ops = st.lists(st.tuples(st.sampled_from(
    ["kill", "start", "bounce", "shutdown", "shrink", "expand", "preferred", "unclean",
     "relinquish", "failover", "rebalance"]), st.integers(0, N_BROKERS - 1),
    st.integers(0, 7)), max_size=30)


@settings(max_examples=400, deadline=None)
@given(seed=st.integers(0, 1000), unclean=st.booleans(), script=ops)
def test_random_event_sequences_keep_invariants(seed, unclean, script):
    c = Cluster(seed, unclean)
    ctx = c.ctx
    now = 0.0
    for op, broker, k in script:
        now += 1000
        tps = list(ctx.all_partitions())
        tp = tps[k % len(tps)]
        if op == "kill" and broker in ctx.live_brokers:
            ctx.remove_broker(broker)
            c.run(D.on_brokers_failed(ctx, [broker]))
        elif op == "start" and broker not in ctx.live_brokers:
            c.register(broker)
            c.run(D.on_brokers_started(ctx, [broker]))
            # every partition that can be led now is led
            for p in ctx.all_partitions():
                s = ctx.leadership[p]
                if s.leader == NO_LEADER:
                    assert not set(s.isr) & ctx.eligible_ids
                    if ctx.unclean_allowed(p.topic):
                        assert not set(ctx.replicas(p)) & ctx.eligible_ids
        elif op == "bounce" and broker in ctx.live_brokers:
            ctx.remove_broker(broker)
            c.run(D.on_brokers_failed(ctx, [broker]))
            c.register(broker)
            c.run(D.on_brokers_started(ctx, [broker]))
        elif op == "shutdown" and broker in ctx.live_brokers:
            ctx.shutting_down.add(broker)
            c.run(D.controlled_shutdown(ctx, broker))
            for p in D.remaining_leaderships(ctx, broker):
                s = ctx.leadership[p]
                others = (set(s.isr) & ctx.eligible_ids) - {broker}
                assert not others, f"{p} remains on {broker} though {others} could lead"
            for p in ctx.partitions_on_brokers([broker]):
                s = ctx.leadership.get(p)
                if s and len(ctx.replicas(p)) > 1 and s.leader != broker:
                    assert broker not in s.isr or s.isr == (broker,)
        elif op in ("shrink", "expand", "relinquish"):
            s = ctx.leadership.get(tp)
            if s is None or s.leader == NO_LEADER:
                continue
            if op == "shrink":
                new_isr = (s.leader,)
            elif op == "expand":
                new_isr = tuple(dict.fromkeys(
                    (s.leader, *s.isr, *[r for r in ctx.replicas(tp) if r in ctx.eligible_ids])))
            else:
                new_isr = (*[r for r in s.isr if r != s.leader], s.leader)
            item = D.AlterPartitionItem(tp, s.leader_epoch, tuple((b, -1) for b in new_isr),
                                        s.partition_epoch, s.leader_recovery_state,
                                        relinquish_leadership=op == "relinquish")
            d = c.run(D.alter_partition(ctx, s.leader, ctx.broker_epoch(s.leader), [item], now))
            o = d.outcomes[tp]
            if op == "relinquish" and o.error == ErrorCode.NEW_LEADER_ELECTED:
                assert ctx.leadership[tp].leader != s.leader
                assert ctx.leadership[tp].isr[-1] == s.leader
            elif o.error == ErrorCode.NONE and op != "relinquish":
                assert ctx.leadership[tp].isr == new_isr
                assert ctx.leadership[tp].leader_epoch == s.leader_epoch
        elif op == "preferred":
            c.run(D.elect_leaders(ctx, D.ElectionType.PREFERRED, None, now))
        elif op == "unclean":
            d = c.run(D.elect_leaders(ctx, D.ElectionType.UNCLEAN, [tp], now))
            if d.outcomes[tp].error == ErrorCode.NONE:
                assert ctx.leadership[tp].leader != NO_LEADER
        elif op == "rebalance":
            c.run(D.elect_leaders(ctx, D.ElectionType.PREFERRED,
                                  D.imbalanced_partitions(ctx, 10, now), now))
        elif op == "failover":
            ctx.epoch += 1
            ctx.reset_states()
            c.run(D.on_controller_failover(ctx))


def _ctx_with_topic():
    c = Cluster(0, False)
    return c, c.ctx


def test_apply_skips_failed_partitions_and_their_requests():
    _c, ctx = _ctx_with_topic()
    victim = next(b for b in range(N_BROKERS)
                  if any(ctx.leadership[tp].leader == b for tp in ctx.all_partitions()))
    before = dict(ctx.leadership)
    ctx.remove_broker(victim)
    d = D.on_brokers_failed(ctx, [victim])
    failed_tp = next(iter(d.writes))
    D.apply(ctx, d, failed={failed_tp})
    assert ctx.leadership[failed_tp] == before[failed_tp]
    for tp in d.writes:
        if tp != failed_tp:
            assert ctx.leadership[tp] == d.writes[tp].new
    for bb in build_requests(ctx, d, CTL, failed={failed_tp}).values():
        for req in bb.leader_and_isr:
            assert all((s.topic, s.partition) != failed_tp for s in req.partition_states)
        for req in bb.update_metadata:
            assert all((s.topic, s.partition) != failed_tp for s in req.partition_states)


def test_alter_partition_whole_request_epoch():
    _c, ctx = _ctx_with_topic()
    with pytest.raises(D.StaleBrokerEpoch, match="not its current registration"):
        D.alter_partition(ctx, 1, ctx.broker_epoch(1) - 100, [], 0)
    with pytest.raises(D.StaleBrokerEpoch, match="not registered"):
        D.alter_partition(ctx, 77, 1, [], 0)


def test_alter_partition_kip903_member_epoch_and_topic_id():
    c, ctx = _ctx_with_topic()
    tp = next(tp for tp in ctx.all_partitions() if len(ctx.replicas(tp)) > 1)
    s = ctx.leadership[tp]
    shrink = D.AlterPartitionItem(tp, s.leader_epoch, ((s.leader, -1),), s.partition_epoch)
    c.run(D.alter_partition(ctx, s.leader, ctx.broker_epoch(s.leader), [shrink], 0))
    s = ctx.leadership[tp]
    other = next(r for r in ctx.replicas(tp) if r != s.leader)
    stale = D.AlterPartitionItem(tp, s.leader_epoch,
                                 ((s.leader, -1), (other, ctx.broker_epoch(other) + 1)),
                                 s.partition_epoch)
    wrong_id = D.AlterPartitionItem(tp, s.leader_epoch, ((s.leader, -1),), s.partition_epoch,
                                    topic_id="nope")
    d = D.alter_partition(ctx, s.leader, ctx.broker_epoch(s.leader), [stale], 0)
    assert d.outcomes[tp].error == ErrorCode.INELIGIBLE_REPLICA
    assert "broker epoch" in d.outcomes[tp].message and not d.writes
    d = D.alter_partition(ctx, s.leader, ctx.broker_epoch(s.leader), [wrong_id], 0)
    assert d.outcomes[tp].error == ErrorCode.UNKNOWN_TOPIC_ID


def test_recovering_rules():
    _c, ctx = _ctx_with_topic()
    tp = next(tp for tp in ctx.all_partitions() if len(ctx.replicas(tp)) > 1)
    s = ctx.leadership[tp]
    to_recovering = D.AlterPartitionItem(tp, s.leader_epoch, ((s.leader, -1),),
                                         s.partition_epoch, leader_recovery_state=1)
    d = D.alter_partition(ctx, s.leader, ctx.broker_epoch(s.leader), [to_recovering], 0)
    assert d.outcomes[tp].error == ErrorCode.INVALID_REQUEST
    assert "RECOVERED to RECOVERING" in d.outcomes[tp].message


def test_update_metadata_marks_deleted_topics_and_offline_replicas():
    c, ctx = _ctx_with_topic()
    ctx.remove_broker(0)
    c.run(D.on_brokers_failed(ctx, [0]))
    ctx.topics_to_delete.add("t0")
    d = D.start_topic_deletion(ctx, ["t0"])
    D.apply(ctx, d)
    batches = build_requests(ctx, d, CTL)
    states = [s for bb in batches.values() for r in bb.update_metadata
              for s in r.partition_states]
    assert states and all(s.leader == -2 for s in states)
    stops = [s for bb in batches.values() for r in bb.stop_replica for s in r.partition_states]
    assert stops and all(s.delete_partition and s.leader_epoch == -2 for s in stops)
    for s in states:
        assert list(s.offline_replicas) == [r for r in s.replicas if r == 0]


def test_large_batches_are_split(monkeypatch):
    import controller.request_batch as rb
    monkeypatch.setattr(rb, "MAX_PARTITIONS_PER_REQUEST", 3)
    _c, ctx = _ctx_with_topic()
    d = D.on_controller_failover(ctx)
    D.apply(ctx, d)
    for bb in rb.build_requests(ctx, d, CTL).values():
        assert all(len(r.partition_states) <= 3 for r in bb.update_metadata)
        assert sum(len(r.partition_states) for r in bb.update_metadata) == 8


def test_new_partitions_adopt_existing_state_znodes():
    """A topic whose state znodes a previous controller wrote before failing: adopted as they
    are; one without a live leader is elected for."""
    from common.zk_layout import LeaderAndIsr
    ctx = ControllerContext(9, epoch=2)
    for b in (1, 2):
        ctx.add_broker(BrokerRegistration(b, "h", 1, epoch=b))
    ctx.add_topic(TopicAssignment("t", "x", {0: [1, 2], 1: [3, 2], 2: [1, 2]}), {})
    ctx.leadership[TopicPartition("t", 0)] = LeaderAndIsr(1, 4, (1, 2), 1, 7)
    ctx.leadership[TopicPartition("t", 1)] = LeaderAndIsr(3, 2, (3, 2), 1, 3)
    d = D.on_new_partitions(ctx, ctx.partitions_of("t"))
    D.apply(ctx, d)
    assert TopicPartition("t", 0) not in d.writes  # live leader: unchanged
    s1 = ctx.leadership[TopicPartition("t", 1)]
    assert (s1.leader, s1.leader_epoch, s1.partition_epoch) == (2, 3, 4)  # 3 is dead
    s2 = ctx.leadership[TopicPartition("t", 2)]
    assert (s2.leader, s2.isr, s2.partition_epoch) == (1, (1, 2), 0)  # created
    check_invariants(ctx)


def test_partitions_whose_creation_failed_are_skipped_by_later_events():
    c, ctx = _ctx_with_topic()
    ctx.add_topic(TopicAssignment("half", "y", {0: [0, 1]}), {})
    d = D.on_new_partitions(ctx, ctx.partitions_of("half"))
    D.apply(ctx, d, failed={TopicPartition("half", 0)})  # its znode write was refused
    assert ctx.partition_sm.state(TopicPartition("half", 0)) is PartitionState.NonExistentPartition
    ctx.remove_broker(0)
    D.apply(ctx, D.on_brokers_failed(ctx, [0]))  # no InvalidStateTransition
    ctx.shutting_down.add(1)
    D.apply(ctx, D.controlled_shutdown(ctx, 1))
    c.register(0)
    D.apply(ctx, D.on_brokers_started(ctx, [0]))
    # and a retry initializes it
    D.apply(ctx, D.on_new_partitions(ctx, ctx.partitions_of("half")))
    assert ctx.leadership[TopicPartition("half", 0)].leader == 0
