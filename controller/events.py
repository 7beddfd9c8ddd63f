"""Events: every fact that enters the controller core goes through `ControllerCore.step` as
one of these (Kafka's ControllerEvent types, as data).

ZooKeeper watches, broker responses, timers and RPCs become events in the shell
(controller.py), which steps them one at a time, so no two decisions ever interleave. Events
carry no futures and read no clock: the shell stamps `now_ms` (wall time, for design.md#kip-501's
cool-down) from its injected clock, and keeps its own bookkeeping of who waits for an answer
(`request_id`). Protobuf stops at the servicer: RPC events hold plain values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common.errors import ErrorCode
from common.names import TopicPartition
from controller.decisions import AlterPartitionItem


@dataclass(frozen=True)
class Event:
    now_ms: float = field(default=0.0, kw_only=True)

    @property
    def name(self) -> str:
        return type(self).__name__


# ---- lifecycle, results, time ----------------------------------------------------------------

@dataclass(frozen=True)
class Activate(Event):
    """This controller won the election: load the cluster and take over (onControllerFailover)."""


@dataclass(frozen=True)
class Completed(Event):
    """The outcome of the effect the core is waiting for (a store read or write)."""

    value: Any = None


@dataclass(frozen=True)
class TimerFired(Event):
    name: str = ""


# ---- cluster changes (watches: "go and read", as Kafka's handlers do) ------------------------

@dataclass(frozen=True)
class BrokerChange(Event):
    """/brokers/ids children changed: registrations appeared or vanished."""


@dataclass(frozen=True)
class BrokerModification(Event):
    broker_id: int = -1


@dataclass(frozen=True)
class TopicChange(Event):
    """/brokers/topics children changed (a topic created outside CreateTopics)."""


@dataclass(frozen=True)
class TopicDeletionChange(Event):
    """/admin/delete_topics children changed."""


@dataclass(frozen=True)
class TopicConfigChange(Event):
    topic: str = ""


@dataclass(frozen=True)
class BrokerDefaultConfigChange(Event):
    """/config/brokers/<default> was created, changed or deleted: the cluster-wide dynamic
    broker configs, whose min.insync.replicas the ELR rules read."""


@dataclass(frozen=True)
class ReassignmentChange(Event):
    """/admin/reassign_partitions was created, changed or deleted (design.md#reassignment's
    listener)."""


@dataclass(frozen=True)
class RestartPartitionsChange(Event):
    """/restart_partitions' children changed: a broker reported replicas lost with a log dir
    (design.md#jbod, "registers Zookeeper listener on /restart_partitions")."""


@dataclass(frozen=True)
class StopReplicaResponse(Event):
    """A broker's answer to StopReplica(delete=true), per partition (transport errors count
    as UNKNOWN_SERVER_ERROR)."""

    broker_id: int = -1
    errors: Mapping[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(frozen=True)
class LeaderAndIsrResponse(Event):
    """A broker's LeaderAndIsr answer: the partitions it refused and why (transport errors
    are not here: the channel retries the request in order)."""

    broker_id: int = -1
    errors: Mapping[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplicaLogInfoResponse(Event):
    """A broker's GetReplicaLogInfo answer (KIP-966) to query `query_id`: per partition its
    log's last written leader epoch and end offset, or None when the RPC failed as a whole
    (`error` says why: unreachable, deadline, another broker incarnation)."""

    query_id: int = 0
    broker_id: int = -1
    broker_epoch: int = -1
    answers: Mapping[TopicPartition, Any] | None = None  # -> decisions.ReplicaLogInfo
    error: str = ""


# ---- RPCs (request_id: the shell's handle for the caller waiting for the Reply) --------------

@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int | None = None
    replication_factor: int | None = None
    assignments: Mapping[int, list[int]] | None = None
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicResult:
    """CreateTopics' answer for one topic (Kafka's CreatableTopicResult)."""

    name: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    topic_id: str = ""
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CreateTopics(Event):
    request_id: int = 0
    topics: tuple[NewTopic, ...] = ()
    validate_only: bool = False


@dataclass(frozen=True)
class NewPartitions:
    """One topic of a CreatePartitions request: raise its partition count to `count`;
    `assignments`, if given, holds one replica list per new partition."""

    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True)
class PartitionsResult:
    """CreatePartitions' answer for one topic (Kafka's CreatePartitionsTopicResult)."""

    name: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True)
class CreatePartitions(Event):
    request_id: int = 0
    topics: tuple[NewPartitions, ...] = ()
    validate_only: bool = False


@dataclass(frozen=True)
class DeleteTopics(Event):
    """Answered at once with the results, naming the topics to wait for; each of those is
    answered again by a `TopicDeleted` effect when its deletion finishes."""

    request_id: int = 0
    topics: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeletionResult:
    name: str
    topic_id: str = ""
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True)
class AlterPartition(Event):
    request_id: int = 0
    broker_id: int = -1
    broker_epoch: int = -1
    items: tuple[AlterPartitionItem, ...] = ()


@dataclass(frozen=True)
class PartitionAnswer:
    """AlterPartition's answer for one partition: the code and the state now in force."""

    tp: TopicPartition
    topic_id: str
    error_code: ErrorCode
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    partition_epoch: int = -1
    elr: tuple[int, ...] = ()


@dataclass(frozen=True)
class ControlledShutdown(Event):
    request_id: int = 0
    broker_id: int = -1
    broker_epoch: int = -1


@dataclass(frozen=True)
class ElectLeaders(Event):
    request_id: int = 0
    election_type: int = 0
    partitions: tuple[TopicPartition, ...] | None = None  # None: every partition


@dataclass(frozen=True)
class ElectionResult:
    tp: TopicPartition
    error_code: ErrorCode
    error_message: str = ""


@dataclass(frozen=True)
class AlterReassignments(Event):
    """AlterPartitionReassignments (KIP-455): per partition a target, or None to cancel."""

    request_id: int = 0
    items: tuple[tuple[TopicPartition, tuple[int, ...] | None], ...] = ()


@dataclass(frozen=True)
class ReassignmentResult:
    tp: TopicPartition
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True)
class ListReassignments(Event):
    """ListPartitionReassignments: these partitions (None: every one moving)."""

    request_id: int = 0
    partitions: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True)
class OngoingReassignment:
    tp: TopicPartition
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
