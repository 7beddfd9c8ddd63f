"""An in-memory disk behind broker/storage/fileops.py's FileOps seam, for the cluster simulation.

A real ``broker.storage.log.Log`` runs over it unchanged: segments, indexes, checkpoints and
the leader-epoch file are byte strings here. What a power loss keeps is modelled as POSIX
promises it:
    - a file's bytes survive once ``fsync(fd)`` ran after they were written;
    - a directory entry (a created, renamed or removed name) survives once ``fsync_dir`` ran
      on its directory after the change; until then the old entry (or none) is what a crash
      leaves.
``crash()`` applies exactly that: every file goes back to its last fsynced bytes and every
directory to its last fsynced entries. A clean shutdown needs nothing here: Log.close and the
checkpoints fsync what they promise to keep, and what they do not is lost by ``crash()`` only.

Deterministic: no clock, no threads; listdir is sorted.
"""

from __future__ import annotations

import errno
import os
import posixpath

from broker.storage.fileops import FileOps


class _Inode:
    __slots__ = ("data", "synced")

    def __init__(self) -> None:
        self.data = bytearray()
        self.synced = b""


class _Fd:
    __slots__ = ("append", "inode", "path", "pos")

    def __init__(self, path: str, inode: _Inode, append: bool) -> None:
        self.path, self.inode, self.append, self.pos = path, inode, append, 0


def _err(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)


class MemFileOps(FileOps):
    """One broker's disk. Paths are absolute POSIX paths; ``/`` always exists."""

    def __init__(self) -> None:
        self.files: dict[str, _Inode] = {}
        self.dirs: set[str] = {"/"}
        # the namespace a power loss leaves: path -> inode for files, and the set of dirs
        self.durable_files: dict[str, _Inode] = {}
        self.durable_dirs: set[str] = {"/"}
        self.fds: dict[int, _Fd] = {}
        self._next_fd = 3

    # ------------------------------------------------------------------ faults

    def crash(self) -> None:
        """Power loss: keep only what was fsynced (bytes, and directory entries)."""
        self.fds.clear()
        dirs = {d for d in self.durable_dirs if self._ancestors_durable(d)}
        self.dirs = dirs
        self.durable_dirs = set(dirs)
        files = {}
        for path, inode in self.durable_files.items():
            if posixpath.dirname(path) in dirs:
                inode.data = bytearray(inode.synced)
                files[path] = inode
        self.files = files
        self.durable_files = dict(files)

    def _ancestors_durable(self, d: str) -> bool:
        while d != "/":
            if d not in self.durable_dirs:
                return False
            d = posixpath.dirname(d)
        return True

    # ------------------------------------------------------------------ fds

    def _fd(self, fd: int) -> _Fd:
        f = self.fds.get(fd)
        if f is None:
            raise _err(errno.EBADF, str(fd))
        return f

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        path = posixpath.normpath(path)
        inode = self.files.get(path)
        if inode is None:
            if not flags & os.O_CREAT:
                raise _err(errno.ENOENT, path)
            if posixpath.dirname(path) not in self.dirs:
                raise _err(errno.ENOENT, path)
            inode = self.files[path] = _Inode()
        elif flags & os.O_TRUNC:
            inode.data = bytearray()
        fd = self._next_fd
        self._next_fd += 1
        self.fds[fd] = _Fd(path, inode, bool(flags & os.O_APPEND))
        return fd

    def close(self, fd: int) -> None:
        self.fds.pop(fd, None)

    def writev(self, fd: int, buffers, total: int | None = None) -> int:
        f = self._fd(fd)
        data = b"".join(bytes(b) for b in buffers)
        if f.append:
            f.inode.data += data
        else:
            self._write_at(f.inode, data, f.pos)
            f.pos += len(data)
        return len(data)

    @staticmethod
    def _write_at(inode: _Inode, data: bytes, offset: int) -> None:
        buf = inode.data
        if len(buf) < offset:
            buf += bytes(offset - len(buf))
        buf[offset:offset + len(data)] = data

    def pwrite(self, fd: int, data, offset: int) -> int:
        self._write_at(self._fd(fd).inode, bytes(data), offset)
        return len(data)

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        return bytes(self._fd(fd).inode.data[offset:offset + n])

    def fsync(self, fd: int) -> None:
        inode = self._fd(fd).inode
        inode.synced = bytes(inode.data)

    def ftruncate(self, fd: int, size: int) -> None:
        inode = self._fd(fd).inode
        if size <= len(inode.data):
            del inode.data[size:]
        else:
            inode.data += bytes(size - len(inode.data))

    def fsize(self, fd: int) -> int:
        return len(self._fd(fd).inode.data)

    # ------------------------------------------------------------------ names

    def replace(self, src: str, dst: str) -> None:
        src, dst = posixpath.normpath(src), posixpath.normpath(dst)
        if src in self.files:
            self.files[dst] = self.files.pop(src)
            return
        if src not in self.dirs:
            raise _err(errno.ENOENT, src)
        for path in [p for p in self.files if p.startswith(src + "/")]:
            self.files[dst + path[len(src):]] = self.files.pop(path)
        for d in [d for d in self.dirs if d == src or d.startswith(src + "/")]:
            self.dirs.discard(d)
            self.dirs.add(dst + d[len(src):])

    def unlink(self, path: str) -> None:
        path = posixpath.normpath(path)
        if self.files.pop(path, None) is None:
            raise _err(errno.ENOENT, path)

    def rmdir(self, path: str) -> None:
        path = posixpath.normpath(path)
        if any(posixpath.dirname(p) == path for p in list(self.files) + list(self.dirs)
               if p != path):
            raise _err(errno.ENOTEMPTY, path)
        self.dirs.discard(path)

    def mkdir(self, path: str) -> None:
        path = posixpath.normpath(path)
        while path not in self.dirs:
            self.dirs.add(path)
            path = posixpath.dirname(path)

    def rmtree(self, path: str) -> None:
        path = posixpath.normpath(path)
        for p in [p for p in self.files if p.startswith(path + "/")]:
            del self.files[p]
        for d in [d for d in self.dirs if d == path or d.startswith(path + "/")]:
            self.dirs.discard(d)

    def listdir(self, path: str) -> list[str]:
        path = posixpath.normpath(path)
        if path not in self.dirs:
            raise _err(errno.ENOENT, path)
        names = {posixpath.basename(p) for p in self.files if posixpath.dirname(p) == path}
        names |= {posixpath.basename(d) for d in self.dirs
                  if d != path and posixpath.dirname(d) == path}
        return sorted(names)

    def exists(self, path: str) -> bool:
        path = posixpath.normpath(path)
        return path in self.files or path in self.dirs

    def isdir(self, path: str) -> bool:
        return posixpath.normpath(path) in self.dirs

    def read_file(self, path: str) -> bytes:
        inode = self.files.get(posixpath.normpath(path))
        if inode is None:
            raise _err(errno.ENOENT, path)
        return bytes(inode.data)

    def fsync_dir(self, path: str) -> None:
        """The entries of ``path`` (files and subdirectories) become what a crash keeps."""
        path = posixpath.normpath(path)
        for p in [p for p in self.durable_files if posixpath.dirname(p) == path]:
            if self.files.get(p) is not self.durable_files[p]:
                del self.durable_files[p]
        for p, inode in self.files.items():
            if posixpath.dirname(p) == path:
                self.durable_files[p] = inode
        self.durable_dirs = {d for d in self.durable_dirs
                             if posixpath.dirname(d) != path or d in self.dirs or d == "/"}
        self.durable_dirs |= {d for d in self.dirs if posixpath.dirname(d) == path}
