"""The broker's side of seed 003 step 2.4: "notify controller that pp partitions need to be
restarted" - one persistent sequential znode ``/restart_partitions/restart-<seq>`` per report
(ZooKeeper's Queue recipe, common/zk_layout.RestartEntry), which the controller processes and
deletes.

A report must not be lost: the partitions it names stay offline on this broker until the
controller has restarted them. So reports are queued here and written by one task that retries
while ZooKeeper is unreachable (SUSPENDED, session lost, or a write that timed out), with
exponential back-off; a report still queued when another arrives for the same log dir is
merged into it. A write that failed on a lost connection may have been applied anyway, so the
retry can write a second entry for the same partitions: the controller's processing is
idempotent (controller/decisions/restarts.py), so at-least-once is enough.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from common import zk_layout as zl
from common.names import TopicPartition

WRITE_TIMEOUT_S = 10.0


@dataclass
class _Report:
    log_dir: str
    partitions: set[TopicPartition] = field(default_factory=set)


def restart_entry(broker_id: int, broker_epoch: int, log_dir: str,
                  partitions) -> zl.RestartEntry:
    return zl.RestartEntry(broker_id, log_dir,
                           tuple(sorted((tp.topic, tp.partition) for tp in partitions)),
                           broker_epoch)


class RestartNotifier:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int],
                 write: Callable[[bytes], Awaitable[object]], events, written_counter=None,
                 backoff_s: tuple[float, float] = (0.2, 5.0)):
        """``write(data)`` creates the sequential entry (kazoo ``sequence=True``) and returns
        its path; any exception it raises is retried."""
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self._write = write
        self.events = events
        self._written_counter = written_counter
        self._backoff = backoff_s
        self._queue: list[_Report] = []
        self._wake = asyncio.Event()
        self._writing = False  # the first report is being written: nothing merges into it
        self.written: list[str] = []  # paths of the entries written, oldest first

    def request(self, log_dir: str, partitions) -> None:
        """Queue a restart of ``partitions`` lost with ``log_dir`` (merged into a queued
        report of the same dir that is not being written yet)."""
        partitions = set(partitions)
        if not partitions:
            return
        for r in self._queue[1:] if self._writing else self._queue:
            if r.log_dir == log_dir:
                r.partitions |= partitions
                break
        else:
            self._queue.append(_Report(log_dir, partitions))
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
                                partitions=[f"{t}-{p}" for t, p in entry.partitions])
