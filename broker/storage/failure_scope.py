"""What an I/O error takes offline: the whole log dir, or only one partition's log (design.md#jbod).

design.md#jbod's ExceptionHandler starts with "from the exception context check whether entire disk
(config.logDirs entry) went down"; if so the dir goes offline with every partition in it
(steps 2.1-2.4), otherwise only the log named by the error (step 3). The decision is
``failure_scope``, a pure function of the error (its errno and whether it names a partition)
and of a probe of the dir, so it is table-tested; ``probe_log_dir`` is the probe.

design.md#jbod-open-questions (open question 1), "how to check a disk is available - a simple, fast
operation": the probe does what every log write needs the disk to do, on a scratch file in the dir
itself (``.replog-disk-probe``): stat the dir, create the file, write a few bytes, fsync it, unlink
it, fsync the dir. A read-only remount (ext4 ``errors=remount-ro``: EROFS), a full disk (ENOSPC), a
vanished mount (ENOENT/ENODEV/ENOTCONN) or a dying device (EIO on fsync) all fail it; an EIO
confined to one partition's files does not. It runs on the dir's own executor thread, behind
the work already queued there, with a timeout (``PROBE_TIMEOUT_S``): a disk that stalls the
probe past it is as unusable as one that fails it (the KIP-112 rationale for one thread per
dir: a hung disk confines its stall to that thread, and here it also convicts the dir).
A stat alone is not enough: it is answered from the inode cache of a disk that cannot write.

Some errnos condemn the dir whatever the probe says: ENOSPC/EDQUOT (the probe's few bytes may
still fit where a segment does not - Kafka takes a full dir offline too), EROFS (the whole
file system), and the errnos of a device or mount going away.
"""

from __future__ import annotations

import errno as errno_mod
import os
from dataclasses import dataclass
from enum import Enum

from broker.storage.fileops import FileOps

PROBE_FILE = ".replog-disk-probe"
PROBE_TIMEOUT_S = 5.0

# Errors that are about the file system or device under the dir, never one file of it.
DIR_WIDE_ERRNOS = frozenset({
    errno_mod.EROFS, errno_mod.ENOSPC, errno_mod.EDQUOT, errno_mod.ENODEV, errno_mod.ENXIO,
    errno_mod.ENOTCONN, errno_mod.ESTALE, errno_mod.ENOMEDIUM, errno_mod.EUCLEAN,
})


class Scope(Enum):
    LOG_DIR = "log_dir"      # design.md#jbod-step-2: the dir goes offline with all its partitions
    PARTITION = "partition"  # design.md#jbod-step-3: only the log named by the error


@dataclass(frozen=True)
class ProbeResult:
    """The disk availability check of one log dir: ``ok``, or why not (errno when an
    operation failed, ``timed_out`` when it did not finish in time)."""

    ok: bool
    errno: int | None = None
    detail: str = ""
    timed_out: bool = False


def failure_scope(err: int | None, partition: str | None, probe: ProbeResult) -> Scope:
    """The seed's "whole disk, or one log" decision.

    - the probe failed or timed out: the dir is gone (whatever the error said);
    - a dir-wide errno (EROFS, ENOSPC, ...): the dir, even if the probe's small file fit;
    - no partition named (a dir-level file: the offset checkpoints, meta.properties, the dir
      listing): the dir - every partition of it depends on those files;
    - otherwise (EIO, ENOENT... on one partition's files with a healthy dir): that partition.
    """
    if not probe.ok:
        return Scope.LOG_DIR
    if err in DIR_WIDE_ERRNOS:
        return Scope.LOG_DIR
    if partition is None:
        return Scope.LOG_DIR
    return Scope.PARTITION


def probe_log_dir(path: str, fileops: FileOps) -> ProbeResult:
    """design.md#jbod-open-questions (open question 1), answered (see the module docstring).
    Blocking: run it on the dir's executor. Never raises."""
    probe = os.path.join(path, PROBE_FILE)
    step = "stat"
    try:
        if not os.path.isdir(path):
            return ProbeResult(False, errno_mod.ENOENT, f"{path} is not a directory")
        step = "create"
        fd = fileops.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            step = "write"
            fileops.writev(fd, [b"replog disk probe\n"])
            step = "fsync"
            fileops.fsync(fd)
        finally:
            fileops.close(fd)
        step = "unlink"
        fileops.unlink(probe)
        step = "fsync dir"
        fileops.fsync_dir(path)
    except OSError as e:
        return ProbeResult(False, e.errno, f"{step} of {probe}: {e.strerror or e}")
    return ProbeResult(True)
