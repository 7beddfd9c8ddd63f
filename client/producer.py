"""Producer: Kafka's producer semantics over replog's Produce RPC.

- ``await producer.send(topic, value, key=...)`` waits (up to ``max_block_ms``) for the topic's
  metadata and for buffer space, picks the partition (Kafka's default partitioner), appends the
  record to the partition's open batch and returns an asyncio future that resolves to
  :class:`RecordMetadata` (topic, partition, offset) once the broker acknowledged it, or raises
  a :class:`KafkaError` naming Kafka's error.
- Records are grouped per partition into Kafka v2 record batches of up to ``batch_size`` bytes;
  a batch is sent when full, after ``linger_ms``, on ``flush()`` or on ``close()``. One
  ProduceRequest per leader broker carries at most one batch per partition, and up to
  ``max_in_flight_requests_per_connection`` requests per broker are outstanding.
- Transport (``produce_stream_enable``, ``produce.stream.enable`` in ``replog produce``'s
  properties, default true): the requests to a broker are pipelined on one long-lived
  Broker.ProduceStream, as Kafka's NetworkClient pipelines them on one connection, answers
  matched by correlation id (client/transport.py ``ProduceStream``); a message on an open
  stream costs gRPC a fraction of a call (``python -m bench transport``). A broken stream fails
  its requests in flight as transport errors (retried as below) and is reopened on next use; a
  broker without the stream (older, in a rolling upgrade) gets unary calls. False: one unary
  Produce call per request (the A/B baseline).
- acks: ``-1``/``"all"`` (the whole ISR, NOT_ENOUGH_REPLICAS below min.insync.replicas), ``1``
  (the leader), ``0`` (no acknowledgement: offsets are -1).
- Retries (Kafka's retriable errors: NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE,
  NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, UNKNOWN_TOPIC_OR_PARTITION,
  KAFKA_STORAGE_ERROR, ... and transport failures) re-enqueue the batch at the head of its
  partition after an exponential backoff (``retry_backoff_ms`` .. ``retry_backoff_max_ms``),
  refreshing metadata first when the error says the leader moved. Batches for a broker whose
  connection broke are held, their retries unspent, until it is connected again or the metadata
  names a new leader (Kafka's Sender drains only for ready nodes; docs/grpc-errors.md). A batch
  gives up when
  ``delivery_timeout_ms`` has passed since it was created (Kafka's rule: a failure seen after the
  deadline is reported as that error; a batch still queued at the deadline fails with
  "Expiring N record(s) ..."), or after ``retries`` attempts when that is set.

Ordering: like Kafka without idempotence, a retried batch may land after a later batch of the
same partition when more than one request is in flight; with
``max_in_flight_requests_per_connection=1`` a partition has at most one batch in flight, so
records keep their send order. replog has no idempotent producer (producer id -1), so a retry
after a lost acknowledgement can duplicate a batch, as in Kafka with enable.idempotence=false.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Self

import grpc

from client.errors import (
    KafkaError,
    KafkaTimeoutError,
    RecordTooLargeError,
    TransportError,
)
from client.metadata import MetadataCache, TopicInfo
from client.partitioner import DefaultPartitioner
from client.recordbatch import build_producer_batch, estimate_record_size
from client.transport import ChannelPool, ProduceStream, call, parse_bootstrap_servers
from common.clock import wall_ms
from common.compression import codec_of
from common.errors import ErrorCode, ReplogError
from common.records import HEADER_SIZE
from common.rpc import replog_pb2 as pb

_DEADLINE_MARGIN_S = 5.0


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class RecordMetadata(NamedTuple):
    """What an acknowledged send() resolves to. A NamedTuple, not a frozen dataclass: one is
    built per record on the send path, and a frozen dataclass's __init__ (a setattr per field)
    cost more than the record's share of encoding and CRC."""

    topic: str
    partition: int
    offset: int  # -1 with acks=0
    timestamp: int  # CreateTime set by the producer, or the broker's LogAppendTime
    serialized_key_size: int
    serialized_value_size: int


def parse_acks(acks: str | int) -> int:
    """Kafka's acks values: "all"/-1, 0, 1."""
    if isinstance(acks, str):
        a = acks.strip().lower()
        if a == "all":
            return -1
        try:
            acks = int(a)
        except ValueError:
            raise ValueError(f"Invalid value {acks!r} for configuration acks: "
                             f"String must be one of: all, -1, 0, 1") from None
    if acks not in (-1, 0, 1):
        raise ValueError(f"Invalid value {acks} for configuration acks: "
                         f"String must be one of: all, -1, 0, 1")
    return acks


def _as_bytes(x: bytes | str | None) -> bytes | None:
    if x is None or isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode("utf-8")
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    raise TypeError(f"record keys and values must be bytes, str or None, not {type(x).__name__}")


# ``_new_tuple(Cls, (a, b, ...))`` builds the same object as ``Cls(a, b, ...)`` for a NamedTuple
# without the Python-level __new__ NamedTuple generates (a lambda that calls tuple.__new__):
# two are built per record (the queued record, its RecordMetadata), and that call was ~5% of
# the client's CPU in replog produce (docs/profiles/produce.md).
_new_tuple = tuple.__new__


class _PendingRecord(NamedTuple):
    """A queued record (what build_producer_batch reads); lighter than a dataclass."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]
    timestamp: int


Callback = Callable[[RecordMetadata | None, BaseException | None], Any]

_log = logging.getLogger(__name__)


class _Callback:
    """``send(..., callback=fn)``'s stand-in for the record's future, with the two methods of
    one that the sender uses: ``fn(metadata, None)`` or ``fn(None, exception)``, called once,
    from the sender, in record order (Kafka's ``send(record, callback)``). An asyncio future
    per record, its done-callback scheduled through ``call_soon``, cost ~3 of the ~10 us the
    perf tool spent per record (docs/profiles/produce.md); a plain call costs a tenth of that."""

    __slots__ = ("called", "fn")

    def __init__(self, fn: Callback) -> None:
        self.fn = fn
        self.called = False

    def done(self) -> bool:
        return self.called

    def set_result(self, metadata: RecordMetadata) -> None:
        self.called = True
        self._call(metadata, None)

    def set_exception(self, err: BaseException) -> None:
        self.called = True
        self._call(None, err)

    def _call(self, metadata: RecordMetadata | None, err: BaseException | None) -> None:
        try:
            self.fn(metadata, err)
        except Exception:  # noqa: BLE001 - as Kafka's producer: logged, the sender goes on
            _log.exception("Error executing user-provided callback on message")


class _Batch:
    __slots__ = (
        "attempts",
        "created",
        "done",
        "full",
        "futures",
        "last_error",
        "payload",
        "records",
        "retry_at",
        "sent_epoch",
        "size",
        "tp",
    )

    def __init__(self, tp: TopicPartition, now: float, loop: asyncio.AbstractEventLoop):
        self.tp = tp
        self.records: list[_PendingRecord] = []
        self.futures: list[asyncio.Future | _Callback] = []
        self.size = HEADER_SIZE
        self.created = now
        self.attempts = 0
        self.last_error: KafkaError | None = None
        self.full = False
        self.payload: bytes | None = None
        self.retry_at = 0.0
        self.sent_epoch = -1  # the partition's leader epoch when last sent
        self.done = loop.create_future()


def _record_error(err: KafkaError, per_record: dict[int, str], index: int) -> BaseException:
    """What the record at ``index`` of a batch refused with record_errors fails with, as
    Kafka's Sender: those named get the partition's error with their own message, the rest a
    plain KafkaException saying why."""
    if index in per_record:
        return KafkaError(err.error_code, per_record[index] or err.message, topic=err.topic,
                          partition=err.partition)
    return ReplogError("Failed to append record because it was part of a batch which had one "
                       "more more invalid records")  # sic, Kafka's words


class Producer:
    """An asyncio producer. Use ``async with Producer(...) as p`` or ``start()``/``close()``."""

    def __init__(self, bootstrap_servers: str | list[str], *, acks: str | int = "all",
                 batch_size: int = 16384, linger_ms: float = 5, buffer_memory: int = 33554432,
                 max_request_size: int = 1048576, delivery_timeout_ms: int = 120000,
                 request_timeout_ms: int = 30000, retries: int | None = None,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000,
                 max_block_ms: int = 60000, max_in_flight_requests_per_connection: int = 5,
                 metadata_max_age_ms: int = 300000, partitioner: DefaultPartitioner | None = None,
                 pool: ChannelPool | None = None, metadata: MetadataCache | None = None,
                 produce_stream_enable: bool = True, compression_type: str = "none"):
        if batch_size < 0 or linger_ms < 0 or max_in_flight_requests_per_connection < 1:
            raise ValueError("batch_size and linger_ms must be >= 0 and "
                             "max_in_flight_requests_per_connection >= 1")
        self.acks = parse_acks(acks)
        # Kafka's compression.type: each batch's records compressed with the codec (none,
        # gzip, snappy, lz4, zstd; common/compression.py frames them as Kafka does)
        self.compression = codec_of(compression_type)
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000
        self.buffer_memory = buffer_memory
        self.max_request_size = max_request_size
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.request_timeout_ms = request_timeout_ms
        self.retries = retries
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.retry_backoff_max_s = max(retry_backoff_max_ms, retry_backoff_ms) / 1000
        self.max_block_ms = max_block_ms
        self.max_in_flight = max_in_flight_requests_per_connection
        self.produce_stream_enable = produce_stream_enable
        self._streams: dict[str, ProduceStream] = {}  # by broker address
        self.partitioner = partitioner or DefaultPartitioner(sticky_batch_size=max(batch_size, 1))
        self._own_pool = pool is None
        self.pool = pool or ChannelPool()
        self.metadata = metadata or MetadataCache(
            self.pool, parse_bootstrap_servers(bootstrap_servers),
            request_timeout_ms=request_timeout_ms, retry_backoff_ms=retry_backoff_ms,
            metadata_max_age_ms=metadata_max_age_ms)
        self.metadata.allow_auto_topic_creation = True  # as Kafka's producer's Metadata

        self._batches: dict[TopicPartition, deque[_Batch]] = {}
        self._tps: dict[str, list[TopicPartition]] = {}  # one key object per partition
        self._incomplete: set[_Batch] = set()
        self._in_flight: dict[int, int] = {}  # broker id -> outstanding requests
        self._muted: set[TopicPartition] = set()  # max_in_flight == 1: one batch per partition
        # Brokers whose connection broke (a transport error): their batches are held, not
        # sent and not counted as attempts, until the channel is connected again or the
        # metadata names another leader - Kafka's Sender drains only for nodes that
        # NetworkClient.ready() says are connected. Without it, retries=3 (replog produce's
        # default) were spent in a second on a dead broker while the controller had not yet
        # moved its partitions, and the records failed.
        self._disconnected: set[int] = set()
        self._buffered = 0
        self._buffer_freed: asyncio.Event | None = None
        self._wakeup: asyncio.Event | None = None
        self._sender: asyncio.Task | None = None
        self._requests: set[asyncio.Task] = set()
        self._flushing = 0
        self._closing = False
        self._stop_sender = False
        self._closed = False
        self._crashed: KafkaError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> Producer:
        if self._sender is None:
            self._loop = asyncio.get_running_loop()
            self._wakeup = asyncio.Event()
            self._buffer_freed = asyncio.Event()
            self._sender = asyncio.create_task(self._run(), name="replog-producer-sender")
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self, timeout_s: float | None = None) -> None:
        """Send everything buffered (waiting at most ``timeout_s``), then release resources;
        records still unsent after the timeout fail."""
        if self._closed:
            return
        self._closing = True
        if self._sender is not None:
            self._wake()
            # Wait for the buffered records, but not for a sender that is gone: when the
            # task running the sender was cancelled (event-loop shutdown cancels every task)
            # nothing would ever complete them, and close() hung for good.
            waiter = asyncio.ensure_future(self._wait_all())
            await asyncio.wait({waiter, self._sender}, timeout=timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            # The sender also stops at its next turn: Python 3.11's wait_for drops a cancel
            # that lands just after its inner wait completed (the _wake() above completes it),
            # and the sender then went on to wait out a retry backoff before close() returned.
            self._stop_sender = True
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # shutting down
                await self._sender
            for t in list(self._requests):
                t.cancel()
            if self._requests:
                await asyncio.gather(*self._requests, return_exceptions=True)
        self._fail_all(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                  "producer closed before the record was sent"))
        self._closed = True
        streams = list(self._streams.values())
        self._streams.clear()
        for stream in streams:
            await stream.close()
        await self.metadata.close()
        if self._own_pool:
            await self.pool.close()

    async def flush(self) -> None:
        """Send every buffered record now and wait until each has succeeded or failed."""
        self._flushing += 1
        try:
            self._wake()
            await self._wait_all()
        finally:
            self._flushing -= 1

    async def _wait_all(self) -> None:
        pending = [b.done for b in self._incomplete]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    # ------------------------------------------------------------------ send

    async def send(self, topic: str, value: bytes | str | None = None,
                   key: bytes | str | None = None, *, partition: int | None = None,
                   headers: list[tuple[str, bytes | None]] | None = None,
                   timestamp_ms: int | None = None,
                   callback: Callback | None = None) -> asyncio.Future | None:
        """Queue one record; returns a future of its :class:`RecordMetadata`. With
        ``callback`` (Kafka's ``send(record, callback)``) no future is made and None is
        returned: ``callback(metadata, None)`` or ``callback(None, exception)`` is called once
        the record is acknowledged or has failed, from the sender, in record order."""
        if self._closing:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "cannot send after the producer "
                             "is closed")
        if self._crashed is not None:
            raise self._crashed
        if self._sender is None:
            await self.start()
        if key is not None and type(key) is not bytes:
            key = _as_bytes(key)
        if value is not None and type(value) is not bytes:
            value = _as_bytes(value)
        t = self.metadata.cluster.topics.get(topic)
        if t is None or t.error_code or not t.partitions or topic not in self.metadata.interest:
            t = await self._wait_on_metadata(topic)
        n = len(t.partitions)
        if partition is None:
            partition = self.partitioner.partition(topic, key, n, t.available_partitions)
        elif not 0 <= partition < n:
            raise ValueError(f"Invalid partition given with record: {partition} is not in the "
                             f"range [0...{n}).")
        if headers:
            headers = list(headers)
            size = estimate_record_size(key, value, headers)
        else:
            headers = ()
            size = 21 + (len(key) if key is not None else 0) + \
                (len(value) if value is not None else 0)
        if size + HEADER_SIZE > self.max_request_size:
            raise RecordTooLargeError(
                f"The message is {size + HEADER_SIZE} bytes when serialized which is larger than "
                f"{self.max_request_size}, which is the value of the max.request.size "
                f"configuration.")
        if self._buffered + size > self.buffer_memory and self._buffered > 0:
            await self._wait_for_buffer(size)
        ts = timestamp_ms if timestamp_ms is not None else wall_ms()
        tps = self._tps.get(topic)
        if tps is None or len(tps) != n:
            tps = self._tps[topic] = [TopicPartition(topic, p) for p in range(n)]
        fut, new_batch, full = self._append(
            tps[partition], _new_tuple(_PendingRecord, (key, value, headers, ts)), size,
            callback)
        self.partitioner.on_append(topic, partition, size, n, t.available_partitions)
        if full or new_batch:
            self._wake_for(tps[partition], full)
        if full:
            await asyncio.sleep(0)  # let the sender ship the full batch
        return fut if callback is None else None

    async def send_and_wait(self, topic: str, value: bytes | str | None = None,
                            key: bytes | str | None = None, **kw) -> RecordMetadata:
        if kw.get("callback") is not None:
            raise ValueError("send_and_wait takes no callback: it waits for the record itself")
        fut = await self.send(topic, value, key, **kw)
        assert fut is not None  # no callback, so send made a future
        return await fut

    async def partitions_for(self, topic: str) -> list[int]:
        t = await self._wait_on_metadata(topic)
        return [p.partition for p in t.partitions]

    async def _wait_on_metadata(self, topic: str) -> TopicInfo:
        t = self.metadata.topic(topic)
        if t is not None and t.error_code == ErrorCode.NONE and t.partitions \
                and topic in self.metadata.interest:
            return t
        return await self.metadata.wait_for_topic(topic, self.max_block_ms,
                                                  self.retry_backoff_s, self.retry_backoff_max_s)

    async def _wait_for_buffer(self, size: int) -> None:
        deadline = time.monotonic() + self.max_block_ms / 1000
        while self._buffered + size > self.buffer_memory and self._buffered > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(f"Failed to allocate memory within the configured max "
                                        f"blocking time {self.max_block_ms} ms.")
            self._buffer_freed.clear()
            self._wake()
            try:
                await asyncio.wait_for(self._buffer_freed.wait(), remaining)
            except TimeoutError:
                pass

    def _append(self, tp: TopicPartition, record: _PendingRecord, size: int,
                callback: Callback | None = None
                ) -> tuple[asyncio.Future | _Callback, bool, bool]:
        dq = self._batches.get(tp)
        if dq is None:
            dq = self._batches[tp] = deque()
        b = dq[-1] if dq and not dq[-1].full and dq[-1].attempts == 0 else None
        new_batch = False
        if b is not None and b.records and b.size + size > self.batch_size:
            b.full = True
            b = None
        if b is None:
            b = _Batch(tp, time.monotonic(), self._loop)
            dq.append(b)
            self._incomplete.add(b)
            new_batch = True
        fut = self._loop.create_future() if callback is None else _Callback(callback)
        b.records.append(record)
        b.futures.append(fut)
        b.size += size
        self._buffered += size
        if b.size >= self.batch_size:
            b.full = True
        return fut, new_batch, b.full

    # ------------------------------------------------------------------ the sender

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _wake_for(self, tp: TopicPartition, full: bool) -> None:
        """Wake the sender for ``tp``'s new or full batch, unless it could do nothing with it:
        the batch is ready (full, or behind another) and the partition's leader already has
        max.in.flight requests. The first of those to complete wakes the sender
        (``_send_request``), and a drain now would walk every partition for nothing. Under
        acks=all the window is nearly always full: one drain per batch was ~8% of the perf
        tool's CPU (docs/profiles). A lone batch still wakes it, for its linger deadline."""
        if full or len(self._batches[tp]) > 1:
            leader = self.metadata.leader(tp.topic, tp.partition)
            if leader is not None and self._in_flight.get(leader.id, 0) >= self.max_in_flight:
                return
        self._wake()

    async def _run(self) -> None:
        try:
            await self._loop_forever()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug must not leave send() futures hanging forever
            self._crashed = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                       f"producer sender failed: {e!r}")
            self._fail_all(self._crashed)
            raise

    async def _loop_forever(self) -> None:
        while not self._stop_sender:
            now = time.monotonic()
            self._expire(now)
            wait = self._drain(now)
            if self.metadata.stale and self.metadata.interest:
                self.metadata.request_update()
            self._wakeup.clear()
            if wait is None:
                await self._wakeup.wait()
            elif wait > 0:
                try:
                    await asyncio.wait_for(self._wakeup.wait(), wait)
                except TimeoutError:
                    pass
            else:
                await asyncio.sleep(0)

    def _expire(self, now: float) -> None:
        """Fail queued (not in-flight) batches whose delivery timeout has passed."""
        for tp, dq in self._batches.items():
            while dq and now - dq[0].created >= self.delivery_timeout_s:
                b = dq.popleft()
                elapsed_ms = int((now - b.created) * 1000)
                self._fail(b, KafkaTimeoutError(
                    f"Expiring {len(b.records)} record(s) for {tp}:{elapsed_ms} ms has passed "
                    f"since batch creation", b.last_error, topic=tp.topic,
                    partition=tp.partition))

    def _drain(self, now: float) -> float | None:
        """Start ProduceRequests for ready batches; return seconds until the next deadline
        (None: nothing to wait for until woken)."""
        per_broker: dict[int, list[_Batch]] = {}
        sizes: dict[int, int] = {}
        soonest = math.inf  # the earliest deadline: a linger, a retry backoff, an expiry
        missing_leader = False
        force = self._flushing > 0 or self._closing
        for tp, dq in self._batches.items():
            if not dq:
                continue
            b = dq[0]
            # Expiry is a deadline too, so queued batches fail on time even without traffic.
            expiry = b.created + self.delivery_timeout_s
            if tp in self._muted:  # its batch in flight (max.in.flight 1)
                soonest = min(soonest, expiry)
                continue
            if b.attempts:
                ready_at = b.retry_at
                if ready_at > now and self._leader_moved(b):
                    # KIP-951: a retry to a new leader skips the backoff; the backoff is for
                    # asking the same broker again.
                    ready_at = now
            elif b.full or len(dq) > 1 or force:
                ready_at = now
            else:
                ready_at = b.created + self.linger_s
            if ready_at > now:
                soonest = min(soonest, ready_at, expiry)
                continue
            leader = self.metadata.leader(tp.topic, tp.partition)
            if leader is None:
                missing_leader = True
                soonest = min(soonest, now + self.retry_backoff_s, expiry)
                continue
            bid = leader.id
            if bid in self._disconnected and not self._reconnected(bid, leader.address):
                # held for the broker's return or a new leader; the metadata is asked again
                # meanwhile, and the batch still expires at its delivery timeout
                missing_leader = True
                soonest = min(soonest, now + self.retry_backoff_max_s, expiry)
                continue
            if self._in_flight.get(bid, 0) >= self.max_in_flight:
                # A completing request wakes the sender (new batches do not: _wake_for); the
                # batch's expiry stays a deadline, should the requests in flight hang.
                soonest = min(soonest, expiry)
                continue
            if b.payload is None:
                b.payload = build_producer_batch(b.records, compression=self.compression)
            b.sent_epoch = self._leader_epoch(tp)
            size = len(b.payload)
            if bid in sizes and sizes[bid] + size > self.max_request_size:
                soonest = now  # into the next request, at once
                continue
            dq.popleft()
            if dq:
                # One batch per partition per request, as in Kafka's drain; the next one is
                # looked at in the next pass at once, not when something else wakes the sender.
                soonest = now
            per_broker.setdefault(bid, []).append(b)
            sizes[bid] = sizes.get(bid, 0) + size
        if missing_leader:
            self.metadata.request_update()
        for bid, batches in per_broker.items():
            self._in_flight[bid] = self._in_flight.get(bid, 0) + 1
            if self.max_in_flight == 1:
                self._muted.update(b.tp for b in batches)
            task = asyncio.create_task(self._send_request(bid, batches))
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
        return None if soonest == math.inf else max(0.0, soonest - now)

    async def _send_request(self, broker_id: int, batches: list[_Batch]) -> None:
        broker = self.metadata.cluster.brokers.get(broker_id)
        try:
            if broker is None:
                err = KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} unknown")
                for b in batches:
                    self._on_error(b, err)
                return
            # Built inside the stream's envelope: wrapping a finished request would copy its
            # batches; a unary call sends the inner message.
            envelope = pb.ProduceStreamRequest()
            req = envelope.request
            req.acks, req.timeout_ms = self.acks, self.request_timeout_ms
            by_topic: dict[str, pb.ProduceTopicData] = {}
            for b in batches:
                td = by_topic.get(b.tp.topic)
                if td is None:
                    td = by_topic[b.tp.topic] = req.topic_data.add(topic=b.tp.topic)
                td.partition_data.add(partition=b.tp.partition, records=b.payload)
            address = broker.address
            timeout_s = self.request_timeout_ms / 1000 + _DEADLINE_MARGIN_S
            try:
                if self.produce_stream_enable:
                    stream = self._streams.get(address)
                    if stream is None:
                        stream = self._streams[address] = ProduceStream(self.pool, address)
                    resp = await stream.produce(envelope, timeout_s)
                else:
                    resp = await call(self.pool.broker(address).Produce, req, address,
                                      timeout_s)
            except KafkaError as e:
                if isinstance(e, TransportError) and \
                        e.status != grpc.StatusCode.DEADLINE_EXCEEDED:
                    self._disconnected.add(broker_id)  # the connection is gone: hold
                for b in batches:
                    self._on_error(b, e)
                return
            pending = {b.tp: b for b in batches}
            for tr in resp.responses:
                for pr in tr.partition_responses:
                    b = pending.pop(TopicPartition(tr.topic, pr.partition), None)
                    if b is None:
                        continue
                    if pr.error_code == ErrorCode.NONE:
                        self._complete(b, pr.base_offset, pr.log_append_time_ms)
                        continue
                    if pr.HasField("current_leader") and pr.current_leader.leader_id >= 0:
                        self.metadata.update_leader(b.tp.topic, b.tp.partition,
                                                    pr.current_leader.leader_id,
                                                    pr.current_leader.leader_epoch,
                                                    resp.node_endpoints)
                    err = KafkaError(pr.error_code, pr.error_message, topic=b.tp.topic,
                                     partition=b.tp.partition)
                    if pr.record_errors:  # KIP-467: which records of the batch were refused
                        err.record_errors = {e.batch_index: e.message for e in pr.record_errors}
                    self._on_error(b, err)
            for b in pending.values():
                self._on_error(b, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                             f"broker {broker_id} did not answer for {b.tp}"))
        finally:
            self._in_flight[broker_id] -= 1
            for b in batches:
                self._muted.discard(b.tp)
            self._wake()

    def _reconnected(self, broker_id: int, address: str) -> bool:
        """Whether a broker whose connection broke is connected again (asking gRPC to
        connect: an idle channel starts connecting, with its backoff capped at 1 s)."""
        try:
            state = self.pool.channel(address).get_state(try_to_connect=True)
        except Exception:  # noqa: BLE001 - a channel that cannot say: send, and learn
            state = grpc.ChannelConnectivity.READY
        if state == grpc.ChannelConnectivity.READY:
            self._disconnected.discard(broker_id)
            return True
        return False

    def _leader_epoch(self, tp: TopicPartition) -> int:
        p = self.metadata.partition(tp.topic, tp.partition)
        return p.leader_epoch if p is not None else -1

    def _leader_moved(self, b: _Batch) -> bool:
        return self._leader_epoch(b.tp) > b.sent_epoch

    def _on_error(self, b: _Batch, err: KafkaError) -> None:
        b.attempts += 1
        b.last_error = err
        if err.invalidates_metadata and not self._leader_moved(b):
            # No KIP-951 hint applied: refresh now, not a retry.backoff after the last
            # refresh, and wake the sender when the answer is in, so the batch goes to the
            # new leader as soon as the metadata names one (see _drain), not after a fixed
            # backoff (a controlled shutdown moves thousands of leaders at once).
            task = self.metadata.request_update(immediate=True)
            if task is not None:
                task.add_done_callback(lambda _: self._wake())
        now = time.monotonic()
        can_retry = (err.retriable and not self._closed
                     and (self.retries is None or b.attempts <= self.retries)
                     and now - b.created < self.delivery_timeout_s)
        if not can_retry:
            self._fail(b, err)
            return
        backoff = min(self.retry_backoff_s * (2 ** (b.attempts - 1)), self.retry_backoff_max_s)
        b.retry_at = now + backoff * random.uniform(0.8, 1.2)
        # Kafka re-enqueues at the head of the partition's queue (RecordAccumulator.reenqueue).
        self._batches.setdefault(b.tp, deque()).appendleft(b)

    def _complete(self, b: _Batch, base_offset: int, log_append_time: int) -> None:
        topic, partition = b.tp
        offset = base_offset if base_offset >= 0 else -1
        step = 1 if base_offset >= 0 else 0
        append_time = log_append_time >= 0
        for fut, r in zip(b.futures, b.records):
            if not fut.done():
                key, value = r.key, r.value
                fut.set_result(_new_tuple(RecordMetadata, (
                    topic, partition, offset,
                    log_append_time if append_time else r.timestamp,
                    len(key) if key is not None else -1,
                    len(value) if value is not None else -1)))
            offset += step
        self._release(b)

    def _fail(self, b: _Batch, err: BaseException) -> None:
        per_record = getattr(err, "record_errors", None)
        for i, fut in enumerate(b.futures):
            if not fut.done():
                fut.set_exception(err if not per_record else _record_error(err, per_record, i))
        self._release(b)

    def _release(self, b: _Batch) -> None:
        if b in self._incomplete:
            self._incomplete.discard(b)
            self._buffered -= b.size - HEADER_SIZE
            if self._buffer_freed is not None:
                self._buffer_freed.set()
        if not b.done.done():
            b.done.set_result(None)

    def _fail_all(self, err: KafkaError) -> None:
        for dq in self._batches.values():
            while dq:
                self._fail(dq.popleft(), err)
        for b in list(self._incomplete):
            self._fail(b, err)
