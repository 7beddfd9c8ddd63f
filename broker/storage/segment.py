"""One log segment: ``<base>.log`` with its ``.index`` and ``.timeindex`` (Kafka's LogSegment).

Files, named by the 20-digit base offset:

- ``.log``: v2 record batches back to back.
- ``.index``: 8-byte entries (relative offset int32, position int32). As in Kafka an entry is
  added for a batch once more than ``log.index.interval.bytes`` were written since the last one,
  keyed by the batch's *last* offset, so a lookup of offset o gives a position at or before the
  batch holding o; the reader then walks batch headers forward.
- ``.timeindex``: 12-byte entries (timestamp int64, relative offset int32), appended beside the
  offset index when the segment's max timestamp grew.

The indexes live in memory and are written to their files when the segment is rolled, flushed
or closed (Kafka mmaps them instead). An index file may therefore be stale after a crash; on load
the segment trusts its index only up to the last entry and re-scans, validates and re-indexes
the batches after it — and a segment at or after the recovery point is recovered from its first
byte. Nothing here decides anything about replication; ``Log`` drives it.

Not thread-safe: a Log serialises access (its log dir's executor thread). Reads from the fetch
read pool run beside it; the file's descriptor is used only under a reference
(``segment_file.py``), so a close on the log dir's thread never lets a read use a recycled
number: the read ends on this file's bytes, or raises SegmentClosedError.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Callable
from typing import NamedTuple

from broker.storage.fileops import FileOps
from broker.storage.segment_file import SegmentClosedError, SegmentFile
from common import records as rec
from common.errors import CorruptRecordError

OFFSET_INDEX_ENTRY = struct.Struct(">ii")
TIME_INDEX_ENTRY = struct.Struct(">qi")
_SCAN = struct.Struct(">qiibIhi")  # baseOffset .. lastOffsetDelta: 27 bytes
_SCAN_SIZE = _SCAN.size
RECOVERY_CHUNK = 1 << 20
NO_TIMESTAMP = -1


def _entry_offset(entry: tuple[int, int]) -> int:
    return entry[0]


def entry_position(entry: tuple[int, int]) -> int:
    """The position of an offset index entry (bisect key; log.py reads by position too)."""
    return entry[1]


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class BatchPosition(NamedTuple):
    position: int
    base_offset: int
    last_offset: int
    size: int


class SegmentCorruption(Exception):
    """Internal: where a scan found the first invalid batch, and why."""

    def __init__(self, position: int, reason: str):
        super().__init__(reason)
        self.position = position
        self.reason = reason


class LogSegment:
    def __init__(self, partition_dir: str, base_offset: int, fileops: FileOps,
                 index_interval_bytes: int, created_ms: int, suffix: str = ""):
        """``suffix``: ``.cleaned`` or ``.swap`` after each file's name, for a segment the
        cleaner is writing or swapping in (swap_files.py)."""
        self.dir = partition_dir
        self.base_offset = base_offset
        self.fileops = fileops
        self.index_interval_bytes = index_interval_bytes
        self.log_path = os.path.join(partition_dir, segment_name(base_offset, ".log") + suffix)
        self.index_path = os.path.join(partition_dir,
                                       segment_name(base_offset, ".index") + suffix)
        self.time_index_path = os.path.join(partition_dir,
                                            segment_name(base_offset, ".timeindex") + suffix)
        # The .log file's descriptor, used only under a reference (segment_file.py): the read
        # pool reads while the log dir's thread may close it.
        self.file: SegmentFile | None = None
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset - 1
        self.created_ms = created_ms
        self.rolling_base_ms = NO_TIMESTAMP  # max timestamp of the first batch
        self.first_batch_seen = False
        self.bytes_since_last_index = 0
        # In-memory indexes (absolute offsets) and how many entries their files already hold.
        # Offset index entries as (absolute offset, position) pairs: one list of pairs, so a
        # reader on another thread never sees an offset without its position.
        self.idx_entries: list[tuple[int, int]] = []
        self._idx_persisted = 0
        self.ti_timestamps: list[int] = []
        self.ti_offsets: list[int] = []
        self._ti_persisted = 0
        self.dirty = False  # holds data not yet fsynced
        self.index_suspect = False  # an index entry was found wrong: see _entry_lies
        self._indexes_unsynced = False  # index files written since their last fsync

    # ----------------------------------------------------------------- open / create

    @classmethod
    def create(cls, partition_dir: str, base_offset: int, fileops: FileOps,
               index_interval_bytes: int, now_ms: int, suffix: str = "") -> LogSegment:
        seg = cls(partition_dir, base_offset, fileops, index_interval_bytes, now_ms, suffix)
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        seg.file = SegmentFile(fileops, fileops.open(seg.log_path, flags), seg.log_path)
        for path in (seg.index_path, seg.time_index_path):
            fd = fileops.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            fileops.close(fd)
        return seg

    @classmethod
    def open(cls, partition_dir: str, base_offset: int, fileops: FileOps,
             index_interval_bytes: int, now_ms: int) -> LogSegment:
        """Open an existing segment, load its indexes and catch up on its unindexed tail.

        Raises SegmentCorruption if the tail holds an invalid batch (the caller recovers).
        """
        seg = cls(partition_dir, base_offset, fileops, index_interval_bytes, now_ms)
        try:
            seg.load()
        except BaseException:
            seg.close_fd()
            raise
        return seg

    def open_for_recovery(self) -> None:
        """Open the file only: ``recover()`` re-validates and re-indexes all of it."""
        self.file = SegmentFile(self.fileops,
                                self.fileops.open(self.log_path, os.O_RDWR | os.O_APPEND),
                                self.log_path)
        with self._use() as fd:
            self.size = self.fileops.fsize(fd)

    def load(self) -> None:
        """Open the file, load the indexes and validate the unindexed tail. On
        SegmentCorruption the segment stays open, so the caller can ``recover()`` it."""
        self.open_for_recovery()
        if not self._load_indexes():
            self._clear_indexes()
        if self.size >= rec.HEADER_SIZE:
            # Kafka rolls by time from the first batch's max timestamp.
            self.rolling_base_ms = self.read_batch_header(0).max_timestamp
            self.first_batch_seen = True
        start = self.idx_entries[-1][1] if self.idx_entries else 0
        if self.idx_entries:
            # Resume the walk at the last indexed batch, so the tail is validated and indexed;
            # that batch's entry is dropped and re-added by the walk.
            self._truncate_indexes_from_position(start)
            self.bytes_since_last_index = self.index_interval_bytes + 1
        self._scan(start, validate=True, expected_min_offset=self.base_offset)

    def close_fd(self) -> None:
        """Close the file: at once, or when the last read under way on it ends."""
        if self.file is not None:
            self.file.close()

    @property
    def fd(self) -> int:
        """The descriptor's number, -1 once closed: for diagnostics and tests only. Reading
        through it races a close (and the number's reuse): use ``_use()``."""
        return -1 if self.file is None else self.file.fd

    @property
    def closed(self) -> bool:
        return self.file is None or self.file.closing

    def _use(self):
        """A reference to the open file for one operation (SegmentFile.use); raises
        SegmentClosedError once the segment was closed."""
        f = self.file
        if f is None:
            raise SegmentClosedError(self.log_path)
        return f.use()

    def _pread(self, n: int, offset: int) -> bytes:
        with self._use() as fd:
            return self.fileops.pread(fd, n, offset)

    def _ftruncate(self, size: int) -> None:
        with self._use() as fd:
            self.fileops.ftruncate(fd, size)

    def dup(self) -> int:
        """A descriptor of its own for a zero-copy region (file_region.py), taken under a
        reference: it names this segment's file even if the segment closes right after."""
        with self._use() as fd:
            return self.fileops.dup(fd)

    def _load_indexes(self) -> bool:
        """Load both index files; False if either fails its sanity check (Kafka rebuilds then)."""
        fo = self.fileops
        try:
            idx = fo.read_file(self.index_path) if fo.exists(self.index_path) else b""
            tix = fo.read_file(self.time_index_path) if fo.exists(self.time_index_path) else b""
        except FileNotFoundError:
            return False
        if len(idx) % OFFSET_INDEX_ENTRY.size or len(tix) % TIME_INDEX_ENTRY.size:
            return False
        last_off, last_pos = -1, -1
        for rel, pos in OFFSET_INDEX_ENTRY.iter_unpack(idx):
            off = self.base_offset + rel
            if rel < 0 or off <= last_off or pos <= last_pos or pos >= self.size:
                return False
            self.idx_entries.append((off, pos))
            last_off, last_pos = off, pos
        last_ts, last_toff = None, -1
        for ts, rel in TIME_INDEX_ENTRY.iter_unpack(tix):
            off = self.base_offset + rel
            if rel < 0 or off < last_toff or (last_ts is not None and ts < last_ts):
                return False
            self.ti_timestamps.append(ts)
            self.ti_offsets.append(off)
            last_ts, last_toff = ts, off
        self._idx_persisted = len(self.idx_entries)
        self._ti_persisted = len(self.ti_offsets)
        if self.ti_timestamps:
            # The segment's max timestamp comes from the last entry: one header read checks it
            # (a wrong one would answer ListOffsets by time, and roll by time, wrongly).
            if not self._time_entry_holds(len(self.ti_offsets) - 1) or self.index_suspect:
                return False
            self.max_timestamp = self.ti_timestamps[-1]
            self.offset_of_max_timestamp = self.ti_offsets[-1]
        return True

    def _time_entry_holds(self, i: int) -> bool:
        """Whether time index entry ``i`` (timestamp, offset) names the max timestamp of the
        batch holding its offset, as every entry is written."""
        found = self.translate_offset(self.ti_offsets[i])
        if found is None or found.base_offset > self.ti_offsets[i]:
            return False
        h = self.read_batch_header(found.position)
        return h.max_timestamp == self.ti_timestamps[i]

    def _clear_indexes(self) -> None:
        self.index_suspect = False  # what follows rebuilds them
        self.idx_entries.clear()
        self.ti_timestamps.clear()
        self.ti_offsets.clear()
        self._idx_persisted = self._ti_persisted = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset - 1

    # ----------------------------------------------------------------- scanning / recovery

    def _scan(self, start: int, *, validate: bool, expected_min_offset: int,
              on_batch: Callable[[rec.BatchHeader], None] | None = None) -> None:
        """Walk (and optionally validate) batches from ``start`` to the end of the file,
        updating next_offset, timestamps and the indexes. Raises SegmentCorruption."""
        pos = start
        expected = expected_min_offset
        while pos < self.size:
            chunk = self._pread(min(RECOVERY_CHUNK, self.size - pos), pos)
            cpos = 0
            progressed = False
            while len(chunk) - cpos >= rec.HEADER_SIZE:
                h = rec.parse_header(chunk, cpos)
                if h.batch_length >= rec.MIN_BATCH_LENGTH and cpos + h.size > len(chunk):
                    if h.size > len(chunk) and cpos == 0 and pos + h.size <= self.size:
                        chunk = self._pread(h.size, pos)  # one large batch
                        continue
                    break
                try:
                    rec.check_header(h, len(chunk) - cpos)
                    if validate:
                        rec.verify_crc(memoryview(chunk)[cpos:cpos + h.size], h)
                except CorruptRecordError as e:
                    raise SegmentCorruption(pos + cpos, str(e)) from None
                if h.base_offset < expected:
                    raise SegmentCorruption(pos + cpos, f"batch base offset {h.base_offset} is "
                                            f"below the expected {expected}")
                if h.last_offset - self.base_offset > 0x7FFFFFFF:
                    raise SegmentCorruption(pos + cpos, f"offset {h.last_offset} does not fit "
                                            f"the segment based at {self.base_offset}")
                if not self.first_batch_seen:
                    self.rolling_base_ms = h.max_timestamp
                    self.first_batch_seen = True
                self._index_batch(h.last_offset, h.max_timestamp, pos + cpos, h.size)
                if on_batch is not None:
                    on_batch(h)
                expected = h.next_offset
                self.next_offset = h.next_offset
                cpos += h.size
                progressed = True
            if not progressed:
                raise SegmentCorruption(pos + cpos, f"{self.size - pos - cpos} bytes at the end "
                                        f"of {os.path.basename(self.log_path)} are not a whole "
                                        f"record batch")
            pos += cpos

    def recover(self, on_batch: Callable[[rec.BatchHeader], None] | None = None) -> int:
        """Re-validate every batch (CRC included), rebuild both indexes, and truncate at the
        first invalid batch. Returns the number of bytes truncated."""
        self._clear_indexes()
        self.next_offset = self.base_offset
        self.bytes_since_last_index = 0
        self.first_batch_seen = False
        try:
            self._scan(0, validate=True, expected_min_offset=self.base_offset, on_batch=on_batch)
            truncated = 0
        except SegmentCorruption as c:
            truncated = self.size - c.position
            self._ftruncate(c.position)
            self.size = c.position
            self.last_corruption = c.reason
        self._rewrite_index_files()
        return truncated

    # ----------------------------------------------------------------- append

    def _index_batch(self, last_offset: int, max_ts: int, position: int, size: int) -> None:
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index > self.index_interval_bytes:
            # Readers (the fetch read pool) bisect idx_entries without a lock while this
            # runs on the log dir's thread: an entry is one tuple appended in one list
            # operation (atomic under the GIL), so a reader sees an offset with its position.
            self.idx_entries.append((last_offset, position))
            if not self.ti_timestamps or self.max_timestamp > self.ti_timestamps[-1]:
                self.ti_timestamps.append(self.max_timestamp)
                self.ti_offsets.append(self.offset_of_max_timestamp)
            self.bytes_since_last_index = 0
        self.bytes_since_last_index += size

    def append(self, iov: list, batches: list[tuple[int, int, int]], total: int) -> None:
        """Write ``iov`` (whole batches) at the end; ``batches`` lists each one's
        (last_offset, max_timestamp, size) in order."""
        position = self.size
        try:
            with self._use() as fd:
                self.fileops.writev(fd, iov, total)
        except OSError:
            # A partial write (ENOSPC, EIO) may have left some bytes after ``position``. With
            # O_APPEND the next write would land after them while every position here assumed
            # they are not there, and recovery would later drop all that follows:
            # cut the file back. The Log refuses further writes whether or not this works.
            try:
                self._ftruncate(position)
            except OSError:
                pass
            raise
        self.dirty = True
        if not self.first_batch_seen:
            self.rolling_base_ms = batches[0][1]
            self.first_batch_seen = True
        for last_offset, max_ts, size in batches:
            self._index_batch(last_offset, max_ts, position, size)
            position += size
        self.size = position
        self.next_offset = batches[-1][0] + 1

    # ----------------------------------------------------------------- read

    def lookup(self, offset: int) -> int:
        """Position of the batch of the largest index entry <= offset, or 0."""
        entry = self._entry_for(offset)
        return 0 if entry is None else entry[1]

    def _entry_for(self, offset: int) -> tuple[int, int] | None:
        """The largest index entry <= offset, or None. Safe against a concurrent append or
        truncation (see _index_batch): the offsets list is never longer than the positions
        list as a reader sees them."""
        if self.index_suspect:
            return None
        entries = self.idx_entries
        i = bisect.bisect_right(entries, offset, key=_entry_offset) - 1
        if i < 0:
            return None
        try:
            entry = entries[i]
        except IndexError:  # truncated under us: the walk from 0 is always right
            return None
        # Truncated and appended to under us, the slot may hold a later entry: walk from 0.
        return entry if entry[0] <= offset else None

    def _checked_lookup(self, offset: int) -> int:
        """``lookup``, with the batch at the entry's position read to check it (see
        ``_entry_lies``)."""
        entry = self._entry_for(offset)
        if entry is None:
            return 0
        head = self._pread(_SCAN_SIZE, entry[1])
        if len(head) == _SCAN_SIZE:
            base, length, *_, lod = _SCAN.unpack(head)
            if base + lod == entry[0] and length >= rec.MIN_BATCH_LENGTH:
                return entry[1]
        self._entry_lies(entry)
        return 0

    def _entry_lies(self, entry: tuple[int, int]) -> None:
        """The batch at an index entry's position does not end at the entry's offset. An index
        file that passes the load's sanity check (sizes, order, bounds: Kafka's) can still be
        wrong - a bit flip, an edit - and trusting it would read, or truncate, the wrong batch.
        Unless a concurrent truncation replaced the entry, the index is no longer used: reads
        walk from the segment's start, and closing writes empty index files, so the next load
        rebuilds them from the batches."""
        if entry in self.idx_entries:
            self.index_suspect = True

    def translate_offset(self, offset: int, start: int | None = None) -> BatchPosition | None:
        """The first batch whose last offset >= ``offset``, or None if there is none.

        Batch headers are walked in chunks (one read covers an index interval and more), not
        one read per header: the walk from an index entry crosses up to
        ``log.index.interval.bytes`` of small batches. The batch at the index entry's position
        must end at the entry's offset (every entry is written so), else the walk starts over
        from the segment's start (``_entry_lies``)."""
        entry = self._entry_for(offset) if start is None else None
        pos = start if start is not None else (0 if entry is None else entry[1])
        chunk_size = max(2 * self.index_interval_bytes, 8192)
        while pos + _SCAN_SIZE <= self.size:
            buf = self._pread(min(chunk_size, self.size - pos), pos)
            cpos = 0
            while cpos + _SCAN_SIZE <= len(buf):
                base, length, _ple, _magic, _crc, _attrs, lod = _SCAN.unpack_from(buf, cpos)
                if entry is not None:
                    if base + lod != entry[0] or length < rec.MIN_BATCH_LENGTH:
                        self._entry_lies(entry)
                        return self.translate_offset(offset, start=0)
                    entry = None
                size = length + rec.LOG_OVERHEAD
                if base + lod >= offset:
                    return BatchPosition(pos + cpos, base, base + lod, size)
                if size < rec.HEADER_SIZE:
                    return None  # not a batch: nothing valid beyond (recovery truncates it)
                cpos += size
            pos += cpos if cpos else _SCAN_SIZE
        return None

    def read(self, position: int, max_bytes: int, end_position: int | None = None) -> bytes:
        end = self.size if end_position is None else min(end_position, self.size)
        n = min(max_bytes, end - position)
        if n <= 0:
            return b""
        return self._pread(n, position)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int
                                 ) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after ``start_offset`` whose timestamp
        is >= ``timestamp``, or None (Kafka's LogSegment.findOffsetByTimestamp): the time index
        gives the offset where the segment's max timestamp last stayed <= the target; the
        walk starts at the batch holding it and decodes only a batch that can hold the answer."""
        i = -1 if self.index_suspect else bisect.bisect_right(self.ti_timestamps, timestamp) - 1
        if i >= 0 and not self._time_entry_holds(i):
            self.index_suspect = True  # as a wrong offset index entry (_entry_lies)
            i = -1
        from_offset = self.ti_offsets[i] if i >= 0 else self.base_offset
        pos = self._checked_lookup(max(from_offset, start_offset))
        while pos + rec.HEADER_SIZE <= self.size:
            h = rec.parse_header(self._pread(rec.HEADER_SIZE, pos))
            size = h.batch_length + rec.LOG_OVERHEAD
            if size < rec.HEADER_SIZE:
                return None
            if h.base_offset + h.last_offset_delta >= start_offset and \
                    h.max_timestamp >= timestamp:
                for r in rec.decode_records(self._pread(size, pos), h):
                    if r.offset >= start_offset and r.timestamp >= timestamp:
                        return r.timestamp, r.offset
            pos += size
        return None

    def whole_batches_end(self, position: int, end: int) -> int:
        """The end of the last whole batch in [position, end), walking batch headers from
        ``position`` (a batch start); ``position`` when not even the first fits."""
        out = position
        chunk_size = max(2 * self.index_interval_bytes, 8192)
        pos = position
        while pos + _SCAN_SIZE <= min(end, self.size):
            buf = self._pread(min(chunk_size, self.size - pos), pos)
            cpos = 0
            while cpos + _SCAN_SIZE <= len(buf):
                size = _SCAN.unpack_from(buf, cpos)[1] + rec.LOG_OVERHEAD
                if size < rec.HEADER_SIZE or pos + cpos + size > end:
                    return out
                cpos += size
                out = pos + cpos
            if cpos == 0:
                return out
            pos += cpos
        return out

    def read_batch_header(self, position: int) -> rec.BatchHeader:
        return rec.parse_header(self._pread(rec.HEADER_SIZE, position))

    # ----------------------------------------------------------------- truncate

    def _truncate_indexes_from_position(self, position: int) -> None:
        i = bisect.bisect_left(self.idx_entries, position, key=entry_position)
        del self.idx_entries[i:]
        self._idx_persisted = min(self._idx_persisted, i)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset >= ``offset`` (so a batch straddling ``offset``
        goes whole, as in Kafka). Returns the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found.position
        removed = self.size - position
        self._ftruncate(position)
        self.size = position
        self.next_offset = found.base_offset
        self._truncate_indexes_from_position(position)
        j = bisect.bisect_left(self.ti_offsets, found.base_offset)
        del self.ti_timestamps[j:]
        del self.ti_offsets[j:]
        self._ti_persisted = min(self._ti_persisted, j)
        # Kafka resets maxTimestampSoFar from the time index's last entry after a truncation.
        if self.ti_timestamps:
            self.max_timestamp = self.ti_timestamps[-1]
            self.offset_of_max_timestamp = self.ti_offsets[-1]
        else:
            self.max_timestamp = NO_TIMESTAMP
            self.offset_of_max_timestamp = self.base_offset - 1
        self.bytes_since_last_index = 0
        if self.size == 0:
            self.first_batch_seen = False
        self._rewrite_index_files()
        self.dirty = True
        return removed

    # ----------------------------------------------------------------- persistence

    def _rewrite_index_files(self) -> None:
        self._indexes_unsynced = True
        self._write_index(self.index_path, self._encode_offset_index(0), 0, truncate=True)
        self._write_index(self.time_index_path, self._encode_time_index(0), 0, truncate=True)
        self._idx_persisted = len(self.idx_entries)
        self._ti_persisted = len(self.ti_offsets)

    def _encode_offset_index(self, start: int) -> bytes:
        base = self.base_offset
        return b"".join(OFFSET_INDEX_ENTRY.pack(o - base, p)
                        for o, p in self.idx_entries[start:])

    def _encode_time_index(self, start: int) -> bytes:
        base = self.base_offset
        return b"".join(TIME_INDEX_ENTRY.pack(t, o - base)
                        for t, o in zip(self.ti_timestamps[start:], self.ti_offsets[start:]))

    def _write_index(self, path: str, data: bytes, offset: int, *, truncate: bool = False,
                     fsync: bool = False) -> None:
        fd = self.fileops.open(path, os.O_WRONLY | os.O_CREAT)
        try:
            if truncate:
                self.fileops.ftruncate(fd, offset + len(data))
            if data:
                self.fileops.pwrite(fd, data, offset)
            if fsync:
                self.fileops.fsync(fd)
        finally:
            self.fileops.close(fd)

    def persist_indexes(self, fsync: bool = False) -> None:
        """Append the index entries not yet in the files (and fsync them if asked). Files with
        nothing new and nothing unsynced are not touched: closing thousands of idle
        partitions costs no fsync."""
        idx_new = self._idx_persisted < len(self.idx_entries)
        ti_new = self._ti_persisted < len(self.ti_offsets)
        sync = fsync and (idx_new or ti_new or self._indexes_unsynced)
        if idx_new or sync:
            self._write_index(self.index_path, self._encode_offset_index(self._idx_persisted),
                              self._idx_persisted * OFFSET_INDEX_ENTRY.size, fsync=sync)
            self._idx_persisted = len(self.idx_entries)
        if ti_new or sync:
            self._write_index(self.time_index_path, self._encode_time_index(self._ti_persisted),
                              self._ti_persisted * TIME_INDEX_ENTRY.size, fsync=sync)
            self._ti_persisted = len(self.ti_offsets)
        if sync:
            self._indexes_unsynced = False
        elif idx_new or ti_new:
            self._indexes_unsynced = True

    def flush(self) -> None:
        """fsync the log file. Indexes need no fsync here: a stale index is repaired on load."""
        if self.dirty:
            with self._use() as fd:
                self.fileops.fsync(fd)
            self.dirty = False

    def close(self) -> None:
        if not self.closed:
            try:
                if self.index_suspect:  # rebuilt from the batches at the next load
                    self._clear_indexes()
                    self._rewrite_index_files()
                self.persist_indexes()
            finally:
                self.close_fd()

    def change_suffix(self, old: str, new: str) -> None:
        """Kafka's LogSegment.changeFileSuffixes: rename the .log file, then the two indexes,
        from ``<name><old>`` to ``<name><new>`` (the clean-and-swap steps, swap_files.py).
        The open descriptor goes on naming the file."""
        for attr in ("log_path", "index_path", "time_index_path"):
            path = getattr(self, attr)
            if not path.endswith(old):
                raise ValueError(f"{path} does not end with {old!r}")
            target = path[:len(path) - len(old)] + new
            self.fileops.replace(path, target)
            setattr(self, attr, target)
        if self.file is not None:
            self.file.path = self.log_path

    def rename_to_deleted(self) -> None:
        """Rename the three files to ``<name>.deleted``; the open fd keeps serving reads."""
        for attr in ("log_path", "index_path", "time_index_path"):
            path = getattr(self, attr)
            try:
                self.fileops.replace(path, path + ".deleted")
            except FileNotFoundError:
                continue
            setattr(self, attr, path + ".deleted")

    def delete_files(self) -> None:
        self.close_fd()  # a read still under way finishes on the open (unlinked) file
        for path in (self.log_path, self.index_path, self.time_index_path):
            try:
                self.fileops.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return (f"LogSegment(base={self.base_offset}, size={self.size}, "
                f"next_offset={self.next_offset})")
