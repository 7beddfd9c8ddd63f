"""The requests the controller sends to brokers, as plain values: Kafka's LeaderAndIsr,
UpdateMetadata and StopReplica of its ZooKeeper mode.

The core builds them (request_batch.py) without touching generated code; the channel turns
them into protobuf at the wire (request_pb.py), and a broker turns that protobuf into its own
values (broker/controller_requests.py). Field names are the protocol's
(proto/replog/v1/replog.proto), so a reader of either side sees the same words. Values are
immutable: one partition state is shared by every broker's request that carries it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from common.listeners import PLAINTEXT, EndPoint
from common.zk_layout import BrokerRegistration, ControllerInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeEndpoint:
    """A broker or the controller: host/port of the listener the receiver connects to
    (``listener``, its name) and every advertised listener (KIP-103), for Metadata answers."""

    broker_id: int
    host: str
    port: int
    listener: str
    rack: str | None = None
    endpoints: tuple[EndPoint, ...] = ()


def node_endpoint(node_id: int, host: str, port: int, endpoints: tuple[EndPoint, ...],
                  rack: str | None = None) -> NodeEndpoint:
    """host/port: the node's inter-broker listener (where followers and the controller
    connect); endpoints: every advertised listener (KIP-103), for Metadata answers."""
    inter = next((e.listener for e in endpoints if (e.host, e.port) == (host, port)),
                 PLAINTEXT)
    return NodeEndpoint(broker_id=node_id, host=host, port=port, listener=inter, rack=rack,
                        endpoints=tuple(endpoints))


def broker_node(reg: BrokerRegistration) -> NodeEndpoint:
    return node_endpoint(reg.broker_id, reg.host, reg.port, reg.listener_endpoints, reg.rack)


def controller_node(info: ControllerInfo) -> NodeEndpoint:
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
    is_new: bool
    leader_recovery_state: int
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int  # the target broker's (KIP-380)
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    topic_ids: Mapping[str, str]
    live_leaders: tuple[NodeEndpoint, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int  # -1 offline, LEADER_DURING_DELETE while the topic is being deleted
    leader_epoch: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()
    partition_epoch: int = 0
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    topic_ids: Mapping[str, str]
    live_brokers: tuple[NodeEndpoint, ...]
    controller: NodeEndpoint


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionState:
    topic: str
    partition: int
    delete_partition: bool
    leader_epoch: int | None = None  # None: not sent (a partition the controller has no state of)


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[StopReplicaPartitionState, ...]


ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
