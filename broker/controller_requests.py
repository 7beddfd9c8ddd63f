"""The controller's requests to a broker (LeaderAndIsr, StopReplica, UpdateMetadata) as plain
values: what the replica manager and the metadata cache take. broker/servicer.py translates
the wire messages into these; nothing below the servicer sees protobuf.

Fields keep Kafka's names (LeaderAndIsrRequest.json, StopReplicaRequest.json,
UpdateMetadataRequest.json) and the wire's sentinels: a leader of -1 is no leader, -2 in
UpdateMetadata is a topic being deleted; a StopReplica leader epoch of None was not sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from common.listeners import EndPoint
from common.names import TopicPartition


@dataclass(frozen=True)
class BrokerNode:
    """A broker (or the controller) as the metadata names it (Kafka's Broker/Node): host/port of
    its inter-broker listener - where followers fetch from - and every advertised listener's
    :class:`EndPoint` (KIP-103)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[EndPoint, ...] = ()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def for_listener(self, listener: str) -> BrokerNode | None:
        """This node as seen through ``listener``: None when it has no such listener (Kafka's
        MetadataCache leaves such a broker out of a Metadata answer). Without endpoints (sent
        by a controller that predates listener names) host/port serve every listener."""
        if not self.endpoints:
            return self
        e = next((e for e in self.endpoints if e.listener == listener), None)
        return None if e is None else BrokerNode(self.broker_id, e.host, e.port, self.rack)


@dataclass
class PartitionInfo:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int = 0
    offline_replicas: tuple[int, ...] = ()
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class LeaderAndIsrPartitionState:
    tp: TopicPartition
    controller_epoch: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    # LeaderAndIsr's isNew: create the replica's log even while a log dir is offline (a new
    # replica, or one restarted after a log-dir failure: design.md#jbod /
    # partition_state.missing_log)
    is_new: bool = False
    # KIP-966's ELR in the state written: the leader's HW stays frozen while it is not empty
    # (broker.partition.Partition.maybe_advance_hw)
    elr: tuple[int, ...] = ()

    @property
    def topic(self) -> str:
        return self.tp.topic


@dataclass(frozen=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    topic_ids: Mapping[str, str] = field(default_factory=dict)
    live_leaders: tuple[BrokerNode, ...] = ()


@dataclass(frozen=True)
class StopReplicaPartitionState:
    tp: TopicPartition
    leader_epoch: int | None
    delete_partition: bool


@dataclass(frozen=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[StopReplicaPartitionState, ...]


@dataclass(frozen=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    live_brokers: tuple[BrokerNode, ...]
    controller: BrokerNode | None
    topic_ids: Mapping[str, str]
    partition_states: tuple[tuple[TopicPartition, PartitionInfo], ...]
