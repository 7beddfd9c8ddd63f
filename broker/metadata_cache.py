"""The broker's metadata cache, filled by the controller's UpdateMetadata requests.

It answers client Metadata requests (live brokers, the controller, partition leaders, ISR, ELR)
and tells followers where their leaders listen. Kafka's ZkMetadataCache, without its locking:
everything runs on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from common.controller_requests import (
    BrokerNode,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import LEADER_DURING_DELETE

__all__ = ["BrokerNode", "MetadataCache", "PartitionInfo", "offline_replicas", "partition_error",
           "partition_info"]


@dataclass
class PartitionInfo:
    """One partition as the cache holds it: UpdateMetadata's partition state without its
    name and controller epoch."""

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


def partition_info(s: UpdateMetadataPartitionState) -> PartitionInfo:
    return PartitionInfo(s.leader, s.leader_epoch, s.isr, s.replicas, s.partition_epoch,
                         s.offline_replicas, s.elr, s.last_known_elr, s.adding_replicas,
                         s.removing_replicas)


@dataclass
class MetadataCache:
    cluster_id: str = ""
    controller_id: int = -1
    controller: BrokerNode | None = None
    controller_epoch: int = -1
    brokers: dict[int, BrokerNode] = field(default_factory=dict)
    partitions: dict[TopicPartition, PartitionInfo] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)

    def update(self, req: UpdateMetadataRequest) -> None:
        """Apply an UpdateMetadataRequest (full or incremental: partitions it names replace
        ours; a leader of -2 means the topic is being deleted)."""
        self.controller_epoch = req.controller_epoch
        self.brokers = {b.broker_id: b for b in req.live_brokers}
        if req.controller is not None:
            self.controller_id = req.controller.broker_id
            self.controller = req.controller
        self.topic_ids.update(req.topic_ids)
        for s in req.partition_states:
            if s.leader == LEADER_DURING_DELETE:
                self.partitions.pop(s.tp, None)
                continue
            self.partitions[s.tp] = partition_info(s)
        live_topics = {tp.topic for tp in self.partitions}
        for t in list(self.topic_ids):
            if t not in live_topics:
                del self.topic_ids[t]

    def topics(self) -> list[str]:
        return sorted({tp.topic for tp in self.partitions})

    def partitions_of(self, topic: str) -> dict[int, PartitionInfo]:
        return {tp.partition: info for tp, info in self.partitions.items() if tp.topic == topic}


def offline_replicas(replicas: Iterable[int], live_brokers: Collection[int],
                     reported_offline: Iterable[int]) -> list[int]:
    """The replicas a Metadata answer lists offline: those on brokers that are not live (Kafka's
    ZkMetadataCache.getPartitionMetadata); when all are live, the ones the controller reported
    offline (a replica in an offline log dir of a live broker)."""
    return [b for b in replicas if b not in live_brokers] or list(reported_offline)


def partition_error(leader: int) -> ErrorCode:
    """A partition without a leader is LEADER_NOT_AVAILABLE in a Metadata answer."""
    return ErrorCode.LEADER_NOT_AVAILABLE if leader < 0 else ErrorCode.NONE
