"""Turns an applied Decision into the controller->broker requests, one batch per broker
(Kafka's ControllerBrokerRequestBatch). Pure: reads the context, builds the requests as plain
values (common/controller_requests.py); the channel turns them into protobuf at the wire
(request_pb.py).

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

from common.controller_requests import (
    BrokerNode,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    broker_node,
    controller_node,
)
from common.names import TopicPartition
from common.zk_layout import EPOCH_DURING_DELETE, LEADER_DURING_DELETE, ControllerInfo
from controller.context import ControllerContext
from controller.decisions import Decision

MAX_PARTITIONS_PER_REQUEST = 5000


@dataclass
class BrokerBatch:
    broker_id: int
    broker_epoch: int
    leader_and_isr: list[LeaderAndIsrRequest] = field(default_factory=list)
    update_metadata: list[UpdateMetadataRequest] = field(default_factory=list)
    stop_replica: list[StopReplicaRequest] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.leader_and_isr) + len(self.update_metadata) + len(self.stop_replica)


def _chunks(items: list) -> Iterable[list]:
    n = MAX_PARTITIONS_PER_REQUEST
    if not items:
        yield []
        return
    for i in range(0, len(items), n):
        yield items[i:i + n]


def leader_and_isr_state(ctx: ControllerContext, tp: TopicPartition,
                         is_new: bool) -> LeaderAndIsrPartitionState | None:
    s = ctx.leadership.get(tp)
    a = ctx.assignments.get(tp.topic)
    if s is None or a is None:
        return None
    return LeaderAndIsrPartitionState(
        topic=tp.topic, partition=tp.partition, controller_epoch=s.controller_epoch,
        leader=s.leader, leader_epoch=s.leader_epoch, isr=tuple(s.isr),
        partition_epoch=s.partition_epoch, replicas=tuple(a.partitions.get(tp.partition, ())),
        is_new=is_new, leader_recovery_state=int(s.leader_recovery_state), elr=tuple(s.elr),
        last_known_elr=tuple(s.last_known_elr),
        adding_replicas=tuple(a.adding_replicas.get(tp.partition, ())),
        removing_replicas=tuple(a.removing_replicas.get(tp.partition, ())))


def update_metadata_state(ctx: ControllerContext,
                          tp: TopicPartition) -> UpdateMetadataPartitionState | None:
    a = ctx.assignments.get(tp.topic)
    if a is None or tp.partition not in a.partitions:
        return None
    replicas = a.partitions[tp.partition]
    s = ctx.leadership.get(tp)
    deleting = ctx.is_being_deleted(tp.topic)
    if s is None and not deleting:
        return None  # not created yet: nothing a client could use
    live = ctx.live_brokers
    common = {"topic": tp.topic, "partition": tp.partition, "replicas": tuple(replicas),
              "offline_replicas": tuple(r for r in replicas if r not in live),
              "adding_replicas": tuple(a.adding_replicas.get(tp.partition, ())),
              "removing_replicas": tuple(a.removing_replicas.get(tp.partition, ()))}
    if s is None:
        return UpdateMetadataPartitionState(controller_epoch=ctx.epoch, leader_epoch=-1,
                                            leader=LEADER_DURING_DELETE, **common)
    return UpdateMetadataPartitionState(
        controller_epoch=s.controller_epoch,
        leader=LEADER_DURING_DELETE if deleting else s.leader, leader_epoch=s.leader_epoch,
        isr=tuple(s.isr), partition_epoch=s.partition_epoch, elr=tuple(s.elr),
        last_known_elr=tuple(s.last_known_elr),
        leader_recovery_state=int(s.leader_recovery_state), **common)


def build_requests(ctx: ControllerContext, decision: Decision,
                   controller: ControllerInfo,
                   failed: Collection[TopicPartition] = ()) -> dict[int, BrokerBatch]:
    """Per live broker, the requests for `decision` (already applied to ctx); partitions whose
    ZooKeeper write failed are left out."""
    failed = set(failed)
    out: dict[int, BrokerBatch] = {}
    # Each node's endpoint is built once per call, and only if a request needs it: a KIP-103
    # endpoint carries every listener, and building them for every live broker on every
    # decision cost the simulation about a tenth of its time.
    endpoints: dict[int, BrokerNode] = {}

    def endpoint_of(b: int) -> BrokerNode:
        if b not in endpoints:
            endpoints[b] = broker_node(ctx.live_brokers[b])
        return endpoints[b]

    um_common: dict[str, object] = {}

    def live_and_controller() -> dict[str, object]:
        if not um_common:
            um_common["live_brokers"] = tuple(endpoint_of(b) for b in sorted(ctx.live_brokers))
            um_common["controller"] = controller_node(controller)
        return um_common

    def batch(broker: int) -> BrokerBatch | None:
        reg = ctx.live_brokers.get(broker)
        if reg is None:
            return None
        if broker not in out:
            out[broker] = BrokerBatch(broker, reg.epoch)
        return out[broker]

    # A partition's state is the same for every broker: build each message once.
    lai_cache: dict[tuple[TopicPartition, bool], LeaderAndIsrPartitionState | None] = {}
    um_cache: dict[TopicPartition, UpdateMetadataPartitionState | None] = {}

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
            bb.leader_and_isr.append(LeaderAndIsrRequest(
                controller_id=ctx.controller_id, controller_epoch=ctx.epoch,
                broker_epoch=bb.broker_epoch, partition_states=tuple(chunk),
                topic_ids={st.topic: ctx.topic_id(st.topic) for st in chunk},
                live_leaders=tuple(endpoint_of(b) for b in leaders)))

    for broker, parts in sorted(decision.update_metadata.items()):
        bb = batch(broker)
        if bb is None:
            continue
        states = [st for tp in sorted(parts) if tp not in failed
                  for st in [um_state(tp)] if st is not None]
        for chunk in _chunks(states):
            bb.update_metadata.append(UpdateMetadataRequest(
                controller_id=ctx.controller_id, controller_epoch=ctx.epoch,
                broker_epoch=bb.broker_epoch, partition_states=tuple(chunk),
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
            s = ctx.leadership.get(tp)
            if delete and ctx.is_being_deleted(tp.topic):
                epoch = EPOCH_DURING_DELETE
            else:
                epoch = s.leader_epoch if s is not None else None
            states.append(StopReplicaPartitionState(topic=tp.topic, partition=tp.partition,
                                                    delete_partition=delete,
                                                    leader_epoch=epoch))
        if not states:
            continue
        for chunk in _chunks(states):
            bb.stop_replica.append(StopReplicaRequest(
                controller_id=ctx.controller_id, controller_epoch=ctx.epoch,
                broker_epoch=bb.broker_epoch, partition_states=tuple(chunk)))
    return {b: bb for b, bb in out.items() if len(bb)}
