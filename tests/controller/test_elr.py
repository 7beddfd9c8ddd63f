"""design.md#kip-966 in the controller's pure core: ELR bookkeeping, the election order and
the unclean recovery choice, table-tested by the names of Kafka's tests.

- `PartitionChangeBuilderTest.testEligibleLeaderReplicas_*` rows run through the decisions
  (AlterPartition, broker failure and startup, ElectLeaders) on a ControllerContext holding the
  row's partition state: the state ZooKeeper would be written with is compared to Kafka's.
- `ReplicationControlManagerTest.testEligibleLeaderReplicas_*` rows run through the core itself
  as scripts (testdata/elr_broker_fence.txt, elr_clean_election.txt, elr_unclean_shutdown.txt,
  elr.txt for ShrinkAndExpandIsr and EffectiveMinIsr); `test_kafka_rcm_rows_are_scripted`
  checks that each has its script and its final state.
- The seed's strategy matrix {ISR, unfenced ELR, fenced ELR, no ELR} x {Proactive, Balanced,
  Manual}, on the selector and through `elect_offline`.

Where replog departs from Kafka's expected values it is Kafka's
`useLastKnownLeaderInBalancedRecovery` stop-gap (LastKnownELR = the last leader only) against
KIP-966's LastKnownELR, which replog keeps (controller/elr.py); those rows say so.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from common.config import build_config
from common.dynamic_config import configured_min_isr, effective_min_isr
from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import (
    LEADER_RECOVERED,
    LEADER_RECOVERING,
    NO_LEADER,
    BrokerRegistration,
    LeaderAndIsr,
    TopicAssignment,
)
from controller import decisions as D
from controller import selectors as S
from controller.context import ControllerContext
from controller.decisions.recovery import (
    ReplicaLogInfo,
    choose_recovery_leader,
    offsets_discarded,
    ready_to_choose,
)
from controller.elr import (
    ElrConfig,
    config_warnings,
    next_elr,
    recovery_strategy,
)
from controller.selectors import UncleanRecoveryStrategy as U
from tests.controller.script import run_script

TP = TopicPartition("foo", 0)
TESTDATA = Path(__file__).parent / "testdata"


def make_ctx(*, replicas=(1, 2, 3, 4), isr=(), elr=(), lke=(), leader=NO_LEADER,
             live=(1, 2, 3, 4), min_isr=3, enabled=True, strategy: U | None = None,
             unclean=False, topic_config=None) -> ControllerContext:
    """One partition foo-0 in the row's state (leader epoch 100, partition epoch 200, as
    Kafka's rows), brokers `live` registered, the topic's min ISR `min_isr`."""
    ctx = ControllerContext(9, epoch=1, unclean_leader_election_default=unclean,
                            elr=ElrConfig(enabled=enabled, strategy=strategy))
    for b in live:
        ctx.add_broker(BrokerRegistration(b, "h", 1000 + b, epoch=10 + b))
    cfg = {"min.insync.replicas": str(min_isr), **(topic_config or {})}
    ctx.add_topic(TopicAssignment("foo", "id", {0: list(replicas)}), cfg)
    ctx.leadership[TP] = LeaderAndIsr(leader, 100, tuple(isr), 1, 200, tuple(elr), tuple(lke),
                                      LEADER_RECOVERED)
    ctx.reset_states()
    return ctx


def run(ctx: ControllerContext, d: D.Decision) -> LeaderAndIsr:
    D.apply(ctx, d)
    return ctx.leadership[TP]


def alter(ctx: ControllerContext, isr) -> D.Decision:
    s = ctx.leadership[TP]
    item = D.AlterPartitionItem(TP, s.leader_epoch, tuple((b, -1) for b in isr),
                                s.partition_epoch)
    return D.alter_partition(ctx, s.leader, ctx.broker_epoch(s.leader), [item], 0)


def register_unclean(ctx: ControllerContext, b: int) -> D.Decision:
    ctx.add_broker(BrokerRegistration(b, "h", 1000 + b, clean_shutdown=False, epoch=99 + b))
    return D.on_brokers_started(ctx, [b])


def fail(ctx: ControllerContext, *brokers: int) -> D.Decision:
    for b in brokers:
        ctx.remove_broker(b)
    return D.on_brokers_failed(ctx, brokers)


# ============================================================ PartitionChangeBuilderTest rows

def test_IsrShrinkBelowMinISR():
    ctx = make_ctx(isr=(1, 2, 3, 4), leader=1)
    s = run(ctx, alter(ctx, (1, 2)))
    assert (s.isr, s.elr, s.last_known_elr) == ((1, 2), (3, 4), ())
    assert s.leader_epoch == 100  # AlterPartition keeps it (KIP-497)


def test_IsrShrinkBelowMinISR_elr_disabled():
    ctx = make_ctx(isr=(1, 2, 3, 4), leader=1, enabled=False)
    s = run(ctx, alter(ctx, (1, 2)))
    assert (s.isr, s.elr, s.last_known_elr) == ((1, 2), (), ())


def test_IsrExpandAboveMinISR():
    ctx = make_ctx(isr=(1, 2), elr=(3,), lke=(4,), leader=1)
    s = run(ctx, alter(ctx, (1, 2, 3)))
    assert (s.isr, s.elr, s.last_known_elr) == ((1, 2, 3), (), ())


def test_IsrAddNewMemberNotInELR():
    ctx = make_ctx(isr=(1,), elr=(3,), lke=(2,), leader=1)
    s = run(ctx, alter(ctx, (1, 4)))
    assert (s.isr, s.elr, s.last_known_elr) == ((1, 4), (3,), (2,))


def test_RemoveUncleanShutdownReplicasFromElr():
    ctx = make_ctx(isr=(1,), elr=(2, 3), leader=1, live=(1, 2, 4))
    d = register_unclean(ctx, 3)
    s = run(ctx, d)
    assert (s.isr, s.elr, s.last_known_elr) == ((1,), (2,), (3,))
    assert s.leader == 1 and s.leader_epoch == 100  # an ELR-only change: no new leader epoch
    # ...but a new partition epoch, which the leader must hold: every replica hears
    # LeaderAndIsr (design.md#sim-finding-a, below).
    assert set(d.leader_and_isr) == {1, 2, 3, 4} and {1, 2, 4} <= set(d.update_metadata)


def test_an_elr_only_change_reaches_the_leader_by_leader_and_isr():
    # design.md#sim-finding-a: remove_unclean_replicas bumped the partition epoch
    # of an ELR-only change but sent only UpdateMetadata, so the leader kept the old partition
    # epoch and every AlterPartition it sent was INVALID_UPDATE_VERSION: the ISR never grew
    # back. As Kafka's ZooKeeper-era controller, every state write the leader must know of is
    # followed by LeaderAndIsr to the live replicas (the leader's own AlterPartition answers
    # are the one exception: the answer carries the new state).
    ctx = make_ctx(isr=(1,), elr=(2, 3), leader=1, live=(1, 2, 4), min_isr=3)
    d = register_unclean(ctx, 3)
    s = run(ctx, d)
    assert (s.leader_epoch, s.partition_epoch) == (100, 201)
    assert TP in d.leader_and_isr.get(1, {}), "the leader never hears the new partition epoch"


@pytest.mark.parametrize("lke", [(), (2,)], ids=["lastKnownLeaderEnabled", "disabled"])
def test_ElrCanBeElected(lke):
    ctx = make_ctx(isr=(1,), elr=(3,), lke=lke, leader=1)
    d = fail(ctx, 1)
    s = run(ctx, d)
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (3, (3,), (1,), lke)
    assert s.leader_recovery_state == LEADER_RECOVERED  # an ELR member is a clean choice
    assert [(e.new_leader, e.unclean) for e in d.elections] == [(3, False)]


def test_IsrCanShrinkToZero():
    ctx = make_ctx(isr=(1, 2, 3, 4), leader=1)
    s = run(ctx, fail(ctx, 1, 2, 3, 4))
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (NO_LEADER, (), (1, 2, 3, 4), ())
    # Kafka's lastKnownLeaderEnabled row has LastKnownELR {1}: replog's last leader is in the
    # ELR already. A member that comes back uncleanly moves to LastKnownELR (Kafka's stop-gap
    # leaves its LastKnownELR alone).
    s = run(ctx, register_unclean(ctx, 2))
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (NO_LEADER, (), (1, 3, 4), (2,))


def recover(ctx: ControllerContext, answers: dict[int, ReplicaLogInfo],
            now_ms: float = 0.0) -> list[D.Choice]:
    """Run the Unclean Recovery Manager over `ctx`'s recoveries: every live replica asked is
    answered with `answers` (absent: the broker never answers)."""
    urm = D.UncleanRecoveryManager(1000)
    d = D.elect_offline_partitions(ctx)
    for tp, strategy in d.recoveries.items():
        urm.start(tp, strategy, ctx.replicas(tp), 0.0)
    for q in urm.queries({b: r.epoch for b, r in ctx.live_brokers.items()}, 0.0):
        if q.broker_id in answers:
            urm.answered(q.query_id, q.broker_id, q.broker_epoch,
                         {tp: answers[q.broker_id] for tp in q.partitions}, 0.0)
    return urm.choices(ctx, now_ms)


def test_ElectLastKnownLeader():
    # Kafka elects the last known leader uncleanly when nothing else can lead; in replog that is
    # the recovery: the operator's ElectLeaders UNCLEAN lists the partition for the Unclean
    # Recovery Manager (never a blind pick)...
    ctx = make_ctx(lke=(1,))
    d = D.elect_leaders(ctx, D.ElectionType.UNCLEAN, [TP], 0)
    assert not d.writes and d.recoveries == {TP: U.BALANCED} and d.forced_recoveries == {TP}
    # ...and so does the offline election under Balanced once every LastKnownELR member is
    # unfenced. The recovery asks every live replica; the last known leader, with the latest
    # log, leads alone, RECOVERING, ELR and LastKnownELR cleared.
    choices = recover(ctx, {1: ReplicaLogInfo(100, 50), 2: ReplicaLogInfo(99, 80),
                            3: ReplicaLogInfo(-1, -1, ErrorCode.KAFKA_STORAGE_ERROR),
                            4: ReplicaLogInfo(100, 20)})
    assert [(c.leader, c.offsets_discarded) for c in choices] == [(1, 30)]
    d = D.elect_recovered(ctx, choices)
    s = run(ctx, d)
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (1, (1,), (), ())
    assert s.leader_recovery_state == LEADER_RECOVERING
    assert d.outcomes[TP].error == ErrorCode.NONE and d.elections[0].unclean
    assert d.elections[0].reason is S.ElectionReason.UNCLEAN_RECOVERY


def test_balanced_recovery_waits_for_every_last_known_elr_member():
    ctx = make_ctx(lke=(1, 2))
    assert recover(ctx, {2: ReplicaLogInfo(5, 5), 3: ReplicaLogInfo(5, 9)}) == []
    assert recover(ctx, {2: ReplicaLogInfo(5, 5), 3: ReplicaLogInfo(5, 9)}, 10_000) == []
    got = recover(ctx, {1: ReplicaLogInfo(5, 5), 2: ReplicaLogInfo(5, 7)}, 1000)
    assert [c.leader for c in got] == [2]  # 3, 4 never answered: chosen at the timeout


@pytest.mark.parametrize("strategy", [U.BALANCED, U.MANUAL])
def test_ElectLastKnownLeaderShouldFail(strategy):
    ctx = make_ctx(elr=(3,), lke=(1,), live=(1, 2, 4), strategy=strategy)
    d = D.elect_offline_partitions(ctx)
    assert not d.writes and not d.recoveries
    assert d.outcomes[TP].error == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


# ============================================================ ReplicationControlManagerTest rows

RCM_ROWS = {
    # Kafka's test name -> (script, the final state line `show` prints)
    "ShrinkAndExpandIsr": ("elr.txt", None),
    "BrokerFence": ("elr_broker_fence.txt",
                    "foo-0 leader=0 leader_epoch=3 isr=[0] elr=[1,3] partition_epoch=3 "
                    "OnlinePartition"),
    "CleanElection": ("elr_clean_election.txt",
                      "foo-0 leader=2 leader_epoch=4 isr=[2] elr=[0,3] partition_epoch=4 "
                      "OnlinePartition"),
    "UncleanShutdown": ("elr_unclean_shutdown.txt",
                        "foo-0 leader=2 leader_epoch=5 isr=[2] lke=[0,3] partition_epoch=7 "
                        "OnlinePartition"),
    "EffectiveMinIsr": ("elr.txt", "u-0 leader=1 leader_epoch=2 isr=[1] partition_epoch=2 "
                                   "OnlinePartition"),
}


@pytest.mark.parametrize("name", sorted(RCM_ROWS))
def test_kafka_rcm_rows_are_scripted(name):
    script, final = RCM_ROWS[name]
    expected, actual = run_script(TESTDATA / script)
    assert f"testEligibleLeaderReplicas_{name}" in expected
    assert actual.rstrip("\n") == expected.rstrip("\n")
    if final is not None:
        assert final in actual.rstrip("\n").split("\n")


def test_EffectiveMinIsr():
    ctx = make_ctx(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, min_isr=5)
    assert ctx.min_isr(TP) == 3


def test_the_controller_reads_min_isr_as_every_broker_does():
    """With min.insync.replicas=2 in the controller's config and a dynamic
    broker default of 1, the controller's ELR rule reads 1 - as each leader does
    (common.dynamic_config.configured_min_isr) - so it does not fill the ELR while the leader
    acknowledges acks=all on one replica. A topic override still wins."""
    ctx = make_ctx(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, min_isr=2)
    ctx.topic_configs[TP.topic].pop("min.insync.replicas")
    ctx.elr = replace(ctx.elr, min_insync_replicas=2)
    assert ctx.min_isr(TP) == 2
    ctx.broker_default_config = {"min.insync.replicas": "1"}
    assert ctx.min_isr(TP) == 1
    rf = len(ctx.replicas(TP))
    broker_side = effective_min_isr(configured_min_isr(
        ctx.topic_configs[TP.topic], ctx.broker_default_config, 2, rf), rf)
    assert ctx.min_isr(TP) == broker_side
    ctx.topic_configs[TP.topic]["min.insync.replicas"] = "3"
    assert ctx.min_isr(TP) == 3


def test_a_dynamic_default_change_reaches_the_controller_core():
    """/config/brokers/<default> is watched: a change is read and applied at once, and a new
    controller reads it at failover."""
    from tests.sim.driver import Driver
    d = Driver()
    d.elect()
    d.run()
    assert d.core.ctx.broker_default_config == {}
    d.tree.write_broker_default_config({"min.insync.replicas": "1"})
    d.run()
    assert d.core.ctx.broker_default_config == {"min.insync.replicas": "1"}
    d.crash()
    d.elect()
    d.run()
    assert d.core.ctx.broker_default_config == {"min.insync.replicas": "1"}


def test_UncleanShutdown_removes_from_isr_too():
    # handleBrokerUncleanShutdown also takes the broker out of an ISR (a controller that did
    # not see it die: the ISR still names it): an ISR change, so a new leader epoch.
    ctx = make_ctx(isr=(1, 2, 3), leader=1, min_isr=2)
    s = run(ctx, register_unclean(ctx, 3))
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (1, (1, 2), (), ())
    assert s.leader_epoch == 101


def test_unclean_shutdown_ignored_without_elr():
    ctx = make_ctx(isr=(3,), leader=NO_LEADER, live=(1, 2), enabled=False)
    s = run(ctx, register_unclean(ctx, 3))
    assert (s.leader, s.isr) == (3, (3,))  # today's ZooKeeper-era behaviour, unchanged


# ============================================================ switching ELR on and off

def test_switched_off_clears_at_next_change():
    ctx = make_ctx(isr=(1, 2), elr=(3,), lke=(4,), leader=1, enabled=False)
    s = run(ctx, alter(ctx, (1,)))
    assert (s.isr, s.elr, s.last_known_elr) == ((1,), (), ())


def test_switched_off_with_empty_isr_takes_the_elr_back():
    ctx = make_ctx(elr=(2, 3), lke=(4,), live=(1, 3, 4), enabled=False)
    s = run(ctx, D.elect_offline_partitions(ctx))
    # The ELR {2,3} becomes the ISR of the old (Kafka ZK-era) election, which elects 3 cleanly.
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (3, (3,), (), ())


def test_switched_on_starts_at_next_isr_change():
    ctx = make_ctx(isr=(1,), leader=1)  # below min ISR already: no ELR until it changes
    assert ctx.leadership[TP].elr == ()
    s = run(ctx, alter(ctx, (1, 2)))
    assert (s.isr, s.elr) == ((1, 2), ())  # 1 was the whole ISR and stays in it


# ============================================================ next_elr (the rules themselves)

def state(isr=(), elr=(), lke=(), leader=NO_LEADER):
    return LeaderAndIsr(leader, 1, tuple(isr), 1, 1, tuple(elr), tuple(lke))


@pytest.mark.parametrize("old,target,kw,want", [
    # below min ISR: (ELR ∪ ISR) − target − unclean; LKE = (union ∪ LKE) − target − ELR
    (state((1, 2, 3)), (1,), {}, ((2, 3), ())),
    (state((1,), (2, 3)), (1,), {"unclean_shutdown": {3}}, ((2,), (3,))),
    (state((1,), (2,), (3,)), (1, 3), {}, ((2,), ())),
    # at or above min ISR: cleared
    (state((1,), (2,), (3,)), (1, 2), {"min_isr": 2}, ((), ())),
    # an unclean election clears both
    (state((), (2,), (3,)), (4,), {"unclean_election": True}, ((), ())),
    # disabled: cleared
    (state((1,), (2,), (3,)), (1,), {"enabled": False}, ((), ())),
    # only assigned replicas (a reassignment removed 5)
    (state((1, 5)), (1,), {}, ((), ())),
    # the last leader, not in the ISR it led, joins LastKnownELR when the ISR first empties
    (state((2,), leader=1), (), {}, ((2,), (1,))),
], ids=["shrink", "unclean-shutdown", "expand-not-elr", "at-min", "unclean-election",
        "disabled", "unassigned", "last-leader"])
def test_next_elr(old, target, kw, want):
    args = {"enabled": True, "min_isr": 3, "replicas": (1, 2, 3, 4)} | kw
    assert next_elr(old, target, **args) == want


# ============================================================ design.md#kip-966's strategy matrix

LIVE = {1, 2, 3}
# Assignment [1,2,3,4]; broker 4 is fenced (dead).
SITUATIONS = {
    "ISR": dict(isr=(2,), elr=(), lke=()),
    "unfenced ELR": dict(isr=(), elr=(4, 3), lke=()),
    "fenced ELR": dict(isr=(), elr=(4,), lke=(1,)),
    "no ELR, LastKnownELR unfenced": dict(isr=(), elr=(), lke=(1, 2)),
    "no ELR, LastKnownELR fenced": dict(isr=(), elr=(), lke=(1, 4)),
}
MATRIX = {
    ("ISR", U.PROACTIVE): ("leader", 2), ("ISR", U.BALANCED): ("leader", 2),
    ("ISR", U.MANUAL): ("leader", 2),
    ("unfenced ELR", U.PROACTIVE): ("leader", 3), ("unfenced ELR", U.BALANCED): ("leader", 3),
    ("unfenced ELR", U.MANUAL): ("leader", 3),
    ("fenced ELR", U.PROACTIVE): ("recover", None), ("fenced ELR", U.BALANCED): ("wait", None),
    ("fenced ELR", U.MANUAL): ("wait", None),
    ("no ELR, LastKnownELR unfenced", U.PROACTIVE): ("recover", None),
    ("no ELR, LastKnownELR unfenced", U.BALANCED): ("recover", None),
    ("no ELR, LastKnownELR unfenced", U.MANUAL): ("wait", None),
    ("no ELR, LastKnownELR fenced", U.PROACTIVE): ("recover", None),
    ("no ELR, LastKnownELR fenced", U.BALANCED): ("wait", None),
    ("no ELR, LastKnownELR fenced", U.MANUAL): ("wait", None),
}


def _kind(r: S.ElrElection):
    if isinstance(r, S.LeaderChosen):
        return ("leader", r.election.leader)
    if isinstance(r, S.NeedsRecovery):
        return ("recover", None)
    return ("wait", None)


@pytest.mark.parametrize("situation,strategy", sorted(MATRIX, key=str),
                         ids=[f"{a}-{b}" for a, b in sorted(MATRIX, key=str)])
def test_strategy_matrix_selector(situation, strategy):
    sit = SITUATIONS[situation]
    r = S.elr_leader([1, 2, 3, 4], sit["isr"], sit["elr"], sit["lke"], LIVE, set(), strategy)
    assert _kind(r) == MATRIX[situation, strategy]
    if isinstance(r, S.LeaderChosen):
        assert not r.election.unclean
        assert r.election.isr == (r.election.leader,)
    if isinstance(r, S.NeedsRecovery):
        assert r.strategy is strategy


@pytest.mark.parametrize("situation,strategy", sorted(MATRIX, key=str),
                         ids=[f"{a}-{b}" for a, b in sorted(MATRIX, key=str)])
def test_strategy_matrix_through_elect_offline(situation, strategy):
    """The same matrix through the decision: a leader is written cleanly; a wait writes nothing
    and answers ELIGIBLE_LEADERS_NOT_AVAILABLE; a recovery is listed for the (not yet wired)
    Unclean Recovery Manager, the topic's strategy set in /config/topics."""
    sit = SITUATIONS[situation]
    ctx = make_ctx(live=LIVE, topic_config={"unclean.recovery.strategy": strategy.value},
                   strategy=U.MANUAL, **sit)
    d = D.elect_offline_partitions(ctx)
    kind, leader = MATRIX[situation, strategy]
    if kind == "leader":
        s = run(ctx, d)
        assert s.leader == leader and s.leader_recovery_state == LEADER_RECOVERED
        assert not d.elections[0].unclean and s.leader not in s.elr
    else:
        assert not d.writes
        assert d.outcomes[TP].error == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        assert d.recoveries == ({TP: strategy} if kind == "recover" else {})


def test_elected_isr_keeps_eligible_members_only():
    r = S.elr_leader([1, 2, 3], (3, 2, 1), (), (), {2, 3}, {3}, U.BALANCED)
    assert r == S.LeaderChosen(S.Election(2, (2,)))  # 3 is shutting down, 1 is dead


def test_unclean_election_enabled_on_the_topic_asks_for_a_recovery():
    # unclean.leader.election.enable=true on the topic maps to Proactive: with only a fenced
    # ELR member the partition is recovered at once - by the Unclean Recovery Manager, which
    # asks the replicas for their logs, not by the old blind pick of the first live replica.
    ctx = make_ctx(elr=(4,), lke=(3,), live=LIVE,
                   topic_config={"unclean.leader.election.enable": "true"})
    d = D.elect_offline_partitions(ctx)
    assert not d.writes and d.recoveries == {TP: U.PROACTIVE} and not d.forced_recoveries
    answers = {b: ReplicaLogInfo(7, 10 * b) for b in LIVE}
    assert recover(ctx, answers, 4999) == []  # 4 (down) may still register and answer...
    choices = recover(ctx, answers, 5000)  # ...for 5 s
    assert [c.leader for c in choices] == [max(LIVE)]  # the longest log, not the first


# ============================================================ configuration

@pytest.mark.parametrize("topic,cluster_strategy,cluster_unclean,want", [
    ({}, None, False, U.BALANCED),
    ({}, None, True, U.PROACTIVE),
    ({}, U.MANUAL, True, U.MANUAL),
    ({"unclean.leader.election.enable": "true"}, U.MANUAL, False, U.PROACTIVE),
    ({"unclean.leader.election.enable": "false"}, None, True, U.BALANCED),
    ({"unclean.recovery.strategy": "Manual",
      "unclean.leader.election.enable": "true"}, None, True, U.MANUAL),
    ({"unclean.recovery.strategy": "bogus"}, U.MANUAL, False, U.MANUAL),
])
def test_recovery_strategy_mapping(topic, cluster_strategy, cluster_unclean, want):
    assert recovery_strategy(topic, ElrConfig(True, 1, cluster_strategy), cluster_unclean) \
        is want


def test_elr_config_from_controller_config():
    cfg = build_config([("eligible.leader.replicas.enable", "true", "t"),
                        ("min.insync.replicas", "2", "t"),
                        ("unclean.recovery.strategy", "Manual", "t"),
                        ("unclean.leader.election.enable", "true", "t")])
    assert ElrConfig.from_config(cfg) == ElrConfig(True, 2, U.MANUAL, 300_000)
    assert any("unclean.recovery.strategy wins" in w for w in config_warnings(cfg))
    plain = build_config([])
    assert ElrConfig.from_config(plain) == ElrConfig()  # off by default, strategy unset
    assert config_warnings(plain) == []
    assert ElrConfig.from_config({"unclean.leader.election.enable": False}) == ElrConfig()


# ============================================================ the recovery's choice

def info(epoch, leo, error=ErrorCode.NONE):
    return ReplicaLogInfo(epoch, leo, error)


@pytest.mark.parametrize("replies,want", [
    ({}, None),
    ({1: info(5, 100)}, 1),
    ({1: info(5, 100), 2: info(5, 120), 3: info(5, 90)}, 2),        # longest log
    ({1: info(5, 100), 2: info(4, 500)}, 1),                         # epoch before length
    ({1: info(5, 100), 2: info(6, 10), 3: info(6, 12)}, 3),
    ({2: info(5, 100), 3: info(5, 100), 1: info(5, 100)}, 1),        # ties: assignment order
    ({3: info(5, 100), 2: info(5, 100)}, 2),
    ({1: info(9, 999, ErrorCode.KAFKA_STORAGE_ERROR), 2: info(1, 1)}, 2),  # errors never count
    ({7: info(9, 999), 3: info(1, 1)}, 3),                           # not a replica
    ({1: info(1, 1, ErrorCode.NOT_LEADER_OR_FOLLOWER)}, None),
], ids=["none", "one", "longest", "epoch-first", "epoch-then-leo", "tie", "tie-2",
        "error", "unassigned", "only-errors"])
def test_choose_recovery_leader(replies, want):
    assert choose_recovery_leader([1, 2, 3], replies) == want


def test_offsets_discarded():
    replies = {1: info(5, 100), 2: info(4, 500), 3: info(5, 90)}
    chosen = choose_recovery_leader([1, 2, 3], replies)
    assert chosen == 1 and offsets_discarded([1, 2, 3], replies, chosen) == 400
    assert offsets_discarded([1, 2, 3], {1: info(5, 100)}, 1) == 0


@pytest.mark.parametrize("strategy,replies,elapsed,want", [
    (U.BALANCED, {1: info(1, 1)}, 0, False),             # LastKnownELR member 2 missing
    (U.BALANCED, {1: info(1, 1), 2: info(1, 1)}, 0, False),   # 3 may still answer in time
    (U.BALANCED, {1: info(1, 1), 2: info(1, 1)}, 1000, True),  # timeout passed
    (U.BALANCED, {1: info(1, 1), 2: info(1, 1), 3: info(1, 1)}, 0, True),  # everyone
    (U.BALANCED, {1: info(1, 1)}, 10_000, False),        # never without every LKE member
    (U.PROACTIVE, {3: info(1, 1)}, 4_999, False),
    (U.PROACTIVE, {3: info(1, 1)}, 5_000, True),
    (U.PROACTIVE, {}, 9_000, False),                     # the first answer after 5 s
    (U.PROACTIVE, {1: info(0, 0, ErrorCode.KAFKA_STORAGE_ERROR)}, 9_000, False),
])
def test_ready_to_choose(strategy, replies, elapsed, want):
    assert ready_to_choose(strategy, [1, 2, 3], [1, 2], replies, elapsed, 1000) is want


def test_partitions_with_elr_and_elr_size_metrics():
    from controller.metrics import ControllerMetrics
    ctx = make_ctx(isr=(1,), elr=(2, 3), lke=(4,), leader=1)
    m = ControllerMetrics()
    m.refresh(ctx)
    value = m.registry.get_sample_value
    assert value("replog_controller_partitions_with_elr") == 1
    assert value("replog_controller_eligible_leader_replicas") == 2
    assert value("replog_controller_last_known_elr_replicas") == 1
    m.refresh(None)
    assert value("replog_controller_partitions_with_elr") == 0
    assert value("replog_controller_eligible_leader_replicas") == 0


def test_restarted_replica_does_not_join_the_elr():
    # design.md#jbod meets KIP-966: a replica lost with its log dir leaves the ISR like an
    # unclean shutdown - an ELR member would be elected cleanly with an empty log.
    # Nor does it join the LastKnownELR, which a Balanced recovery waits for: its log is gone.
    ctx = make_ctx(replicas=(1, 2, 3), isr=(1, 2), leader=1, min_isr=2, live=(1, 2, 3))
    s = run(ctx, D.restart_partitions(ctx, 2, [TP]))
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (1, (1,), (), ())


@pytest.mark.parametrize("unclean", [False, True])
def test_restarted_leader_hands_over_to_a_clean_elr_member(unclean):
    # The leader, the last ISR member, lost its log; 2 is a clean, live ELR member.
    # design.md#kip-966's order elects 2 cleanly - before, the restart ignored the ELR: offline with
    # unclean election off, an unclean RECOVERING election of 2 with it on.
    ctx = make_ctx(replicas=(1, 2, 3), isr=(1,), elr=(2,), leader=1, min_isr=2,
                   live=(1, 2, 3), unclean=unclean)
    d = D.restart_partitions(ctx, 1, [TP])
    s = run(ctx, d)
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (2, (2,), (), ())
    assert s.leader_recovery_state == LEADER_RECOVERED and s.leader_epoch == 101
    assert [e.unclean for e in d.elections] == [False] and not d.recoveries


@pytest.mark.parametrize("strategy, recovers", [(U.PROACTIVE, True), (U.BALANCED, True),
                                                (U.MANUAL, False)])
def test_restarted_last_leader_without_elr_goes_to_the_recovery_manager(strategy, recovers):
    # Nobody in sync is left: no blind unclean pick (even with unclean election on) - the
    # Unclean Recovery Manager asks the others for their logs, or Manual waits.
    ctx = make_ctx(replicas=(1, 2, 3), isr=(1,), leader=1, min_isr=2, live=(1, 2, 3),
                   strategy=strategy, unclean=True)
    d = D.restart_partitions(ctx, 1, [TP])
    s = run(ctx, d)
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (NO_LEADER, (), (), ())
    assert d.elections[0].new_leader == NO_LEADER and not d.elections[0].unclean
    assert (TP in d.recoveries) is recovers
    assert d.outcomes[TP].error == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


# ============================================================ seeded run with ELR invariants

def _elr_invariants(seed: int, steps: int = 40) -> None:
    """A seeded run of the core with ELR on (brokers die, return cleanly or not, leaders shrink
    and expand ISRs, operators force unclean elections, controllers fail over), checking after
    every step: ELR ∩ ISR = ∅; ELR and LastKnownELR disjoint, within the replicas; both empty
    when the ISR is at the min ISR the *brokers* compute (min.insync.replicas moves through
    the topic override and the dynamic broker default as the run goes); the leader in the ISR; a new leader from the old ISR or ELR
    unless an unclean recovery elected it (then RECOVERING, and the best log among the
    answers: brokers answer GetReplicaLogInfo with random logs, late, or not at all); a broker
    that registered uncleanly in no ELR; at most one leader per leader epoch. (tests/sim keeps
    the general invariants with ELR off; the durability side - brokers' HW and logs against
    the ELR - is the whole-cluster simulation's, tests/sim/cluster.)"""
    import random

    from controller import effects as X
    from controller import events as E
    from controller.store import WatchedEvent
    from tests.sim.driver import Crashed, Driver

    rng = random.Random(seed)
    d = Driver(config={"eligible.leader.replicas.enable": True, "min.insync.replicas": 2,
                       "unclean.recovery.strategy": rng.choice(["Proactive", "Balanced",
                                                                 "Manual"])})
    d.elect()
    brokers = [1, 2, 3, 4]
    for b in brokers:
        d.register(b)
    d.run()
    d.request(E.CreateTopics(topics=(E.NewTopic("t", assignments={
        0: [1, 2, 3], 1: [2, 3, 4], 2: [3, 4, 1]}),)))
    d.run()
    last = dict(d.tree.states)
    recovered: dict[TopicPartition, dict] = {}
    leader_of_epoch: dict[tuple[TopicPartition, int], int] = {}

    def on_effect(eff) -> None:
        if isinstance(eff, X.Emit) and eff.name == "unclean_recovery_finished" \
                and eff.fields["outcome"] == "elected":
            recovered[TopicPartition("t", int(eff.fields["partition"].rsplit("-", 1)[1]))] = \
                dict(eff.fields)

    d.on_effect = on_effect
    answered = 0
    for step in range(steps):
        unclean_now: set[int] = set()
        recovered.clear()
        live = sorted(d.broker_sessions)
        ctx = d.core.ctx
        action = rng.choice(["kill", "start", "start", "alter", "elect", "failover",
                             "answer", "answer", "later", "min_isr"])
        try:
            if action == "kill" and live:
                d.kill(rng.choice(live))
            elif action == "start":
                dead = [b for b in brokers if b not in d.broker_sessions]
                if dead:
                    b = rng.choice(dead)
                    clean = rng.random() < 0.5
                    d.register(b, clean_shutdown=clean)
                    if not clean:
                        unclean_now.add(b)
            elif action == "alter":
                tp = TopicPartition("t", rng.randrange(3))
                s = ctx.leadership[tp]
                if s.leader in d.broker_sessions:
                    isr = [s.leader] + [r for r in ctx.replicas(tp) if r != s.leader
                                        and r in d.broker_sessions and rng.random() < 0.6]
                    d.request(E.AlterPartition(
                        broker_id=s.leader, broker_epoch=ctx.broker_epoch(s.leader),
                        items=(D.AlterPartitionItem(tp, s.leader_epoch,
                                                    tuple((r, -1) for r in isr),
                                                    s.partition_epoch, LEADER_RECOVERED),)))
            elif action == "elect":
                d.request(E.ElectLeaders(election_type=D.ElectionType.UNCLEAN,
                                         partitions=None))
            elif action == "answer":
                queries = list(d.log_queries(answered))
                answered = len(d.sent)
                for _i, q in queries:
                    if rng.random() < 0.15:
                        continue  # lost: the broker died, or the answer is still on its way
                    answers = None if rng.random() < 0.1 else {
                        tp: D.ReplicaLogInfo(rng.randint(0, 3), rng.randint(0, 20))
                        for tp, _topic_id in q.partitions}
                    d.post(E.ReplicaLogInfoResponse(query_id=q.query_id,
                                                    broker_id=q.broker_id,
                                                    broker_epoch=q.broker_epoch,
                                                    answers=answers))
            elif action == "later":
                d.now_ms += rng.choice([1000, 6000, 400_000])
                d.fire_timers()
            elif action == "failover":
                d.crash()
                d.elect()
            elif action == "min_isr":
                # min.insync.replicas moves through either source the brokers read (one
                # resolver): the topic override or the dynamic broker default
                value = rng.choice([None, "1", "2", "3"])
                if rng.random() < 0.5:
                    cfg = d.tree.configs.setdefault("t", {})
                    if value is None:
                        cfg.pop("min.insync.replicas", None)
                    else:
                        cfg["min.insync.replicas"] = value
                    d.tree.fire(("config", "t"), WatchedEvent("CHANGED", "t"))
                else:
                    d.tree.write_broker_default_config(
                        {} if value is None else {"min.insync.replicas": value})
            d.run()
        except Crashed:
            d.crash()
            d.elect()
            d.run()
        for tp, s in d.tree.states.items():
            where = f"seed {seed} step {step} ({action}) {tp}: {s}"
            replicas = set(d.tree.topics["t"].partitions[tp.partition])
            isr, elr, lke = set(s.isr), set(s.elr), set(s.last_known_elr)
            assert not isr & elr and not elr & lke, where
            assert (isr | elr | lke) <= replicas, where
            # the min ISR every leader applies, from the brokers' own resolver over what
            # ZooKeeper holds - the controller's ELR must agree with it, not with a view of
            # its own
            rf = len(replicas)
            min_isr = effective_min_isr(configured_min_isr(
                d.tree.configs.get("t", {}), d.tree.broker_default_config, 2, rf), rf)
            if len(s.isr) >= min_isr:
                assert not elr and not lke, where
            assert s.leader == NO_LEADER or s.leader in isr, where
            assert not elr & unclean_now, where
            seen = leader_of_epoch.setdefault((tp, s.leader_epoch), s.leader)
            assert seen == s.leader, where
            old = last.get(tp)
            if old is not None and s.leader not in (NO_LEADER, old.leader) \
                    and s.leader not in set(old.isr) | set(old.elr):
                r = recovered.get(tp)
                assert r is not None and r["leader"] == s.leader, where
                assert s.leader_recovery_state == LEADER_RECOVERING, where
                answers = {int(b): D.ReplicaLogInfo(a["last_written_leader_epoch"],
                                                    a["log_end_offset"], ErrorCode[a["error"]])
                           for b, a in r["answers"].items()}
                assert choose_recovery_leader(r["candidates"], answers) == s.leader, where
        last = dict(d.tree.states)


def test_seeded_runs_keep_the_elr_invariants():
    for seed in range(300):
        _elr_invariants(seed)
