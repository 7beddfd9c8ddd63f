"""What the controller core asks its shell to do (etcd raft's `Ready`), as data.

`ControllerCore.step(event)` returns a list of these. The shell carries them out in list order
and never decides anything itself. An effect whose `needs_result` is true (a store read or
write) is always the last of its list: the shell performs it and steps the outcome straight
back as `events.Completed(value)` - before any other event - and carries out what that returns.
This is how "the controller writes ZooKeeper before it tells brokers" is kept: the requests of
a decision are only produced once the write's outcome has come back.

Store effects carry the controller-epoch version their writes are conditional on (a deposed
controller's writes fail as a whole: the shell then throws the core away). Request effects
carry the requests as plain values, already built (request_batch.py,
common/controller_requests.py; the channel turns them into protobuf at the wire); broker answers
come back as
events (`events.StopReplicaResponse`). Timers come back as `events.TimerFired`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import BrokerRegistration, LeaderAndIsr, RestartEntry, TopicAssignment
from controller.decisions import Decision
from controller.emitted import Emitted
from controller.request_batch import BrokerBatch
from controller.store import PartitionWrite


class Effect:
    needs_result: ClassVar[bool] = False


# ---- store reads (each arms the watch its result depends on, as kazoo reads do) -----------

@dataclass(frozen=True)
class ClusterSnapshot:
    """What a new controller loads (Kafka's initializeControllerContext)."""

    cluster_id: str
    brokers: Mapping[int, BrokerRegistration]
    assignments: Mapping[str, TopicAssignment]
    configs: Mapping[str, Mapping[str, str]]
    states: Mapping[TopicPartition, LeaderAndIsr]
    topics_to_delete: tuple[str, ...]
    admin_reassignments: AdminReassignments | None = None


@dataclass(frozen=True)
class AdminReassignments:
    """/admin/reassign_partitions (design.md#reassignment): the targets asked for, or why the
    document could not be read (it is then rejected whole)."""

    entries: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class ReadCluster(Effect):
    """-> ClusterSnapshot; arms the broker, topic, config and deletion watches."""

    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class ReadBrokers(Effect):
    """-> dict broker id -> BrokerRegistration (/brokers/ids and each registration)."""

    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class ReadBroker(Effect):
    """-> BrokerRegistration | None."""

    broker_id: int
    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class ReadTopicNames(Effect):
    """-> list of topic names (/brokers/topics children)."""

    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class ReadTopics(Effect):
    """-> (assignments, configs, states) of these topics; arms their config watches."""

    topics: tuple[str, ...]
    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class ReadTopicConfig(Effect):
    """-> dict; arms the topic's config watch."""

    topic: str
    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class ReadBrokerDefaultConfig(Effect):
    """-> dict (/config/brokers/<default>, {} without a znode); arms its exists-watch."""

    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class ReadAdminReassignments(Effect):
    """-> AdminReassignments | None (no znode); arms the znode's exists-watch."""

    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class RestartEntries:
    """/restart_partitions' entries in sequence order: (name, entry), or (name, why it could
    not be read) - an unreadable entry can never become readable, so it is dropped."""

    entries: tuple[tuple[str, RestartEntry | str], ...] = ()


@dataclass(frozen=True)
class ReadRestartEntries(Effect):
    """-> RestartEntries; arms the children watch of /restart_partitions."""

    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class ReadTopicsToDelete(Effect):
    """-> list of topic names (/admin/delete_topics children)."""

    needs_result: ClassVar[bool] = True


# ---- conditional store writes ----------------------------------------------------------------

@dataclass(frozen=True)
class PartitionWritesOutcome:
    failed: frozenset[TopicPartition]
    # the re-read state of each refused partition (absent: no znode)
    current: Mapping[TopicPartition, LeaderAndIsr]


@dataclass(frozen=True)
class WritePartitionStates(Effect):
    """-> PartitionWritesOutcome; the shell re-reads the refused partitions."""

    writes: tuple[PartitionWrite, ...]
    epoch_version: int
    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class CreateTopic(Effect):
    """-> True, or False when /brokers/topics/<t> exists already."""

    assignment: TopicAssignment
    configs: Mapping[str, str]
    epoch_version: int
    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class WriteTopicAssignment(Effect):
    """Reassignment steps 1 and 6: set /brokers/topics/<t> (replicas, adding, removing)."""

    assignment: TopicAssignment
    epoch_version: int
    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class WriteAdminReassignments(Effect):
    """Reassignment step 7 (and a rejected request): /admin/reassign_partitions holds exactly
    `entries`; deleted when empty (a tool waiting for it learns every move is done)."""

    entries: Mapping[TopicPartition, tuple[int, ...]]
    epoch_version: int
    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class DeleteRestartEntry(Effect):
    """The last step of handling one /restart_partitions entry (design.md#jbod-step-3: "Removes
    data from /restart_partitions"); epoch-checked like every controller write."""

    name: str
    epoch_version: int
    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class MarkTopicForDeletion(Effect):
    topic: str
    epoch_version: int
    needs_result: ClassVar[bool] = True


@dataclass(frozen=True)
class DeleteTopic(Effect):
    """Remove a topic's znodes and its /admin/delete_topics entry."""

    topic: str
    epoch_version: int
    needs_result: ClassVar[bool] = True


# ---- brokers ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class UpdateBrokers(Effect):
    """The live brokers changed: open channels to new ones, drop queues of gone ones."""

    live: Mapping[int, BrokerRegistration]


@dataclass(frozen=True)
class QueryReplicaLogs(Effect):
    """KIP-966's BrokerRequestSender: send one GetReplicaLogInfo to this broker (at this
    epoch) for these partitions, apart from the ordered LeaderAndIsr/UpdateMetadata queue and
    with its own deadline. The answer comes back as `events.ReplicaLogInfoResponse` with the
    same `query_id` (answers None when the RPC failed as a whole)."""

    query_id: int
    broker_id: int
    broker_epoch: int
    partitions: tuple[tuple[TopicPartition, str], ...]  # (partition, topic id)


@dataclass(frozen=True)
class SendRequests(Effect):
    """Queue these requests, per broker in order; answers come back as events."""

    batches: Mapping[int, BrokerBatch]


# ---- callers, observers, time ----------------------------------------------------------------

@dataclass(frozen=True)
class Rejection:
    """A whole request refused; the servicer answers FAILED_PRECONDITION with the code."""

    error_code: ErrorCode
    message: str


@dataclass(frozen=True)
class Reply(Effect):
    """The answer to request `request_id`. With `await_deliveries` the caller also waits (up
    to its timeout) until the brokers have the LeaderAndIsr/UpdateMetadata sent while
    handling the request, so what it changed is visible from any broker; and until the
    `awaited_deletions` are finished (`TopicDeleted`)."""

    request_id: int
    value: Any = None
    error: Rejection | None = None
    await_deliveries: bool = False
    awaited_deletions: tuple[str, ...] = ()


@dataclass(frozen=True)
class TopicDeleted(Effect):
    """A topic's deletion finished: DeleteTopics callers waiting for it are answered."""

    topic: str


@dataclass(frozen=True)
class Emit(Effect):
    """A typed record for the event log (controller/emitted.py), stamped with the epoch of
    the controller that emitted it; the shell's metrics and test hooks match its type."""

    event: Emitted
    controller_epoch: int

    @property
    def name(self) -> str:
        return self.event.name

    @property
    def level(self) -> str:
        return self.event.level

    @property
    def fields(self) -> dict[str, Any]:
        """The event log line's fields: the record's, then the controller epoch."""
        return {**self.event.fields(), "controller_epoch": self.controller_epoch}


@dataclass(frozen=True)
class Decided(Effect):
    """A decision was applied (trace for scripts and the simulation; the shell ignores it)."""

    decision: Decision
    failed: frozenset[TopicPartition]


@dataclass(frozen=True)
class SetTimer(Effect):
    """Step `events.TimerFired(name)` after `delay_s` (replacing a pending one)."""

    name: str
    delay_s: float
