"""ListOffsets and OffsetForLeaderEpoch, once for both front-ends (KafkaApis).

ListOffsets needs Describe on each topic; OffsetForLeaderEpoch ClusterAction on the cluster
(a follower), which covers every topic, or else Describe per topic. A refused topic's
partitions are answered TOPIC_AUTHORIZATION_FAILED with -1s, and nothing is read for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.apis.context import ApiContext
from common.errors import ErrorCode
from common.names import TopicPartition
from common.security.acl import AclOperation


@dataclass
class ListOffsetsPartition:
    tp: TopicPartition
    timestamp: int  # -1 latest, -2 earliest, -3 max timestamp (KIP-734), else a time
    current_leader_epoch: int | None = None


@dataclass
class ListOffsetsAnswer:
    tp: TopicPartition
    error: ErrorCode
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


async def list_offsets(ctx: ApiContext, partitions: list[ListOffsetsPartition],
                       replica_id: int = -1) -> list[ListOffsetsAnswer]:
    """One answer per partition, in order; ``replica_id`` -1 is a consumer (up to the HW)."""
    denied = ctx.denied_topics(AclOperation.DESCRIBE, (p.tp.topic for p in partitions))
    out = []
    for p in partitions:
        if p.tp.topic in denied:
            out.append(ListOffsetsAnswer(p.tp, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        code, ts, offset, epoch = await ctx.rm.list_offset_and_timestamp(
            p.tp, p.timestamp, p.current_leader_epoch, replica_id)
        out.append(ListOffsetsAnswer(p.tp, code, ts, offset, epoch))
    return out


@dataclass
class EpochPartition:
    tp: TopicPartition
    leader_epoch: int
    current_leader_epoch: int | None = None


@dataclass
class EpochAnswer:
    tp: TopicPartition
    error: ErrorCode
    leader_epoch: int = -1
    end_offset: int = -1


def offset_for_leader_epoch(ctx: ApiContext, partitions: list[EpochPartition]
                            ) -> list[EpochAnswer]:
    """One answer per partition, in order."""
    denied = frozenset() if ctx.authorized_on_cluster(AclOperation.CLUSTER_ACTION) \
        else ctx.denied_topics(AclOperation.DESCRIBE, (p.tp.topic for p in partitions))
    out = []
    for p in partitions:
        if p.tp.topic in denied:
            out.append(EpochAnswer(p.tp, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        code, epoch, end = ctx.rm.offset_for_leader_epoch(p.tp, p.current_leader_epoch,
                                                          p.leader_epoch)
        out.append(EpochAnswer(p.tp, code, epoch, end))
    return out
