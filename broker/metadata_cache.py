"""The broker's metadata cache, filled by the controller's UpdateMetadata requests.

It answers client Metadata requests (live brokers, the controller, partition leaders, ISR, ELR)
and tells followers where their leaders listen. Kafka's ZkMetadataCache, without its locking:
everything runs on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from common.errors import ErrorCode
from common.listeners import EndPoint
from common.names import TopicPartition

if TYPE_CHECKING:
    from broker.controller_requests import UpdateMetadataRequest

LEADER_DURING_DELETE = -2  # UpdateMetadata's leader for a topic being deleted (Kafka's)


@dataclass(frozen=True)
class Endpoint:
    """A broker (or the controller): host/port of its inter-broker listener - where followers
    fetch from - and every advertised listener's endpoint (KIP-103)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[EndPoint, ...] = ()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def for_listener(self, listener: str) -> Endpoint | None:
        """This node as seen through ``listener``: None when it has no such listener (Kafka's
        MetadataCache leaves such a broker out of a Metadata answer). Without endpoints (sent
        by a controller that predates listener names) host/port serve every listener."""
        if not self.endpoints:
            return self
        e = next((e for e in self.endpoints if e.listener == listener), None)
        return None if e is None else Endpoint(self.broker_id, e.host, e.port, self.rack)


@dataclass
class PartitionInfo:
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


@dataclass
class MetadataCache:
    cluster_id: str = ""
    controller_id: int = -1
    controller: Endpoint | None = None
    controller_epoch: int = -1
    brokers: dict[int, Endpoint] = field(default_factory=dict)
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
        for tp, info in req.partition_states:
            if info.leader == LEADER_DURING_DELETE:
                self.partitions.pop(tp, None)
                continue
            self.partitions[tp] = info
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
