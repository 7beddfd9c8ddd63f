"""When an acks=all produce is answered, as a pure function: Kafka's DelayedProduce.tryComplete.

An appended batch waits until the high watermark reaches its end. It fails instead when this
broker no longer leads the partition, when the batch is no longer in the log as it was written
(a leader epoch bump that truncated it), when the ISR fell below min.insync.replicas
(NOT_ENOUGH_REPLICAS_AFTER_APPEND), or when the request's timeout ran out. A leader epoch bump
that left this broker leading with the batch intact is no failure: the batch is committed once
the HW passes it, whatever the epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Protocol

from common.errors import ErrorCode


class ProduceWait(Enum):
    ACKNOWLEDGED = "acknowledged"
    WAIT = "wait"
    NOT_LEADER = "not leader"        # leadership moved away
    TRUNCATED = "truncated"          # a new leader epoch truncated the batch
    ISR_TOO_SMALL = "isr too small"  # the ISR shrank below min.insync.replicas
    TIMED_OUT = "timed out"


ERROR_CODES = {
    ProduceWait.ACKNOWLEDGED: ErrorCode.NONE,
    ProduceWait.NOT_LEADER: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ProduceWait.TRUNCATED: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ProduceWait.ISR_TOO_SMALL: ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ProduceWait.TIMED_OUT: ErrorCode.REQUEST_TIMED_OUT,
}


class LeaderView(Protocol):
    """What ``produce_wait`` reads of the partition (broker.partition.Partition)."""

    is_leader: bool
    leader_epoch: int
    high_watermark: int
    log_end_offset: int
    isr: tuple[int, ...]
    min_isr: int


def produce_wait(p: LeaderView | None, written_epoch: int, end_offset: int,
                 epoch_at: Callable[[int], int], remaining_s: float) -> ProduceWait:
    """The state of a batch written in ``written_epoch`` and ending at ``end_offset`` that
    waits for replication on partition ``p`` (None once that partition was removed or
    replaced), checked in Kafka's order: leadership, the batch still being in the log, the
    HW, then the ISR size and the timeout. ``epoch_at(offset)`` is the leader-epoch cache's
    epoch of an offset, read only after an epoch change."""
    if p is None or not p.is_leader:
        return ProduceWait.NOT_LEADER
    if p.leader_epoch != written_epoch and \
            not batch_intact(p.log_end_offset, end_offset, epoch_at, written_epoch):
        return ProduceWait.TRUNCATED
    # Kafka's DelayedProduce (Partition.checkEnoughReplicasReachOffset): the ISR size is read
    # with the HW, not only while waiting - a batch below the HW is acknowledged only if the
    # ISR is still at min.insync.replicas, else NOT_ENOUGH_REPLICAS_AFTER_APPEND (retriable).
    if len(p.isr) < p.min_isr:
        return ProduceWait.ISR_TOO_SMALL
    if p.high_watermark >= end_offset:
        return ProduceWait.ACKNOWLEDGED
    if remaining_s <= 0:
        return ProduceWait.TIMED_OUT
    return ProduceWait.WAIT


def batch_intact(log_end_offset: int, end_offset: int, epoch_at: Callable[[int], int],
                 written_epoch: int) -> bool:
    """Whether the log still holds, below ``end_offset``, what was written in
    ``written_epoch``: the LEO is past it and the leader-epoch cache still places its last
    offset in that epoch (asked only when the LEO is past it)."""
    return log_end_offset >= end_offset and epoch_at(end_offset - 1) == written_epoch
