"""The log cleaner's threads (design.md#compaction): Kafka's LogCleaner and CleanerThread.

``log.cleaner.threads`` threads, off the event loop and off the log dirs' executors, each
repeatedly takes the dirtiest compacted log (log_cleaner_manager.py), cleans it (cleaner.py)
and records the round's stats; with nothing to clean it sleeps ``log.cleaner.backoff.ms``.
A round reads segments on its own thread and writes only its own ``.cleaned`` files there;
the swap into the log runs on the log's dir executor (``run_in_dir``), where every change of a
log's segment list runs, so reads and appends never see a half-swapped log.

Waiting for its swap, a cleaner keeps checking whether its round was aborted (a deletion of
the log, which runs on that same executor and waits for the abort) or the cleaner is shutting
down: the swap, still queued, is then cancelled - never a wait for a job queued behind the
caller that waits for us.

Errors of a round (Kafka's CleanerThread.cleanLog and tryCleanFilthiestLog): an abort, or any
error of a log that changed under the round (truncated, closed, moved, failed), ends it
quietly; an I/O error goes to the log dir failure channel (KIP-112: the dir's handling
decides); any other error marks the partition uncleanable in its dir.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker.storage.cleaner import Cleaner, CleanerStats
from broker.storage.errors import KafkaStorageError, LogCleaningError, LogClosedError
from broker.storage.fileops import FileOps
from broker.storage.log import CleaningAbortedError
from broker.storage.log_cleaner_manager import CleanableLogs, LogCleanerManager, PreCleanStats
from broker.storage.offset_map import SkimpyOffsetMap
from broker.storage.segment_file import SegmentClosedError
from common.names import TopicPartition

if TYPE_CHECKING:
    from broker.storage.log import Log
    from common.config import Config

_log = logging.getLogger(__name__)
_POLL_S = 0.05  # how often a cleaner waiting for its swap checks for an abort
DELETE_ABORT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class CleanerConfig:
    """Kafka's CleanerConfig, from the broker's ``log.cleaner.*`` properties."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_size: int = 512 * 1024
    io_buffer_load_factor: float = 0.9
    io_max_bytes_per_second: float = float("inf")
    backoff_ms: int = 15000
    max_message_size: int = 1048588

    @classmethod
    def from_config(cls, config: Config) -> CleanerConfig:
        return cls(config["log.cleaner.enable"], config["log.cleaner.threads"],
                   config["log.cleaner.dedupe.buffer.size"], config["log.cleaner.io.buffer.size"],
                   config["log.cleaner.io.buffer.load.factor"],
                   config["log.cleaner.io.max.bytes.per.second"],
                   config["log.cleaner.backoff.ms"], config["message.max.bytes"])


class Throttler:
    """Kafka's Throttler: all cleaners' reads and writes together at most ``rate`` bytes/s,
    measured over 300 ms periods."""

    def __init__(self, rate: float, period_s: float = 0.3):
        self.rate = rate
        self.period_s = period_s
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._bytes = 0.0

    def maybe_throttle(self, n: int) -> None:
        if self.rate == float("inf"):
            return
        with self._lock:
            self._bytes += n
            elapsed = time.monotonic() - self._start
            if elapsed < self.period_s:
                return
            sleep = self._bytes / self.rate - elapsed
            self._start, self._bytes = time.monotonic(), 0.0
        if sleep > 0:
            time.sleep(sleep)


class _Shutdown(Exception):
    """The cleaner is stopping: the round ends where it is."""


class _SwapJob:
    """A swap queued on a log dir's executor that a cleaner can still call off."""

    def __init__(self, fn: Callable[[], None]):
        self.fn = fn
        self._lock = threading.Lock()
        self._started = False
        self._cancelled = False

    def __call__(self) -> None:
        with self._lock:
            if self._cancelled:
                raise CleaningAbortedError("the swap was called off before it ran")
            self._started = True
        self.fn()

    def cancel(self) -> bool:
        with self._lock:
            if self._started:
                return False
            self._cancelled = True
            return True


class CleanerLogs(CleanableLogs, Protocol):
    """What the LogCleaner needs of the LogManager besides the logs."""

    def call_in_dir(self, log_dir: str, fn: Callable[[], None]) -> concurrent.futures.Future:
        ...


class LogCleaner:
    def __init__(self, config: CleanerConfig, logs: CleanerLogs, log_dirs: list[str],
                 fileops: FileOps, clock: Callable[[], int],
                 report_failure: Callable[[str, BaseException], None] = lambda d, e: None,
                 events=None):
        self.config = config
        self.logs = logs
        self.clock = clock
        self.report_failure = report_failure
        self.events = events
        self.manager = LogCleanerManager(logs, log_dirs, fileops, clock, report_failure)
        self.throttler = Throttler(config.io_max_bytes_per_second)
        self.threads: list[CleanerThread] = []
        self._stop = threading.Event()

    def startup(self) -> None:
        self._stop.clear()
        for i in range(self.config.threads):
            t = CleanerThread(self, i)
            self.threads.append(t)
            t.start()

    def shutdown(self) -> None:
        self._stop.set()
        for t in self.threads:
            t.join()
        self.threads.clear()

    # ------------------------------------------------------------------ the log manager's calls

    def abort_cleaning(self, tp: TopicPartition,
                       timeout_s: float | None = DELETE_ABORT_TIMEOUT_S) -> None:
        self.manager.abort_cleaning(tp, timeout_s)

    def update_checkpoints(self, log_dir: str, remove: TopicPartition | None = None) -> None:
        self.manager.update_checkpoints(log_dir, remove=remove)

    def maybe_truncate_checkpoint(self, log_dir: str, tp: TopicPartition, offset: int) -> None:
        self.manager.maybe_truncate_checkpoint(log_dir, tp, offset)

    def alter_checkpoint_dir(self, tp: TopicPartition, source: str, dest: str) -> None:
        self.manager.alter_checkpoint_dir(tp, source, dest)

    def handle_log_dir_failure(self, log_dir: str) -> None:
        self.manager.handle_log_dir_failure(log_dir)

    def await_cleaned(self, tp: TopicPartition, offset: int, timeout_s: float = 60.0) -> bool:
        """Kafka's awaitCleaned (for tests): the checkpoint of ``tp`` reached ``offset``."""
        deadline = time.monotonic() + timeout_s
        while self.manager.all_checkpoints().get(tp, -1) < offset:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    # ------------------------------------------------------------------ gauges (Kafka's)

    def max_buffer_utilization_percent(self) -> float:
        return max((t.last_stats.buffer_utilization for t in self.threads), default=0.0) * 100

    def cleaner_recopy_percent(self) -> int:
        stats = [t.last_stats for t in self.threads]
        written = sum(s.bytes_written for s in stats)
        return int(100 * written / max(sum(s.bytes_read for s in stats), 1))

    def max_clean_time_secs(self) -> float:
        return max((t.last_stats.elapsed_secs for t in self.threads), default=0.0)

    def max_compaction_delay_secs(self) -> float:
        return max((t.last_pre_clean_stats.max_compaction_delay_ms for t in self.threads),
                   default=0) / 1000

    def dead_thread_count(self) -> int:
        return sum(not t.is_alive() and not self._stop.is_set() for t in self.threads)

    def max_dirty_percent(self) -> int:
        return int(100 * self.manager.dirtiest_ratio)

    def time_since_last_run_ms(self) -> int:
        return self.clock() - self.manager.time_of_last_run


class CleanerThread(threading.Thread):
    def __init__(self, owner: LogCleaner, thread_id: int):
        super().__init__(name=f"kafka-log-cleaner-thread-{thread_id}", daemon=True)
        self.owner = owner
        c = owner.config
        threads = max(c.threads, 1)
        self.cleaner = Cleaner(
            thread_id, SkimpyOffsetMap(min(c.dedupe_buffer_size // threads, (1 << 31) - 1)),
            io_buffer_size=c.io_buffer_size // threads // 2,
            max_io_buffer_size=c.max_message_size, load_factor=c.io_buffer_load_factor,
            check_done=self._check_done, throttle=owner.throttler.maybe_throttle,
            swap=self._swap)
        self.last_stats = CleanerStats(end_s=0.0, start_s=0.0)
        self.last_pre_clean_stats = PreCleanStats()
        self._dir = ""
        self._tp: TopicPartition | None = None

    def run(self) -> None:
        stop = self.owner._stop
        while not stop.is_set():
            try:
                cleaned = self._clean_filthiest_log()
            except _Shutdown:
                return
            if not cleaned:
                stop.wait(self.owner.config.backoff_ms / 1000)
            self.owner.manager.maintain_uncleanable()

    def _check_done(self, tp: TopicPartition) -> None:
        if self.owner._stop.is_set():
            raise _Shutdown()
        self.owner.manager.check_aborted(tp)

    def _swap(self, log: Log, fn: Callable[[], None]) -> None:
        job = _SwapJob(fn)
        fut = self.owner.logs.call_in_dir(self._dir, job)
        while True:
            try:
                return fut.result(timeout=_POLL_S)
            except concurrent.futures.TimeoutError:
                try:
                    self._check_done(log.tp)
                except (_Shutdown, CleaningAbortedError):
                    if job.cancel():
                        raise
                    return fut.result()  # already running: it finishes first

    def _clean_filthiest_log(self) -> bool:
        manager = self.owner.manager
        pre = PreCleanStats()
        grabbed = manager.grab_filthiest_compacted_log(pre)
        if grabbed is None:
            return False
        self.last_pre_clean_stats = pre
        tp, log, d, candidate = grabbed
        self._dir, self._tp = d, tp
        truncations = log.truncations
        end = None
        try:
            end, stats = self.cleaner.clean(log, candidate.first_dirty_offset,
                                            candidate.first_uncleanable_offset,
                                            self.owner.clock())
            self.last_stats = stats
            self._record(tp, candidate.first_dirty_offset, end, stats)
        except _Shutdown:
            raise
        except (CleaningAbortedError, SegmentClosedError, LogClosedError):
            pass  # aborted, or its log went: let it go
        except Exception as e:  # noqa: BLE001 - Kafka's LogCleaningException handling
            if _changed(log, truncations):
                pass  # whatever broke, it broke on a log the round no longer owns
            elif isinstance(e, (OSError, KafkaStorageError)):
                self.owner.report_failure(d, e if isinstance(e, KafkaStorageError) else
                                          LogCleaningError(d, str(tp), e))
            else:
                _log.warning("cleaning %s failed, marking it uncleanable: %r", tp, e)
                manager.mark_uncleanable(d, tp)
                if self.owner.events is not None:
                    self.owner.events.warning("log_cleaning_failed", partition=str(tp),
                                              log_dir=d, error=repr(e)[:300])
        finally:
            manager.done_cleaning(tp, d, end)
        return True

    def _record(self, tp: TopicPartition, start: int, end: int, s: CleanerStats) -> None:
        """Kafka's recordStats: the round's summary, as an event."""
        if self.owner.events is None:
            return
        self.owner.events.info(
            "log_cleaned", partition=str(tp), cleaner=self.cleaner.id,
            dirty_section=[start, end], bytes_read=s.bytes_read,
            bytes_written=s.bytes_written, messages_read=s.messages_read,
            messages_written=s.messages_written, seconds=round(s.elapsed_secs, 3),
            buffer_utilization=round(s.buffer_utilization, 3))


def _changed(log: Log, truncations: int) -> bool:
    return log.closed or log.moved_to is not None or log.failed is not None or \
        log.truncations != truncations
