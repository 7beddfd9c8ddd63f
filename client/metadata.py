"""Cluster metadata as a client sees it: brokers, the active controller, topics and leaders.

Any broker answers Metadata from its cache (fed by the controller's UpdateMetadata), so a client
bootstraps from whichever address answers, then asks the live brokers it learnt of. Brokers'
caches are not updated atomically, so two brokers may disagree for a moment; as in Kafka
(KIP-320), a partition's cached state is only replaced by one with an equal or newer leader
epoch, so a client never moves back to a deposed leader because a lagging broker answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field, replace
from functools import cached_property

from client.errors import KafkaError, KafkaTimeoutError, TransportError, UnknownTopicError
from client.transport import ChannelPool, call
from common.errors import ErrorCode
from common.rpc import replog_pb2 as pb

NO_LEADER = -1


@dataclass(frozen=True)
class BrokerInfo:
    id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def from_pb(cls, e: pb.BrokerEndpoint) -> BrokerInfo:
        return cls(e.broker_id, e.host, e.port, e.rack if e.HasField("rack") else None)


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1: none
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    error_code: int = 0

    @property
    def has_leader(self) -> bool:
        return self.leader >= 0

    @property
    def reassignment_in_progress(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: str
    partitions: tuple[PartitionInfo, ...]  # sorted by partition number
    configs: dict[str, str] = field(default_factory=dict)
    error_code: int = 0

    def partition(self, p: int) -> PartitionInfo | None:
        if 0 <= p < len(self.partitions) and self.partitions[p].partition == p:
            return self.partitions[p]
        for info in self.partitions:
            if info.partition == p:
                return info
        return None

    @cached_property
    def available_partitions(self) -> list[int]:
        """Partitions with a leader (computed once: the instance is immutable)."""
        return [p.partition for p in self.partitions if p.has_leader]


@dataclass
class ClusterMetadata:
    cluster_id: str = ""
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    controller: BrokerInfo | None = None
    topics: dict[str, TopicInfo] = field(default_factory=dict)

    @classmethod
    def from_pb(cls, resp: pb.MetadataResponse) -> ClusterMetadata:
        brokers = {b.broker_id: BrokerInfo.from_pb(b) for b in resp.brokers}
        controller = None
        if resp.controller_id >= 0 and resp.HasField("controller") and resp.controller.port:
            controller = BrokerInfo.from_pb(resp.controller)
        topics = {t.topic: topic_from_pb(t) for t in resp.topics}
        return cls(resp.cluster_id, brokers, controller, topics)


def topic_from_pb(t: pb.MetadataTopic) -> TopicInfo:
    parts = tuple(sorted(
        (PartitionInfo(t.topic, p.partition, p.leader_id, p.leader_epoch, tuple(p.replicas),
                       tuple(p.isr), tuple(p.elr), tuple(p.last_known_elr),
                       tuple(p.offline_replicas), tuple(p.adding_replicas),
                       tuple(p.removing_replicas), p.error_code)
         for p in t.partitions), key=lambda p: p.partition))
    return TopicInfo(t.topic, t.topic_id, parts, dict(t.configs), t.error_code)


class MetadataCache:
    """The client's view of the cluster, refreshed on demand from any reachable broker."""

    def __init__(self, pool: ChannelPool, bootstrap: list[str], *,
                 request_timeout_ms: int = 30000, retry_backoff_ms: int = 100,
                 metadata_max_age_ms: int = 300_000):
        self.pool = pool
        self.bootstrap = list(bootstrap)
        self.request_timeout_s = request_timeout_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.max_age_s = metadata_max_age_ms / 1000
        self.cluster = ClusterMetadata()
        self.interest: set[str] = set()
        self.version = 0  # bumped on every applied response
        self.last_refresh = 0.0
        self.updated = asyncio.Event()  # set after each applied response, then cleared
        self._refresh_task: asyncio.Task | None = None
        # Set to make the pending background refresh skip what is left of its backoff.
        self._hurry: asyncio.Event | None = None
        self._closed = False
        self._last_attempt = 0.0
        # The broker that answered the last Metadata request: the admin client's "least loaded
        # node" (Kafka prefers a node it already has a ready connection to).
        self.last_answered: str | None = None
        # Kafka's producer asks brokers to create the unknown topics it names (a broker with
        # auto.create.topics.enable does); the admin client and consumers do not.
        self.allow_auto_topic_creation = False

    # ------------------------------------------------------------------ queries on the cache

    def topic(self, name: str) -> TopicInfo | None:
        return self.cluster.topics.get(name)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        t = self.cluster.topics.get(topic)
        return t.partition(partition) if t is not None else None

    def leader(self, topic: str, partition: int) -> BrokerInfo | None:
        p = self.partition(topic, partition)
        if p is None or p.leader < 0:
            return None
        return self.cluster.brokers.get(p.leader)

    def broker_addresses(self) -> list[str]:
        """Live brokers first (shuffled, to spread the load), then the bootstrap list."""
        known = [b.address for b in self.cluster.brokers.values()]
        random.shuffle(known)
        return known + [a for a in self.bootstrap if a not in known]

    @property
    def stale(self) -> bool:
        return time.monotonic() - self.last_refresh > self.max_age_s

    # ------------------------------------------------------------------ requests

    async def fetch(self, topics: list[str] | None = None, *, all_topics: bool = False,
                    include_configs: bool = False) -> ClusterMetadata:
        """One Metadata request to the first broker that answers; applied to the cache and
        returned as is. ``topics=None`` and not ``all_topics``: brokers and controller only."""
        req = pb.MetadataRequest(topics=topics or [], all_topics=all_topics,
                                 include_topic_configs=include_configs,
                                 allow_auto_topic_creation=self.allow_auto_topic_creation)
        last: KafkaError | None = None
        for address in self.broker_addresses():
            try:
                resp = await call(self.pool.broker(address).Metadata, req, address,
                                  self.request_timeout_s)
            except TransportError as e:
                last = e
                continue
            md = ClusterMetadata.from_pb(resp)
            self._apply(md)
            self.last_answered = address
            return md
        raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE,
                         f"no broker answered a Metadata request (tried "
                         f"{', '.join(self.broker_addresses())}): {last}")

    async def refresh(self, *extra_topics: str) -> ClusterMetadata:
        """Refresh the topics of interest (plus ``extra_topics``, which join them)."""
        self.interest.update(extra_topics)
        self._last_attempt = time.monotonic()
        return await self.fetch(sorted(self.interest))

    async def wait_for_topic(self, topic: str, max_block_ms: int, backoff_s: float,
                             backoff_max_s: float | None = None) -> TopicInfo:
        """Refresh until ``topic`` has partitions (Kafka's max.block.ms wait), backing off
        between attempts (doubling up to ``backoff_max_s``). Raises UnknownTopicError or, if
        refreshes were failing, KafkaTimeoutError naming the last error."""
        deadline = time.monotonic() + max_block_ms / 1000
        backoff_max_s = backoff_s if backoff_max_s is None else backoff_max_s
        last: KafkaError | None = None
        while True:
            try:
                await self.refresh(topic)
                last = None
            except KafkaError as e:
                last = e
            t = self.topic(topic)
            if t is not None:
                if t.error_code == ErrorCode.NONE and t.partitions:
                    return t
                if t.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION:
                    self.interest.discard(topic)
                    raise KafkaError(t.error_code, f"Invalid topic: {topic}", topic=topic)
                if t.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                    # Kafka's TopicAuthorizationException: fatal, not waited out
                    self.interest.discard(topic)
                    raise KafkaError(t.error_code, f"Not authorized to access topics: [{topic}]",
                                     topic=topic)
            if time.monotonic() + backoff_s >= deadline:
                self.interest.discard(topic)
                self.cluster.topics.pop(topic, None)
                msg = f"Topic {topic} not present in metadata after {max_block_ms} ms."
                if last is not None:
                    raise KafkaTimeoutError(msg, last, topic=topic)
                raise UnknownTopicError(topic, msg)
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, backoff_max_s)

    def request_update(self, immediate: bool = False) -> asyncio.Task | None:
        """Refresh in the background, at most once per retry.backoff.ms (``immediate``: now,
        for an error that says the leader moved; still one refresh in flight at a time).
        Returns the refresh task (the one already pending, if any).

        An ``immediate`` request that finds a refresh still waiting out its backoff makes it go
        now: before, it returned that task as it was, so the immediate refresh waited up to a
        retry.backoff.ms anyway (the producer's sender queues a delayed refresh as it starts,
        so a leader move soon after, as in a controlled shutdown, always hit this)."""
        task = self._refresh_task
        if task is not None and not task.done():
            if immediate and self._hurry is not None:
                self._hurry.set()
            return task
        delay = 0.0 if immediate else \
            max(0.0, self._last_attempt + self.retry_backoff_s - time.monotonic())
        self._hurry = asyncio.Event()
        self._refresh_task = asyncio.ensure_future(self._background_refresh(delay, self._hurry))
        return self._refresh_task

    async def _background_refresh(self, delay: float, hurry: asyncio.Event
                                  ) -> ClusterMetadata | None:
        if delay:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hurry.wait(), delay)
            if self._closed:  # a cancel that wait_for dropped (Python 3.11) as hurry was set
                return None
        self._last_attempt = time.monotonic()
        try:
            return await self.fetch(sorted(self.interest))
        except KafkaError:
            return None  # the next request_update() tries again

    async def close(self) -> None:
        self._closed = True
        task, self._refresh_task = self._refresh_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # shutting down
                await task

    # ------------------------------------------------------------------ updates

    def _apply(self, md: ClusterMetadata) -> None:
        c = self.cluster
        if md.brokers:
            c.brokers = dict(md.brokers)
        if md.cluster_id:
            c.cluster_id = md.cluster_id
        if md.controller is not None or not md.brokers:
            c.controller = md.controller
        for name, new in md.topics.items():
            old = c.topics.get(name)
            c.topics[name] = _merge_topic(old, new)
        self.version += 1
        self.last_refresh = time.monotonic()
        self.updated.set()
        self.updated.clear()

    def update_leader(self, topic: str, partition: int, leader_id: int, leader_epoch: int,
                      endpoints: list[pb.BrokerEndpoint] | tuple = ()) -> bool:
        """Apply a KIP-951 ``current_leader`` hint from a Produce/Fetch response."""
        t = self.cluster.topics.get(topic)
        p = t.partition(partition) if t is not None else None
        if t is None or p is None or leader_id < 0 or leader_epoch <= p.leader_epoch:
            return False
        for e in endpoints:
            if e.broker_id == leader_id and e.broker_id not in self.cluster.brokers:
                self.cluster.brokers[e.broker_id] = BrokerInfo.from_pb(e)
        if leader_id not in self.cluster.brokers:
            return False
        parts = tuple(replace(x, leader=leader_id, leader_epoch=leader_epoch)
                      if x.partition == partition else x for x in t.partitions)
        self.cluster.topics[topic] = replace(t, partitions=parts)
        self.version += 1
        return True


def _merge_topic(old: TopicInfo | None, new: TopicInfo) -> TopicInfo:
    if (old is None or new.error_code != ErrorCode.NONE or old.error_code != ErrorCode.NONE
            or (new.topic_id and old.topic_id and new.topic_id != old.topic_id)
            or len(new.partitions) != len(old.partitions)):
        return new
    merged = []
    for p in new.partitions:
        prev = old.partition(p.partition)
        # KIP-320: never go back to an older leader epoch reported by a lagging broker.
        merged.append(prev if prev is not None and prev.leader_epoch > p.leader_epoch else p)
    return replace(new, partitions=tuple(merged))
