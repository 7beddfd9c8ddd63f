"""The broker's side of design.md#jbod-step-2-4: "notify controller that pp partitions need to be
restarted" - one persistent sequential znode ``/restart_partitions/restart-<seq>`` per report
(ZooKeeper's Queue recipe, common/zk_layout.RestartEntry), which the controller processes and
deletes.

A report must not be lost: the partitions it names stay offline on this broker until the
controller has restarted them. So reports are queued here and written by one task that retries
while ZooKeeper is unreachable (SUSPENDED, session lost, or a write that timed out), with
exponential back-off; a report still queued when another arrives for the same log dir is
merged into it. A write that failed on a lost connection may have been applied anyway, so the
retry can write a second entry for the same partitions, possibly after the controller has
applied the first and the re-created replica has rejoined the ISR. So each partition carries
the partition epoch the broker held when it lost the replica: the
controller ignores an entry older than a restart it applied that the replica then rejoined
the ISR after (controller/decisions/restarts.py `stale_restart`: a rejoin with no restart
before it may come from the lost replica's own fetches) and otherwise applies it
idempotently, so at-least-once is enough.

Before the entry, the lost copies are added to ``/brokers/lost_replicas/<id>`` (replog's own
znode): the restart entry is deleted once processed, but the fact that the copies in that dir
are stale must outlive it. After a restart with the dir readable again, the copy there would
otherwise be loaded whenever its newer copy is in a dir that is broken at that start - placement
records (broker/storage/placement.py) decide only between two copies both found. The broker
reads the znode before loading its logs, sets those copies aside and then forgets each dir it
could read (``read_lost_replicas``/``forget_lost_replicas``), before it registers - so no copy
created afterwards can be mistaken for a lost one. A record that fails to write is retried with
the entry (``record_lost`` runs first, in the same retry loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from kazoo.exceptions import NoNodeError

from common import zk_layout as zl
from common.names import TopicPartition

WRITE_TIMEOUT_S = 10.0


@dataclass
class _Report:
    log_dir: str
    # partition -> the partition epoch held when it was lost (-1: unknown)
    partitions: dict[TopicPartition, int] = field(default_factory=dict)

    def add(self, epochs: Mapping[TopicPartition, int]) -> None:
        # The same lost replica reported twice (lost, then a LeaderAndIsr refused): the higher
        # epoch is the broker's latest view, and only an older entry can be fenced wrongly.
        for tp, e in epochs.items():
            self.partitions[tp] = max(self.partitions.get(tp, -1), e)


def restart_entry(broker_id: int, broker_epoch: int, log_dir: str,
                  partitions: Mapping[TopicPartition, int]) -> zl.RestartEntry:
    tps = sorted(partitions)
    return zl.RestartEntry(broker_id, log_dir, tuple((tp.topic, tp.partition) for tp in tps),
                           broker_epoch, tuple(partitions[tp] for tp in tps))


class RestartNotifier:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int],
                 write: Callable[[bytes], Awaitable[object]], events, written_counter=None,
                 backoff_s: tuple[float, float] = (0.2, 5.0),
                 record_lost: Callable[[zl.RestartEntry], Awaitable[object]] | None = None):
        """``write(data)`` creates the sequential entry (kazoo ``sequence=True``) and returns
        its path; ``record_lost(entry)`` runs before it (``record_lost_copies``); any exception
        either raises is retried."""
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self._write = write
        self.events = events
        self._written_counter = written_counter
        self._record_lost = record_lost
        self._backoff = backoff_s
        self._queue: list[_Report] = []
        self._wake = asyncio.Event()
        self._writing = False  # the first report is being written: nothing merges into it
        self.written: list[str] = []  # paths of the entries written, oldest first

    def request(self, log_dir: str, partitions: Iterable[TopicPartition],
                epochs: Mapping[TopicPartition, int] | None = None) -> None:
        """Queue a restart of ``partitions`` lost with ``log_dir`` (merged into a queued
        report of the same dir that is not being written yet). ``epochs``: the partition
        epoch this broker held for each when it lost it (missing: -1, an unfenced entry)."""
        epochs = epochs or {}
        lost = {tp: epochs.get(tp, -1) for tp in partitions}
        if not lost:
            return
        for r in self._queue[1:] if self._writing else self._queue:
            if r.log_dir == log_dir:
                r.add(lost)
                break
        else:
            self._queue.append(_Report(log_dir, lost))
        self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._queue)

    async def run(self) -> None:
        delay = self._backoff[0]
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            report = self._queue[0]
            entry = restart_entry(self.broker_id, self.broker_epoch(), report.log_dir,
                                  report.partitions)
            self._writing = True
            try:
                if self._record_lost is not None:
                    await asyncio.wait_for(self._record_lost(entry), WRITE_TIMEOUT_S)
                path = await asyncio.wait_for(self._write(zl.encode_restart_entry(entry)),
                                              WRITE_TIMEOUT_S)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - ZooKeeper unreachable: keep it, retry
                self.events.warning("restart_partitions_write_failed", log_dir=report.log_dir,
                                    partitions=len(report.partitions), error=str(e)[:200],
                                    retry_in_s=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._backoff[1])
                continue
            finally:
                self._writing = False
            delay = self._backoff[0]
            self._queue.pop(0)
            self.written.append(str(path))
            if self._written_counter is not None:
                self._written_counter.inc()
            self.events.warning("restart_partitions_requested", path=str(path),
                                log_dir=report.log_dir, broker_epoch=entry.broker_epoch,
                                partitions=[f"{t}-{p}" for t, p in entry.partitions],
                                partition_epochs=list(entry.partition_epochs))


async def record_lost_copies(zk, entry: zl.RestartEntry, offline_dirs: Collection[str]) -> None:
    """Add the entry's partitions to /brokers/lost_replicas/<id> under every log dir that is
    offline now. Those dirs get nothing new while this process lives, so any copy of these
    partitions there predates the loss - the dir named by a dir failure, and for a replica
    refused because some dir is offline, the dirs it may be in. Never an online dir: a log
    that failed alone was moved aside at once (``-stray``), and a copy created there later
    is legitimate."""
    lost = {d: set(entry.partitions) for d in offline_dirs}
    if not lost:
        return
    path = zl.lost_replicas_path(entry.broker)
    got = await zk.get_or_none(path)
    if got is None:
        await zk.create(path, zl.encode_lost_replicas(lost))
        return
    merged = _decode_or_empty(got[0])
    for d, tps in lost.items():
        merged.setdefault(d, set()).update(tps)
    await zk.set(path, zl.encode_lost_replicas(merged), version=got[1].version)


async def read_lost_replicas(zk, broker_id: int) -> dict[str, set[TopicPartition]]:
    got = await zk.get_or_none(zl.lost_replicas_path(broker_id))
    if got is None:
        return {}
    return {d: {TopicPartition(t, p) for t, p in tps}
            for d, tps in _decode_or_empty(got[0]).items()}


async def forget_lost_replicas(zk, broker_id: int, log_dirs) -> None:
    """Drop ``log_dirs`` (read at this start: their lost copies are set aside) from the
    broker's znode; the znode goes when nothing is left."""
    path = zl.lost_replicas_path(broker_id)
    got = await zk.get_or_none(path)
    if got is None:
        return
    lost = _decode_or_empty(got[0])
    left = {d: tps for d, tps in lost.items() if d not in set(log_dirs)}
    if left == lost:
        return
    try:
        if left:
            await zk.set(path, zl.encode_lost_replicas(left), version=got[1].version)
        else:
            await zk.delete(path, version=got[1].version)
    except NoNodeError:
        pass


def _decode_or_empty(data: bytes) -> dict[str, set[tuple[str, int]]]:
    try:
        return zl.decode_lost_replicas(data)
    except ValueError:
        return {}  # unreadable: rewritten whole by the next report
