"""Where every storage I/O error of a log dir is reported: Kafka's LogDirFailureChannel.

Kafka (KIP-112) does not let the code that hit an I/O error decide what happens to the log dir.
It calls ``maybeAddOfflineLogDir(dir, msg, e)``, which queues the dir the *first* time it is
named (later errors of the same dir only log), and one consumer - ReplicaManager's
LogDirFailureHandler thread - takes dirs off the queue and stops serving them.

replog's LogManager reports here every ``KafkaStorageError`` (or raw ``OSError``) raised by
work run on a log dir's executor (``LogManager.run`` / ``submit`` / ``run_in_dir``), by log
creation, and by startup's dir loading; the replica manager adds the errors of reads, which run
on a separate pool. Producers run on any thread, so the channel is thread-safe, and ``take`` is
awaited on the event loop.

A failure names the partition too when the error does (``KafkaStorageError.partition``):
design.md#jbod tells apart a dead dir (step 2) from one lost log (step 3), so the channel queues the
first error of each (dir, partition) - and of (dir, no partition) - once. The consumer
(``ReplicaManager.log_dir_failure_loop``, the seed's ExceptionHandler) decides which it is
(``failure_scope``); once it marks the dir offline (``mark_offline``) every later error of that
dir is only recorded, and once a lost log is re-created (``forget``) its next error is new.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class LogDirFailure:
    """The first I/O error reported for a log dir."""

    log_dir: str
    message: str
    error: BaseException | None = None
    partition: str | None = None  # the partition the error names, if any


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failed: dict[str, LogDirFailure] = {}  # Kafka's offlineLogDirs: first per dir
        self._reported: set[tuple[str, str | None]] = set()  # (dir, partition) queued once
        self._offline: set[str] = set()  # dirs the consumer took offline
        self._queue: deque[LogDirFailure] = deque()  # Kafka's offlineLogDirQueue
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Event | None = None

    def maybe_add_offline_log_dir(self, log_dir: str, message: str,
                                  error: BaseException | None = None) -> bool:
        """Report an I/O error of ``log_dir`` (from any thread). Queued for the consumer only
        the first time its (dir, partition) is named and while the dir is not offline; True
        then. The partition is the one ``error`` names (a KafkaStorageError's)."""
        partition = getattr(error, "partition", None)
        with self._lock:
            key = (log_dir, partition)
            if log_dir in self._offline or key in self._reported:
                return False
            self._reported.add(key)
            failure = LogDirFailure(log_dir, message, error, partition)
            self._failed.setdefault(log_dir, failure)
            self._queue.append(failure)
            loop, ready = self._loop, self._ready
        if loop is not None and ready is not None:
            try:
                loop.call_soon_threadsafe(ready.set)
            except RuntimeError:  # the loop is closed: nobody is taking any more
                pass
        return True

    def mark_offline(self, log_dir: str) -> None:
        """The consumer took ``log_dir`` offline: its later errors are no news."""
        with self._lock:
            self._offline.add(log_dir)

    def forget(self, log_dir: str, partition: str) -> None:
        """A log lost alone (design.md#jbod-step-3) was re-created: its next error is reported."""
        with self._lock:
            self._reported.discard((log_dir, partition))

    def has_offline_log_dir(self, log_dir: str) -> bool:
        with self._lock:
            return log_dir in self._failed

    @property
    def offline_log_dirs(self) -> list[str]:
        with self._lock:
            return list(self._failed)

    def poll(self) -> LogDirFailure | None:
        """The next queued failure, or None."""
        with self._lock:
            return self._queue.popleft() if self._queue else None

    async def take(self) -> LogDirFailure:
        """Wait for the next queued failure (one consumer, on its event loop)."""
        while True:
            with self._lock:
                if self._queue:
                    return self._queue.popleft()
                if self._ready is None:
                    self._loop = asyncio.get_running_loop()
                    self._ready = asyncio.Event()
                self._ready.clear()
                ready = self._ready
            await ready.wait()
