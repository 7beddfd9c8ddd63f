"""KIP-966 defects the whole-cluster simulation found in the controller
(design.md#sim-finding-d, design.md#sim-finding-e, design.md#sim-finding-f), each on the pure
decisions and, where the event path matters, through the core (tests/sim/driver.py).

- D: a min.insync.replicas decrease lets the leader advance its HW on a smaller ISR, so an ELR
  kept from the higher value vouches for replicas without those records (seed 45).
- E: a broker that registered after an unclean shutdown while no controller ran is still in
  the ISR, or still the leader, when the next controller loads (seed 197).
- F: a leaderless partition with an empty ISR and ELR gets no unclean recovery under Balanced:
  a move of the partition dropped its task for good (seed 49); a replica that lost its whole
  log answers UNKNOWN_TOPIC_OR_PARTITION and the task waited for a usable answer forever
  (seed 113).
"""

from __future__ import annotations

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import LEADER_RECOVERING, NO_LEADER, BrokerRegistration
from controller import decisions as D
from controller import events as E
from controller.decisions.recovery import ReplicaLogInfo
from controller.selectors import UncleanRecoveryStrategy as U
from tests.controller.test_elr import TP, make_ctx, run
from tests.sim.driver import Driver

FOO0 = TopicPartition("foo", 0)


# ============================================================ D: min ISR changes

def test_a_topic_min_isr_decrease_clears_an_elr_the_isr_no_longer_needs():
    # ISR [1] under min ISR 2: the HW is frozen, 2 (ELR) holds every committed record. Min ISR
    # 1: leader 1 advances its HW on the ISR alone, which 2 never fetched.
    ctx = make_ctx(replicas=(1, 2, 3), isr=(1,), elr=(2,), lke=(3,), leader=1, min_isr=2)
    strategy = ctx.recovery_strategy("foo")
    ctx.topic_configs["foo"]["min.insync.replicas"] = "1"
    d = D.on_topic_config_changed(ctx, "foo", False, strategy)
    s = run(ctx, d)
    assert (s.isr, s.elr, s.last_known_elr) == ((1,), (), ())
    assert (s.leader, s.leader_epoch, s.partition_epoch) == (1, 100, 201)  # no new leader epoch
    assert set(d.leader_and_isr) == {1, 2, 3}  # the leader must hold the new partition epoch


def test_a_min_isr_change_keeps_the_elr_while_the_isr_is_still_below_it():
    # 3 -> 2 with ISR [1]: still below, the HW stays frozen, the ELR members keep their claim.
    ctx = make_ctx(isr=(1,), elr=(2, 3), leader=1, min_isr=3)
    strategy = ctx.recovery_strategy("foo")
    ctx.topic_configs["foo"]["min.insync.replicas"] = "2"
    d = D.on_topic_config_changed(ctx, "foo", False, strategy)
    assert TP not in d.writes


def test_a_broker_default_min_isr_decrease_clears_the_elr():
    """The cluster-wide path (/config/brokers/<default>) through the core: the topic has no
    override, so the default's 1 is its min ISR from now on."""
    d = Driver(config={"eligible.leader.replicas.enable": True, "min.insync.replicas": 2})
    d.elect()
    d.run()
    for b in (1, 2, 3):
        d.register(b)
    d.run()
    d.request(E.CreateTopics(topics=(E.NewTopic("foo", assignments={0: [1, 2, 3]}),)))
    d.run()
    d.kill(3)
    d.run()
    d.kill(2)
    d.run()
    s = d.tree.states[FOO0]
    assert (s.leader, s.isr, s.elr) == (1, (1,), (2,))
    d.tree.write_broker_default_config({"min.insync.replicas": "1"})
    d.run()
    s = d.tree.states[FOO0]
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (1, (1,), (), ())
    assert d.core.ctx.leadership[FOO0] == s


def test_a_new_controller_checks_every_elr_against_the_min_isr_it_loads():
    # The min ISR changed while no controller ran (seed 133): the one that loads next clears
    # the ELR the new value leaves unneeded.
    ctx = make_ctx(replicas=(1, 2, 3), isr=(1,), elr=(2,), leader=1, min_isr=1)
    s = run(ctx, D.on_controller_failover(ctx))
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (1, (1,), (), ())


# ============================================================ E: unclean registrations at failover

def unclean_registration(ctx, b: int) -> None:
    ctx.add_broker(BrokerRegistration(b, "h", 1000 + b, clean_shutdown=False, epoch=99 + b))


def test_a_leader_that_registered_uncleanly_while_no_controller_ran_is_not_kept():
    # Broker 3 lost power and registered again while no controller ran: ZooKeeper still names
    # it leader and in the ISR, and its log may lack committed records (seed 197). The next
    # controller takes it out of the ISR as handleBrokerUncleanShutdown would have, and elects
    # from the rest of the ISR.
    ctx = make_ctx(replicas=(1, 2, 3), isr=(3, 1, 2), leader=3, min_isr=2)
    unclean_registration(ctx, 3)
    s = run(ctx, D.on_controller_failover(ctx))
    assert (s.leader, s.isr, s.elr) == (1, (1, 2), ())
    assert s.leader_epoch > 100  # deposed and elected in one write


def test_an_isr_follower_that_registered_uncleanly_leaves_the_isr_at_failover():
    ctx = make_ctx(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, min_isr=2)
    unclean_registration(ctx, 2)
    s = run(ctx, D.on_controller_failover(ctx))
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (1, (1, 3), (), ())


def test_a_sole_isr_leader_that_registered_uncleanly_goes_to_a_recovery():
    # Nobody else may lead cleanly: it moves to LastKnownELR, and Balanced recovers once it
    # answers (it is live), instead of leading cleanly on a log that may have lost records.
    ctx = make_ctx(replicas=(1, 2), isr=(1,), elr=(), leader=1, min_isr=2,
                   strategy=U.BALANCED)
    unclean_registration(ctx, 1)
    d = D.on_controller_failover(ctx)
    s = run(ctx, d)
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (NO_LEADER, (), (), (1,))
    assert d.recoveries == {TP: U.BALANCED}


# ============================================================ F: unclean recoveries that never ran

def test_a_recovery_dropped_by_a_move_of_the_partition_is_decided_again():
    # Seed 49: the leaderless partition's replicas were reordered by a reassignment; the task
    # (started with the old assignment) is dropped, and nothing started another.
    ctx = make_ctx(replicas=(1, 2), isr=(), lke=(1, 2), min_isr=2, strategy=U.BALANCED)
    urm = D.UncleanRecoveryManager(3000)
    urm.start(TP, U.BALANCED, ctx.replicas(TP), 0)
    a = ctx.assignments["foo"]
    ctx.set_topic_assignment(type(a)("foo", a.topic_id, {0: [2, 1]}))
    reason, elect = D.obsolete(ctx, urm.tasks[TP])
    assert reason == "the partition was reassigned"
    assert elect, "no offline election decides the partition again: no task ever restarts"
    assert D.elect_offline_partitions(ctx).recoveries == {TP: U.BALANCED}


def test_a_recovery_whose_every_replica_lost_its_log_elects_one():
    # Seed 113: the only replica lost its whole log (a power loss before the partition dir was
    # fsynced) and answers UNKNOWN_TOPIC_OR_PARTITION. Nothing better can come: it is elected
    # with an empty log (RECOVERING), as the unclean election would have.
    ctx = make_ctx(replicas=(4,), isr=(), lke=(4,), min_isr=1, live=(1, 4),
                   strategy=U.BALANCED)
    urm = D.UncleanRecoveryManager(3000)
    urm.start(TP, U.BALANCED, ctx.replicas(TP), 0)
    (q,) = urm.queries({4: 14}, 0)
    urm.answered(q.query_id, 4, 14, {}, 10)  # no answer for the partition: it holds no log
    assert urm.tasks[TP].replies[4].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    (c,) = urm.choices(ctx, 10)
    assert c.leader == 4
    s = run(ctx, D.elect_recovered(ctx, [c]))
    assert (s.leader, s.isr, s.leader_recovery_state) == (4, (4,), LEADER_RECOVERING)


def test_a_replica_without_a_log_is_not_elected_while_another_may_still_answer():
    # Only when every replica said it holds no log: one that is down (or answered with a
    # storage error: its dir may come back) might hold the records.
    ctx = make_ctx(replicas=(4, 2), isr=(), lke=(4,), min_isr=1, live=(2, 4),
                   strategy=U.BALANCED)
    urm = D.UncleanRecoveryManager(3000)
    urm.start(TP, U.BALANCED, ctx.replicas(TP), 0)
    (q,) = urm.queries({4: 14}, 0)
    urm.answered(q.query_id, 4, 14, {}, 10)
    assert urm.choices(ctx, 10_000) == []
    urm.tasks[TP].replies[2] = ReplicaLogInfo(-1, -1, ErrorCode.KAFKA_STORAGE_ERROR)
    assert urm.choices(ctx, 10_000) == []
    urm.tasks[TP].replies[2] = ReplicaLogInfo(3, 7)
    assert [c.leader for c in urm.choices(ctx, 10_000)] == [2]



def test_a_last_known_elr_member_a_move_removed_is_not_waited_for():
    # Seed 592 (40 steps): a cancelled move left broker 4 in the LastKnownELR though the
    # partition's replicas are [1] now. Nobody asks 4 (not a replica), so Balanced waited for
    # its answer forever; and were it down, the election would wait for it to come back.
    ctx = make_ctx(replicas=(1,), isr=(), lke=(1, 4), min_isr=1, live=(1,),
                   strategy=U.BALANCED)
    assert D.elect_offline_partitions(ctx).recoveries == {TP: U.BALANCED}
    urm = D.UncleanRecoveryManager(3000)
    urm.start(TP, U.BALANCED, ctx.replicas(TP), 0)
    assert D.obsolete(ctx, urm.tasks[TP]) is None
    (q,) = urm.queries({1: 11}, 0)
    urm.answered(q.query_id, 1, 11, {TP: ReplicaLogInfo(3, 7)}, 10)
    assert [c.leader for c in urm.choices(ctx, 10)] == [1]


def test_a_cancel_of_a_leaderless_move_takes_the_removed_replicas_out_of_the_elr():
    # Seed 1738 (40 steps): t1-0 moving [3] -> [2, 1] (RS [2, 1, 3]), leaderless with ISR []
    # and ELR [1] (1 lost power). The cancel removes 2 and 1 while the leader (none) stays, so
    # the ISR does not change and nothing was written: 1 stayed in the ELR of a partition on
    # [3], and when 1 came back after an unclean shutdown nothing took it out (it is no
    # replica). A change of replicas rewrites the ELR (KIP-966 PartitionChangeBuilder).
    ctx = make_ctx(replicas=(2, 1, 3), isr=(), elr=(1,), lke=(2,), min_isr=2, live=(2, 3))
    d = D.remove_replicas(ctx, TP, [2, 1], stop=False)
    assert TP in d.writes, "the removed replicas stay in the ELR and LastKnownELR"
    s = run(ctx, d)
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (NO_LEADER, (), (), ())
    assert s.leader_epoch == 100  # only the partition epoch: no leader changed
    assert set(d.leader_and_isr) == {2, 3}  # the live replicas of RS


def test_step_5_takes_the_removed_replicas_out_of_the_elr_when_the_isr_has_none():
    # RR out of the ISR already (a failover between 5 and 6), but still in the ELR.
    ctx = make_ctx(replicas=(1, 2), isr=(1,), elr=(3,), leader=1, min_isr=2, live=(1, 2))
    s = run(ctx, D.remove_replicas(ctx, TP, [3]))
    assert (s.leader, s.isr, s.elr, s.last_known_elr) == (1, (1,), (), ())
