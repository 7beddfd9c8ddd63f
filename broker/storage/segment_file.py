"""A segment's open ``.log`` descriptor, shared by the log dir's thread and the read pool.

A descriptor is only a number: once closed, the kernel hands the same number to the next file
or socket opened anywhere in the process (a segment roll, a checkpoint, a gRPC core thread
that does not hold the GIL). A read-pool thread that loaded ``seg.fd`` before the log dir's
thread closed it (``Log.delete`` on StopReplica with deletion, ``close_old`` after a KIP-113
swap, ``reload_log``, a log dir taken offline) then read *another file's bytes* and served
them - to a consumer past its Read ACL, or to a follower as records (issue 42, defect 3).

So no one uses the number outside a reference: ``use()`` takes one for the length of an
operation (a pread, a walk of batch headers, the dup of a zero-copy region), ``close()`` only
marks the file closing, and the descriptor is closed when the last reference goes - by
whichever thread drops it. Until then the number cannot be recycled, and the bytes read are
the segment's own (its name may be gone: an open file stays readable after unlink). After
``close()`` a new reference is refused with ``SegmentClosedError``, which the Log turns into a
retry or a clean answer, never an I/O error of the log dir (that would take the dir offline).
Kafka gets this from the JVM: a ``FileChannel`` closed under a reader throws
``ClosedChannelException`` instead of reading through a recycled descriptor.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.storage.fileops import FileOps


class SegmentClosedError(Exception):
    """Internal: the segment's file was closed before this operation took its reference. The
    Log retries the read on what replaced it, or answers with ``LogClosedError``."""

    def __init__(self, path: str):
        super().__init__(f"{path} was closed")
        self.path = path


class SegmentFile:
    """A refcounted descriptor: closed when it is closing and no operation uses it."""

    __slots__ = ("_closing", "_fd", "_fileops", "_lock", "_users", "path")

    def __init__(self, fileops: FileOps, fd: int, path: str):
        self._fileops = fileops
        self._fd = fd
        self.path = path
        self._lock = threading.Lock()
        self._users = 0
        self._closing = False

    @property
    def fd(self) -> int:
        """The number, -1 once closing (diagnostics and tests only: never read through it)."""
        return -1 if self._closing else self._fd

    @property
    def closing(self) -> bool:
        return self._closing

    @contextmanager
    def use(self) -> Iterator[int]:
        """The descriptor, which stays this file's for the ``with`` block. Raises
        SegmentClosedError once ``close()`` was called."""
        with self._lock:
            if self._closing:
                raise SegmentClosedError(self.path)
            self._users += 1
        try:
            yield self._fd
        finally:
            with self._lock:
                self._users -= 1
                last = self._closing and self._users == 0 and self._fd >= 0
                fd = self._fd
                if last:
                    self._fd = -1
            if last:
                self._fileops.close(fd)

    def close(self) -> None:
        """Refuse new operations; close the descriptor now, or when the last one ends."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            last = self._users == 0
            fd = self._fd
            if last:
                self._fd = -1
        if last:
            self._fileops.close(fd)

    def __repr__(self) -> str:
        state = "open" if not self._closing else "closing" if self._fd >= 0 else "closed"
        return f"SegmentFile({self.path}, {state}, users={self._users})"
