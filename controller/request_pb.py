"""The controller's plain values at the wire: its requests to brokers
(common/controller_requests.py) and the node endpoints of Metadata answers, as protobuf.

The channel calls :func:`request_pb` as it queues a request; the servicer calls the endpoint
helpers. Nothing else in the controller imports generated code for what it sends, so the core
and its tests work on plain values (STYLE.md: pure core, thin shells).
"""

from __future__ import annotations

from common.controller_requests import (
    BrokerNode,
    ControllerRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
    broker_node,
    controller_node,
)
from common.listeners import EndPoint
from common.rpc import replog_pb2 as pb
from common.zk_layout import BrokerRegistration, ControllerInfo


def endpoint_pb(n: BrokerNode) -> pb.BrokerEndpoint:
    ep = pb.BrokerEndpoint(broker_id=n.broker_id, host=n.host, port=n.port, listener=n.listener,
                           endpoints=[pb.ListenerEndpoint(listener=e.listener, host=e.host,
                                                          port=e.port) for e in n.endpoints])
    if n.rack is not None:
        ep.rack = n.rack
    return ep


def broker_endpoint(reg: BrokerRegistration) -> pb.BrokerEndpoint:
    return endpoint_pb(broker_node(reg))


def controller_endpoint(info: ControllerInfo) -> pb.BrokerEndpoint:
    return endpoint_pb(controller_node(info))


def endpoint_on_listener(node_id: int, endpoints: tuple[EndPoint, ...], listener: str,
                         rack: str | None = None) -> pb.BrokerEndpoint | None:
    """A node as a client on ``listener`` sees it; None when it has no such listener (left
    out of the answer, KIP-103)."""
    e = next((e for e in endpoints if e.listener == listener), None)
    if e is None:
        return None
    ep = pb.BrokerEndpoint(broker_id=node_id, host=e.host, port=e.port, listener=listener)
    if rack is not None:
        ep.rack = rack
    return ep


def _cached(memo: dict[int, object] | None, s, build):
    """One partition state goes to many brokers (UpdateMetadata to all of them): build its
    message once per send. Keyed by identity: the states live as long as the memo's caller."""
    if memo is None:
        return build(s)
    m = memo.get(id(s))
    if m is None:
        m = memo[id(s)] = build(s)
    return m


def _lai_state(s) -> pb.LeaderAndIsrPartitionState:
    return pb.LeaderAndIsrPartitionState(
        topic=s.topic, partition=s.partition, controller_epoch=s.controller_epoch,
        leader=s.leader, leader_epoch=s.leader_epoch, isr=s.isr,
        partition_epoch=s.partition_epoch, replicas=s.replicas,
        adding_replicas=s.adding_replicas, removing_replicas=s.removing_replicas,
        is_new=s.is_new, leader_recovery_state=s.leader_recovery_state, elr=s.elr,
        last_known_elr=s.last_known_elr)


def _um_state(s) -> pb.UpdateMetadataPartitionState:
    return pb.UpdateMetadataPartitionState(
        topic=s.topic, partition=s.partition, controller_epoch=s.controller_epoch,
        leader=s.leader, leader_epoch=s.leader_epoch, isr=s.isr,
        partition_epoch=s.partition_epoch, replicas=s.replicas,
        offline_replicas=s.offline_replicas, elr=s.elr, last_known_elr=s.last_known_elr,
        adding_replicas=s.adding_replicas, removing_replicas=s.removing_replicas,
        leader_recovery_state=s.leader_recovery_state)


def _sr_state(s) -> pb.StopReplicaPartitionState:
    st = pb.StopReplicaPartitionState(topic=s.topic, partition=s.partition,
                                      delete_partition=s.delete_partition)
    if s.leader_epoch is not None:
        st.leader_epoch = s.leader_epoch
    return st


def request_pb(r: ControllerRequest, memo: dict[int, object] | None = None):
    """The protobuf message of one of the controller's requests to a broker. ``memo`` (one
    dict for the requests of one send) builds each shared partition state and endpoint once."""
    if isinstance(r, LeaderAndIsrRequest):
        return pb.LeaderAndIsrRequest(
            controller_id=r.controller_id, controller_epoch=r.controller_epoch,
            broker_epoch=r.broker_epoch, topic_ids=r.topic_ids,
            live_leaders=[_cached(memo, n, endpoint_pb) for n in r.live_leaders],
            partition_states=[_cached(memo, s, _lai_state) for s in r.partition_states])
    if isinstance(r, UpdateMetadataRequest):
        return pb.UpdateMetadataRequest(
            controller_id=r.controller_id, controller_epoch=r.controller_epoch,
            broker_epoch=r.broker_epoch, topic_ids=r.topic_ids,
            live_brokers=[_cached(memo, n, endpoint_pb) for n in r.live_brokers],
            controller=_cached(memo, r.controller, endpoint_pb),
            partition_states=[_cached(memo, s, _um_state) for s in r.partition_states])
    if isinstance(r, StopReplicaRequest):
        return pb.StopReplicaRequest(
            controller_id=r.controller_id, controller_epoch=r.controller_epoch,
            broker_epoch=r.broker_epoch,
            partition_states=[_sr_state(s) for s in r.partition_states])
    raise TypeError(f"not a controller request: {type(r).__name__}")
