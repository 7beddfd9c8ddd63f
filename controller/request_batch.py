"""Turns an applied Decision into the controller->broker requests, one batch per broker
(Kafka's ControllerBrokerRequestBatch). Pure: reads the context, builds protobuf messages.

Per broker, in Kafka's order: LeaderAndIsr, then UpdateMetadata, then StopReplica. Each carries
controller_id, controller_epoch and the *target* broker's epoch (KIP-380), so a broker fences a
deposed controller (STALE_CONTROLLER_EPOCH) and a request meant for its previous incarnation
(STALE_BROKER_EPOCH).

"One request per broker per decision" holds up to MAX_PARTITIONS_PER_REQUEST partition states;
beyond that a batch is split into several requests of the same kind, in order, so a failover
with 100k partitions does not build one message larger than a broker's gRPC receive limit.
UpdateMetadata is incremental for partitions (the ones it names replace the broker's) and
complete for live brokers, so splitting it is safe.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from common.listeners import PLAINTEXT, EndPoint
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from common.zk_layout import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    BrokerRegistration,
    ControllerInfo,
)
from controller.context import ControllerContext
from controller.decisions import Decision

MAX_PARTITIONS_PER_REQUEST = 5000


@dataclass
class BrokerBatch:
    broker_id: int
    broker_epoch: int
    leader_and_isr: list[pb.LeaderAndIsrRequest] = field(default_factory=list)
    update_metadata: list[pb.UpdateMetadataRequest] = field(default_factory=list)
    stop_replica: list[pb.StopReplicaRequest] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.leader_and_isr) + len(self.update_metadata) + len(self.stop_replica)


def _endpoint(node_id: int, host: str, port: int, endpoints: tuple[EndPoint, ...],
              rack: str | None = None) -> pb.BrokerEndpoint:
    """host/port: the node's inter-broker listener (where followers and the controller
    connect); endpoints: every advertised listener (KIP-103), for Metadata answers."""
    inter = next((e.listener for e in endpoints if (e.host, e.port) == (host, port)),
                 PLAINTEXT)
    ep = pb.BrokerEndpoint(broker_id=node_id, host=host, port=port, listener=inter,
                           endpoints=[pb.ListenerEndpoint(listener=e.listener, host=e.host,
                                                          port=e.port) for e in endpoints])
    if rack is not None:
        ep.rack = rack
    return ep


def broker_endpoint(reg: BrokerRegistration) -> pb.BrokerEndpoint:
    return _endpoint(reg.broker_id, reg.host, reg.port, reg.listener_endpoints, reg.rack)


def controller_endpoint(info: ControllerInfo) -> pb.BrokerEndpoint:
    return _endpoint(info.controller_id, info.host, info.port, info.endpoints)


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


def _chunks(items: list) -> Iterable[list]:
    n = MAX_PARTITIONS_PER_REQUEST
    if not items:
        yield []
        return
    for i in range(0, len(items), n):
        yield items[i:i + n]


def leader_and_isr_state(ctx: ControllerContext, tp: TopicPartition,
                         is_new: bool) -> pb.LeaderAndIsrPartitionState | None:
    s = ctx.leadership.get(tp)
    a = ctx.assignments.get(tp.topic)
    if s is None or a is None:
        return None
    extra = {}
    if a.adding_replicas or a.removing_replicas:
        extra = {"adding_replicas": a.adding_replicas.get(tp.partition, ()),
                     "removing_replicas": a.removing_replicas.get(tp.partition, ())}
    return pb.LeaderAndIsrPartitionState(
        topic=tp.topic, partition=tp.partition, controller_epoch=s.controller_epoch,
        leader=s.leader, leader_epoch=s.leader_epoch, isr=s.isr,
        partition_epoch=s.partition_epoch, replicas=a.partitions.get(tp.partition, ()),
        is_new=is_new, leader_recovery_state=s.leader_recovery_state, elr=s.elr,
        last_known_elr=s.last_known_elr, **extra)


def update_metadata_state(ctx: ControllerContext,
                          tp: TopicPartition) -> pb.UpdateMetadataPartitionState | None:
    a = ctx.assignments.get(tp.topic)
    if a is None or tp.partition not in a.partitions:
        return None
    replicas = a.partitions[tp.partition]
    s = ctx.leadership.get(tp)
    deleting = ctx.is_being_deleted(tp.topic)
    if s is None and not deleting:
        return None  # not created yet: nothing a client could use
    live = ctx.live_brokers
    common = {"topic": tp.topic, "partition": tp.partition, "replicas": replicas,
                  "offline_replicas": [r for r in replicas if r not in live]}
    if a.adding_replicas or a.removing_replicas:
        common.update(adding_replicas=a.adding_replicas.get(tp.partition, ()),
                      removing_replicas=a.removing_replicas.get(tp.partition, ()))
    if s is None:
        return pb.UpdateMetadataPartitionState(controller_epoch=ctx.epoch, leader_epoch=-1,
                                               leader=LEADER_DURING_DELETE, **common)
    return pb.UpdateMetadataPartitionState(
        controller_epoch=s.controller_epoch,
        leader=LEADER_DURING_DELETE if deleting else s.leader, leader_epoch=s.leader_epoch,
        isr=s.isr, partition_epoch=s.partition_epoch, elr=s.elr,
        last_known_elr=s.last_known_elr, leader_recovery_state=s.leader_recovery_state,
        **common)


def build_requests(ctx: ControllerContext, decision: Decision,
                   controller: ControllerInfo,
                   failed: Collection[TopicPartition] = ()) -> dict[int, BrokerBatch]:
    """Per live broker, the requests for `decision` (already applied to ctx); partitions whose
    ZooKeeper write failed are left out."""
    failed = set(failed)
    out: dict[int, BrokerBatch] = {}
    # Each node's endpoint message is built once per call, and only if a request needs it:
    # a KIP-103 endpoint carries every listener, and building them for every live broker on
    # every decision cost the simulation about a tenth of its time.
    endpoints: dict[int, pb.BrokerEndpoint] = {}

    def endpoint_of(b: int) -> pb.BrokerEndpoint:
        if b not in endpoints:
            endpoints[b] = broker_endpoint(ctx.live_brokers[b])
        return endpoints[b]

    um_common: dict[str, object] = {}

    def live_and_controller() -> dict[str, object]:
        if not um_common:
            um_common["live_brokers"] = [endpoint_of(b) for b in sorted(ctx.live_brokers)]
            um_common["controller"] = controller_endpoint(controller)
        return um_common

    def batch(broker: int) -> BrokerBatch | None:
        reg = ctx.live_brokers.get(broker)
        if reg is None:
            return None
        if broker not in out:
            out[broker] = BrokerBatch(broker, reg.epoch)
        return out[broker]

    # A partition's state is the same for every broker: build each message once.
    lai_cache: dict[tuple[TopicPartition, bool], pb.LeaderAndIsrPartitionState | None] = {}
    um_cache: dict[TopicPartition, pb.UpdateMetadataPartitionState | None] = {}

    def lai_state(tp: TopicPartition, is_new: bool):
        key = (tp, is_new)
        if key not in lai_cache:
            lai_cache[key] = leader_and_isr_state(ctx, tp, is_new)
        return lai_cache[key]

    def um_state(tp: TopicPartition):
        if tp not in um_cache:
            um_cache[tp] = update_metadata_state(ctx, tp)
        return um_cache[tp]

    for broker, parts in sorted(decision.leader_and_isr.items()):
        bb = batch(broker)
        if bb is None:
            continue
        states = [st for tp, is_new in sorted(parts.items()) if tp not in failed
                  for st in [lai_state(tp, is_new)] if st is not None]
        if not states:
            continue
        for chunk in _chunks(states):
            leaders = sorted({st.leader for st in chunk if st.leader in ctx.live_brokers})
            bb.leader_and_isr.append(pb.LeaderAndIsrRequest(
                controller_id=ctx.controller_id, controller_epoch=ctx.epoch,
                broker_epoch=bb.broker_epoch, partition_states=chunk,
                topic_ids={st.topic: ctx.topic_id(st.topic) for st in chunk},
                live_leaders=[endpoint_of(b) for b in leaders]))

    for broker, parts in sorted(decision.update_metadata.items()):
        bb = batch(broker)
        if bb is None:
            continue
        states = [st for tp in sorted(parts) if tp not in failed
                  for st in [um_state(tp)] if st is not None]
        for chunk in _chunks(states):
            bb.update_metadata.append(pb.UpdateMetadataRequest(
                controller_id=ctx.controller_id, controller_epoch=ctx.epoch,
                broker_epoch=bb.broker_epoch, partition_states=chunk,
                topic_ids={st.topic: ctx.topic_id(st.topic) for st in chunk},
                **live_and_controller()))

    for broker, parts in sorted(decision.stop_replica.items()):
        bb = batch(broker)
        if bb is None:
            continue
        states = []
        for tp, delete in sorted(parts.items()):
            if tp in failed:
                continue
            st = pb.StopReplicaPartitionState(topic=tp.topic, partition=tp.partition,
                                              delete_partition=delete)
            s = ctx.leadership.get(tp)
            if delete and ctx.is_being_deleted(tp.topic):
                st.leader_epoch = EPOCH_DURING_DELETE
            elif s is not None:
                st.leader_epoch = s.leader_epoch
            states.append(st)
        if not states:
            continue
        for chunk in _chunks(states):
            bb.stop_replica.append(pb.StopReplicaRequest(
                controller_id=ctx.controller_id, controller_epoch=ctx.epoch,
                broker_epoch=bb.broker_epoch, partition_states=chunk))
    return {b: bb for b, bb in out.items() if len(bb)}
