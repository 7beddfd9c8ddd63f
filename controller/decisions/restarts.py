"""Restarted partitions (C5, seed 003 "Partitions Restart"): a broker lost its replicas with a
log dir and asked, through /restart_partitions, for them to be restarted.

Seed 003: the controller "acts as if broker went shutdown but only for specific partitions",
with the RestartedPartitionsLeaderSelector (`selectors.restarted_leader`):

- b led p: new ISR = ISR - b, new leader = the first of AR in the new ISR;
- b followed: new ISR = ISR - b, the leader stays;
- AR is unchanged, so b keeps its replica, and the LeaderAndIsr that follows tells b to
  re-create it (`is_new`, the broker puts it in its healthy log dir with the fewest
  partitions) and to fetch it from the leader from the log start; b rejoins the ISR by the
  normal AlterPartition rules.

Choices where the seed is silent or would be wrong here:

- An empty new ISR (b was the only in-sync replica) is handled like an offline election:
  another live replica leads only if unclean election is allowed; otherwise the partition is
  offline with leader -1. Unlike a dead broker (Kafka's removeReplicasFromIsr keeps the last
  ISR member, whose log will come back with it), b is removed even when it is the last one:
  its log is gone, and an ISR naming it would let the re-created, empty replica be elected
  cleanly - losing every record. The ISR may therefore be empty, as KIP-966 allows.
- With ELR on (KIP-966, seed 001), a restart that needs a new leader runs seed 001's election
  order without b (`selectors.elr_leader`): another ISR member, else an unfenced ELR member
  (cleanly), else the Unclean Recovery Manager or a wait as the topic's strategy says - never
  the blind unclean pick. b leaves the ISR, the ELR and the LastKnownELR (its log is gone).
- The seed filters out partitions "being deleted, reassigned etc". Deleted ones are skipped
  (their replicas are going anyway). Partitions being reassigned are restarted too: the
  selector leaves AR, adding and removing replicas alone, and without the restart a
  reassignment whose leader lost its log could never finish (its followers cannot fetch, so
  step 3 never sees the target in the ISR). A partition that no longer names b (a move removed
  it since the report) has nothing to restart.
- Processing is at least once (a controller can die between the state write and deleting the
  entry), so it is idempotent: once b is out of the ISR and does not lead, processing the same
  entry again writes nothing and only repeats the LeaderAndIsr that lets b re-create its
  replica - a request the broker answers the same way twice.
"""

from __future__ import annotations

from collections.abc import Iterable

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import LEADER_RECOVERING, NO_LEADER
from controller import selectors
from controller.context import ControllerContext, PartitionReplica
from controller.decisions.base import (
    Builder,
    Decision,
    ElectionRecord,
    P,
    R,
    failed_election_message,
    next_state,
)
from controller.decisions.elections import no_elr_leader
from controller.selectors import ElectionReason


def restartable(ctx: ControllerContext, broker: int, tp: TopicPartition) -> str | None:
    """Why `tp` on `broker` is not restarted (None: it is)."""
    if not ctx.has_partition(tp):
        return "no such partition"
    if ctx.is_being_deleted(tp.topic):
        return "topic being deleted"
    if broker not in ctx.replicas(tp):
        return "no longer a replica"
    if tp not in ctx.leadership:
        return "no partition state yet"
    return None


def restart_partitions(ctx: ControllerContext, broker: int,
                       partitions: Iterable[TopicPartition]) -> Decision:
    """The decision for one /restart_partitions entry: broker `broker` lost its replicas of
    `partitions`. Partitions `restartable` names a reason for are left out."""
    b = Builder(ctx)
    # KIP-966: the lost replica comes back empty, so it must not join an ELR as it leaves the
    # ISR (an ELR member is elected cleanly), nor the LastKnownELR a recovery waits for.
    b.lost_logs.add(broker)
    for tp in sorted(set(partitions)):
        if restartable(ctx, broker, tp) is None:
            _restart_one(b, broker, tp)
    return b.build()


def _restart_one(b: Builder, broker: int, tp: TopicPartition) -> None:
    ctx = b.ctx
    s = b.leadership(tp)
    pr = PartitionReplica(tp, broker)
    # The replica was lost and comes back empty: Offline, then Online again once b is told to
    # re-create it (b dead meanwhile: it stays Offline, as for any dead broker).
    if b.rstate(pr) is not R.OfflineReplica:
        b.replica(pr, R.OfflineReplica)
    if broker in ctx.live_brokers:
        b.replica(pr, R.OnlineReplica)
    if ctx.elr.enabled and (s.leader == broker or broker in s.isr or broker in s.elr
                            or broker in s.last_known_elr):
        _restart_with_elr(b, broker, tp, s)
    elif s.leader == broker or broker in s.isr:
        e = selectors.restarted_leader(ctx.replicas(tp), s.isr, s.leader, broker, ctx.live_ids,
                                       ctx.shutting_down, ctx.unclean_allowed(tp.topic))
        new_isr = tuple(r for r in s.isr if r != broker)
        if e is None:
            # Nobody may lead (the offline election's rule): leader -1 if b led; a follower's
            # loss leaves a leader that was not eligible anyway to the broker-failure path.
            leader = NO_LEADER if s.leader == broker else s.leader
            new = next_state(ctx, s, leader=leader, isr=new_isr)
            if leader != s.leader:
                b.write(tp, new, ElectionRecord(tp, s.leader, NO_LEADER, new.leader_epoch,
                                                False, ElectionReason.RESTARTED))
                b.partition(tp, P.OfflinePartition)
                b.outcome(tp, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, failed_election_message(
                    tp, "RestartedPartitionLeaderElectionStrategy"))
            else:
                b.write(tp, new)
        elif e.leader != s.leader:
            unclean = e.unclean or e.leader not in new_isr
            b.elect(tp, s, e.leader, e.isr, ElectionReason.RESTARTED, unclean=unclean,
                    recovery=LEADER_RECOVERING if unclean else None)
        else:
            b.write(tp, next_state(ctx, s, isr=e.isr))
        b.lai_replicas(tp)
        b.um_all([tp])
    _recreate(b, broker, tp)


def _restart_with_elr(b: Builder, broker: int, tp: TopicPartition, s) -> None:
    """KIP-966 on: b leaves the ISR and the ELR; if the leader must change, seed 001's order
    picks the next one from what is left (the restarted replica is no candidate)."""
    ctx = b.ctx
    new_isr = tuple(r for r in s.isr if r != broker)
    live = [x for x in ctx.live_ids if x != broker]
    if s.leader != broker and s.leader in new_isr and s.leader in live \
            and s.leader not in ctx.shutting_down:
        b.write(tp, next_state(ctx, s, isr=new_isr))  # a follower's loss: the leader stays
    else:
        strategy = ctx.recovery_strategy(tp.topic)
        r = selectors.elr_leader([x for x in ctx.replicas(tp) if x != broker], new_isr,
                                 [x for x in s.elr if x != broker],
                                 [x for x in s.last_known_elr if x != broker], live,
                                 ctx.shutting_down, strategy)
        if isinstance(r, selectors.LeaderChosen):
            b.elect(tp, s, r.election.leader, r.election.isr, ElectionReason.RESTARTED)
        else:
            new = next_state(ctx, s, leader=NO_LEADER, isr=new_isr,
                             bump_leader_epoch=s.leader != NO_LEADER)
            if s.leader != NO_LEADER:
                b.write(tp, new, ElectionRecord(tp, s.leader, NO_LEADER, new.leader_epoch,
                                                False, ElectionReason.RESTARTED))
            else:
                b.write(tp, new)
            b.partition(tp, P.OfflinePartition)
            no_elr_leader(b, tp, r, strategy)
    b.lai_replicas(tp)
    b.um_all([tp])


def _recreate(b: Builder, broker: int, tp: TopicPartition) -> None:
    # Re-create the replica (KIP-112's isNew: a replica not new is never created while a log
    # dir is offline, since its log may be in that dir).
    b.lai([broker], tp, is_new=True)
