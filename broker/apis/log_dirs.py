"""DescribeLogDirs, AlterReplicaLogDirs and DeleteRecords, once for both front-ends: KafkaApis'
authorization around the replica manager (and broker/delete_records.py, KIP-107).

DescribeLogDirs needs Describe on the cluster (refused whole); AlterReplicaLogDirs Alter on the
cluster (each partition CLUSTER_AUTHORIZATION_FAILED, nothing moves); DeleteRecords Delete on
each topic (its partitions TOPIC_AUTHORIZATION_FAILED, nothing deleted).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from broker.apis.context import ApiContext
from broker.delete_records import delete_records as delete_records_through_leader
from common.errors import ErrorCode
from common.names import TopicPartition
from common.security.acl import AclOperation


@dataclass
class LogDirsAnswer:
    error: ErrorCode
    dirs: list = field(default_factory=list)  # the replica manager's log dir descriptions


async def describe_log_dirs(ctx: ApiContext, partitions: frozenset[tuple[str, int]] | None
                            ) -> LogDirsAnswer:
    """``partitions`` None: every partition; empty: none (the dirs alone, as Kafka answers an
    empty topic list)."""
    if not ctx.authorized_on_cluster(AclOperation.DESCRIBE):
        return LogDirsAnswer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    dirs = await ctx.rm.describe_log_dirs(partitions or frozenset())
    if partitions is not None and not partitions:  # an empty filter asks the manager for all
        dirs = [dataclasses.replace(d, replicas=()) for d in dirs]
    return LogDirsAnswer(ErrorCode.NONE, list(dirs))


async def alter_replica_log_dirs(ctx: ApiContext, moves: dict[str, list[TopicPartition]]
                                 ) -> list[tuple[TopicPartition, ErrorCode, str]]:
    """(partition, error, message) per partition moved."""
    if not ctx.authorized_on_cluster(AclOperation.ALTER):
        return [(tp, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "")
                for tps in moves.values() for tp in tps]
    return list(await ctx.rm.alter_replica_log_dirs(moves))


async def delete_records(ctx: ApiContext, offsets: dict[TopicPartition, int], timeout_ms: int
                         ) -> dict[TopicPartition, tuple[ErrorCode, int, str]]:
    """Each partition -> (error, low watermark, message): the refused ones first."""
    denied = ctx.denied_topics(AclOperation.DELETE, (tp.topic for tp in offsets))
    out: dict[TopicPartition, tuple[ErrorCode, int, str]] = {
        tp: (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1,
             f"Not authorized to delete records of {tp.topic}")
        for tp in offsets if tp.topic in denied}
    todo = {tp: o for tp, o in offsets.items() if tp.topic not in denied}
    if todo:
        out.update(await delete_records_through_leader(ctx.rm, todo, timeout_ms))
    return out
