"""The group coordinator's shell: one `GroupCoordinatorCore` per broker, stepped from one asyncio
task, with the core's effects carried out against the replica manager (Kafka's
GroupCoordinator + GroupMetadataManager plumbing: the request handlers' callbacks, the
DelayedProduce of storeGroup/storeOffsets, the scheduler's load and heartbeat purgatory).

    coordinator = GroupCoordinator(ReplicaManagerLog(rm), GroupConfig.from_config(config), events)
    coordinator.start()                     # the task; rm.on_leadership_change is hooked
    response = await coordinator.call(events.Heartbeat(group_id=..., ...))

What the shell does, and nothing else (the decisions are the core's, core.py's docstring
states the rules kept here):

- every event - a request, a leadership change, a load's records, an append's outcome, time -
  goes through one queue into one task, stamped there with the clock (never going back), so
  the core sees one event at a time in a single order;
- `Answer` resolves the future of the request it names (`call` awaits it);
- `Append` is written as one record batch through the replica manager's produce path with
  acks=all (required_acks=-1, `offsets.commit.timeout.ms`), and `AppendCompleted` is stepped
  when that produce completes: after the high watermark passed the batch, or with its error;
- `LoadPartition` reads the partition from its log start offset to its log end offset off the
  event loop (the log's own reads run on a worker thread), then steps `LoadRecords` in chunks
  and `LoadCompleted`;
- `BecameCoordinator` / `ResignedCoordinator` come from the replica manager's
  `on_leadership_change` (Kafka's onLeadershipChange: LeaderAndIsr making this broker leader
  or follower of a `__consumer_offsets` partition, StopReplica);
- a timer at `core.next_deadline_ms` steps `Tick`;
- `Emit` becomes an event-log line.

The shell needs a narrow view of the replica manager (`GroupLog`): append, read, and the
leadership notifications. `ReplicaManagerLog` is that view over broker/replica_manager.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from broker.group import effects as X
from broker.group import events as E
from broker.group.config import GroupConfig
from broker.group.core import GroupCoordinatorCore
from broker.group.records import partition_for
from common import records as rec
from common.clock import wall_ms
from common.errors import ErrorCode
from common.names import TopicPartition

OFFSETS_TOPIC = "__consumer_offsets"  # Topic.GROUP_METADATA_TOPIC_NAME
DEFAULT_COMMIT_TIMEOUT_MS = 5_000     # offsets.commit.timeout.ms
DEFAULT_LOAD_BUFFER_BYTES = 5 << 20   # offsets.load.buffer.size
_LOAD_CHUNK = 1_000                   # records per LoadRecords event

LeadershipCallback = Callable[[dict[TopicPartition, int], dict[TopicPartition, int | None]],
                              None]


class GroupLog(Protocol):
    """What the coordinator needs of the replica manager."""

    async def append(self, tp: TopicPartition, batch: bytes, timeout_ms: int
                     ) -> tuple[ErrorCode, int]:
        """Append one record batch as leader with acks=all: (NONE, base offset) once the high
        watermark passed it, else (the error, -1)."""

    async def read_all(self, tp: TopicPartition, max_bytes: int) -> list[E.LogRecord]:
        """Every data record of the partition from its log start to its log end offset (read
        off the event loop), in offset order; control batches are skipped."""

    def on_leadership_change(self, callback: LeadershipCallback) -> None:
        """Call ``callback(led, no_longer_led)`` after each leadership change."""


class ReplicaManagerLog:
    """`GroupLog` over broker/replica_manager.py's ReplicaManager."""

    def __init__(self, rm: Any):
        self.rm = rm

    async def append(self, tp: TopicPartition, batch: bytes, timeout_ms: int
                     ) -> tuple[ErrorCode, int]:
        [result] = await self.rm.produce(-1, timeout_ms, [(tp, batch)])
        return result.error, result.base_offset

    async def read_all(self, tp: TopicPartition, max_bytes: int) -> list[E.LogRecord]:
        p = self.rm.partitions.get(tp)
        if p is None or p.log is None:
            return []
        log = p.log
        return await asyncio.get_running_loop().run_in_executor(
            None, _read_records, log, max_bytes)

    def on_leadership_change(self, callback: LeadershipCallback) -> None:
        self.rm.on_leadership_change = callback


def _read_records(log: Any, max_bytes: int) -> list[E.LogRecord]:
    """Worker thread: the log's records from its start to its end (GroupMetadataManager's
    doLoadGroupsAndOffsets reads up to the log end offset, as the new leader's log is the
    partition's from now on)."""
    out: list[E.LogRecord] = []
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        data = log.read(offset, max_bytes, end)
        if not data:
            break
        for b in rec.iter_batches(data, allow_partial_tail=True):
            h = b.header
            offset = max(offset, h.next_offset)
            if h.is_control:
                continue
            for r in rec.decode_records(b.data, h):
                if r.key is not None:  # the coordinator writes keyed records only
                    out.append(E.LogRecord(r.offset, r.key, r.value))
    return out


class GroupCoordinator:
    """One per broker: the core, its queue and its task."""

    def __init__(self, log: GroupLog, config: GroupConfig | None = None, events: Any = None,
                 *, clock: Callable[[], int] = wall_ms,
                 commit_timeout_ms: int = DEFAULT_COMMIT_TIMEOUT_MS,
                 load_buffer_bytes: int = DEFAULT_LOAD_BUFFER_BYTES,
                 topic: str = OFFSETS_TOPIC):
        self.log = log
        self.config = config or GroupConfig()
        self.events = events
        self.clock = clock
        self.commit_timeout_ms = commit_timeout_ms
        self.load_buffer_bytes = load_buffer_bytes
        self.topic = topic
        self._now = clock()
        self.core = GroupCoordinatorCore(self.config, now_ms=self._now)
        self._queue: deque[E.Event] = deque()
        self._wake = asyncio.Event()
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._request_ids = itertools.count(1)
        self._task: asyncio.Task[None] | None = None
        self._jobs: set[asyncio.Task[None]] = set()
        log.on_leadership_change(self.on_leadership_change)

    @classmethod
    def from_config(cls, rm: Any, config: Any, events: Any) -> GroupCoordinator:
        """The broker's coordinator over its replica manager, from its properties."""
        return cls(ReplicaManagerLog(rm), GroupConfig.from_config(config), events,
                   commit_timeout_ms=config["offsets.commit.timeout.ms"],
                   load_buffer_bytes=config["offsets.load.buffer.size"])

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(),
                                                                name="group-coordinator")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._jobs) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None
        for f in self._waiting.values():
            if not f.done():
                f.cancel()
        self._waiting.clear()

    # ------------------------------------------------------------------ what enters

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    async def call(self, request: E.Request) -> Any:
        """Step a request; its answer (the core's response object), now or once the core
        answers it (a parked JoinGroup, SyncGroup, OffsetCommit, DeleteGroups)."""
        rid = next(self._request_ids)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        self._put(dataclasses.replace(request, request_id=rid))
        try:
            return await fut
        finally:
            self._waiting.pop(rid, None)

    def on_leadership_change(self, led: dict[TopicPartition, int],
                             no_longer_led: dict[TopicPartition, int | None]) -> None:
        """The replica manager's onLeadershipChange: onElection / onResignation for the
        partitions of __consumer_offsets among them."""
        for tp, epoch in sorted(led.items()):
            if tp.topic == self.topic and 0 <= tp.partition < self.config.num_partitions:
                self._put(E.BecameCoordinator(partition=tp.partition, epoch=epoch))
        for tp, last in sorted(no_longer_led.items()):
            if tp.topic == self.topic and 0 <= tp.partition < self.config.num_partitions:
                self._put(E.ResignedCoordinator(partition=tp.partition, epoch=last))

    def _put(self, event: E.Event) -> None:
        self._queue.append(event)
        self._wake.set()

    # ------------------------------------------------------------------ the task

    async def _run(self) -> None:
        while True:
            if not self._queue:
                deadline = self.core.next_deadline_ms
                self._wake.clear()
                if deadline is None:
                    await self._wake.wait()
                else:
                    delay = max(0, deadline - self.clock()) / 1000
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), delay)
            event = self._queue.popleft() if self._queue else E.Tick()
            self._now = max(self._now, self.clock(), self.core.now_ms)
            event = dataclasses.replace(event, now_ms=self._now)
            try:
                effects = self.core.step(event)
            except Exception as e:  # noqa: BLE001 - a core bug fails its request, not the broker
                self._log("error", "group_coordinator_step_failed", event=event.name,
                          error=f"{type(e).__name__}: {e}"[:300])
                if isinstance(event, E.Request):
                    fut = self._waiting.get(event.request_id)
                    if fut is not None and not fut.done():
                        fut.set_exception(e)
                continue
            for effect in effects:
                self._carry_out(effect)

    def _carry_out(self, effect: X.Effect) -> None:
        if isinstance(effect, X.Answer):
            fut = self._waiting.get(effect.request_id)
            if fut is not None and not fut.done():
                fut.set_result(effect.response)
        elif isinstance(effect, X.Append):
            self._job(self._append(effect))
        elif isinstance(effect, X.LoadPartition):
            self._job(self._load(effect))
        elif isinstance(effect, X.Emit):
            self._log("info", effect.name, **effect.fields)

    def _job(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    async def _append(self, effect: X.Append) -> None:
        tp = TopicPartition(self.topic, effect.partition)
        # One batch per Append: a group's records land together or not at all, as Kafka's
        # storeGroup/storeOffsets write one MemoryRecords.
        batch = rec.build_batch([rec.ProducerRecord(*r.encode()) for r in effect.records],
                                now_ms=self.clock())
        try:
            error, base = await self.log.append(tp, batch, self.commit_timeout_ms)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - the append failed: the core is told so
            self._log("error", "group_coordinator_append_failed", partition=str(tp),
                      error=f"{type(e).__name__}: {e}"[:300])
            error, base = ErrorCode.UNKNOWN_SERVER_ERROR, -1
        self._put(E.AppendCompleted(append_id=effect.append_id, error=error,
                                    base_offset=base if error is ErrorCode.NONE else -1))

    async def _load(self, effect: X.LoadPartition) -> None:
        tp = TopicPartition(self.topic, effect.partition)
        try:
            records = await self.log.read_all(tp, self.load_buffer_bytes)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - Kafka logs the failure and serves what it read
            self._log("error", "coordinator_load_failed", partition=effect.partition,
                      error=f"{type(e).__name__}: {e}"[:300])
            records = []
        for i in range(0, len(records), _LOAD_CHUNK):
            self._put(E.LoadRecords(partition=effect.partition, epoch=effect.epoch,
                                    records=tuple(records[i:i + _LOAD_CHUNK])))
        self._put(E.LoadCompleted(partition=effect.partition, epoch=effect.epoch))

    def _log(self, level: str, name: str, **fields: Any) -> None:
        if self.events is not None:
            getattr(self.events, level)(name, **fields)
