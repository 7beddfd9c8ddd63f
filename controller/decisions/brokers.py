"""Broker lifecycle: registration changes, failure, startup, controlled shutdown, and the
controller's own failover (Kafka's onBrokerFailure, onBrokerStartup, onBrokerUpdate,
doControlledShutdown, onControllerFailover).

A broker failure and a controller failover take the same two steps, in this order, so a
failover that interrupts a broker failure finishes it with the same writes:

1. elect a leader for every partition whose leader is gone (`elect_offline`);
2. take the dead replicas out of the ISRs that still list them, writing leader -1 where the
   leader itself is gone and nobody could be elected (Kafka's OfflineReplica transition,
   removeReplicasFromIsr). Elections go first so a partition is written once, with one
   leader-epoch bump.

With eligible.leader.replicas.enable (design.md#kip-966) step 2 may empty an ISR - its last
members move to the ELR (decisions/base.py `Builder.write`) - and a broker that registers after
an unclean shutdown leaves every ISR and ELR before anything is elected
(`remove_unclean_replicas`, Kafka's handleBrokerUncleanShutdown) - and again at every failover
while its registration says so (`_unclean_registrations_at_failover`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from common.names import TopicPartition
from common.zk_layout import NO_LEADER, BrokerRegistration, LeaderAndIsr
from controller import selectors
from controller.context import ControllerContext, PartitionReplica
from controller.decisions.base import (
    BrokerNotAvailable,
    Builder,
    Decision,
    ElectionRecord,
    P,
    R,
    StaleBrokerEpoch,
    next_state,
    shrink_isr,
)
from controller.decisions.deletion import resume_deletion
from controller.decisions.elections import elect_offline, recheck_elrs
from controller.selectors import ElectionReason


@dataclass(frozen=True)
class BrokerDiff:
    """What a /brokers/ids read changed against the brokers the controller knows."""

    dead: tuple[int, ...]
    new: tuple[int, ...]
    bounced: tuple[int, ...]  # re-registered with a new broker epoch: failed, then started

    @property
    def gone(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.dead) | set(self.bounced)))

    @property
    def arrived(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.new) | set(self.bounced)))


def diff_brokers(known: Mapping[int, BrokerRegistration],
                 registered: Mapping[int, BrokerRegistration]) -> BrokerDiff:
    """A broker whose registration carries a new epoch (KIP-380: the znode's czxid) restarted
    between two reads: it is handled as a failure followed by a startup, as Kafka does."""
    return BrokerDiff(
        dead=tuple(sorted(set(known) - set(registered))),
        new=tuple(sorted(set(registered) - set(known))),
        bounced=tuple(sorted(b for b in set(registered) & set(known)
                             if registered[b].epoch != known[b].epoch)))


def remove_replicas_from_isr(b: Builder, tps: Iterable[TopicPartition],
                             gone: Collection[int]) -> None:
    """Kafka's OfflineReplica transition (removeReplicasFromIsr): drop `gone` from each ISR
    (never emptying it) and write leader -1 where the leader is gone. Reads through the
    builder, so a partition elected in the same decision is not written again."""
    ctx = b.ctx
    gone = set(gone)
    for tp in tps:
        if ctx.is_being_deleted(tp.topic) or b.pstate(tp) is P.NonExistentPartition:
            continue
        s = b.leadership(tp)
        if s is None:
            continue
        leader_gone = s.leader != NO_LEADER and s.leader not in ctx.live_ids
        new_isr = shrink_isr(s.isr, gone, s.leader, allow_empty=ctx.elr.enabled)
        if not leader_gone and new_isr == tuple(s.isr):
            continue
        new = next_state(ctx, s, leader=NO_LEADER if leader_gone else None, isr=new_isr)
        _write_without(b, tp, s, new, leader_gone)


def _write_without(b: Builder, tp: TopicPartition, s: LeaderAndIsr, new: LeaderAndIsr,
                   leader_gone: bool) -> None:
    """Write `new` (brokers taken out of `s`'s ISR, or ELR, or leadership): a deposed leader is
    recorded as an offline election to NO_LEADER and its partition goes Offline; the
    replicas hear the new state by LeaderAndIsr and every broker by UpdateMetadata."""
    b.write(tp, new, ElectionRecord(tp, s.leader, NO_LEADER, new.leader_epoch, False,
                                    ElectionReason.OFFLINE) if leader_gone else None)
    if leader_gone and b.pstate(tp) is not P.OfflinePartition:
        b.partition(tp, P.OfflinePartition)
    b.lai_replicas(tp)
    b.um_all([tp])


def shut_down_uncleanly(reg: BrokerRegistration) -> bool:
    """KIP-966: the broker's registration says its previous shutdown was not clean (its log
    dirs had no clean-shutdown marker, so unflushed records may be lost). Kafka also counts a
    marker from another broker epoch as unclean; replog's marker carries no epoch yet
    (broker/storage/log_manager.py), so only the flag is checked."""
    return not reg.clean_shutdown


def remove_unclean_replicas(b: Builder, brokers: Collection[int]) -> None:
    """Kafka's handleBrokerUncleanShutdown: `brokers` registered after an unclean shutdown, so
    their logs may lack committed records. They leave every ISR and ELR (to LastKnownELR, which
    Balanced recovery still waits for) - before any election of this decision, so none of
    them is elected cleanly from an ELR. An ISR change bumps the leader epoch (package rule);
    an ELR-only change does not, but its new partition epoch goes to the replicas by
    LeaderAndIsr all the same: a leader left at the old one has every AlterPartition refused
    (INVALID_UPDATE_VERSION) and its ISR never grows back (design.md#sim-finding-a)."""
    ctx = b.ctx
    brokers = set(brokers)
    if not ctx.elr.enabled or not brokers:
        return
    b.unclean_shutdown |= brokers
    for tp in ctx.partitions_on_brokers(brokers):
        s = b.leadership(tp)
        if (s is None or ctx.is_being_deleted(tp.topic)
                or b.pstate(tp) is P.NonExistentPartition
                or brokers.isdisjoint(set(s.isr) | set(s.elr))):
            continue
        new_isr = tuple(r for r in s.isr if r not in brokers)
        leader_gone = s.leader in brokers  # only if it was not seen to fail: defensive
        isr_changed = new_isr != tuple(s.isr) or leader_gone
        new = next_state(ctx, s, leader=NO_LEADER if leader_gone else None, isr=new_isr,
                         bump_leader_epoch=isr_changed)
        _write_without(b, tp, s, new, leader_gone)


def _unclean_registrations_at_failover(b: Builder) -> None:
    """KIP-966 across a failover: a broker may have registered after an unclean shutdown while
    no controller ran, or the previous controller may have died before
    `remove_unclean_replicas`. ZooKeeper then still names it in ISRs and ELRs, even as a
    leader, while its log may lack committed records (design.md#sim-finding-e).
    ZooKeeper does not record whether a registration was handled (KRaft handles it once, in
    the registration's own record), so every live broker whose registration says unclean is
    handled again, as Kafka's handleBrokerUncleanShutdown: out of every ISR and ELR, a leader
    deposed. Conservative: one that caught up and rejoined since leaves again and rejoins by
    AlterPartition; a partition it led alone goes to a recovery that hears from it - never a
    clean election on a log that may miss committed records."""
    ctx = b.ctx
    remove_unclean_replicas(b, [r for r, reg in sorted(ctx.live_brokers.items())
                                if shut_down_uncleanly(reg)])


def _offline(b: Builder) -> list[TopicPartition]:
    """New and Offline partitions, counting those this decision has just made Offline."""
    ctx = b.ctx
    tps = ctx.partition_sm.in_state(P.NewPartition, P.OfflinePartition)
    known = set(tps)
    return tps + [tp for tp in b.d.writes
                  if tp not in known and b.pstate(tp) is P.OfflinePartition]


def _leaderless(b: Builder, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    """Partitions (with a state znode) whose leader is not a live broker: -> Offline."""
    ctx = b.ctx
    out = []
    for tp in tps:
        s = b.leadership(tp)
        if s is None or ctx.is_being_deleted(tp.topic):
            continue
        if s.leader == NO_LEADER or s.leader not in ctx.live_ids:
            if b.pstate(tp) is not P.OfflinePartition:
                b.partition(tp, P.OfflinePartition)
            out.append(tp)
    return out


def on_brokers_failed(ctx: ControllerContext, dead: Collection[int]) -> Decision:
    """Kafka's onBrokerFailure / onReplicasBecomeOffline. `ctx` no longer lists `dead` as live.

    Replicas on the dead brokers -> Offline (DeletionIneligible for topics being deleted);
    then the two steps of the module docstring. LeaderAndIsr to the live replicas of each
    changed partition, UpdateMetadata to all."""
    dead = set(dead)
    b = Builder(ctx)
    tps = [tp for tp in ctx.partitions_on_brokers(dead)
           if b.pstate(tp) is not P.NonExistentPartition]  # creations never written: nothing
    for tp in tps:
        for r in ctx.replicas(tp):
            if r not in dead:
                continue
            pr = PartitionReplica(tp, r)
            if ctx.is_being_deleted(tp.topic):
                if b.rstate(pr) in (R.ReplicaDeletionStarted, R.OfflineReplica) or \
                        b.replicas.add_if_valid(pr, R.OfflineReplica):
                    b.replica(pr, R.ReplicaDeletionIneligible)
            else:
                b.replica(pr, R.OfflineReplica)
    elect_offline(b, _leaderless(b, tps))
    remove_replicas_from_isr(b, tps, dead)
    # The live-broker list changed for everyone, even where no partition did.
    b.um_brokers(ctx.live_brokers)
    return b.build()


def on_controller_failover(ctx: ControllerContext) -> Decision:
    """After loading the cluster (ctx.reset_states() done): full metadata to every live
    broker, LeaderAndIsr for every partition to its live replicas (Kafka's
    replicaStateMachine.startup), then the two steps of the module docstring for every broker
    that is not registered, and deletions resumed."""
    b = Builder(ctx)
    all_tps = list(ctx.all_partitions())
    b.um_brokers(ctx.live_brokers, all_tps)
    for tp in all_tps:
        # Kafka moves every live replica Online -> Online here to send LeaderAndIsr;
        # reset_states() already put them Online, so only the requests are needed.
        if not ctx.is_being_deleted(tp.topic) and tp in ctx.leadership:
            b.lai_replicas(tp)
    # a min ISR changed while none ran (design.md#sim-finding-d)
    recheck_elrs(b, sorted(ctx.assignments))
    _unclean_registrations_at_failover(b)
    elect_offline(b, _offline(b))
    dead = {r for tp in all_tps for r in ctx.replicas(tp) if r not in ctx.live_brokers}
    remove_replicas_from_isr(b, all_tps, dead)
    resume_deletion(b)
    return b.build()


def on_broker_modified(ctx: ControllerContext, old: BrokerRegistration,
                       new: BrokerRegistration) -> Decision:
    """A broker rewrote its registration (endpoint, rack, log dirs) at the same epoch
    (ctx has `new` already): new metadata for everyone, and - when its address changed -
    LeaderAndIsr for its partitions, so its followers fetch from the new address (Kafka's
    onBrokerUpdate)."""
    b = Builder(ctx)
    b.um_brokers(ctx.live_brokers)
    if new.address != old.address:
        b.d.leader_and_isr[new.broker_id] = {
            tp: False for tp in ctx.partitions_on_brokers([new.broker_id])
            if tp in ctx.leadership}
    return b.build()


def on_brokers_started(ctx: ControllerContext, new: Collection[int]) -> Decision:
    """Kafka's onBrokerStartup. `ctx` lists `new` as live already.

    Full metadata to the new brokers, the new live-broker list to the others, LeaderAndIsr for
    every partition the new brokers host, elections for partitions they can now lead, and
    topic deletions resumed where they were waiting for these brokers. With ELR, new brokers
    that shut down uncleanly first leave every ISR and ELR (`remove_unclean_replicas`)."""
    new = set(new)
    b = Builder(ctx)
    remove_unclean_replicas(b, [r for r in sorted(new) if r in ctx.live_brokers
                                and shut_down_uncleanly(ctx.live_brokers[r])])
    all_tps = list(ctx.all_partitions())
    b.um_brokers(new, all_tps)
    b.um_brokers(ctx.live_brokers)
    for pr in ctx.replicas_on_brokers(new):
        if ctx.is_being_deleted(pr.tp.topic) or b.rstate(pr) is R.NonExistentReplica:
            continue
        if b.rstate(pr) is R.NewReplica and b.leadership(pr.tp) is None:
            continue  # not yet initialized: elect_offline below makes it Online
        b.replica(pr, R.OnlineReplica)
        if b.leadership(pr.tp) is not None:
            b.lai([pr.replica], pr.tp)
    elect_offline(b, _offline(b))
    resume_deletion(b)
    return b.build()


def check_controlled_shutdown(ctx: ControllerContext, broker_id: int, broker_epoch: int) -> bool:
    """ControlledShutdown's whole-request checks (Kafka's processControlledShutdown, KIP-380):
    the broker must be registered, and at the epoch it quotes (-1: an old client, not checked).
    Returns whether this is the broker's first attempt."""
    current = ctx.broker_epoch(broker_id)
    if current is None:
        raise BrokerNotAvailable(f"Broker {broker_id} is not registered")
    if broker_epoch != -1 and broker_epoch != current:
        raise StaleBrokerEpoch(f"Broker epoch {broker_epoch} of broker {broker_id} is not its "
                               f"current registration's ({current})")
    return broker_id not in ctx.shutting_down


def controlled_shutdown(ctx: ControllerContext, broker_id: int) -> Decision:
    """Kafka's doControlledShutdown; `broker_id` is in ctx.shutting_down already.

    Partitions with more than one replica: where the broker leads, elect with the controlled
    shutdown selector (the broker becomes a follower and leaves the ISR); where it follows,
    StopReplica(delete=false) and remove it from the ISR. The partitions it still leads
    afterwards (`remaining_leaderships`) are the RPC's answer; the broker retries."""
    b = Builder(ctx)
    for tp in ctx.partitions_on_brokers([broker_id]):
        replicas = ctx.replicas(tp)
        s = b.leadership(tp)
        if (len(replicas) <= 1 or s is None or ctx.is_being_deleted(tp.topic)
                or b.pstate(tp) is P.NonExistentPartition):
            continue
        if s.leader == broker_id:
            e = selectors.controlled_shutdown_leader(replicas, s.isr, ctx.live_ids,
                                                     ctx.shutting_down)
            if e is None:
                continue
            b.elect(tp, s, e.leader, e.isr, ElectionReason.CONTROLLED_SHUTDOWN)
        else:
            b.stop(broker_id, tp, delete=False)
            b.replica(PartitionReplica(tp, broker_id), R.OfflineReplica)
            if broker_id in s.isr:
                new_isr = shrink_isr(s.isr, {broker_id}, s.leader)
                if new_isr != tuple(s.isr):
                    b.write(tp, next_state(ctx, s, isr=new_isr))
                    b.lai_replicas(tp, exclude={broker_id})
                    b.um_all([tp])
    return b.build()


def remaining_leaderships(ctx: ControllerContext, broker_id: int) -> list[TopicPartition]:
    """What ControlledShutdown answers: partitions (with more than one replica) the broker
    still leads (Kafka's partitionLeadersOnBroker)."""
    return sorted(ctx.partitions_led_by(broker_id, min_replicas=2))
