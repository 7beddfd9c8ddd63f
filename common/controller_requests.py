"""The requests the controller sends to brokers, as plain values: Kafka's LeaderAndIsr,
UpdateMetadata and StopReplica of its ZooKeeper mode. Defined once, for both ends.

The controller's core builds them (controller/request_batch.py) without touching generated
code; the channel turns them into protobuf at the wire (controller/request_pb.py), and the
broker's servicer turns that protobuf back into these same values (broker/servicer.py), so
nothing below either shell sees protobuf. Field names are the protocol's
(proto/replog/v1/replog.proto, Kafka's LeaderAndIsrRequest.json, StopReplicaRequest.json,
UpdateMetadataRequest.json) and so are its sentinels: a leader of -1 is no leader, -2 in
UpdateMetadata is a topic being deleted; a StopReplica leader epoch of None was not sent.
Values are immutable: one partition state is shared by every broker's request that carries it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from common.listeners import PLAINTEXT, EndPoint
from common.names import TopicPartition
from common.zk_layout import BrokerRegistration, ControllerInfo


@dataclass(frozen=True, slots=True)
class BrokerNode:
    """A broker (or the controller) as the metadata names it (Kafka's Broker/Node): host/port of
    the listener the receiver connects to - its inter-broker listener, where followers fetch
    from and the controller sends - named ``listener``, and every advertised listener's
    :class:`EndPoint` (KIP-103), for Metadata answers. The controller sends it as the
    request's node endpoint; the broker keeps it in its metadata cache: one type."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[EndPoint, ...] = ()
    listener: str = PLAINTEXT

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
        return None if e is None else BrokerNode(self.broker_id, e.host, e.port, self.rack,
                                                 listener=listener)


def node_endpoint(node_id: int, host: str, port: int, endpoints: tuple[EndPoint, ...],
                  rack: str | None = None) -> BrokerNode:
    """host/port: the node's inter-broker listener (where followers and the controller
    connect); endpoints: every advertised listener (KIP-103), for Metadata answers."""
    inter = next((e.listener for e in endpoints if (e.host, e.port) == (host, port)),
                 PLAINTEXT)
    return BrokerNode(node_id, host, port, rack, tuple(endpoints), inter)


def broker_node(reg: BrokerRegistration) -> BrokerNode:
    return node_endpoint(reg.broker_id, reg.host, reg.port, reg.listener_endpoints, reg.rack)


def controller_node(info: ControllerInfo) -> BrokerNode:
    return node_endpoint(info.controller_id, info.host, info.port, info.endpoints)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    # LeaderAndIsr's isNew: create the replica's log even while a log dir is offline (a new
    # replica, or one restarted after a log-dir failure: design.md#jbod /
    # partition_state.missing_log)
    is_new: bool = False
    leader_recovery_state: int = 0
    # KIP-966's ELR in the state written: the leader's HW stays frozen while it is not empty
    # (broker.partition.Partition.maybe_advance_hw)
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int  # the target broker's (KIP-380)
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    topic_ids: Mapping[str, str] = field(default_factory=dict)
    live_leaders: tuple[BrokerNode, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int  # -1 offline, LEADER_DURING_DELETE while the topic is being deleted
    leader_epoch: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    partition_epoch: int = 0
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    topic_ids: Mapping[str, str] = field(default_factory=dict)
    live_brokers: tuple[BrokerNode, ...] = ()
    controller: BrokerNode | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionState:
    topic: str
    partition: int
    delete_partition: bool
    leader_epoch: int | None = None  # None: not sent (a partition the controller has no state of)

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[StopReplicaPartitionState, ...]


ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
