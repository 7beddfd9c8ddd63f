"""New partitions: topic creation (CreateTopics, or a topic written to ZooKeeper by another
tool) - Kafka's onNewPartitionCreation."""

from __future__ import annotations

from collections.abc import Iterable

from common.names import TopicPartition
from common.zk_layout import NO_LEADER
from controller.context import ControllerContext, PartitionReplica
from controller.decisions.base import Builder, Decision, P, R
from controller.decisions.elections import elect_offline, initialize_partition


def on_new_partitions(ctx: ControllerContext, tps: Iterable[TopicPartition]) -> Decision:
    """NonExistent -> New -> Online with the initial leader; replicas NonExistent -> New ->
    Online (Offline on a dead broker). The assignment must be in ctx already. A partition whose
    state znode exists already (a previous controller wrote it before failing) is adopted as it
    is, and elected for if it has no live leader."""
    b = Builder(ctx)
    adopted = []
    for tp in tps:
        if b.pstate(tp) is P.NonExistentPartition:
            b.partition(tp, P.NewPartition)
            for r in ctx.replicas(tp):
                b.replica(PartitionReplica(tp, r), R.NewReplica)
        s = b.leadership(tp)
        if s is None:
            initialize_partition(b, tp)
        elif b.pstate(tp) is P.NewPartition:
            online = s.leader != NO_LEADER and s.leader in ctx.live_brokers
            b.partition(tp, P.OnlinePartition if online else P.OfflinePartition)
            for r in ctx.replicas(tp):
                b.replica(PartitionReplica(tp, r),
                          R.OnlineReplica if r in ctx.live_brokers else R.OfflineReplica)
            b.lai_replicas(tp)
            b.um_all([tp])
            adopted.append(tp)
    elect_offline(b, adopted)
    return b.build()
