"""Topic deletion (Kafka's TopicDeletionManager): UpdateMetadata with LeaderDuringDelete,
partitions -> Offline -> NonExistent, replicas -> Offline -> DeletionStarted (StopReplica with
delete) -> DeletionSuccessful -> NonExistent; replicas on dead brokers wait in
DeletionIneligible until their broker returns."""

from __future__ import annotations

from collections.abc import Iterable

from common.errors import ErrorCode
from common.names import TopicPartition
from controller.context import ControllerContext, PartitionReplica
from controller.decisions.base import Builder, Decision, P, R


def start_topic_deletion(ctx: ControllerContext, topics: Iterable[str]) -> Decision:
    """Kafka's TopicDeletionManager.onTopicDeletion; the topics are in ctx.topics_to_delete.
    UpdateMetadata (leader -2, LeaderDuringDelete) to every broker; partitions -> Offline;
    replicas on live brokers -> Offline -> DeletionStarted with StopReplica(delete=true);
    replicas on dead brokers -> DeletionIneligible (retried when the broker returns)."""
    b = Builder(ctx)
    for topic in topics:
        tps = ctx.partitions_of(topic)
        b.um_all(tps)
        for tp in tps:
            if b.pstate(tp) is not P.OfflinePartition and b.pstate(tp) is not \
                    P.NonExistentPartition:
                b.partition(tp, P.OfflinePartition)
            for r in ctx.replicas(tp):
                start_replica_deletion(b, PartitionReplica(tp, r))
    collect_deletable(b, topics)
    return b.build()


def start_replica_deletion(b: Builder, pr: PartitionReplica) -> None:
    state = b.rstate(pr)
    if state in (R.ReplicaDeletionStarted, R.ReplicaDeletionSuccessful, R.NonExistentReplica):
        return
    if state is not R.OfflineReplica:
        b.replica(pr, R.OfflineReplica)
    if pr.replica in b.ctx.live_brokers:
        b.replica(pr, R.ReplicaDeletionStarted)
        b.stop(pr.replica, pr.tp, delete=True)
    else:
        b.replica(pr, R.ReplicaDeletionIneligible)


def resume_deletion(b: Builder) -> None:
    """Retry deletion of replicas that were ineligible (their broker was down)."""
    ctx = b.ctx
    for topic in sorted(ctx.topics_to_delete):
        for tp in ctx.partitions_of(topic):
            if b.pstate(tp) not in (P.OfflinePartition, P.NonExistentPartition):
                b.partition(tp, P.OfflinePartition)
            for r in ctx.replicas(tp):
                pr = PartitionReplica(tp, r)
                if b.rstate(pr) is R.ReplicaDeletionIneligible and r in ctx.live_brokers:
                    b.replica(pr, R.OfflineReplica)
                    b.replica(pr, R.ReplicaDeletionStarted)
                    b.stop(r, tp, delete=True)


def resume_topic_deletion(ctx: ControllerContext) -> Decision:
    b = Builder(ctx)
    resume_deletion(b)
    collect_deletable(b, ctx.topics_to_delete)
    return b.build()


def on_stop_replica_response(ctx: ControllerContext, broker_id: int,
                             errors: dict[TopicPartition, ErrorCode]) -> Decision:
    """A broker answered StopReplica(delete=true): DeletionStarted -> Successful, or
    Ineligible on error (retried on the broker's next startup or the next deletion request)."""
    b = Builder(ctx)
    topics = set()
    for tp, error in errors.items():
        pr = PartitionReplica(tp, broker_id)
        if not ctx.is_being_deleted(tp.topic) or b.rstate(pr) is not R.ReplicaDeletionStarted:
            continue
        b.replica(pr, R.ReplicaDeletionSuccessful if error == ErrorCode.NONE
                  else R.ReplicaDeletionIneligible)
        topics.add(tp.topic)
    collect_deletable(b, topics)
    return b.build()


def collect_deletable(b: Builder, topics: Iterable[str]) -> None:
    for topic in topics:
        tps = b.ctx.partitions_of(topic)
        if all(b.rstate(PartitionReplica(tp, r)) is R.ReplicaDeletionSuccessful
               for tp in tps for r in b.ctx.replicas(tp)):
            b.d.deletable_topics.add(topic)


def finish_topic_deletion(ctx: ControllerContext, topic: str) -> Decision:
    """After the topic's znodes are removed: replicas -> NonExistent, partitions ->
    NonExistent. The shell then forgets the topic (ctx.remove_topic)."""
    b = Builder(ctx)
    for tp in ctx.partitions_of(topic):
        for r in ctx.replicas(tp):
            pr = PartitionReplica(tp, r)
            if b.rstate(pr) is R.ReplicaDeletionSuccessful:
                b.replica(pr, R.NonExistentReplica)
        if b.pstate(tp) is P.OfflinePartition:
            b.partition(tp, P.NonExistentPartition)
    return b.build()
