"""ISR changes a leader asks for: AlterPartition (KIP-497), recovery completion (KIP-704) and
- design.md#kip-501 (KIP-501 Solution 2) - relinquishing leadership."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import LEADER_RECOVERED, LEADER_RECOVERING
from controller import selectors
from controller.context import ControllerContext
from controller.decisions.base import (
    Builder,
    Decision,
    StaleBrokerEpoch,
    next_state,
)
from controller.selectors import ElectionReason


@dataclass(frozen=True)
class AlterPartitionItem:
    tp: TopicPartition
    leader_epoch: int
    new_isr: tuple[tuple[int, int], ...]  # (broker, broker epoch or -1)
    partition_epoch: int
    leader_recovery_state: int = LEADER_RECOVERED
    topic_id: str = ""
    relinquish_leadership: bool = False


def alter_partition(ctx: ControllerContext, broker_id: int, broker_epoch: int,
                    items: Sequence[AlterPartitionItem], now_ms: float) -> Decision:
    """A leader's ISR change (KIP-497), recovery completion (KIP-704) or - design.md#kip-501 - its
    relinquishment of leadership.

    Whole request: StaleBrokerEpoch unless the sender is registered at `broker_epoch`.
    Per partition, in Kafka's order: UNKNOWN_TOPIC_OR_PARTITION (also while being deleted),
    UNKNOWN_TOPIC_ID; a leader or partition epoch *newer* than ours means we are not the
    controller any more (NOT_CONTROLLER); older leader epoch FENCED_LEADER_EPOCH; a sender that
    is not the leader NOT_LEADER_OR_FOLLOWER; a request equal to the current state succeeds
    without a write even at a stale partition epoch (idempotent retry); older partition epoch
    INVALID_UPDATE_VERSION; KIP-704 misuse and a malformed ISR INVALID_REQUEST; an ISR member
    that is not registered, at another broker epoch (KIP-903), or - when being added - in
    controlled shutdown: INELIGIBLE_REPLICA (KIP-841)."""
    current = ctx.broker_epoch(broker_id)
    if current is None:
        raise StaleBrokerEpoch(f"Broker {broker_id} is not registered")
    if current != broker_epoch:
        raise StaleBrokerEpoch(f"Broker epoch {broker_epoch} of broker {broker_id} is not its "
                               f"current registration's ({current})")
    b = Builder(ctx)
    for item in items:
        _alter_one(b, broker_id, item, now_ms)
    return b.build()


def _alter_one(b: Builder, broker_id: int, item: AlterPartitionItem, now_ms: float) -> None:
    ctx, tp = b.ctx, item.tp
    s = b.leadership(tp)
    if s is None or not ctx.has_partition(tp):
        return b.outcome(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"Partition {tp} does not exist")
    if ctx.is_being_deleted(tp.topic):
        return b.outcome(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"Topic {tp.topic} is being deleted")
    if item.topic_id and item.topic_id != ctx.topic_id(tp.topic):
        return b.outcome(tp, ErrorCode.UNKNOWN_TOPIC_ID,
                         f"Topic id {item.topic_id} is not the id of {tp.topic}")
    if item.leader_epoch > s.leader_epoch or item.partition_epoch > s.partition_epoch:
        return b.outcome(tp, ErrorCode.NOT_CONTROLLER,
                         f"Epochs of {tp} are newer than this controller's: it is stale")
    if item.leader_epoch < s.leader_epoch:
        return b.outcome(tp, ErrorCode.FENCED_LEADER_EPOCH,
                         f"Leader epoch {item.leader_epoch} of {tp} is older than the "
                         f"current {s.leader_epoch}")
    if s.leader != broker_id:
        return b.outcome(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                         f"Broker {broker_id} is not the leader of {tp} (leader {s.leader})")
    new_isr = tuple(r for r, _ in item.new_isr)
    if (not item.relinquish_leadership and new_isr == tuple(s.isr)
            and item.leader_recovery_state == s.leader_recovery_state):
        return b.outcome(tp, ErrorCode.NONE)  # already so: idempotent retry
    if item.partition_epoch < s.partition_epoch:
        return b.outcome(tp, ErrorCode.INVALID_UPDATE_VERSION,
                         f"Partition epoch {item.partition_epoch} of {tp} is older than the "
                         f"current {s.partition_epoch}")
    if item.leader_recovery_state not in (LEADER_RECOVERED, LEADER_RECOVERING):
        return b.outcome(tp, ErrorCode.INVALID_REQUEST,
                         f"Unknown leader recovery state {item.leader_recovery_state}")
    if item.leader_recovery_state == LEADER_RECOVERING and len(new_isr) > 1:
        return b.outcome(tp, ErrorCode.INVALID_REQUEST,
                         "A RECOVERING leader must be alone in the ISR (KIP-704)")
    if (s.leader_recovery_state == LEADER_RECOVERED
            and item.leader_recovery_state == LEADER_RECOVERING):
        return b.outcome(tp, ErrorCode.INVALID_REQUEST,
                         "Leader recovery state cannot go from RECOVERED to RECOVERING")
    replicas = ctx.replicas(tp)
    if (not new_isr or len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(replicas)
            or broker_id not in new_isr):
        return b.outcome(tp, ErrorCode.INVALID_REQUEST,
                         f"Invalid ISR {list(new_isr)} for {tp} with replicas {replicas} and "
                         f"leader {broker_id}")
    ineligible = []
    for r, epoch in item.new_isr:
        current = ctx.broker_epoch(r)
        if current is None:
            ineligible.append(f"{r} (not registered)")
        elif epoch != -1 and epoch != current:
            ineligible.append(f"{r} (broker epoch {epoch} is not {current})")
        elif r in ctx.shutting_down and r not in s.isr:
            ineligible.append(f"{r} (in controlled shutdown)")
    if ineligible:
        return b.outcome(tp, ErrorCode.INELIGIBLE_REPLICA,
                         f"Ineligible replicas in the new ISR of {tp}: {', '.join(ineligible)}")
    if item.relinquish_leadership:
        e = selectors.relinquished_leader(new_isr, broker_id, ctx.live_ids, ctx.shutting_down)
        if e is None:
            return b.outcome(tp, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                             f"No other eligible ISR member of {tp} to take over from "
                             f"{broker_id}")
        b.elect(tp, s, e.leader, e.isr, ElectionReason.RELINQUISHED,
                recovery=item.leader_recovery_state)
        b.d.relinquished[tp] = (broker_id, now_ms + ctx.relinquish_cooldown_ms)
        return b.outcome(tp, ErrorCode.NEW_LEADER_ELECTED)
    b.write(tp, next_state(ctx, s, isr=new_isr, bump_leader_epoch=False,
                        recovery=item.leader_recovery_state))
    b.um_all([tp])
    b.outcome(tp, ErrorCode.NONE)
