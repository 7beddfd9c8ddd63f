"""One round of compaction of one log (design.md#compaction): Kafka's Cleaner.

A thin shell over the storage code; ``cleaner_rules`` decides. On a cleaner thread it
1. builds the offset map (key -> last offset) over the dirty section, reading the segments
   the way a fetch does (under their file references: a segment closed meanwhile raises
   SegmentClosedError, never reads another file's bytes);
2. rewrites the segments below the map's end, group by group, into a ``.cleaned`` segment
   (``LogSegment``: the offset and time indexes are built as it is written) and fsyncs it;
3. hands each to ``Log.replace_segments`` through ``swap`` - in the broker, a call on the log
   dir's executor, where every change of a log's segment list runs - which refuses it if the
   log changed meanwhile (CleaningAbortedError), and then deletes the ``.cleaned`` files.

Nothing here changes the Log outside ``replace_segments``; an interrupted round leaves only
``.cleaned`` (or ``.swap``) files, which loading undoes or completes (swap_files.py).

Partial: the last batch of each active idempotent producer is kept only for the producers
``active_producers`` names (the producer state is not wired into the log yet, so the broker
passes none), and transaction markers are always kept (cleaner_rules.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker.storage import cleaner_rules as rules
from broker.storage.log import Log
from broker.storage.offset_map import SkimpyOffsetMap
from broker.storage.segment import LogSegment
from broker.storage.swap_files import CLEANED
from common import records as rec
from common.errors import CorruptRecordError
from common.names import TopicPartition

# Kafka's log.index.size.max.bytes default: the index bytes a group's segments may add up to.
MAX_INDEX_SIZE = 10 * 1024 * 1024


@dataclass
class CleanerStats:
    """Kafka's CleanerStats: one round's figures, for the logged summary and the metrics."""

    start_s: float = field(default_factory=time.monotonic)
    map_complete_s: float = -1.0
    end_s: float = -1.0
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages_read: int = 0
    buffer_utilization: float = 0.0

    def index_done(self) -> None:
        self.map_complete_s = time.monotonic()

    def all_done(self) -> None:
        self.end_s = time.monotonic()

    @property
    def elapsed_secs(self) -> float:
        return max(0.0, self.end_s - self.start_s) if self.end_s >= 0 else 0.0


def segment_stats(seg: LogSegment) -> rules.SegmentStats:
    """What the rules read of a segment (a reader's view: plain attribute reads)."""
    return rules.SegmentStats(seg.base_offset, seg.size, seg.next_offset, seg.max_timestamp,
                              seg.rolling_base_ms if seg.first_batch_seen else rules.NO_TIMESTAMP,
                              8 * len(seg.idx_entries), 12 * len(seg.ti_offsets))


def log_stats(log: Log, segments: list[LogSegment] | None = None) -> rules.LogStats:
    """The log as the rules see it. Its last stable offset is the high watermark: replog has
    no transactions yet, so no first unstable offset lies below it."""
    segs = list(log.segments) if segments is None else segments
    c = log.config
    return rules.LogStats(log.log_start_offset, segs[-1].next_offset,
                          min(log.high_watermark, segs[-1].next_offset),
                          tuple(segment_stats(s) for s in segs),
                          rules.CompactionConfig(c.min_cleanable_ratio, c.min_compaction_lag_ms,
                                                 c.max_compaction_lag_ms,
                                                 c.delete_retention_ms))


def _direct(log: Log, fn: Callable[[], None]) -> None:
    fn()


class Cleaner:
    def __init__(self, cleaner_id: int, offset_map: SkimpyOffsetMap, *, io_buffer_size: int,
                 max_io_buffer_size: int, load_factor: float = 0.9,
                 check_done: Callable[[TopicPartition], None] = lambda tp: None,
                 throttle: Callable[[int], None] = lambda n: None,
                 swap: Callable[[Log, Callable[[], None]], None] = _direct,
                 active_producers: Callable[[Log], Mapping[int, int]] | None = None):
        """``check_done(tp)`` raises to stop the round (shutdown, abort: Kafka's checkDone);
        ``swap(log, fn)`` runs ``fn`` where the log's segment list may change (the log dir's
        executor) and returns when it did; ``active_producers(log)`` maps each active
        producer id to its last batch's last offset."""
        if offset_map.slots * load_factor <= 1:
            raise ValueError("offset map is too small to fit in even a single message, so log "
                             "cleaning will never make progress. You can increase "
                             "log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads")
        self.id = cleaner_id
        self.offset_map = offset_map
        self.io_buffer_size = max(io_buffer_size, rec.HEADER_SIZE)
        self.max_io_buffer_size = max_io_buffer_size
        self.load_factor = load_factor
        self.check_done = check_done
        self.throttle = throttle
        self.swap = swap
        self.active_producers = active_producers

    # ------------------------------------------------------------------ a round

    def clean(self, log: Log, first_dirty: int, first_uncleanable: int, now_ms: int
              ) -> tuple[int, CleanerStats]:
        """Kafka's Cleaner.doClean: returns the next first dirty offset (the map's end) and
        the round's stats."""
        truncations = log.truncations
        segments = list(log.segments)
        stats = CleanerStats()
        self._build_offset_map(log, segments, first_dirty, first_uncleanable, stats)
        # nothing dirty to read: the round ends where it began (never below it)
        end_offset = max(self.offset_map.latest_offset + 1, first_dirty)
        stats.index_done()
        to_clean = [s for s in segments[:-1] if s.base_offset < end_offset]
        by_base = {s.base_offset: s for s in to_clean}
        groups = rules.group_segments_by_size([segment_stats(s) for s in to_clean],
                                              log.config.segment_bytes, MAX_INDEX_SIZE,
                                              first_uncleanable)
        producers = dict(self.active_producers(log)) if self.active_producers else {}
        for group in groups:
            self._clean_segments(log, [by_base[s.base_offset] for s in group], now_ms,
                                 truncations, producers, stats)
        stats.buffer_utilization = self.offset_map.utilization
        stats.all_done()
        return end_offset, stats

    # ------------------------------------------------------------------ the offset map

    def _build_offset_map(self, log: Log, segments: list[LogSegment], start: int, end: int,
                          stats: CleanerStats) -> None:
        """Kafka's buildOffsetMap: the last offset of each key in [start, end), until the map
        is load-factor full."""
        m = self.offset_map
        m.clear()
        dirty = [s for i, s in enumerate(segments)
                 if s.base_offset < end and (i + 1 == len(segments)
                                             or segments[i + 1].base_offset > start)]
        dirty = [s for s in dirty if s is not segments[-1]]
        max_desired = int(m.slots * self.load_factor)
        for k, seg in enumerate(dirty):
            next_start = dirty[k + 1].base_offset if k + 1 < len(dirty) else end
            if self._map_segment(log.tp, seg, start, max_desired, stats):
                return
            # offsets up to the next segment are covered, gaps included
            m.update_latest_offset(next_start - 1)

    def _map_segment(self, tp: TopicPartition, seg: LogSegment, start: int, max_desired: int,
                     stats: CleanerStats) -> bool:
        """Kafka's buildOffsetMapForSegment: True once the map is full."""
        m = self.offset_map
        for h, data in self._batches(tp, seg, seg.lookup(start)):
            stats.map_bytes_read += h.size
            if h.is_control:
                stats.map_messages_read += 1
            else:
                for r in rec.decode_records(data, h):
                    if r.key is not None and r.offset >= start:
                        if m.size >= max_desired:
                            return True
                        m.put(r.key, r.offset)
                    stats.map_messages_read += 1
            if h.last_offset >= start:
                m.update_latest_offset(h.last_offset)
        return False

    # ------------------------------------------------------------------ rewriting

    def _clean_segments(self, log: Log, group: list[LogSegment], now_ms: int, truncations: int,
                        producers: Mapping[int, int], stats: CleanerStats) -> None:
        """Kafka's cleanSegments: the group's batches, filtered, into one ``.cleaned``
        segment based at the group's first, then swapped in."""
        group_end = group[-1].next_offset
        cleaned = LogSegment.create(log.dir, group[0].base_offset, log.fileops,
                                    log.config.index_interval_bytes, log.clock(), suffix=CLEANED)
        try:
            for seg in group:
                for h, data in self._batches(log.tp, seg, 0):
                    out = self._filter(h, data, group_end, now_ms,
                                       log.config.delete_retention_ms, producers, stats)
                    if out is not None:
                        batch, max_ts = out
                        cleaned.append([batch], [(h.last_offset, max_ts, len(batch))],
                                       len(batch))
                        self.throttle(len(batch))
            if cleaned.next_offset != group_end:
                raise CorruptRecordError(
                    f"cleaning segments {[s.base_offset for s in group]} of {log.tp} ended at "
                    f"{cleaned.next_offset}, not at their end {group_end}")
            cleaned.flush()  # on disk before its rename to .swap (Kafka flushes it too)
            cleaned.persist_indexes(fsync=True)
            self.swap(log, lambda: log.replace_segments(cleaned, group, truncations))
        except BaseException:
            if not any(s is cleaned for s in log.segments):
                cleaned.delete_files()
            raise

    def _filter(self, h: rec.BatchHeader, data, group_end: int, now_ms: int,
                delete_retention_ms: int, producers: Mapping[int, int], stats: CleanerStats
                ) -> tuple[bytes, int] | None:
        """What of one batch is written: (bytes, max timestamp), or None to drop it (Kafka's
        filterTo with the cleaner's RecordFilter)."""
        stats.bytes_read += h.size
        if h.is_control:  # partial: transaction markers stay (no transactions yet)
            stats.messages_read += 1
            stats.messages_written += 1
            stats.bytes_written += h.size
            return bytes(data), h.max_timestamp
        records = rec.decode_records(data, h)
        stats.messages_read += len(records)
        m = self.offset_map
        horizon = h.base_timestamp if h.attributes & rec.DELETE_HORIZON_MASK else None
        kept = []
        for r in records:
            if r.key is None and r.offset <= m.latest_offset:
                stats.invalid_messages_read += 1
            latest = m.get(r.key) if r.key is not None else -1
            if rules.retain_record(r.offset, r.key is not None, r.value is not None, latest,
                                   m.latest_offset, horizon, now_ms):
                kept.append(r)
        retention = rules.batch_retention(
            next_offset=h.next_offset, group_end_offset=group_end,
            is_last_batch_of_active_producer=h.producer_id >= 0
            and producers.get(h.producer_id) == h.last_offset)
        if kept:
            tombstone = any(r.value is None for r in kept)
            if rules.copy_unchanged(len(kept), len(records), horizon, tombstone):
                out, max_ts = bytes(data), h.max_timestamp
            else:
                out = rec.rebuild_batch(h, kept, rules.new_delete_horizon(
                    tombstone, horizon, now_ms, delete_retention_ms))
                max_ts = rec.parse_header(out).max_timestamp
        elif retention is rules.BatchRetention.RETAIN_EMPTY:
            out, max_ts = rec.empty_batch(h), h.max_timestamp
        else:
            return None
        stats.messages_written += len(kept)
        stats.bytes_written += len(out)
        return out, max_ts

    # ------------------------------------------------------------------ reading

    def _batches(self, tp: TopicPartition, seg: LogSegment, position: int):
        """Every batch of ``seg`` from ``position``, CRC checked, read in chunks of the I/O
        buffer (a larger batch alone; Kafka grows its buffers the same way)."""
        size = seg.size
        pos = position
        while pos < size:
            self.check_done(tp)
            chunk = seg.read(pos, min(self.io_buffer_size, size - pos))
            self.throttle(len(chunk))
            cpos = 0
            while len(chunk) - cpos >= rec.HEADER_SIZE:
                h = rec.parse_header(chunk, cpos)
                if h.batch_length >= rec.MIN_BATCH_LENGTH and h.size > len(chunk) - cpos:
                    break
                rec.check_header(h, len(chunk) - cpos)
                view = memoryview(chunk)[cpos:cpos + h.size]
                rec.verify_crc(view, h)
                yield h, view
                cpos += h.size
            if cpos == 0:
                if len(chunk) < rec.HEADER_SIZE:
                    raise CorruptRecordError(f"{len(chunk)} bytes at position {pos} of "
                                             f"{seg.log_path} are not a record batch")
                h = rec.parse_header(chunk, 0)
                if h.size > size - pos:
                    raise CorruptRecordError(f"the batch at position {pos} of {seg.log_path} "
                                             f"overruns the segment")
                big = seg.read(pos, h.size)
                self.throttle(len(big))
                rec.check_header(h, len(big))
                rec.verify_crc(big, h)
                yield h, memoryview(big)
                cpos = h.size
            pos += cpos
