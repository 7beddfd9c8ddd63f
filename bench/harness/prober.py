"""The clients the cluster figures watch availability with (bench_cluster's (b) and (c)):
``Prober`` writes one small acks=all record to each partition at a fixed interval straight to its
leader, refreshing metadata on a leader-change error as Kafka's clients do; ``ProducerLoad`` runs
the library's ``Producer`` at a fixed rate; ``outage`` and ``all_sent_ok_after`` read what they saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import Counter
from functools import partial

import grpc
import grpc.aio

from bench.harness import (
    Brokers,
)
from client import KafkaError, Producer
from common import records as rec
from common.errors import ErrorCode
from common.rpc import replog_pb2 as pb
from harness.local_cluster import LocalCluster

PROBE_VALUE_BYTES = 100
METADATA_MIN_INTERVAL_S = 0.020
_RETRY_CODES = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH,
                ErrorCode.KAFKA_STORAGE_ERROR}


async def pace(next_t: float, interval: float) -> float:
    """Sleep until the next tick of an open-loop schedule (event-loop time) and return it; a
    caller already late goes on at once and the schedule restarts from now (no burst)."""
    next_t += interval
    now = asyncio.get_running_loop().time()
    if next_t > now:
        await asyncio.sleep(next_t - now)
        return next_t
    return now


class Prober:
    """One small acks=all Produce per partition every ``interval``, straight to the leader,
    one request in flight per partition; per partition, the (sent, answered) wall-clock times
    of every successful request.
    """

    def __init__(self, brokers: Brokers, c: LocalCluster, topic: str, partitions: list[int],
                 interval: float):
        self.brokers = brokers
        self.topic = topic
        self.partitions = partitions
        self.interval = interval
        self.bootstrap = [h.address for h in c.brokers.values()]
        self.addresses: dict[int, str] = {b: h.address for b, h in c.brokers.items()}
        self.leaders: dict[int, int] = {}
        self.successes: dict[int, list[tuple[float, float]]] = {p: [] for p in partitions}
        self.errors: Counter = Counter()
        self.error_times: dict[int, list[float]] = {p: [] for p in partitions}
        self.refreshes = 0
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._refresh_task: asyncio.Task | None = None
        self._last_refresh = 0.0
        batch = rec.build_batch([rec.ProducerRecord(key=None,
                                                    value=os.urandom(PROBE_VALUE_BYTES))])
        self.payloads = {p: pb.ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
            pb.ProduceTopicData(topic=topic, partition_data=[
                pb.ProducePartitionData(partition=p, records=batch)])]).SerializeToString()
            for p in partitions}

    async def start(self) -> None:
        await self.refresh()
        self._tasks = [asyncio.create_task(self._probe(p)) for p in self.partitions]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._refresh_task is not None:
            self._refresh_task.cancel()
            with contextlib.suppress(BaseException):
                await self._refresh_task

    async def refresh(self) -> None:
        if self._refresh_task is None or self._refresh_task.done():
            self._refresh_task = asyncio.create_task(self._do_refresh())
        await asyncio.shield(self._refresh_task)

    async def _do_refresh(self) -> None:
        loop = asyncio.get_running_loop()
        wait = self._last_refresh + METADATA_MIN_INTERVAL_S - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        for addr in self.bootstrap:
            try:
                md = await self.brokers.metadata(addr, [self.topic], timeout=1.0)
            except grpc.aio.AioRpcError:
                continue
            self.refreshes += 1
            for b in md.brokers:
                self.addresses[b.broker_id] = f"{b.host}:{b.port}"
            for t in md.topics:
                if t.topic == self.topic:
                    for p in t.partitions:
                        self.leaders[p.partition] = p.leader_id
            # next time start with the broker that answered
            self.bootstrap.remove(addr)
            self.bootstrap.insert(0, addr)
            break
        self._last_refresh = loop.time()

    async def _probe(self, p: int) -> None:
        payload = self.payloads[p]
        next_t = asyncio.get_running_loop().time()
        while not self._stop.is_set():
            leader = self.leaders.get(p, -1)
            addr = self.addresses.get(leader)
            if leader < 0 or addr is None:
                self.errors["no_leader_in_metadata"] += 1
                await self.refresh()
            else:
                sent = time.time()
                try:
                    resp = await self.brokers.produce(addr)(payload, timeout=5.0)
                    code = resp.responses[0].partition_responses[0].error_code
                except grpc.aio.AioRpcError as e:
                    code = None
                    self.errors[e.code().name] += 1
                    self.error_times[p].append(time.time())
                    await self.refresh()
                else:
                    if code == 0:
                        self.successes[p].append((sent, time.time()))
                    else:
                        self.errors[ErrorCode(code).name] += 1
                        self.error_times[p].append(time.time())
                        if code in _RETRY_CODES:
                            await self.refresh()
            next_t = await pace(next_t, self.interval)

    def outage(self, p: int, t_from: float, t_to: float) -> float | None:
        return outage(self.successes[p], t_from, t_to)

    def all_sent_ok_after(self, t: float) -> bool:
        return all_sent_ok_after(self.successes, t)


def outage(successes: list[tuple[float, float]], t_from: float, t_to: float) -> float | None:
    """The longest stretch without a success (between answers) from the last success answered
    at or before ``t_from`` to the first success of a request sent at or after ``t_to``, over
    one partition's (sent, answered) successes: a late answer to a request sent
    before the event does not end the stretch early. None if either end is missing."""
    s = sorted(successes, key=lambda x: x[1])
    lo = max((i for i, (_, done) in enumerate(s) if done <= t_from), default=None)
    hi = min((i for i, (sent, _) in enumerate(s) if sent >= t_to), default=None)
    if lo is None or hi is None or hi <= lo:
        return None
    return max(s[i + 1][1] - s[i][1] for i in range(lo, hi))


def all_sent_ok_after(successes: dict[int, list[tuple[float, float]]], t: float) -> bool:
    """Every partition has a success of a request sent at or after ``t``."""
    return all(any(sent >= t for sent, _ in s) for s in successes.values())


class ProducerLoad:
    """What users run through a controlled shutdown: the library's Producer (acks=all, its
    defaults otherwise: retries until delivery.timeout.ms = 120 s, KIP-951 leader hints,
    metadata refresh on NOT_LEADER_OR_FOLLOWER) sending one small record to each of
    ``partitions`` in turn, ``rate`` records/s in all, open loop. Every record's fate is counted
    once it is settled: acknowledged (with its send and acknowledgement wall-clock times, per
    partition) or FAILED to the client (by error name) - the SPEC's "no produce request failing
    to the client"."""

    def __init__(self, c: LocalCluster, topic: str, partitions: list[int], rate: float):
        self.bootstrap = c.bootstrap_servers
        self.topic = topic
        self.partitions = partitions
        self.interval = 1.0 / rate
        self.value = os.urandom(PROBE_VALUE_BYTES)
        self.sent = 0
        self.successes: dict[int, list[tuple[float, float]]] = {p: [] for p in partitions}
        self.failed: Counter = Counter()
        self._producer: Producer | None = None
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()

    async def start(self) -> None:
        self._producer = await Producer(self.bootstrap, acks="all").start()
        await self._producer.partitions_for(self.topic)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        next_t = asyncio.get_running_loop().time()
        i = 0
        while not self._stop.is_set():
            p = self.partitions[i % len(self.partitions)]
            i += 1
            sent = time.time()
            fut = await self._producer.send(self.topic, self.value, partition=p)
            self.sent += 1
            fut.add_done_callback(partial(self._settled, p, sent))
            next_t = await pace(next_t, self.interval)

    def _settled(self, p: int, sent: float, fut: asyncio.Future) -> None:
        if fut.cancelled():
            self.failed["cancelled"] += 1
        elif (e := fut.exception()) is not None:
            self.failed[e.name if isinstance(e, KafkaError) else type(e).__name__] += 1
        else:
            self.successes[p].append((sent, time.time()))

    async def stop(self) -> None:
        """Stop sending, then wait until every record sent is settled (flush)."""
        self._stop.set()
        if self._task is not None:
            await self._task
        if self._producer is not None:
            await self._producer.flush()
            await self._producer.close()

    def acked(self) -> int:
        return sum(len(s) for s in self.successes.values())

    def max_latency_s(self, t_from: float, t_to: float) -> float | None:
        """The longest send -> acknowledgement of a record sent in [t_from, t_to]."""
        lat = [done - sent for s in self.successes.values() for sent, done in s
               if t_from <= sent <= t_to]
        return round(max(lat), 3) if lat else None
