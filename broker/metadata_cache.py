"""The broker's metadata cache, filled by the controller's UpdateMetadata requests.

It answers client Metadata requests (live brokers, the controller, partition leaders, ISR, ELR)
and tells followers where their leaders listen. Kafka's ZkMetadataCache, without its locking:
everything runs on the broker's event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.names import TopicPartition


@dataclass(frozen=True)
class Endpoint:
    broker_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


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

    def update(self, req) -> None:
        """Apply an UpdateMetadataRequest (full or incremental: partitions it names replace
        ours; a leader of -2 means the topic is being deleted)."""
        self.controller_epoch = req.controller_epoch
        self.brokers = {b.broker_id: Endpoint(b.broker_id, b.host, b.port,
                                              b.rack if b.HasField("rack") else None)
                        for b in req.live_brokers}
        if req.HasField("controller"):
            c = req.controller
            self.controller_id = c.broker_id
            self.controller = Endpoint(c.broker_id, c.host, c.port)
        self.topic_ids.update(req.topic_ids)
        for s in req.partition_states:
            tp = TopicPartition(s.topic, s.partition)
            if s.leader == -2:
                self.partitions.pop(tp, None)
                continue
            self.partitions[tp] = PartitionInfo(
                s.leader, s.leader_epoch, tuple(s.isr), tuple(s.replicas), s.partition_epoch,
                tuple(s.offline_replicas), tuple(s.elr), tuple(s.last_known_elr),
                tuple(s.adding_replicas), tuple(s.removing_replicas))
        live_topics = {tp.topic for tp in self.partitions}
        for t in list(self.topic_ids):
            if t not in live_topics:
                del self.topic_ids[t]

    def topics(self) -> list[str]:
        return sorted({tp.topic for tp in self.partitions})

    def partitions_of(self, topic: str) -> dict[int, PartitionInfo]:
        return {tp.partition: info for tp, info in self.partitions.items() if tp.topic == topic}
