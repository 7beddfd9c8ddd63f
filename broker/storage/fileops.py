"""The one seam every file operation of the storage engine goes through.

``FileOps`` is the real thing: thin wrappers over ``os``. ``FaultInjectingFileOps`` sits behind
the same interface and lets a test make a chosen log dir (or any path prefix) fail with a chosen
errno (EIO, ENOSPC, EROFS...) or become slow, for the faults that cannot be produced for real on
demand (design.md#storage, design.md#jbod JBOD failures, design.md#kip-501 slow leader reads).
Errors raised here are plain ``OSError``; the storage classes wrap them into the storage-error
hierarchy with the log dir and partition.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
import time
from dataclasses import dataclass

IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024
OPS = frozenset({"open", "write", "pread", "fsync", "truncate", "rename", "unlink", "mkdir",
                 "listdir", "read_file", "rmdir"})


class FileOps:
    """Real file operations (the default)."""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def writev(self, fd: int, buffers, total: int | None = None) -> int:
        """Write all of ``buffers`` (``total`` is their length, if the caller knows it)."""
        if len(buffers) > IOV_MAX:
            return sum(self.writev(fd, buffers[i:i + IOV_MAX])
                       for i in range(0, len(buffers), IOV_MAX))
        if total is None:
            total = sum(len(b) for b in buffers)
        written = os.writev(fd, buffers)
        # Loop on short writes (rare for regular files, possible near ENOSPC).
        if written == total:
            return written
        data = b"".join(bytes(b) for b in buffers)
        while written < total:
            written += os.write(fd, data[written:])
        return total

    def pwrite(self, fd: int, data, offset: int) -> int:
        return os.pwrite(fd, data, offset)

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        return os.pread(fd, n, offset)

    def dup(self, fd: int) -> int:
        """A second descriptor of an open file: a zero-copy Fetch answer holds one while its
        bytes go to the socket, so a segment deleted or closed meanwhile stays readable."""
        return os.dup(fd)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fsize(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def mkdir(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def rmtree(self, path: str) -> None:
        if os.path.exists(path):
            shutil.rmtree(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def read_file(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def write_file_atomically(self, path: str, data: bytes, fsync: bool = True) -> None:
        """Write to ``path.tmp``, fsync it, rename over ``path``, fsync the directory.

        A crash at any point leaves either the old file or the new one, never a torn one
        (Kafka's CheckpointFile does the same). With ``fsync=False`` a process crash still
        leaves one or the other, but a power loss may leave either, or an empty file: for
        files the reader can rebuild (the leader-epoch checkpoint, see Log).
        """
        tmp = path + ".tmp"
        fd = self.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self.writev(fd, [data])
            if fsync:
                self.fsync(fd)
        finally:
            self.close(fd)
        self.replace(tmp, path)
        if fsync:
            self.fsync_dir(os.path.dirname(path) or ".")


@dataclass
class _Fault:
    prefix: str
    ops: frozenset[str]
    err: int | None  # errno to raise, or None for a delay only
    delay_s: float
    remaining: int | None  # how many more times it fires; None = until cleared


class _Hold:
    def __init__(self, prefix: str, ops: frozenset[str], thread: threading.Thread | None = None):
        self.prefix = prefix
        self.ops = ops
        self.thread = thread  # only this thread's operations block (None: every thread's)
        self.entered = threading.Event()  # an operation is blocked here
        self._released = threading.Event()

    def wait(self) -> None:
        self.entered.set()
        self._released.wait()

    def release(self) -> None:
        self._released.set()


class FaultInjectingFileOps(FileOps):
    """FileOps that fails or slows operations under chosen path prefixes, for tests.

    ``fail(prefix, errno.EIO)`` makes every operation on a path under ``prefix`` raise
    ``OSError(EIO)``; ``ops=`` narrows it to some operations (names in ``OPS``); ``times=``
    makes it fire only that often. ``slow(prefix, 0.5, ops={"pread"})`` delays matching
    operations instead. fd-based operations are matched by the path the fd was opened with.
    """

    def __init__(self) -> None:
        self._faults: list[_Fault] = []
        self._partials: list[_Fault] = []
        self._holds: list[_Hold] = []
        self._paths: dict[int, str] = {}
        self._lock = threading.Lock()

    def fail(self, prefix: str, err: int = errno.EIO, ops=None, times: int | None = None) -> None:
        with self._lock:
            self._faults.append(_Fault(os.path.abspath(prefix), frozenset(ops or OPS), err, 0.0,
                                       times))

    def partial_write(self, prefix: str, nbytes: int, err: int = errno.ENOSPC,
                      times: int | None = 1) -> None:
        """The next write(s) under ``prefix`` put only their first ``nbytes`` bytes on disk
        and then fail with ``err``: what a disk filling up mid-write does."""
        with self._lock:
            self._partials.append(_Fault(os.path.abspath(prefix), frozenset({"write"}), err,
                                         float(nbytes), times))

    def hold(self, prefix: str, ops=None, thread: threading.Thread | None = None) -> _Hold:
        """Block matching operations until ``release()``: a test makes a storage call stop
        at a chosen point (``entered`` is set once one is blocked) and acts meanwhile. With
        ``thread``, only that thread's operations (a read on the read pool stops while the
        log dir's thread goes on)."""
        h = _Hold(os.path.abspath(prefix), frozenset(ops or OPS), thread)
        with self._lock:
            self._holds.append(h)
        return h

    def slow(self, prefix: str, delay_s: float, ops=None) -> None:
        with self._lock:
            self._faults.append(_Fault(os.path.abspath(prefix), frozenset(ops or OPS), None,
                                       delay_s, None))

    def clear(self, prefix: str | None = None) -> None:
        with self._lock:
            self._faults = [f for f in self._faults
                            if prefix is not None and f.prefix != os.path.abspath(prefix)]
            self._partials = [f for f in self._partials
                              if prefix is not None and f.prefix != os.path.abspath(prefix)]
            holds, self._holds = self._holds, [h for h in self._holds if prefix is not None
                                               and h.prefix != os.path.abspath(prefix)]
        for h in holds:
            if h not in self._holds:
                h.release()

    @staticmethod
    def _under(path: str, prefix: str) -> bool:
        return path == prefix or path.startswith(prefix.rstrip("/") + "/")

    def _check(self, op: str, path: str | None) -> None:
        if path is None:
            return
        if self._holds:
            abspath = os.path.abspath(path)
            with self._lock:
                me = threading.current_thread()
                holds = [h for h in self._holds
                         if op in h.ops and self._under(abspath, h.prefix)
                         and (h.thread is None or h.thread is me)]
            for h in holds:
                h.wait()
        if not self._faults:
            return
        path = os.path.abspath(path)
        delay = 0.0
        with self._lock:
            for f in self._faults:
                if op in f.ops and (path == f.prefix or path.startswith(f.prefix.rstrip("/") + "/")):  # noqa: E501
                    if f.err is None:
                        delay = max(delay, f.delay_s)
                        continue
                    if f.remaining is not None:
                        if f.remaining <= 0:
                            continue
                        f.remaining -= 1
                    raise OSError(f.err, os.strerror(f.err), path)
        if delay:
            time.sleep(delay)

    def open(self, path, flags, mode=0o644):
        self._check("open", path)
        fd = super().open(path, flags, mode)
        self._paths[fd] = path
        return fd

    def close(self, fd):
        self._paths.pop(fd, None)
        super().close(fd)

    def writev(self, fd, buffers, total=None):
        path = self._paths.get(fd)
        self._check("write", path)
        partial = self._take_partial(path)
        if partial is not None:
            data = b"".join(bytes(b) for b in buffers)
            super().writev(fd, [data[:int(partial.delay_s)]])
            raise OSError(partial.err, os.strerror(partial.err), path)
        return super().writev(fd, buffers, total)

    def _take_partial(self, path: str | None) -> _Fault | None:
        if path is None or not self._partials:
            return None
        path = os.path.abspath(path)
        with self._lock:
            for f in self._partials:
                if self._under(path, f.prefix) and (f.remaining is None or f.remaining > 0):
                    if f.remaining is not None:
                        f.remaining -= 1
                    return f
        return None

    def pwrite(self, fd, data, offset):
        self._check("write", self._paths.get(fd))
        return super().pwrite(fd, data, offset)

    def pread(self, fd, n, offset):
        self._check("pread", self._paths.get(fd))
        return super().pread(fd, n, offset)

    def dup(self, fd):
        # A region handed to sendfile is a read of the file: the same faults apply.
        self._check("pread", self._paths.get(fd))
        return super().dup(fd)

    def fsync(self, fd):
        self._check("fsync", self._paths.get(fd))
        super().fsync(fd)

    def ftruncate(self, fd, size):
        self._check("truncate", self._paths.get(fd))
        super().ftruncate(fd, size)

    def replace(self, src, dst):
        self._check("rename", dst)
        super().replace(src, dst)

    def unlink(self, path):
        self._check("unlink", path)
        super().unlink(path)

    def rmdir(self, path):
        self._check("rmdir", path)
        super().rmdir(path)

    def rmtree(self, path):
        self._check("unlink", path)
        super().rmtree(path)

    def mkdir(self, path):
        self._check("mkdir", path)
        super().mkdir(path)

    def listdir(self, path):
        self._check("listdir", path)
        return super().listdir(path)

    def read_file(self, path):
        self._check("read_file", path)
        return super().read_file(path)

    def fsync_dir(self, path):
        self._check("fsync", path)
        super().fsync_dir(path)
