"""A partition's log: an ordered list of segments in ``<log dir>/<topic>-<partition>/``.

This is Kafka's (Unified)Log without the replication decisions: it assigns offsets to a leader's
appends, accepts a follower's already-offset batches, serves reads bounded by an upper offset
(the high watermark for consumers, the log end offset for followers), truncates for followers,
rolls segments by size and time, deletes old segments by retention, keeps the leader-epoch cache
and recovers from a crash. The replica manager decides *when* to call these; this class decides
nothing about replication.

Threading: every mutating call runs on its log dir's single executor thread (LogManager), which
keeps write order; reads may run concurrently with appends, which only ever extend the log.
Every I/O error surfaces as a storage error naming the log dir and the partition (design.md#jbod).
"""

from __future__ import annotations

import bisect
import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from crc32c import crc32c

from broker.storage import log_validator, swap_files
from broker.storage.checkpoints import LeaderEpochCheckpointFile, MalformedCheckpointError
from broker.storage.epoch_cache import LeaderEpochCache
from broker.storage.errors import (
    KafkaStorageError,
    LogAppendError,
    LogCleaningError,
    LogClosedError,
    LogDeletionError,
    LogFlushError,
    LogLoadError,
    LogReadError,
    LogTruncationError,
)
from broker.storage.file_region import FileRegion
from broker.storage.fileops import FileOps
from broker.storage.segment import LogSegment, SegmentCorruption, entry_position
from broker.storage.segment_file import SegmentClosedError
from common import records as rec
from common.clock import wall_ms
from common.errors import CorruptRecordError, ErrorCode, OffsetOutOfRangeError, ReplogError
from common.names import TopicPartition

if TYPE_CHECKING:
    from common.config import Config


class RecordTooLargeError(ReplogError):
    error_code = ErrorCode.MESSAGE_TOO_LARGE


@dataclass(frozen=True)
class LogConfig:
    """The per-log settings, named after Kafka's ``log.*`` broker properties."""

    segment_bytes: int = 1 << 30                     # log.segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000           # log.roll.ms
    retention_ms: int = 7 * 24 * 3600 * 1000         # log.retention.ms (-1: unlimited)
    retention_bytes: int = -1                        # log.retention.bytes (-1: unlimited)
    # log.flush.interval.messages. What it promises: a record is on this broker's disk (it
    # survives a power loss) once the append that brings the unflushed count to this value
    # returns - that append fsyncs the segments written since the last flush, the directory
    # entries of segments and partition dirs created since, and moves the recovery point.
    # Records not yet flushed survive a process crash (the page cache keeps them) but not a
    # power loss; recovery then keeps a prefix of whole batches. Kafka's default (never)
    # leaves durability to replication: acks=all with min.insync.replicas.
    flush_interval_messages: int = (1 << 63) - 1
    index_interval_bytes: int = 4096                 # log.index.interval.bytes
    max_message_bytes: int = 1048588                 # message.max.bytes
    file_delete_delay_ms: int = 60000                # file.delete.delay.ms
    # topic-level only (log_validator): the codec a produced batch is stored in, and whether
    # records need a key
    compression_type: str = "producer"               # compression.type
    cleanup_policy: str = "delete"                   # cleanup.policy (log.cleanup.policy)
    # log compaction (design.md#compaction; the log.cleaner.* broker synonyms)
    delete_retention_ms: int = 86_400_000            # delete.retention.ms
    min_compaction_lag_ms: int = 0                   # min.compaction.lag.ms
    max_compaction_lag_ms: int = (1 << 63) - 1       # max.compaction.lag.ms
    min_cleanable_ratio: float = 0.5                 # min.cleanable.dirty.ratio

    @property
    def compact(self) -> bool:
        """cleanup.policy holds compact: the log cleaner compacts this log."""
        return "compact" in (p.strip() for p in self.cleanup_policy.split(","))

    @property
    def delete(self) -> bool:
        """cleanup.policy holds delete: retention by time and size applies."""
        return "delete" in (p.strip() for p in self.cleanup_policy.split(","))

    @property
    def effective_segment_ms(self) -> int:
        """Kafka's LogConfig.maxSegmentMs: a compacted log's active segment also rolls at
        max.compaction.lag.ms, or its records could never be compacted in time."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @classmethod
    def from_config(cls, config: Config) -> LogConfig:
        """The broker's log defaults from its ``log.*`` properties (Kafka's LogConfig built
        from KafkaConfig)."""
        return cls(segment_bytes=config["log.segment.bytes"], segment_ms=config.roll_ms,
                   retention_ms=config.retention_ms,
                   retention_bytes=config["log.retention.bytes"],
                   flush_interval_messages=config["log.flush.interval.messages"],
                   index_interval_bytes=config["log.index.interval.bytes"],
                   max_message_bytes=config["message.max.bytes"],
                   file_delete_delay_ms=config["file.delete.delay.ms"],
                   cleanup_policy=config["log.cleanup.policy"],
                   delete_retention_ms=config["log.cleaner.delete.retention.ms"],
                   min_compaction_lag_ms=config["log.cleaner.min.compaction.lag.ms"],
                   max_compaction_lag_ms=config["log.cleaner.max.compaction.lag.ms"],
                   min_cleanable_ratio=config["log.cleaner.min.cleanable.ratio"])

    def with_topic_overrides(self, overrides: dict[str, str] | None) -> LogConfig:
        """This (the broker's) config under a topic's overrides, as Kafka's LogConfig merges
        the topic's props over the broker defaults (LogManager.updateTopicConfig /
        TopicConfigHandler). Values were validated when written (dynamic_config)."""
        changes = {field: int(overrides[key]) for key, field in TOPIC_LOG_KEYS.items()
                   if overrides and key in overrides}
        changes.update({field: overrides[key] for key, field in TOPIC_LOG_STR_KEYS.items()
                        if overrides and key in overrides})
        changes.update({field: float(overrides[key])
                        for key, field in TOPIC_LOG_FLOAT_KEYS.items()
                        if overrides and key in overrides})
        return dataclasses.replace(self, **changes) if changes else self


# A read that finds its segment closed starts over (Log._reading); each retry needs another
# segment closed under it, so this bound is never met in practice.
_CLOSED_SEGMENT_RETRIES = 8

MAX_TIMESTAMP = -3  # ListOffsets v7 (KIP-734): the offset of the largest timestamp

# Topic-level log config key -> LogConfig field (Kafka's TopicConfig names).
TOPIC_LOG_KEYS = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_interval_messages",
    "index.interval.bytes": "index_interval_bytes",
    "max.message.bytes": "max_message_bytes",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
}
TOPIC_LOG_STR_KEYS = {"compression.type": "compression_type", "cleanup.policy": "cleanup_policy"}
TOPIC_LOG_FLOAT_KEYS = {"min.cleanable.dirty.ratio": "min_cleanable_ratio"}


def _base_offset(seg: LogSegment) -> int:
    return seg.base_offset


class CleaningAbortedError(Exception):
    """The log changed under a cleaning (truncated, retention removed a segment it rewrote,
    closed, moved, failed): its rewritten segment is not swapped in (Kafka's
    LogCleaningAbortedException)."""


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    num_records: int
    valid_bytes: int


class Log:
    def __init__(self, partition_dir: str, tp: TopicPartition, log_dir: str, config: LogConfig,
                 fileops: FileOps, clock: Callable[[], int]):
        self.dir = partition_dir
        self.tp = tp
        self.log_dir = log_dir
        self.config = config
        self.fileops = fileops
        self.clock = clock
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.recovery_point = 0
        self.high_watermark = 0
        self.unflushed_messages = 0
        self.epoch_cache = LeaderEpochCache()
        self.recovered_bytes_truncated = 0
        self.load_problems: list[str] = []  # what loading found and repaired, for the events
        # Directory entries created since the last flush (new segments; a new partition dir
        # in the log dir): fsynced by the next flush, or the files could vanish at power loss.
        self._dir_unsynced = False
        self._log_dir_unsynced = False
        self._epochs_unsynced = False  # leader-epoch-checkpoint written since the last fsync
        self._epoch_checkpoint: LeaderEpochCheckpointFile | None = None
        # Segments removed from the log (retention, truncation), renamed to .deleted and
        # waiting file.delete.delay.ms before their fds close and files go: a read already
        # under way on the read pool finishes on the open file (Kafka's asyncDeleteSegment).
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.closed = False
        # Truncations so far: a cleaning that started before one is not swapped in (its offset
        # map may hold records the truncation removed; Kafka aborts cleaning on truncation).
        self.truncations = 0
        # Set by the first I/O error of a write: the files may no longer match what this
        # object believes (a partial write, a failed index or checkpoint update), so every
        # later append, truncation or roll is refused until the log is reloaded from disk
        # (JBOD's log-dir failure handling, design.md#jbod, takes its dir offline).
        self.failed: str | None = None
        # KIP-113: set when an intra-broker move swapped a new log in for this one; work still
        # queued for this object is forwarded there (broker/alter_log_dirs.py).
        self.moved_to: Log | None = None
        # Set by the LogManager holding this log as the partition's replica: run after a
        # truncation to checkpoint the lowered recovery point at once (Kafka's
        # LogManager.truncateTo and truncateFullyAndStartAt). A checkpoint left at the old, higher point makes recovery  # noqa: E501
        # re-add leader epochs only past it, so an epoch that starts at the truncation point
        # - becoming leader right after truncating, its entry deferred - comes back after a
        # crash starting at that old point.
        self.on_truncation: Callable[[], None] | None = None

    # ------------------------------------------------------------------ loading

    @classmethod
    def open(cls, log_dir: str, tp: TopicPartition, config: LogConfig | None = None, *,
             fileops: FileOps | None = None, clock: Callable[[], int] = wall_ms,
             recovery_point: int = 0, log_start_offset: int = 0, high_watermark: int = 0,
             needs_recovery: bool = True, partition_dir: str | None = None) -> Log:
        """Open (creating if absent) the log of ``tp`` in ``log_dir``.

        With ``needs_recovery`` (no clean-shutdown marker) every segment from the one holding
        ``recovery_point`` on is re-validated batch by batch, CRCs included, and the log is
        truncated at the first invalid batch; later segments are deleted.
        """
        fileops = fileops or FileOps()
        partition_dir = partition_dir or os.path.join(log_dir, tp.dir_name)
        log = cls(partition_dir, tp, log_dir, config or LogConfig(), fileops, clock)
        try:
            log._load(recovery_point, log_start_offset, high_watermark, needs_recovery)
        except OSError as e:
            log._close_fds()
            raise LogLoadError(log_dir, str(tp), e) from e
        except KafkaStorageError:
            log._close_fds()
            raise
        return log

    def _load(self, recovery_point: int, log_start_offset: int, high_watermark: int,
              needs_recovery: bool) -> None:
        fo = self.fileops
        if not fo.exists(self.dir):
            self._log_dir_unsynced = True
        fo.mkdir(self.dir)
        self._epoch_checkpoint = LeaderEpochCheckpointFile(self.log_dir, self.dir, str(self.tp),
                                                           fo)
        try:
            epochs = self._epoch_checkpoint.read()
            rebuild_epochs = False
        except MalformedCheckpointError as e:
            # Written without fsync (see _persist_epochs): after a power loss it may be empty
            # or torn. Every segment is then recovered, which rebuilds the cache from the
            # batches' leader epochs.
            self.load_problems.append(str(e))
            epochs, rebuild_epochs = [], True
        self.epoch_cache = LeaderEpochCache(epochs, persist=self._persist_epochs)
        now = self.clock()
        interval = self.config.index_interval_bytes
        self._complete_interrupted_swaps(interval, now)
        bases = []
        for name in fo.listdir(self.dir):
            stem, ext = os.path.splitext(name)
            if ext == ".log" and stem.isascii() and stem.isdigit():
                bases.append(int(stem))
        bases.sort()
        # Recovery begins at the segment holding the recovery point (Kafka's LogLoader).
        first_to_recover = len(bases)
        if needs_recovery:
            first_to_recover = max(0, bisect.bisect_right(bases, recovery_point) - 1)
        if rebuild_epochs:
            first_to_recover = 0
        for i, base in enumerate(bases):
            if self.segments and base != self.segments[-1].next_offset:
                # Segments of an uncompacted log are contiguous: each starts where the previous
                # one ends. A gap or an overlap means files were lost or mixed up; keep the
                # contiguous prefix (the later segments go, as after a truncation).
                self.load_problems.append(
                    f"segment {base} does not start at the previous segment's end "
                    f"{self.segments[-1].next_offset}: it and later segments are deleted")
                self._delete_segment_files(bases[i:], interval, now)
                break
            seg = LogSegment(self.dir, base, fo, interval, now)
            try:
                if i >= first_to_recover:
                    seg.open_for_recovery()
                    truncated = seg.recover(on_batch=self._assign_epoch_on_recovery)
                else:
                    seg.load()
                    truncated = 0
            except SegmentCorruption as c:
                # A segment before the recovery point whose unindexed tail fails validation:
                # the disk changed under flushed data. Recover it as an unflushed one - truncate
                # at its first invalid batch - and drop every later segment (this
                # path used the previous iteration's segment, or none at all).
                self.load_problems.append(f"segment {base} is corrupt before the recovery "
                                          f"point: {c.reason}")
                truncated = max(1, seg.recover(on_batch=self._assign_epoch_on_recovery))
            except BaseException:
                seg.close_fd()
                raise
            # A segment recovered past the recovery point may hold bytes a killed process left
            # in the page cache, never fsynced: the next flush must sync it before the recovery
            # point moves past them, as Kafka's LocalLog.flush syncs every segment from the
            # recovery point on (tests/storage/test_recovery.py::
            # test_the_flush_after_a_process_crash_fsyncs_the_recovered_unflushed_segments).
            seg.dirty = seg.dirty or i >= first_to_recover or bool(truncated)
            self._add_segment(seg)
            if truncated:
                self.recovered_bytes_truncated += truncated
                # Everything after the first invalid batch is gone: drop the later segments.
                self._delete_segment_files(bases[i + 1:], interval, now)
                break
        if not self.segments:
            start = max(log_start_offset, 0)
            self._add_segment(LogSegment.create(self.dir, start, fo, interval, now))
            self._dir_unsynced = True
        leo = self.log_end_offset
        self.log_start_offset = min(max(log_start_offset, self.segments[0].base_offset), leo)
        # Recovered bytes read back from the page cache are valid but not necessarily on disk:
        # the recovery point stays at the checkpoint's (or the LEO, if smaller) until the next
        # flush, so a power loss after this start is recovered from there again.
        self.recovery_point = min(recovery_point, leo)
        self.high_watermark = min(max(high_watermark, self.log_start_offset), leo)
        self.epoch_cache.truncate_from_end(leo)
        self.epoch_cache.truncate_from_start(self.log_start_offset)

    def _complete_interrupted_swaps(self, interval: int, now: int) -> None:
        """Kafka's LogLoader passes over the leftovers of an interrupted operation
        (swap_files.py): .deleted and .tmp files go, a clean-and-swap cut short before all
        its files were .swap is undone, and one cut short after is completed."""
        fo = self.fileops
        names = fo.listdir(self.dir)
        first = swap_files.first_pass(names)
        for name in first.delete:
            fo.unlink(os.path.join(self.dir, name))
        if any(n.endswith((swap_files.CLEANED, swap_files.SWAP)) for n in first.delete):
            self.load_problems.append("an interrupted log cleaning was undone: its "
                                      ".cleaned/.swap files were deleted")
        ends = {}
        for base in first.swap_logs:
            swap = LogSegment(self.dir, base, fo, interval, now, suffix=swap_files.SWAP)
            try:
                swap.open_for_recovery()
                swap._scan(0, validate=True, expected_min_offset=base)
            except SegmentCorruption as c:  # fsynced before its rename: not expected
                self.load_problems.append(f"swap segment {base} is corrupt: {c.reason}")
            finally:
                swap.close_fd()
            ends[base] = swap.next_offset
        left = [n for n in names if n not in first.delete]
        replaced = swap_files.replaced_files(left, ends)
        for name in replaced:
            fo.unlink(os.path.join(self.dir, name))
        renames = swap_files.swap_renames(left)
        for src, dst in renames:
            fo.replace(os.path.join(self.dir, src), os.path.join(self.dir, dst))
        if renames:
            self.load_problems.append(f"an interrupted log cleaning was completed: segments "
                                      f"{sorted(ends)} swapped in")
        if first.delete or replaced or renames:
            fo.fsync_dir(self.dir)

    def _persist_epochs(self, entries: list[tuple[int, int]]) -> None:
        """The epoch cache changed: rewrite ``leader-epoch-checkpoint`` atomically but without
        fsync, and fsync it with the next flush (Kafka's KAFKA-15046). An fsync per change
        put two disk syncs on every new leader epoch - ~1 ms each, one partition after the
        other on the log dir's thread: a broker taking over 10k leaderships spent ~10 s on
        them. What the unsynced file may lose at a power loss lies past the recovery point
        (the flush that moves it also syncs this file), so recovery rebuilds it from the
        batches; a torn file makes the load recover every segment instead."""
        self._epoch_checkpoint.write(entries, fsync=False)
        self._epochs_unsynced = True

    def write_deferred_epochs(self) -> None:
        """Write a leader epoch that becoming leader recorded only in memory
        (``assign(defer=True)``), as ``_persist_epochs`` writes any change. Run soon after
        LeaderAndIsr is answered, off its path. Until it runs, a crash loses only an entry at
        or past the checkpointed recovery point -- the flush that moves the recovery point
        writes and syncs the file first, and a truncation that lowers it checkpoints it at once
        (``on_truncation``) -- and recovery rebuilds that from the batches' leader epochs. An epoch
        with no batch yet is dropped by every load anyway (``truncate_from_end(LEO)``, as
        Kafka's LogLoader does). After a KIP-113 swap it writes the live copy's file: this
        one's dir is renamed aside. Raises
        KafkaStorageError (CheckpointIOError) as every epoch write does."""
        if self.moved_to is not None:
            return self.moved_to.write_deferred_epochs()
        if not self.closed:
            self.epoch_cache.flush_deferred()

    def _delete_segment_files(self, bases: list[int], interval: int, now: int) -> None:
        for base in bases:
            LogSegment(self.dir, base, self.fileops, interval, now).delete_files()

    def _assign_epoch_on_recovery(self, h: rec.BatchHeader) -> None:
        if h.partition_leader_epoch >= 0 and h.partition_leader_epoch > \
                self.epoch_cache.latest_epoch():
            self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)

    def _add_segment(self, seg: LogSegment) -> None:
        self.segments.append(seg)
        self._bases.append(seg.base_offset)

    def _close_fds(self) -> None:
        """Close every segment file (a read under way ends on its file first: segment_file.py).
        The log is closed from here on, so a read that finds a segment closed answers
        ``LogClosedError`` instead of retrying."""
        self.closed = True
        for _, seg in self._pending_deletes:
            seg.close_fd()
        for seg in self.segments:
            seg.close_fd()

    # ------------------------------------------------------------------ offsets

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as answered to OffsetForLeaderEpoch (KIP-101/279)."""
        return self.epoch_cache.end_offset_for(epoch, self.log_end_offset)

    # ------------------------------------------------------------------ append

    def append_as_leader(self, records, leader_epoch: int) -> LogAppendInfo:
        """Validate a producer's batches, assign offsets from the log end offset, stamp the
        leader epoch, and append them. Raises CorruptRecordError / RecordTooLargeError (nothing
        written) or LogAppendError."""
        if self.moved_to is not None:
            return self.moved_to.append_as_leader(records, leader_epoch)
        cfg = self.config
        view = memoryview(log_validator.to_topic_codec(
            records, log_validator.target_codec(cfg.compression_type)))
        compacted = log_validator.is_compacted(cfg.cleanup_policy)
        end = len(view)
        if end == 0:
            raise CorruptRecordError("the produce request carries no record batches")
        iov: list = []
        metas: list[tuple[int, int, int]] = []
        first = offset = self.log_end_offset
        num_records = 0
        max_ts = -1
        pos = 0
        max_bytes = self.config.max_message_bytes
        unpack = rec.HEADER_STRUCT.unpack_from
        # The hot path: the header is unpacked into locals and checked inline (the same checks
        # as records.check_header), since this runs once per produced batch.
        while pos < end:
            if end - pos < rec.HEADER_SIZE:
                raise CorruptRecordError(f"{end - pos} trailing bytes are not a record batch")
            (_bo, length, _ple, magic, crc, attrs, lod, _bts, mts, _pid, _pep, _bseq,
             count) = unpack(view, pos)
            size = length + rec.LOG_OVERHEAD
            if magic != rec.MAGIC_V2 or length < rec.MIN_BATCH_LENGTH or size > end - pos or \
                    lod < 0 or count <= 0:
                rec.check_header(rec.parse_header(view, pos), end - pos)  # raises, says why
                if count <= 0:  # an empty batch is a compacted log's, never a producer's
                    raise CorruptRecordError(f"record batch with {count} records")
            if count != lod + 1:
                raise CorruptRecordError(f"batch has {count} records but lastOffsetDelta {lod}")
            if size > max_bytes:
                raise RecordTooLargeError(f"record batch of {size} bytes exceeds "
                                          f"message.max.bytes {max_bytes}")
            if crc32c(view[pos + rec.ATTRIBUTES_OFFSET:pos + size]) != crc:
                rec.verify_crc(view[pos:pos + size], rec.parse_header(view, pos))  # raises
            # a correct CRC over records that do not parse: refused, as Kafka's LogValidator
            if attrs & rec.COMPRESSION_MASK or compacted:
                log_validator.check_batch(view[pos:pos + size], rec.parse_header(view, pos),
                                          only_batch=size == end, compacted=compacted,
                                          tp=self.tp)
            else:
                rec.check_records(view[pos:pos + size], rec.parse_header(view, pos))
            iov.append(rec.stamp_prefix(offset, length, leader_epoch))
            iov.append(view[pos + 16:pos + size])
            last = offset + lod
            metas.append((last, mts, size))
            max_ts = max(max_ts, mts)
            num_records += count
            offset = last + 1
            pos += size
        self._check_writable()
        try:
            self._append(iov, metas, end, first)
            if leader_epoch >= 0 and leader_epoch != self.epoch_cache.latest_epoch():
                self.epoch_cache.assign(leader_epoch, first)
            self._after_append(num_records)
        except OSError as e:
            raise self._fail(LogAppendError(self.log_dir, str(self.tp), e)) from e
        return LogAppendInfo(first, offset - 1, max_ts, num_records, end)

    def append_as_follower(self, records) -> LogAppendInfo:
        """Append batches fetched from the leader, offsets and epochs as the leader set them.

        Batches must start at or after the log end offset and increase. Only complete batches
        are appended; a partial trailing batch (a fetch cut by max_bytes) is ignored.
        """
        if self.moved_to is not None:
            return self.moved_to.append_as_follower(records)
        view = memoryview(records)
        valid = rec.complete_batches_length(view)
        iov: list = []
        metas: list[tuple[int, int, int]] = []
        expected = first = self.log_end_offset
        num_records = 0
        max_ts = -1
        epochs: list[tuple[int, int]] = []
        latest = self.epoch_cache.latest_epoch()
        for b in rec.iter_batches(view[:valid]):
            h = b.header
            if h.base_offset < expected:
                raise CorruptRecordError(f"out of order offsets: batch at {h.base_offset} "
                                         f"while the log end offset is {expected}")
            if not metas:
                first = h.base_offset
            iov.append(b.data)
            metas.append((h.last_offset, h.max_timestamp, h.size))
            if h.partition_leader_epoch > latest:
                latest = h.partition_leader_epoch
                epochs.append((latest, h.base_offset))
            max_ts = max(max_ts, h.max_timestamp)
            num_records += h.records_count
            expected = h.next_offset
        if not metas:
            return LogAppendInfo(first, first - 1, -1, 0, 0)
        self._check_writable()
        try:
            self._append(iov, metas, valid, first)
            for epoch, start in epochs:
                self.epoch_cache.assign(epoch, start)
            self._after_append(num_records)
        except OSError as e:
            raise self._fail(LogAppendError(self.log_dir, str(self.tp), e)) from e
        return LogAppendInfo(first, expected - 1, max_ts, num_records, valid)

    def _check_writable(self) -> None:
        if self.failed is not None:
            raise LogAppendError(self.log_dir, str(self.tp),
                                 detail=f"the log failed earlier and refuses writes until it "
                                        f"is reloaded: {self.failed}")

    def _fail(self, error: KafkaStorageError) -> KafkaStorageError:
        if self.failed is None:
            self.failed = str(error)
        return error

    def _append(self, iov: list, metas: list[tuple[int, int, int]], nbytes: int,
                first_offset: int) -> None:
        seg = self.active_segment
        if seg.size > 0 and self._should_roll(seg, nbytes, metas[-1][0],
                                              max(m[1] for m in metas)):
            # A new segment starts at the log end offset, also when a follower's batch starts
            # past it (a compacted leader's gap): the segments stay contiguous, as loading
            # checks; only offsets beyond a segment's 32-bit range force the gap.
            leo = self.log_end_offset
            seg = self._roll(leo if metas[-1][0] - leo <= 0x7FFFFFFF else first_offset)
        seg.append(iov, metas, nbytes)

    def _should_roll(self, seg: LogSegment, nbytes: int, last_offset: int, max_ts: int) -> bool:
        c = self.config
        # Kafka's LogSegment.timeWaitedForRoll: the time between the segment's first batch and
        # the incoming one, by record timestamps (wall clock only when there are none).
        if seg.rolling_base_ms >= 0 and seg.first_batch_seen:
            waited = max_ts - seg.rolling_base_ms
        else:
            waited = self.clock() - seg.created_ms
        return (seg.size + nbytes > c.segment_bytes
                or waited > c.effective_segment_ms
                or last_offset - seg.base_offset > 0x7FFFFFFF)

    def _roll(self, base_offset: int) -> LogSegment:
        old = self.active_segment
        old.persist_indexes()
        new = LogSegment.create(self.dir, base_offset, self.fileops,
                                self.config.index_interval_bytes, self.clock())
        self._add_segment(new)
        self._dir_unsynced = True
        return new

    def roll(self) -> None:
        """Force a new segment at the log end offset (if the active one is not empty)."""
        if self.active_segment.size > 0:
            self._check_writable()
            try:
                self._roll(self.log_end_offset)
            except OSError as e:
                raise self._fail(LogAppendError(self.log_dir, str(self.tp), e)) from e

    def _after_append(self, num_records: int) -> None:
        self.unflushed_messages += num_records
        if self.unflushed_messages >= self.config.flush_interval_messages:
            self._flush()

    # ------------------------------------------------------------------ read

    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True) -> bytes:
        """Whole batches from the one holding ``start_offset``, up to ``max_bytes`` and below
        ``max_offset`` (exclusive: the HW for consumers, the LEO for followers).

        As in Kafka (KIP-74) the first batch is returned whole even if larger than max_bytes,
        so a reader always makes progress. Raises OffsetOutOfRangeError, LogReadError or
        LogClosedError.
        """
        return self._reading("read", start_offset, max_bytes, max_offset, min_one_batch)

    def _reading(self, name: str, *args):
        """Run the read ``_<name>`` here, or on the log a KIP-113 swap moved it to. A segment
        closed under the read (SegmentClosedError: never a recycled descriptor's bytes) makes
        it start over on what replaced it - the moved-to log, or this log's segments after
        retention or a truncation removed one whose delay passed - and, once this log itself
        is closed, answer LogClosedError."""
        for _ in range(_CLOSED_SEGMENT_RETRIES):
            moved = self.moved_to
            if moved is not None:
                return getattr(moved, name)(*args)
            try:
                return getattr(self, "_" + name)(*args)
            except SegmentClosedError:
                if self.moved_to is None and self.closed:
                    raise self._closed_error() from None
        raise self._closed_error()

    def _closed_error(self) -> LogClosedError:
        if self.failed is not None:  # its dir went offline, or it failed and is reloaded
            return LogClosedError(self.log_dir, str(self.tp), ErrorCode.KAFKA_STORAGE_ERROR,
                                  self.failed)
        return LogClosedError(self.log_dir, str(self.tp), ErrorCode.NOT_LEADER_OR_FOLLOWER,
                              "the replica was deleted or its broker is shutting down")

    def _read(self, start_offset: int, max_bytes: int, max_offset: int | None,
              min_one_batch: bool) -> bytes:
        try:
            found = self._locate(start_offset, max_bytes, max_offset, min_one_batch)
            if found is None:
                return b""
            seg, position, limit, whole = found
            data = seg.read(position, limit - position, limit)
            if whole:
                return data
            cut = rec.complete_batches_length(data)
            return data if cut == len(data) else data[:cut]
        except OSError as e:
            raise LogReadError(self.log_dir, str(self.tp), e) from e

    def offset_for_timestamp(self, timestamp: int, upper: int) -> tuple[int, int, int] | None:
        """ListOffsets by time (Kafka's UnifiedLog.fetchOffsetByTimestamp): (timestamp, offset,
        leader epoch) of the first record with a timestamp >= ``timestamp``, below ``upper``
        (the HW for a consumer); for MAX_TIMESTAMP (-3, KIP-734) the record holding the largest
        timestamp. None when there is none."""
        return self._reading("offset_for_timestamp", timestamp, upper)

    def _offset_for_timestamp(self, timestamp: int, upper: int) -> tuple[int, int, int] | None:
        try:
            if timestamp == MAX_TIMESTAMP:
                seg = max(self.segments, key=lambda s: s.max_timestamp, default=None)
                if seg is None or seg.max_timestamp < 0:
                    return None
                found = seg.find_offset_by_timestamp(seg.max_timestamp, self.log_start_offset)
            else:
                # Past a segment whose max timestamp qualifies but whose records do not: a
                # compacted segment may keep only an empty batch (its max timestamp stays).
                found = None
                for seg in self.segments:
                    if seg.max_timestamp >= timestamp:
                        found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                        if found is not None:
                            break
        except OSError as e:
            raise LogReadError(self.log_dir, str(self.tp), e) from e
        if found is None or found[1] >= upper:
            return None
        return found[0], found[1], self.epoch_cache.epoch_for_offset(found[1])

    def read_region(self, start_offset: int, max_bytes: int, max_offset: int | None = None,
                    min_one_batch: bool = True) -> FileRegion | bytes:
        """``read``'s batches as a region of the segment file (``broker/storage/file_region.py``)
        for a zero-copy Fetch answer, or b"" when there is nothing to read. Only batch headers
        are read to find the end; the records themselves are never read into Python."""
        return self._reading("read_region", start_offset, max_bytes, max_offset, min_one_batch)

    def _read_region(self, start_offset: int, max_bytes: int, max_offset: int | None,
                     min_one_batch: bool) -> FileRegion | bytes:
        try:
            found = self._locate(start_offset, max_bytes, max_offset, min_one_batch)
            if found is None:
                return b""
            seg, position, limit, whole = found
            if not whole:
                limit = seg.whole_batches_end(position, limit)
                if limit <= position:
                    return b""
            # The dup is taken under the segment's reference: it names this file, never a
            # number the log dir's thread closed and another file reused meanwhile.
            return FileRegion(seg.dup(), position, limit - position)
        except OSError as e:
            raise LogReadError(self.log_dir, str(self.tp), e) from e

    def _locate(self, start_offset: int, max_bytes: int, max_offset: int | None,
                min_one_batch: bool) -> tuple[LogSegment, int, int, bool] | None:
        """Where a read's bytes are: (segment, start position, end position, whether the end
        is known to be a batch boundary), or None for nothing to read. May raise OSError."""
        leo = self.log_end_offset
        if start_offset < self.log_start_offset or start_offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is out of range for {self.tp}: log start offset "
                f"{self.log_start_offset}, log end offset {leo}")
        upper = leo if max_offset is None else min(max_offset, leo)
        if start_offset >= upper:
            return None
        # One reference to the list: a clean-and-swap replaces it whole (replace_segments),
        # so a read sees the segments before the swap or after it, never half of each.
        segs = self.segments
        i = max(0, bisect.bisect_right(segs, start_offset, key=_base_offset) - 1)
        for seg in segs[i:]:
            found = seg.translate_offset(start_offset)
            if found is None:
                continue
            if found.base_offset >= upper:
                return None
            end_pos = None
            if upper < seg.next_offset:
                # The HW and LEO sit on batch boundaries, so the batch holding ``upper``
                # starts there; reading stops before it.
                stop = seg.translate_offset(upper, start=found.position)
                end_pos = stop.position if stop else None
            limit = min(seg.size, seg.size if end_pos is None else end_pos)
            if limit - found.position <= max_bytes:
                return seg, found.position, limit, True
            # Stop at the last indexed batch start that fits, so the read holds whole
            # batches and needs no trimming (index entries sit on batch starts).
            entries = () if seg.index_suspect else seg.idx_entries
            j = bisect.bisect_right(entries, found.position + max_bytes, key=entry_position) - 1
            try:
                start = entries[j][1] if j >= 0 else -1
            except IndexError:  # truncated under us: read up to max_bytes
                start = -1
            if start > found.position:
                return seg, found.position, start, True
            if found.size > max_bytes:
                # KIP-74: the first batch whole, even above max_bytes, so the reader progresses.
                if not min_one_batch:
                    return None
                return seg, found.position, min(limit, found.position + found.size), True
            return seg, found.position, found.position + max_bytes, False
        return None

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and after ``offset`` (whole batches). Returns whether
        anything was removed. A follower calls this before fetching from a new leader."""
        if self.moved_to is not None:
            return self.moved_to.truncate_to(offset)
        if offset < 0:
            raise ValueError(f"cannot truncate {self.tp} to negative offset {offset}")
        self._check_writable()
        if offset >= self.log_end_offset:
            # Nothing to remove, but an epoch that started at the log end without writing a
            # batch (a leadership with no appends) is dropped, or a follower would report it
            # as its last fetched epoch forever.
            try:
                self.epoch_cache.truncate_from_end(offset)
            except OSError as e:
                raise LogTruncationError(self.log_dir, str(self.tp), e) from e
            return False
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self.truncations += 1
        try:
            while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
                self._delete_later(self.segments.pop())
                self._bases.pop()
            self.active_segment.truncate_to(offset)
            leo = self.log_end_offset
            self.epoch_cache.truncate_from_end(leo)
        except OSError as e:
            raise self._fail(LogTruncationError(self.log_dir, str(self.tp), e)) from e
        self.recovery_point = min(self.recovery_point, leo)
        self.high_watermark = min(self.high_watermark, leo)
        self.log_start_offset = min(self.log_start_offset, leo)
        self._after_truncation()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset`` (a follower whose fetch offset
        fell out of the leader's range)."""
        if self.moved_to is not None:
            return self.moved_to.truncate_fully_and_start_at(offset)
        self._check_writable()
        self.truncations += 1
        try:
            for seg in self.segments:
                self._delete_later(seg)
            self.segments.clear()
            self._bases.clear()
            self._add_segment(LogSegment.create(self.dir, offset, self.fileops,
                                                self.config.index_interval_bytes, self.clock()))
            self._dir_unsynced = True
            self.epoch_cache.clear()
        except OSError as e:
            raise self._fail(LogTruncationError(self.log_dir, str(self.tp), e)) from e
        self.log_start_offset = self.recovery_point = self.high_watermark = offset
        self._after_truncation()

    # ------------------------------------------------------------------ compaction

    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment],
                         truncations: int) -> None:
        """Swap ``cleaned`` (written as ``.cleaned`` files, fsynced) in for the consecutive,
        non-active segments ``old`` (Kafka's LocalLog.replaceSegments), crash-safe at every
        step (swap_files.py): its files become ``.swap``, the segment list is replaced in one
        assignment (a read sees it before or after, never half), the old files become
        ``.deleted`` (removed after file.delete.delay.ms, so reads under way finish), then the
        ``.swap`` files take their final names. Runs on the log dir's executor, as every
        change of the segment list does. CleaningAbortedError, with nothing changed, when the
        log is no longer the one the cleaning read: ``truncations`` is the count it started
        under. LogCleaningError on an I/O error."""
        if self.closed or self.failed is not None or self.moved_to is not None:
            raise CleaningAbortedError(f"{self.tp}: the log was closed, failed or moved")
        if self.truncations != truncations:
            raise CleaningAbortedError(f"{self.tp}: truncated while it was being cleaned")
        segs = self.segments
        i = next((k for k, s in enumerate(segs) if s is old[0]), None)
        if i is None or i + len(old) >= len(segs) or \
                any(a is not b for a, b in zip(segs[i:i + len(old)], old)):
            raise CleaningAbortedError(f"{self.tp}: segments {[s.base_offset for s in old]} "
                                       f"are no longer in the log")
        if cleaned.base_offset != old[0].base_offset or \
                cleaned.next_offset != segs[i + len(old)].base_offset:
            raise CleaningAbortedError(f"{self.tp}: the cleaned segment [{cleaned.base_offset}, "
                                       f"{cleaned.next_offset}) does not replace "
                                       f"{[s.base_offset for s in old]} exactly")
        swapped = False
        try:
            cleaned.change_suffix(swap_files.CLEANED, swap_files.SWAP)
            self.fileops.fsync_dir(self.dir)
            new = segs[:i] + [cleaned] + segs[i + len(old):]
            self.segments = new
            self._bases = [s.base_offset for s in new]
            swapped = True
            for seg in old:
                self._delete_later(seg)
            cleaned.change_suffix(swap_files.SWAP, "")
            self.fileops.fsync_dir(self.dir)
        except OSError as e:
            error = LogCleaningError(self.log_dir, str(self.tp), e)
            # Swapped in memory but not wholly on disk: refuse writes until a reload, whose
            # load completes the swap from the files (swap_files.py).
            raise (self._fail(error) if swapped else error) from e

    def _after_truncation(self) -> None:
        if self.on_truncation is not None:
            self.on_truncation()

    # ------------------------------------------------------------------ flush / retention

    def flush(self) -> None:
        if self.moved_to is not None:
            return self.moved_to.flush()
        try:
            self._flush()
        except OSError as e:
            raise LogFlushError(self.log_dir, str(self.tp), e) from e

    def _flush(self) -> None:
        leo = self.log_end_offset
        active = self.active_segment
        for seg in self.segments:
            if seg is not active and seg.dirty:  # rolled since the last flush
                seg.flush()
                seg.persist_indexes(fsync=True)
        active.flush()
        if self._epochs_unsynced or self.epoch_cache.deferred:
            # Synced before the recovery point moves: entries below it are never rebuilt.
            self._epoch_checkpoint.write(self.epoch_cache.entries, fsync=True)
            self._epochs_unsynced = self.epoch_cache.deferred = False
        if self._dir_unsynced:
            self.fileops.fsync_dir(self.dir)
            self._dir_unsynced = False
        if self._log_dir_unsynced:
            self.fileops.fsync_dir(self.log_dir)
            self._log_dir_unsynced = False
        self.recovery_point = leo
        self.unflushed_messages = 0

    def increment_log_start_offset(self, offset: int) -> bool:
        """KIP-107 (DeleteRecords on the leader; a follower following its leader's log start):
        records below ``offset`` are no longer served, and the segments wholly below it go at
        the next retention pass. Never past the high watermark (OffsetOutOfRangeError, as
        Kafka's UnifiedLog.maybeIncrementLogStartOffset); False when it does not move."""
        if self.moved_to is not None:
            return self.moved_to.increment_log_start_offset(offset)
        if offset <= self.log_start_offset:
            return False
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {offset} of partition {self.tp} "
                f"since it is larger than the high watermark {self.high_watermark}")
        self.log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        return True

    def delete_old_segments(self) -> list[int]:
        """Retention: delete whole segments past ``retention.ms`` or beyond
        ``retention.bytes``, or wholly below the log start offset (KIP-107), oldest first,
        never the active segment and never one holding offsets at or above the high
        watermark. Returns the deleted base offsets."""
        c = self.config
        now = self.clock()
        deleted: list[int] = []
        total = self.size
        while len(self.segments) > 1:
            seg, nxt = self.segments[0], self.segments[1]
            if nxt.base_offset > self.high_watermark:
                break  # not yet replicated: never delete what a follower may still need
            # Kafka's UnifiedLog.deleteOldSegments: time and size retention only with
            # cleanup.policy delete; a compact-only log loses segments below its log start.
            by_time = c.delete and c.retention_ms >= 0 and seg.max_timestamp >= 0 and \
                now - seg.max_timestamp > c.retention_ms
            by_size = c.delete and c.retention_bytes >= 0 and \
                total - seg.size >= c.retention_bytes
            by_start = nxt.base_offset <= self.log_start_offset
            if not (by_time or by_size or by_start):
                break
            try:
                self._delete_later(seg)
            except OSError as e:
                raise LogDeletionError(self.log_dir, str(self.tp), e) from e
            self.segments.pop(0)
            self._bases.pop(0)
            total -= seg.size
            deleted.append(seg.base_offset)
        if deleted:
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            self.epoch_cache.truncate_from_start(self.log_start_offset)
        return deleted

    def _delete_later(self, seg: LogSegment) -> None:
        """Rename ``seg``'s files to .deleted (a crash before their removal deletes them on
        load) and remove them after file.delete.delay.ms."""
        seg.rename_to_deleted()
        self._pending_deletes.append((self.clock() + self.config.file_delete_delay_ms, seg))

    def delete_due_segments(self, force: bool = False) -> int:
        """Close and remove the .deleted segments whose delay has passed (all with
        ``force``). Run on the log dir's executor (the retention job calls it)."""
        if not self._pending_deletes:
            return 0
        now = self.clock()
        due = [e for e in self._pending_deletes if force or e[0] <= now]
        self._pending_deletes = [e for e in self._pending_deletes if e not in due]
        try:
            for _, seg in due:
                seg.delete_files()
        except OSError as e:
            raise LogDeletionError(self.log_dir, str(self.tp), e) from e
        return len(due)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Flush and close (a clean shutdown): indexes are written in full."""
        if self.closed:
            return
        # Before the segments close: a read meeting a closed one then answers at once
        # (_reading) instead of retrying.
        self.closed = True
        try:
            self.delete_due_segments(force=True)
            self._flush()
            for seg in self.segments:
                seg.persist_indexes(fsync=True)
                seg.close()
        except OSError as e:
            raise LogFlushError(self.log_dir, str(self.tp), e) from e
        finally:
            self.closed = True
            self._close_fds()

    def delete(self) -> None:
        """Remove the partition's directory (StopReplica with deletion)."""
        self._close_fds()
        self.closed = True
        try:
            self.fileops.rmtree(self.dir)
        except OSError as e:
            raise LogDeletionError(self.log_dir, str(self.tp), e) from e

    def __repr__(self) -> str:
        return (f"Log({self.tp}, dir={self.log_dir}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, hw={self.high_watermark}, "
                f"segments={len(self.segments)})")
