"""Builders shared by the cleaner tests and the child process a kill test runs
(``python -m tests.storage.cleaner_helpers DIR N`` cleans the log in DIR and SIGKILLs itself
at its N-th file operation)."""

from __future__ import annotations

import os
import signal
import sys

from broker.storage import cleaner_rules as rules
from broker.storage.cleaner import Cleaner, log_stats
from broker.storage.fileops import FileOps
from broker.storage.log import Log, LogConfig
from broker.storage.offset_map import SkimpyOffsetMap
from common.names import TopicPartition
from common.records import ProducerRecord, build_batch, decode_all, iter_batches

TP = TopicPartition("compacted", 0)
CFG = LogConfig(segment_bytes=1024, index_interval_bytes=128, cleanup_policy="compact",
                delete_retention_ms=1000, file_delete_delay_ms=0)


def keyed(key: bytes, value: bytes | None, ts: int = 1_000) -> bytes:
    return build_batch([ProducerRecord(key, value, timestamp=ts)])


def fill(log: Log, rounds: int = 5, keys: int = 8, size: int = 40, ts: int = 1_000
         ) -> dict[int, tuple[bytes, bytes | None]]:
    """``rounds`` values for each of ``keys`` keys, one batch each; rolls, and the HW at the
    end. Returns offset -> (key, value) of everything written."""
    written = {}
    for r in range(rounds):
        for k in range(keys):
            key, value = f"k{k}".encode(), f"v{r}-{k}-".encode() * (size // 6)
            info = log.append_as_leader(keyed(key, value, ts), 0)
            written[info.first_offset] = (key, value)
    log.roll()
    log.high_watermark = log.log_end_offset
    return written


def latest(written: dict[int, tuple[bytes, bytes | None]], upto: int | None = None
           ) -> dict[bytes, tuple[int, bytes | None]]:
    """key -> (offset, value) of each key's last record (below ``upto``)."""
    out = {}
    for off in sorted(written):
        if upto is None or off < upto:
            key, value = written[off]
            out[key] = (off, value)
    return out


def records(log: Log) -> list[tuple[int, bytes, bytes | None]]:
    """Every record, read as a consumer reads (one segment per read)."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30)
        batches = list(iter_batches(data))
        if not batches:
            break
        out += [(r.offset, r.key, r.value) for r in decode_all(data)]
        offset = batches[-1].header.next_offset
    return out


def new_cleaner(swap=None, memory: int = 1 << 20, **kw) -> Cleaner:
    if swap is not None:
        kw["swap"] = swap
    return Cleaner(0, SkimpyOffsetMap(memory), io_buffer_size=4096, max_io_buffer_size=1 << 20,
                   **kw)


def clean_once(log: Log, cleaner: Cleaner, now_ms: int, checkpoint: int | None = None):
    """One round as the LogCleaner runs it: (next first dirty offset, stats), or None when the
    rules find the log not cleanable."""
    candidate, _ = rules.log_to_clean(log.tp, log_stats(log), checkpoint, now_ms)
    if candidate.cleanable_bytes == 0:
        return None
    return cleaner.clean(log, candidate.first_dirty_offset,
                         candidate.first_uncleanable_offset, now_ms)


class KillAt(FileOps):
    """FileOps that SIGKILLs its own process before its n-th mutating operation (a real kill;
    the operations counted are test_cleaner_crash.CrashAt's)."""

    def __init__(self, n: int):
        self.n = n

    def _tick(self) -> None:
        self.n -= 1
        if self.n < 0:
            os.kill(os.getpid(), signal.SIGKILL)

    def writev(self, fd, buffers, total=None):
        self._tick()
        return super().writev(fd, buffers, total)

    def pwrite(self, fd, data, offset):
        self._tick()
        return super().pwrite(fd, data, offset)

    def replace(self, src, dst):
        self._tick()
        super().replace(src, dst)

    def unlink(self, path):
        self._tick()
        super().unlink(path)

    def fsync(self, fd):
        self._tick()
        super().fsync(fd)

    def fsync_dir(self, path):
        self._tick()
        super().fsync_dir(path)

    def ftruncate(self, fd, size):
        self._tick()
        super().ftruncate(fd, size)

    def rmtree(self, path):
        self._tick()
        super().rmtree(path)


def _child(directory: str, n: int) -> None:
    log = Log.open(directory, TP, CFG, needs_recovery=False, fileops=KillAt(n))
    log.high_watermark = log.log_end_offset
    clean_once(log, new_cleaner(), now_ms=10_000)
    print("finished", flush=True)


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]))
