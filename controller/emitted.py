"""What the controller core reports: one typed record per line of the controller's event log.

The core yields them inside ``effects.Emit``; the shell writes each as a JSON line (``name``
and ``fields()``) and derives its metrics and its test-only kill hooks from the record's type,
not from matching names. analytics/schema.py documents the lines the analysis reads; the
names, fields and their order here are those lines', so the event log does not change.

A field defaulting to ``OMITTED`` is left out of the line when not given: some records have
more than one shape (a reassignment step says what that step did; a finished unclean recovery
names its leader only when it elected one).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar


class _Omitted:
    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Any = _Omitted()


@dataclass(frozen=True, kw_only=True)
class Emitted:
    name: ClassVar[str]
    default_level: ClassVar[str] = "info"

    @property
    def level(self) -> str:
        return self.default_level

    def fields(self) -> dict[str, Any]:
        """The line's fields, in declaration order, without the ones not given."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not OMITTED:
                out[f.name] = v
        return out


# ---- carrying out a decision ---------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class PartitionStateWritesRefused(Emitted):
    name = "partition_state_writes_refused"
    default_level = "warning"
    partitions: list[str]


@dataclass(frozen=True, kw_only=True)
class InvalidStateTransition(Emitted):
    """design.md#reassignment: a transition the state machines' tables refuse, never applied."""

    name = "invalid_state_transition"
    default_level = "warning"
    kind: str
    key: str
    current: str
    target: str
    message: str


@dataclass(frozen=True, kw_only=True)
class LeaderElection(Emitted):
    name = "leader_election"
    partition: str
    old_leader: int
    new_leader: int  # -1: none eligible
    leader_epoch: int
    unclean: bool
    reason: str  # controller.selectors.ElectionReason
    isr: list[int]
    partition_epoch: int


@dataclass(frozen=True, kw_only=True)
class IsrChange(Emitted):
    name = "isr_change"
    partition: str
    leader: int
    leader_epoch: int
    old_isr: list[int]
    new_isr: list[int]
    partition_epoch: int


# ---- brokers, topics, configs -----------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class BrokerFailed(Emitted):
    name = "broker_failed"
    broker: int
    broker_epoch: int
    bounced: bool


@dataclass(frozen=True, kw_only=True)
class BrokerRegistered(Emitted):
    name = "broker_registered"
    broker: int
    broker_epoch: int
    address: str
    rack: str | None
    clean_shutdown: bool


@dataclass(frozen=True, kw_only=True)
class TopicCreated(Emitted):
    """From a CreateTopics request (with its plan) or found in ZooKeeper (``source``)."""

    name = "topic_created"
    topic: str
    topic_id: str
    partitions: int
    replication_factor: int = OMITTED
    assignment: dict[str, list[int]] = OMITTED
    configs: dict[str, str] = OMITTED
    source: str = OMITTED


@dataclass(frozen=True, kw_only=True)
class PartitionsCreated(Emitted):
    name = "partitions_created"
    topic: str
    topic_id: str
    old_count: int
    new_count: int
    assignment: dict[str, list[int]]


@dataclass(frozen=True, kw_only=True)
class MinIsrDefaultChanged(Emitted):
    name = "min_isr_default_changed"
    old: str | None
    new: str | None


@dataclass(frozen=True, kw_only=True)
class TopicDeletionStarted(Emitted):
    name = "topic_deletion_started"
    topic: str
    topic_id: str


@dataclass(frozen=True, kw_only=True)
class TopicDeleted(Emitted):
    name = "topic_deleted"
    topic: str
    topic_id: str


@dataclass(frozen=True, kw_only=True)
class LeaderAndIsrErrors(Emitted):
    name = "leader_and_isr_errors"
    default_level = "warning"
    broker: int
    errors: dict[str, str]


@dataclass(frozen=True, kw_only=True)
class LeadershipRelinquished(Emitted):
    """design.md#kip-501: a slow leader gave a partition up (AlterPartition relinquish)."""

    name = "leadership_relinquished"
    partition: str
    broker: int
    new_leader: int
    leader_epoch: int


@dataclass(frozen=True, kw_only=True)
class ControlledShutdown(Emitted):
    name = "controlled_shutdown"
    broker: int
    broker_epoch: int | None  # None: no longer registered
    first_attempt: bool
    remaining: list[str]


# ---- reassignment (design.md#reassignment, KIP-455) ------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ReassignmentStep(Emitted):
    """One of design.md#reassignment's steps 1-7 done for a partition, with what that step did."""

    name = "reassignment_step"
    partition: str
    step: int
    replicas: list[int] = OMITTED  # 1, 6
    adding: list[int] = OMITTED  # 2
    isr: list[int] = OMITTED  # 3
    leader: int = OMITTED  # 4
    removed: list[int] = OMITTED  # 5
    resumed: bool = OMITTED  # 7 after a failover (seed case 5)


@dataclass(frozen=True, kw_only=True)
class ReassignmentRejected(Emitted):
    """A whole request refused (``reason``), or some of its partitions (``errors``)."""

    name = "reassignment_rejected"
    default_level = "warning"
    reason: str = OMITTED
    source: str
    errors: dict[str, str] = OMITTED


@dataclass(frozen=True, kw_only=True)
class ReassignmentStalled(Emitted):
    name = "reassignment_stalled"
    default_level = "warning"
    partition: str
    step: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class ReassignmentStarted(Emitted):
    name = "reassignment_started"
    partition: str
    source: str
    original: list[int]
    target: list[int]
    adding: list[int]
    removing: list[int]


@dataclass(frozen=True, kw_only=True)
class ReassignmentCancelled(ReassignmentStarted):
    name = "reassignment_cancelled"


@dataclass(frozen=True, kw_only=True)
class ReassignmentCompleted(Emitted):
    name = "reassignment_completed"
    partition: str
    replicas: list[int]
    removed: list[int]
    added: list[int]


# ---- /restart_partitions (design.md#jbod) --------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class RestartEntryInvalid(Emitted):
    name = "restart_entry_invalid"
    default_level = "warning"
    entry: str
    error: str


@dataclass(frozen=True, kw_only=True)
class PartitionsRestarted(Emitted):
    """An entry applied; its deletion from ZooKeeper is the next effect."""

    name = "partitions_restarted"
    entry: str
    broker: int
    log_dir: str
    broker_epoch: int
    partitions: list[str]
    skipped: dict[str, str]
    refused: list[str]


@dataclass(frozen=True, kw_only=True)
class PartitionsRestartIncomplete(PartitionsRestarted):
    """Some writes stayed refused: the entry is kept for the next change or controller."""

    name = "partitions_restart_incomplete"
    default_level = "warning"


# ---- unclean recovery (design.md#kip-966) --------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class UncleanRecoveryStarted(Emitted):
    name = "unclean_recovery_started"
    partition: str
    strategy: str
    forced: bool
    replicas: list[int]
    last_known_elr: list[int]


@dataclass(frozen=True, kw_only=True)
class ReplicaLogInfoFailed(Emitted):
    name = "replica_log_info_failed"
    default_level = "warning"
    broker: int
    broker_epoch: int
    error: str


@dataclass(frozen=True, kw_only=True)
class UncleanRecoveryFinished(Emitted):
    """``outcome`` elected (with the leader, its epoch and the offsets it discarded), dropped
    or failed (with the ``reason``)."""

    name = "unclean_recovery_finished"
    partition: str
    strategy: str
    forced: bool
    outcome: str
    candidates: list[int]
    answers: dict[str, Any]
    waited_ms: int
    leader: int = OMITTED
    leader_epoch: int = OMITTED
    offsets_discarded: int = OMITTED
    reason: str = OMITTED

    @property
    def level(self) -> str:
        return "warning" if self.outcome == "failed" else "info"
