"""Elections: new partitions, offline partitions (the one offline election every path uses),
ElectLeaders (KIP-460) and the automatic preferred-leader check.

Offline partitions are elected by `elect_offline` and nothing else - broker failure, broker
startup, controller failover, a refused write decided again, enabling unclean election and
ElectLeaders(UNCLEAN) all call it (Kafka's triggerOnlinePartitionStateChange).

With eligible.leader.replicas.enable (design.md#kip-966) it elects in the seed's order
(`selectors.elr_leader`): an ISR member, an unfenced ELR member, then by the topic's
unclean.recovery.strategy a wait or an unclean recovery. A recovery is never a blind pick: the
partition stays leaderless and is listed in `Decision.recoveries`, and the Unclean Recovery
Manager (decisions/recovery.py, driven by core.py) asks the replicas for their logs and elects
the best one. The operator's ElectLeaders UNCLEAN asks for one whatever the strategy
(`Decision.forced_recoveries`). With ELR off, unclean election is Kafka's ZooKeeper-era one:
the first live replica, when the topic allows it or the operator forces it.
"""

from __future__ import annotations

from collections.abc import Iterable

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import LEADER_RECOVERING, NO_LEADER, LeaderAndIsr
from controller import selectors
from controller.context import ControllerContext, PartitionReplica
from controller.decisions.base import (
    Builder,
    Decision,
    ElectionRecord,
    ElectionType,
    P,
    R,
    failed_election_message,
    next_state,
)
from controller.elr import assigned_only
from controller.selectors import ElectionReason


def initialize_partition(b: Builder, tp: TopicPartition) -> None:
    """NewPartition -> OnlinePartition: the first live replica leads, the ISR is the live
    replicas, leader epoch 0 (Kafka's initializeLeaderAndIsrForPartitions)."""
    ctx = b.ctx
    replicas = ctx.replicas(tp)
    e = selectors.initial_leader(replicas, ctx.live_ids, ctx.shutting_down)
    if e is None:
        # Stays NewPartition; a broker startup retries it (Kafka logs the same and waits).
        b.outcome(tp, ErrorCode.LEADER_NOT_AVAILABLE,
                  f"No live replica among {replicas} for new partition {tp}")
        return
    new = LeaderAndIsr(e.leader, 0, e.isr, ctx.epoch, 0)
    b.write(tp, new, ElectionRecord(tp, NO_LEADER, e.leader, 0, False,
                                    ElectionReason.NEW_PARTITION))
    b.partition(tp, P.OnlinePartition)
    for r in replicas:
        pr = PartitionReplica(tp, r)
        b.replica(pr, R.OnlineReplica if r in ctx.live_brokers else R.OfflineReplica)
    b.lai_replicas(tp, is_new=True)
    b.um_all([tp])


def elect_offline(b: Builder, tps: Iterable[TopicPartition], *, force_unclean: bool = False,
                  reason: ElectionReason = ElectionReason.OFFLINE) -> None:
    """Kafka's triggerOnlinePartitionStateChange for New and Offline partitions: the first live
    ISR member leads (unclean - the first live replica, RECOVERING per KIP-704 - when the topic
    allows it or the operator forces it). A partition nobody may lead keeps its state and gets
    ELIGIBLE_LEADERS_NOT_AVAILABLE as its outcome."""
    ctx = b.ctx
    for tp in tps:
        if ctx.is_being_deleted(tp.topic):
            continue
        state = b.pstate(tp)
        if state is P.NewPartition and b.leadership(tp) is None:
            initialize_partition(b, tp)
            continue
        s = b.leadership(tp)
        if s is None:
            continue
        if state is P.OnlinePartition and s.leader != NO_LEADER and s.leader in ctx.live_brokers:
            continue  # led (by a broker in controlled shutdown, at worst: that path moves it)
        if ctx.elr.enabled:
            _elect_with_elr(b, tp, s, reason, force_unclean)
            continue
        unclean_ok = force_unclean or ctx.unclean_allowed(tp.topic)
        # ELR switched off while this ISR was empty: its ELR members were the last in sync
        # (controller/elr.py), so the old election reads them as the ISR.
        isr = s.isr or s.elr
        e = selectors.offline_leader(ctx.replicas(tp), isr, ctx.live_ids, ctx.shutting_down,
                                     unclean_ok)
        if e is None:
            b.outcome(tp, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, failed_election_message(
                tp, f"OfflinePartitionLeaderElectionStrategy({str(unclean_ok).lower()})"))
            continue
        unclean = e.unclean or e.leader not in isr
        b.elect(tp, s, e.leader, e.isr, reason, unclean=unclean,
                recovery=LEADER_RECOVERING if unclean else None)


def _elect_with_elr(b: Builder, tp: TopicPartition, s: LeaderAndIsr, reason: ElectionReason,
                    force_unclean: bool) -> None:
    """One partition's offline election in design.md#kip-966's order (module docstring). The
    operator's ElectLeaders UNCLEAN asks for the recovery whatever the strategy: it is Manual's way
    out, and under the others it skips the wait."""
    ctx = b.ctx
    strategy = (selectors.UncleanRecoveryStrategy.PROACTIVE if force_unclean
                else ctx.recovery_strategy(tp.topic))
    replicas = ctx.replicas(tp)
    r = selectors.elr_leader(replicas, s.isr, assigned_only(s.elr, replicas),
                             assigned_only(s.last_known_elr, replicas), ctx.live_ids,
                             ctx.shutting_down, strategy)
    if isinstance(r, selectors.LeaderChosen):
        b.elect(tp, s, r.election.leader, r.election.isr, reason)  # ISR or ELR: clean
        return
    no_elr_leader(b, tp, r, strategy, force_unclean)


def no_elr_leader(b: Builder, tp: TopicPartition, r: selectors.Wait | selectors.NeedsRecovery,
                  strategy: selectors.UncleanRecoveryStrategy, force_unclean: bool = False
                  ) -> None:
    """design.md#kip-966's order found no clean leader (``r`` is Wait or NeedsRecovery): queue the
    partition for the Unclean Recovery Manager if it needs one, and say why in the outcome.
    Shared by offline elections and /restart_partitions (decisions/restarts.py)."""
    if isinstance(r, selectors.NeedsRecovery):
        b.d.recoveries[tp] = b.ctx.recovery_strategy(tp.topic)
        if force_unclean:
            b.d.forced_recoveries.add(tp)
        why = f"it needs an unclean recovery ({r.strategy})"
    else:
        why = r.reason
    b.outcome(tp, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
              failed_election_message(tp, f"EligibleLeaderReplicas({strategy})") + f": {why}")


def elect_offline_partitions(ctx: ControllerContext) -> Decision:
    """Elect leaders for every New or Offline partition that can now have one."""
    b = Builder(ctx)
    elect_offline(b, ctx.partition_sm.in_state(P.NewPartition, P.OfflinePartition))
    return b.build()


def reelect_after_refused_writes(ctx: ControllerContext,
                                 tps: Iterable[TopicPartition]) -> Decision:
    """Partitions whose state write was refused (someone else changed the znode; the
    controller has re-read it) and whose leader is now not eligible: decide their election
    again on the state ZooKeeper holds. Only adopting the re-read state left such a partition
    led by a dead broker - offline until some unrelated event."""
    b = Builder(ctx)
    again = [tp for tp in tps if tp in ctx.leadership
             and ctx.leadership[tp].leader not in ctx.eligible_ids]
    for tp in again:
        if b.pstate(tp) is P.OnlinePartition and ctx.leadership[tp].leader not in ctx.live_ids:
            b.partition(tp, P.OfflinePartition)
    elect_offline(b, again)
    return b.build()


def on_topic_config_changed(ctx: ControllerContext, topic: str, unclean_was_allowed: bool,
                            strategy_was: selectors.UncleanRecoveryStrategy | None = None
                            ) -> Decision:
    """A topic's config changed (already in ctx). Kafka: enabling unclean leader election for
    a topic elects the offline partitions at once (KafkaController.processTopicUncleanLeader-
    ElectionEnable), rather than at the next broker event. With ELR, so does a new
    unclean.recovery.strategy (Manual -> Proactive may start a recovery now; a change towards
    waiting drops a running one, decisions/recovery.py `obsolete`); and its ELRs are checked
    against its min.insync.replicas, which may be the change (`recheck_elrs`)."""
    b = Builder(ctx)
    recheck_elrs(b, [topic])
    if (ctx.elr.enabled and strategy_was is not None
            and ctx.recovery_strategy(topic) is not strategy_was) \
            or (not unclean_was_allowed and ctx.unclean_allowed(topic)):
        elect_offline(b, ctx.partition_sm.in_state(P.NewPartition, P.OfflinePartition))
    return b.build()


def on_min_isr_changed(ctx: ControllerContext) -> Decision:
    """/config/brokers/<default> changed min.insync.replicas (already in ctx): every topic
    without an override now reads the new value (`recheck_elrs`)."""
    b = Builder(ctx)
    recheck_elrs(b, sorted(ctx.assignments))
    return b.build()


def recheck_elrs(b: Builder, topics: Iterable[str]) -> None:
    """KIP-966 after a min.insync.replicas change, whether a topic override or the cluster
    default: a partition whose ISR now meets its effective min ISR loses its ELR and
    LastKnownELR (`next_elr` derived again). Its leader may now advance the HW on the ISR
    alone, past records the ELR members never fetched, so they must not stay eligible for a
    clean election (design.md#sim-finding-d). Kafka clears them on every
    min.insync.replicas update (KAFKA-16540's ClearElrRecord); replog keeps the ELR of a
    partition whose ISR is still below the new value - its HW stays frozen, so the members'
    claim still holds - rather than send a leaderless one to an unclean recovery. Neither
    the leader nor the ISR changes, so no new leader epoch; the replicas hear the new
    partition epoch by LeaderAndIsr (design.md#sim-finding-a)."""
    ctx = b.ctx
    if not ctx.elr.enabled:
        return  # with ELR off every partition's next change clears them (elr.py)
    for topic in topics:
        if ctx.is_being_deleted(topic):
            continue
        for tp in ctx.partitions_of(topic):
            s = b.leadership(tp)
            if (s is None or b.pstate(tp) is P.NonExistentPartition
                    or not (s.elr or s.last_known_elr) or len(s.isr) < ctx.min_isr(tp)):
                continue
            b.write(tp, next_state(ctx, s, bump_leader_epoch=False))
            b.lai_replicas(tp)
            b.um_all([tp])


# ============================================================================ ElectLeaders

def elect_leaders(ctx: ControllerContext, election_type: int,
                  tps: Iterable[TopicPartition] | None, now_ms: float) -> Decision:
    """ElectLeaders (KIP-460). `tps` None = every partition. Per-partition outcomes:
    PREFERRED - NONE, ELECTION_NOT_NEEDED (the preferred replica leads already),
    PREFERRED_LEADER_NOT_AVAILABLE (it is dead, shutting down, out of the ISR, or in
    design.md#kip-501's relinquish cool-down); UNCLEAN - NONE, ELECTION_NOT_NEEDED (a live leader
    exists), ELIGIBLE_LEADERS_NOT_AVAILABLE (no live replica at all). UNKNOWN_TOPIC_OR_PARTITION for
    partitions that do not exist or are being deleted."""
    b = Builder(ctx)
    targets = list(ctx.all_partitions()) if tps is None else list(dict.fromkeys(tps))
    for tp in targets:
        s = b.leadership(tp)
        if not ctx.has_partition(tp) or ctx.is_being_deleted(tp.topic):
            b.outcome(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      f"The partition {tp} does not exist.")
            continue
        if s is None:
            b.outcome(tp, ErrorCode.LEADER_NOT_AVAILABLE, f"Partition {tp} is being created.")
            continue
        replicas = ctx.replicas(tp)
        if election_type == ElectionType.PREFERRED:
            _elect_preferred(b, tp, s, replicas, now_ms)
        elif election_type == ElectionType.UNCLEAN:
            if s.leader != NO_LEADER and s.leader in ctx.live_brokers:
                b.outcome(tp, ErrorCode.ELECTION_NOT_NEEDED,
                          f"Partition {tp} already has a live leader {s.leader}.")
                continue
            if b.pstate(tp) is P.OnlinePartition:
                b.partition(tp, P.OfflinePartition)
            elect_offline(b, [tp], force_unclean=True)
            if tp in b.d.writes:
                b.outcome(tp, ErrorCode.NONE)
        else:
            b.outcome(tp, ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}")
    return b.build()


def _elect_preferred(b: Builder, tp: TopicPartition, s: LeaderAndIsr, replicas: list[int],
                     now_ms: float) -> None:
    ctx = b.ctx
    if replicas and s.leader == replicas[0]:
        b.outcome(tp, ErrorCode.ELECTION_NOT_NEEDED,
                  f"Preferred replica {replicas[0]} is already the leader of {tp}.")
        return
    excluded = ctx.relinquish_excluded(tp, now_ms)
    e = selectors.preferred_leader(replicas, s.isr, ctx.live_ids, ctx.shutting_down, excluded)
    if e is None:
        why = (f" (broker {replicas[0]} relinquished its leadership recently, KIP-501)"
               if replicas and replicas[0] in excluded else "")
        b.outcome(tp, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, failed_election_message(
            tp, "PreferredReplicaPartitionLeaderElectionStrategy") + why)
        return
    b.elect(tp, s, e.leader, e.isr, ElectionReason.PREFERRED)
    b.outcome(tp, ErrorCode.NONE)


def imbalanced_partitions(ctx: ControllerContext, imbalance_percentage: int,
                          now_ms: float) -> list[TopicPartition]:
    """Kafka's checkAndTriggerAutoLeaderRebalance: for every broker whose share of partitions
    it should lead but does not exceeds `imbalance_percentage`%, the partitions whose preferred
    replica can lead now (live, not shutting down, in the ISR, not in a relinquish cool-down)."""
    by_preferred: dict[int, list[TopicPartition]] = {}
    for tp in ctx.all_partitions():
        if ctx.is_being_deleted(tp.topic) or tp not in ctx.leadership:
            continue
        replicas = ctx.replicas(tp)
        if replicas:
            by_preferred.setdefault(replicas[0], []).append(tp)
    out: list[TopicPartition] = []
    for broker, tps in sorted(by_preferred.items()):
        not_led = [tp for tp in tps if ctx.leadership[tp].leader != broker]
        if not tps or len(not_led) / len(tps) <= imbalance_percentage / 100:
            continue
        for tp in not_led:
            s = ctx.leadership[tp]
            if selectors.preferred_leader(ctx.replicas(tp), s.isr, ctx.live_ids,
                                          ctx.shutting_down,
                                          ctx.relinquish_excluded(tp, now_ms)) is not None:
                out.append(tp)
    return out
