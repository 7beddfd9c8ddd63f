"""Consumer: manual partition assignment, seeking, long-poll fetching from partition leaders.

Kafka's KafkaConsumer with ``assign()`` (replog has no consumer groups): the caller assigns
partitions, optionally seeks (an offset, the beginning or the end: ListOffsets -2 / -1), and
polls. Each leader broker gets one outstanding Fetch at a time covering every assigned partition
it leads; the broker long-polls up to ``fetch_max_wait_ms``. Fetches to different brokers run
concurrently and a poll returns as soon as any of them brings records, so an idle partition on
one broker does not hold back another.

Leader changes are followed the way Kafka's Fetcher does: NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, KAFKA_STORAGE_ERROR or a dead broker mark the
partition for a metadata refresh (a KIP-951 ``current_leader`` hint is applied at once) and the
next poll fetches from the new leader at the same position. OFFSET_OUT_OF_RANGE resets the
position by ``auto_offset_reset`` ("earliest", "latest", or "none" to raise).

Consumers read up to the high watermark, so every record returned is committed: with acks=all
it is on every in-sync replica and survives leader changes at its offset.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Self

from client.errors import KafkaError, KafkaTimeoutError, TransportError
from client.metadata import MetadataCache, TopicInfo
from client.producer import TopicPartition
from client.transport import ChannelPool, call, parse_bootstrap_servers
from common.errors import ErrorCode
from common.records import decode_records, iter_batches
from common.rpc import replog_pb2 as pb

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
_DEADLINE_MARGIN_S = 5.0


@dataclass(frozen=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: str  # "CreateTime" | "LogAppendTime"
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int


class OffsetOutOfRangeError(KafkaError):
    def __init__(self, tp: TopicPartition, offset: int):
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE,
                         f"Fetch position {offset} is out of range for partition {tp}",
                         topic=tp.topic, partition=tp.partition)


def _tp(x) -> TopicPartition:
    return x if isinstance(x, TopicPartition) else TopicPartition(x[0], int(x[1]))


class Consumer:
    def __init__(self, bootstrap_servers: str | list[str], *, auto_offset_reset: str = "latest",
                 fetch_max_wait_ms: int = 500, fetch_min_bytes: int = 1,
                 fetch_max_bytes: int = 52428800, max_partition_fetch_bytes: int = 1048576,
                 request_timeout_ms: int = 30000, retry_backoff_ms: int = 100,
                 default_api_timeout_ms: int = 60000, max_block_ms: int = 60000,
                 pool: ChannelPool | None = None, metadata: MetadataCache | None = None):
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(f"Invalid value {auto_offset_reset} for configuration "
                             f"auto.offset.reset: String must be one of: latest, earliest, none")
        self.auto_offset_reset = auto_offset_reset
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.request_timeout_s = request_timeout_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.default_api_timeout_s = default_api_timeout_ms / 1000
        self.max_block_ms = max_block_ms
        self._own_pool = pool is None
        self.pool = pool or ChannelPool()
        self.metadata = metadata or MetadataCache(
            self.pool, parse_bootstrap_servers(bootstrap_servers),
            request_timeout_ms=request_timeout_ms, retry_backoff_ms=retry_backoff_ms)
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int | None] = {}
        self._pending_reset: dict[TopicPartition, int] = {}  # tp -> EARLIEST/LATEST timestamp
        self._backoff_until: dict[TopicPartition, float] = {}
        self._fetches: dict[int, asyncio.Task] = {}  # broker id -> outstanding Fetch
        self._fetching: dict[int, set[TopicPartition]] = {}
        self._buffer: deque[ConsumerRecord] = deque()
        self._error: BaseException | None = None  # raised by the next poll
        self._closed = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def start(self) -> Consumer:
        return self

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for t in self._fetches.values():
            t.cancel()
        if self._fetches:
            await asyncio.gather(*self._fetches.values(), return_exceptions=True)
        self._fetches.clear()
        await self.metadata.close()
        if self._own_pool:
            await self.pool.close()

    # ------------------------------------------------------------------ assignment

    async def topic_metadata(self, topic: str) -> TopicInfo:
        """The topic's metadata, waiting up to max.block.ms for it to appear."""
        return await self.metadata.wait_for_topic(topic, self.max_block_ms, self.retry_backoff_s)

    async def partitions_for(self, topic: str) -> list[int]:
        return [p.partition for p in (await self.topic_metadata(topic)).partitions]

    async def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (replacing any earlier assignment)."""
        tps = list(dict.fromkeys(_tp(x) for x in partitions))
        for topic in sorted({tp.topic for tp in tps}):
            t = await self.topic_metadata(topic)
            for tp in tps:
                if tp.topic == topic and t.partition(tp.partition) is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"partition {tp} does not exist (topic {topic} has "
                                     f"{len(t.partitions)} partitions)", topic=topic,
                                     partition=tp.partition)
        self._assignment = tps
        self._positions = {tp: self._positions.get(tp) for tp in tps}
        self._pending_reset = {tp: r for tp, r in self._pending_reset.items() if tp in tps}
        self._buffer = deque(r for r in self._buffer
                             if TopicPartition(r.topic, r.partition) in self._positions)

    async def assign_topic(self, topic: str) -> list[TopicPartition]:
        """Assign every partition of ``topic``."""
        tps = [TopicPartition(topic, p) for p in await self.partitions_for(topic)]
        await self.assign(tps)
        return tps

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    # ------------------------------------------------------------------ positions

    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        tp = _tp(tp)
        self._check_assigned(tp)
        if offset < 0:
            raise ValueError(f"seek offset must not be negative, got {offset}")
        self._positions[tp] = offset
        self._pending_reset.pop(tp, None)
        self._drop_buffered(tp)

    def seek_to_beginning(self, *tps: TopicPartition | tuple[str, int]) -> None:
        self._seek_to(tps, EARLIEST_TIMESTAMP)

    def seek_to_end(self, *tps: TopicPartition | tuple[str, int]) -> None:
        self._seek_to(tps, LATEST_TIMESTAMP)

    def _seek_to(self, tps, ts: int) -> None:
        for tp in (map(_tp, tps) if tps else list(self._assignment)):
            self._check_assigned(tp)
            self._positions[tp] = None
            self._pending_reset[tp] = ts
            self._drop_buffered(tp)

    async def position(self, tp: TopicPartition | tuple[str, int]) -> int:
        tp = _tp(tp)
        self._check_assigned(tp)
        await self._resolve_positions()
        pos = self._positions[tp]
        assert pos is not None
        return pos

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._positions:
            raise ValueError(f"No current assignment for partition {tp}")

    def _drop_buffered(self, tp: TopicPartition) -> None:
        if self._buffer:
            self._buffer = deque(r for r in self._buffer
                                 if (r.topic, r.partition) != (tp.topic, tp.partition))

    async def beginning_offsets(self, tps: Iterable[TopicPartition | tuple[str, int]]
                                ) -> dict[TopicPartition, int]:
        return await self.list_offsets({_tp(tp): EARLIEST_TIMESTAMP for tp in tps})

    async def end_offsets(self, tps: Iterable[TopicPartition | tuple[str, int]]
                          ) -> dict[TopicPartition, int]:
        """The high watermark of each partition (the offset the next committed record gets)."""
        return await self.list_offsets({_tp(tp): LATEST_TIMESTAMP for tp in tps})

    async def list_offsets(self, request: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """ListOffsets at each partition's leader (-2 earliest, -1 latest, else a timestamp),
        retrying leader moves until default.api.timeout.ms."""
        todo = dict(request)
        out: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + self.default_api_timeout_s
        last: KafkaError | None = None
        for topic in {tp.topic for tp in todo}:
            if self.metadata.topic(topic) is None:
                await self.topic_metadata(topic)
        while todo:
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in todo:
                leader = self.metadata.leader(tp.topic, tp.partition)
                if leader is not None:
                    by_leader.setdefault(leader.id, []).append(tp)
            results = await asyncio.gather(*(self._list_offsets_at(b, tps, todo)
                                             for b, tps in by_leader.items()))
            for answers in results:
                for tp, value in answers.items():
                    if isinstance(value, KafkaError):
                        last = value
                        if not value.retriable:
                            raise value
                    else:
                        out[tp] = value
                        todo.pop(tp, None)
            if not todo:
                break
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"Failed to get offsets by times in {int(self.default_api_timeout_s * 1000)}"
                    f" ms for {', '.join(map(str, sorted(todo)))}", last)
            self.metadata.request_update()
            await asyncio.sleep(self.retry_backoff_s)
            try:
                await self.metadata.refresh()
            except KafkaError as e:
                last = e
        return out

    async def _list_offsets_at(self, broker_id: int, tps: list[TopicPartition],
                               timestamps: dict[TopicPartition, int]
                               ) -> dict[TopicPartition, int | KafkaError]:
        broker = self.metadata.cluster.brokers.get(broker_id)
        if broker is None:
            return {}
        req = pb.ListOffsetsRequest()
        by_topic: dict[str, pb.ListOffsetsTopic] = {}
        for tp in tps:
            t = by_topic.get(tp.topic)
            if t is None:
                t = by_topic[tp.topic] = req.topics.add(topic=tp.topic)
            t.partitions.add(partition=tp.partition, timestamp=timestamps[tp])
        try:
            resp = await call(self.pool.broker(broker.address).ListOffsets, req, broker.address,
                              self.request_timeout_s)
        except KafkaError as e:
            return {tp: e for tp in tps}
        out: dict[TopicPartition, int | KafkaError] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                if p.error_code == ErrorCode.NONE:
                    out[tp] = p.offset
                else:
                    out[tp] = KafkaError(p.error_code, f"ListOffsets for {tp}", topic=t.topic,
                                         partition=p.partition)
        return out

    async def _resolve_positions(self) -> None:
        missing = {tp: self._pending_reset.get(tp, self._policy_timestamp(tp))
                   for tp, pos in self._positions.items() if pos is None}
        if not missing:
            return
        offsets = await self.list_offsets(missing)
        for tp, off in offsets.items():
            if tp in self._positions and self._positions[tp] is None:
                # A timestamp lookup with no later record answers -1: use the end then.
                self._positions[tp] = off if off >= 0 else (await self.end_offsets([tp]))[tp]
                self._pending_reset.pop(tp, None)

    def _policy_timestamp(self, tp: TopicPartition) -> int:
        if self.auto_offset_reset == "earliest":
            return EARLIEST_TIMESTAMP
        if self.auto_offset_reset == "latest":
            return LATEST_TIMESTAMP
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                         f"Undefined offset with no reset policy for partition: {tp}",
                         topic=tp.topic, partition=tp.partition)

    # ------------------------------------------------------------------ fetching

    async def poll(self, timeout_ms: int = 1000, max_records: int | None = None
                   ) -> list[ConsumerRecord]:
        """Records fetched within ``timeout_ms`` (an empty list if none arrived)."""
        if self._closed:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "the consumer is closed")
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            if self._buffer:
                return self._take(max_records)
            if self._error is not None:
                err, self._error = self._error, None
                raise err
            if not self._assignment:
                raise ValueError("the consumer has no assigned partitions")
            await self._resolve_positions()
            self._start_fetches()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            if self._fetches:
                await asyncio.wait(list(self._fetches.values()), timeout=remaining,
                                   return_when=asyncio.FIRST_COMPLETED)
            else:
                await asyncio.sleep(min(self.retry_backoff_s, remaining))

    async def __aiter__(self):
        while True:
            for r in await self.poll(1000):
                yield r

    def _take(self, max_records: int | None) -> list[ConsumerRecord]:
        n = len(self._buffer) if max_records is None else min(max_records, len(self._buffer))
        return [self._buffer.popleft() for _ in range(n)]

    def _start_fetches(self) -> None:
        now = time.monotonic()
        busy = set().union(*self._fetching.values()) if self._fetching else set()
        plan: dict[int, dict[TopicPartition, int]] = {}
        need_metadata = False
        for tp in self._assignment:
            pos = self._positions.get(tp)
            if pos is None or tp in busy or self._backoff_until.get(tp, 0) > now:
                continue
            leader = self.metadata.leader(tp.topic, tp.partition)
            if leader is None:
                need_metadata = True
                continue
            if leader.id in self._fetches:
                continue  # joins the next request to that broker
            plan.setdefault(leader.id, {})[tp] = pos
        if need_metadata:
            self.metadata.request_update()
        for bid, positions in plan.items():
            self._fetching[bid] = set(positions)
            self._fetches[bid] = asyncio.create_task(self._fetch_from(bid, positions))

    async def _fetch_from(self, broker_id: int, positions: dict[TopicPartition, int]) -> None:
        try:
            broker = self.metadata.cluster.brokers.get(broker_id)
            if broker is None:
                return
            req = pb.FetchRequest(max_wait_ms=self.fetch_max_wait_ms,
                                  min_bytes=self.fetch_min_bytes, max_bytes=self.fetch_max_bytes)
            by_topic: dict[str, pb.FetchTopic] = {}
            for tp, pos in positions.items():
                t = by_topic.get(tp.topic)
                if t is None:
                    t = by_topic[tp.topic] = req.topics.add(topic=tp.topic)
                t.partitions.add(partition=tp.partition, fetch_offset=pos,
                                 partition_max_bytes=self.max_partition_fetch_bytes)
            timeout = self.fetch_max_wait_ms / 1000 + self.request_timeout_s
            try:
                resp = await call(self.pool.broker(broker.address).Fetch, req, broker.address,
                                  timeout)
            except TransportError:
                self._retry_later(positions, refresh=True)
                return
            except KafkaError as e:
                if not e.retriable:
                    raise
                self._retry_later(positions, refresh=e.invalidates_metadata)
                return
            for t in resp.responses:
                for p in t.partitions:
                    tp = TopicPartition(t.topic, p.partition)
                    if tp in positions:
                        self._handle_partition(tp, positions[tp], p, resp)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - handed to the caller by the next poll()
            self._error = e
        finally:
            self._fetches.pop(broker_id, None)
            self._fetching.pop(broker_id, None)

    def _retry_later(self, tps: Iterable[TopicPartition], refresh: bool) -> None:
        until = time.monotonic() + self.retry_backoff_s
        for tp in tps:
            self._backoff_until[tp] = until
        if refresh:
            # now, not a retry.backoff after the last refresh: the new leader is usually
            # known by the time this partition's backoff ends
            self.metadata.request_update(immediate=True)

    def _handle_partition(self, tp: TopicPartition, fetch_offset: int,
                          p: pb.FetchPartitionResponse, resp: pb.FetchResponse) -> None:
        if self._positions.get(tp) != fetch_offset:
            return  # seeked or unassigned while the fetch was out
        code = p.error_code
        if code == ErrorCode.NONE:
            position = fetch_offset
            for batch in iter_batches(p.records, allow_partial_tail=True):
                h = batch.header
                if h.next_offset <= position:
                    continue
                if not h.is_control:
                    for r in decode_records(batch.data, h):
                        if r.offset >= position:
                            self._buffer.append(ConsumerRecord(
                                tp.topic, tp.partition, r.offset, r.timestamp,
                                h.timestamp_type, r.key, r.value, r.headers,
                                h.partition_leader_epoch))
                position = h.next_offset
            self._positions[tp] = position
            return
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.auto_offset_reset == "none":
                raise OffsetOutOfRangeError(tp, fetch_offset)
            self._positions[tp] = None  # reset by the policy on the next poll
            return
        if p.HasField("current_leader") and p.current_leader.leader_id >= 0 and \
                self.metadata.update_leader(tp.topic, tp.partition, p.current_leader.leader_id,
                                            p.current_leader.leader_epoch, resp.node_endpoints):
            return  # KIP-951: the next poll fetches from the new leader, no backoff
        err = KafkaError(code, f"Fetch for {tp}", topic=tp.topic, partition=tp.partition)
        if err.retriable:
            self._retry_later([tp], refresh=err.invalidates_metadata)
            return
        raise err
