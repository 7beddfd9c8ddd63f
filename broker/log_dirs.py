"""DescribeLogDirs as plain values, built by a pure function (Kafka's
ReplicaManager.describeLogDirs, KIP-113 / KIP-827 for the disk totals).

The replica manager gathers the facts - each dir's replicas with their size, HW and LEO, and
the disk usage, read off the event loop - and ``describe_log_dir`` turns them into the answer.
An offline dir reports KAFKA_STORAGE_ERROR and nothing else; a dir whose usage could not be
read reports its replicas with totals of 0 (left unset on the wire).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from common.errors import ErrorCode
from common.names import TopicPartition


@dataclass(frozen=True)
class ReplicaInDir:
    tp: TopicPartition
    size: int
    is_follower: bool  # False for a leader and for a log no partition state owns
    high_watermark: int
    log_end_offset: int
    # KIP-113: the -future copy of an intra-broker move, and the LEO of the current replica
    # it is filling up to.
    is_future: bool = False
    current_log_end_offset: int = 0


@dataclass(frozen=True)
class ReplicaDescription:
    tp: TopicPartition
    size: int
    offset_lag: int
    is_future: bool = False


@dataclass(frozen=True)
class LogDirDescription:
    path: str
    directory_id: str
    online: bool
    error: ErrorCode
    total_bytes: int = 0
    usable_bytes: int = 0
    replicas: tuple[ReplicaDescription, ...] = ()


def offset_lag(is_follower: bool, high_watermark: int, log_end_offset: int) -> int:
    """How far a follower's log is behind the HW it knows (Kafka's offsetLag: 0 for a
    leader, and never negative)."""
    return max(0, high_watermark - log_end_offset) if is_follower else 0


def future_offset_lag(current_log_end_offset: int, future_log_end_offset: int) -> int:
    """KIP-113: a future replica's lag is the current replica's LEO minus its own."""
    return max(0, current_log_end_offset - future_log_end_offset)


def wanted(tp: TopicPartition, filter_: frozenset[tuple[str, int]]) -> bool:
    """An empty filter asks for every partition."""
    return not filter_ or (tp.topic, tp.partition) in filter_


def describe_log_dir(path: str, directory_id: str | None, online: bool,
                     usage: tuple[int, int] | None, replicas: Iterable[ReplicaInDir],
                     filter_: frozenset[tuple[str, int]] = frozenset()) -> LogDirDescription:
    """One dir's answer; ``usage`` is (total, free) bytes or None when it could not be read."""
    if not online:
        return LogDirDescription(path, directory_id or "", False,
                                 ErrorCode.KAFKA_STORAGE_ERROR)
    total, free = usage if usage is not None else (0, 0)
    return LogDirDescription(
        path, directory_id or "", True, ErrorCode.NONE, total, free,
        tuple(ReplicaDescription(r.tp, r.size,
                                 future_offset_lag(r.current_log_end_offset, r.log_end_offset)
                                 if r.is_future else
                                 offset_lag(r.is_follower, r.high_watermark, r.log_end_offset),
                                 r.is_future)
              for r in replicas if wanted(r.tp, filter_)))
