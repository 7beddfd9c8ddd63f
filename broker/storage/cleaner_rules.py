"""What log compaction decides (design.md#compaction): pure functions and one state table, no I/O.

Kafka's LogCleanerManager (which log is cleaned next, over which offsets), Cleaner (which
segments are rewritten together, which records and batches survive, when a tombstone's delete
horizon is set and when it has passed) and LogCleaningState. The shells - ``cleaner.py`` (the
file rewriting) and ``log_cleaner.py`` (the threads, checkpoints and metrics) - gather the
numbers these functions need from the logs and do what they answer.

Rules, each with the Kafka code it comes from:

- Every log has a clean head ``[log start, first dirty)``, where ``first dirty`` is the
  ``cleaner-offset-checkpoint`` entry, and a dirty tail. A checkpoint below the log start or
  past the log end is reset to the log start (LogCleanerManager.cleanableOffsets).
- Cleaning never reaches the active segment, the last stable offset (the high watermark, or the
  first unstable offset of an open transaction when lower), nor a segment whose largest
  timestamp is newer than ``min.compaction.lag.ms`` (cleanableOffsets). The cleanable bytes are
  whole segments from the one holding ``first dirty`` to the first uncleanable one
  (calculateCleanableBytes).
- The dirty ratio is cleanable bytes over clean plus cleanable bytes (LogToClean). A log is
  cleaned once the ratio exceeds ``min.cleanable.dirty.ratio``, or at once when a dirty,
  non-active segment's first batch is older than ``max.compaction.lag.ms`` and there are bytes
  to clean; of those, the dirtiest goes first (grabFilthiestCompactedLog). Empty logs are skipped.
- The offset map holds the last offset of each key in the dirty section; it takes keys until it
  is ``log.cleaner.io.buffer.load.factor`` full (Cleaner.buildOffsetMap), and the round ends at
  the map's last offset + 1 (Cleaner.doClean), the next first dirty offset.
- A record survives when its offset is past the map's last offset, or it holds the latest offset
  of its key and it has a value, or it is a tombstone whose batch's delete horizon has not
  passed (or was never set). A record without a key is dropped (Cleaner.shouldRetainRecord).
- A batch whose records are all kept, and that needs no delete horizon, is copied unchanged;
  otherwise it is rebuilt with the kept records at their own offsets, its base offset and last
  offset kept (so offsets, leader epochs and producer sequences survive). A kept tombstone in a
  batch with no delete horizon gets one: now + ``delete.retention.ms``, written as the batch's
  base timestamp with the attributes' delete-horizon bit (KIP-534, MemoryRecords.filterTo).
- A batch left with no record is dropped, except the last batch of an active producer and the
  last batch of a group of segments, which stay as an empty batch header (``RETAIN_EMPTY``).
  Kafka keeps only the last batch of the round; replog keeps every group's, so the rewritten
  segment ends where the segments it replaces ended and a log's segments stay contiguous (each
  starts where the previous one ends: the check ``Log`` loads with).
- Segments are rewritten in groups whose total log and index sizes stay within
  ``segment.bytes`` and ``log.index.size.max.bytes``, and whose offsets fit one segment's 32-bit
  relative offsets (Cleaner.groupSegmentsBySize), so repeated cleaning does not leave tiny
  segments.
- ``LogCleaningState``: none -> in progress -> none (done) | aborted -> paused(1); paused(n)
  counts the pauses (abort_and_pause, resume). A transition the table does not hold raises
  ``CleaningStateError`` naming both states (LogCleanerManager's IllegalStateException).

Partial: transactions are not modelled yet (replog has no transaction markers): control
batches are always kept, and no batch is discarded as aborted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

# The largest offset a segment can hold relative to its base (int32 index entries).
MAX_RELATIVE_OFFSET = 0x7FFFFFFF
NO_TIMESTAMP = -1


@dataclass(frozen=True)
class SegmentStats:
    """What the rules read of one segment."""

    base_offset: int
    size: int
    next_offset: int              # the offset after its last batch
    largest_timestamp: int = NO_TIMESTAMP    # LogSegment.largestTimestamp
    first_batch_timestamp: int = NO_TIMESTAMP  # the first batch's max timestamp
    index_bytes: int = 0          # offset index entries x 8
    time_index_bytes: int = 0     # time index entries x 12


@dataclass(frozen=True)
class CompactionConfig:
    """The per-topic settings the choice reads (Kafka's LogConfig names)."""

    min_cleanable_ratio: float = 0.5        # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0          # min.compaction.lag.ms
    max_compaction_lag_ms: int = (1 << 63) - 1  # max.compaction.lag.ms
    delete_retention_ms: int = 86_400_000   # delete.retention.ms


@dataclass(frozen=True)
class LogStats:
    """A log as the rules see it: offsets and segments, the active one last."""

    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    segments: tuple[SegmentStats, ...]
    config: CompactionConfig = CompactionConfig()

    @property
    def active(self) -> SegmentStats:
        return self.segments[-1]

    def non_active_from(self, offset: int) -> list[SegmentStats]:
        """Kafka's nonActiveLogSegmentsFrom: from the segment holding ``offset`` (the one with
        the largest base at or below it, or the first) to the one before the active segment."""
        out = []
        for i, s in enumerate(self.segments[:-1]):
            nxt = self.segments[i + 1].base_offset
            if nxt > offset:
                out.append(s)
        return out

    def overlapping(self, start: int, end: int) -> list[SegmentStats]:
        """Kafka's logSegments(from, to): the segments holding offsets in [start, end)."""
        out = []
        for i, s in enumerate(self.segments):
            upper = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else None
            if s.base_offset < end and (upper is None or upper > start):
                out.append(s)
        return out


@dataclass(frozen=True)
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


def cleanable_offsets(log: LogStats, checkpointed: int | None, now_ms: int) -> OffsetsToClean:
    """LogCleanerManager.cleanableOffsets: where the dirty section starts, and the first offset
    that may not be cleaned yet."""
    start = log.log_start_offset
    dirty = start if checkpointed is None else checkpointed
    force = False
    if dirty < start or dirty > log.log_end_offset:
        # truncated below the checkpoint, or the checkpoint ran ahead of a log that lost its
        # tail: clean the whole log again (Kafka warns and resets to the log start)
        dirty, force = start, True
    bounds = [log.last_stable_offset, log.active.base_offset]
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for s in log.non_active_from(dirty):
            if s.largest_timestamp > now_ms - lag:
                bounds.append(s.base_offset)
                break
    return OffsetsToClean(dirty, max(dirty, min(bounds)), force)


def cleanable_bytes(log: LogStats, first_dirty: int, uncleanable: int) -> tuple[int, int]:
    """LogCleanerManager.calculateCleanableBytes: (first uncleanable offset - a segment base -,
    bytes of the segments from the one holding ``first_dirty`` up to it)."""
    rest = log.non_active_from(uncleanable)
    first_uncleanable = (rest[0] if rest else log.active).base_offset
    segs = log.overlapping(min(first_dirty, first_uncleanable), first_uncleanable)
    return first_uncleanable, sum(s.size for s in segs)


def max_compaction_delay(log: LogStats, first_dirty: int, now_ms: int) -> int:
    """LogCleanerManager.maxCompactionDelay: how long past ``max.compaction.lag.ms`` the
    oldest dirty, non-active segment's first batch is (0: not overdue)."""
    stamps = [s.first_batch_timestamp for s in log.non_active_from(first_dirty)
              if s.first_batch_timestamp > 0]
    if not stamps:
        return 0
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    earliest = min(stamps)
    return clean_until - earliest if earliest < clean_until else 0


@dataclass(frozen=True)
class LogToClean:
    """Kafka's LogToClean: one log's candidacy for the next round."""

    key: object
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool
    min_cleanable_ratio: float
    force_update_checkpoint: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def eligible(self) -> bool:
        """grabFilthiestCompactedLog's threshold."""
        return (self.need_compaction_now and self.cleanable_bytes > 0) or \
            self.cleanable_ratio > self.min_cleanable_ratio


def log_to_clean(key: object, log: LogStats, checkpointed: int | None, now_ms: int
                 ) -> tuple[LogToClean, int]:
    """The candidacy of one log and its compaction delay (ms past max.compaction.lag.ms)."""
    offsets = cleanable_offsets(log, checkpointed, now_ms)
    delay = max_compaction_delay(log, offsets.first_dirty_offset, now_ms)
    first_uncleanable, cleanable = cleanable_bytes(
        log, offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset)
    clean = sum(s.size for s in log.overlapping(-1, offsets.first_dirty_offset))
    return LogToClean(key, offsets.first_dirty_offset, first_uncleanable, clean, cleanable,
                      delay > 0, log.config.min_cleanable_ratio,
                      offsets.force_update_checkpoint), delay


def choose_filthiest(candidates: Iterable[LogToClean]) -> tuple[float, LogToClean | None]:
    """grabFilthiestCompactedLog: (the largest dirty ratio among non-empty logs, for the
    max-dirty-percent gauge; the eligible log with the largest ratio, or None)."""
    logs = [c for c in candidates if c.total_bytes > 0]
    dirtiest = max((c.cleanable_ratio for c in logs), default=0.0)
    eligible = [c for c in logs if c.eligible]
    if not eligible:
        return dirtiest, None
    return dirtiest, max(eligible, key=lambda c: c.cleanable_ratio)


def group_segments_by_size(segments: Sequence[SegmentStats], max_size: int,
                           max_index_size: int, first_uncleanable: int
                           ) -> list[list[SegmentStats]]:
    """Cleaner.groupSegmentsBySize: consecutive segments whose total log bytes stay within
    ``max_size`` (segment.bytes) and index bytes within ``max_index_size``, and whose last
    offset fits one segment based at the group's first (an empty segment is always taken)."""
    groups: list[list[SegmentStats]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size
        index = segments[i].index_bytes
        time_index = segments[i].time_index_bytes
        i += 1
        while i < len(segments):
            s = segments[i]
            # The last offset of s, bounded by the next base (or the first uncleanable offset).
            last = (segments[i + 1].base_offset if i + 1 < len(segments)
                    else first_uncleanable) - 1
            if not (size + s.size <= max_size and index + s.index_bytes <= max_index_size
                    and time_index + s.time_index_bytes <= max_index_size
                    and (s.size == 0 or last - group[0].base_offset <= MAX_RELATIVE_OFFSET)):
                break
            group.append(s)
            size += s.size
            index += s.index_bytes
            time_index += s.time_index_bytes
            i += 1
        groups.append(group)
    return groups


# ----------------------------------------------------------------------------- records

def retain_record(offset: int, has_key: bool, has_value: bool, latest_offset_for_key: int,
                  map_latest_offset: int, delete_horizon_ms: int | None, now_ms: int) -> bool:
    """Cleaner.shouldRetainRecord for a v2 batch. ``latest_offset_for_key`` is the map's entry
    (-1: the key is not in the map); ``delete_horizon_ms`` the batch's, None when unset."""
    if offset > map_latest_offset:
        return True  # beyond what this round read: not cleaned yet
    if not has_key:
        return False  # a compacted log's records have keys; Kafka counts it invalid
    if offset < latest_offset_for_key:
        return False  # a later record of the same key exists
    return has_value or delete_horizon_ms is None or now_ms < delete_horizon_ms


class BatchRetention(Enum):
    """MemoryRecords.RecordFilter.BatchRetention."""

    DELETE = "DELETE"              # drop the batch, records and all
    DELETE_EMPTY = "DELETE_EMPTY"  # drop it if no record is kept
    RETAIN_EMPTY = "RETAIN_EMPTY"  # keep at least its header, records or not


def batch_retention(*, next_offset: int, group_end_offset: int,
                    is_last_batch_of_active_producer: bool, discard: bool = False
                    ) -> BatchRetention:
    """The cleaner's checkBatchRetention. A producer's last batch keeps its sequence numbers for
    the producer state; the group's last batch keeps the segment's end offset."""
    if is_last_batch_of_active_producer or next_offset == group_end_offset:
        return BatchRetention.RETAIN_EMPTY
    return BatchRetention.DELETE if discard else BatchRetention.DELETE_EMPTY


def new_delete_horizon(kept_tombstone: bool, delete_horizon_ms: int | None, now_ms: int,
                       delete_retention_ms: int) -> int | None:
    """The delete horizon a rebuilt batch carries: its own, or - for the first cleaning that
    keeps one of its tombstones - now + delete.retention.ms (MemoryRecords.filterTo)."""
    if delete_horizon_ms is not None:
        return delete_horizon_ms
    return now_ms + delete_retention_ms if kept_tombstone else None


def copy_unchanged(kept: int, total: int, delete_horizon_ms: int | None,
                   kept_tombstone: bool) -> bool:
    """Whether the batch is written as it was (filterTo's writeOriginalBatch)."""
    return kept == total and not (kept_tombstone and delete_horizon_ms is None)


# ----------------------------------------------------------------------------- state

class CleaningStateError(Exception):
    """A cleaning-state transition the table does not hold (Kafka's IllegalStateException)."""


@dataclass(frozen=True)
class CleaningState:
    """LogCleaningState: NONE (absent from Kafka's inProgress map), IN_PROGRESS, ABORTED, or
    PAUSED with a count."""

    name: str
    paused: int = 0

    def __str__(self) -> str:
        return f"LogCleaningPaused({self.paused})" if self.name == "PAUSED" else self.name


NONE = CleaningState("None")
IN_PROGRESS = CleaningState("LogCleaningInProgress")
ABORTED = CleaningState("LogCleaningAborted")


def paused(n: int) -> CleaningState:
    return CleaningState("PAUSED", n)


def _next(state: CleaningState, event: str) -> CleaningState | None:
    """The table: (state, event) -> state, None where the event is refused."""
    if event == "start":            # grabFilthiestCompactedLog, deletableLogs
        return IN_PROGRESS if state == NONE else None
    if event == "done":             # doneCleaning, doneDeleting
        return {IN_PROGRESS: NONE, ABORTED: paused(1)}.get(state)
    if event == "abort_and_pause":  # abortAndPauseCleaning
        if state == NONE:
            return paused(1)
        if state == IN_PROGRESS:
            return ABORTED
        return paused(state.paused + 1) if state.name == "PAUSED" else None
    if event == "resume":           # resumeCleaning
        if state.name != "PAUSED":
            return None
        return NONE if state.paused == 1 else paused(state.paused - 1)
    raise ValueError(f"unknown cleaning event {event!r}")


def transition(state: CleaningState, event: str, partition: object = "") -> CleaningState:
    nxt = _next(state, event)
    if nxt is None:
        raise CleaningStateError(f"compaction of {partition} cannot {event.replace('_', ' ')} "
                                 f"in state {state}")
    return nxt


def is_paused(state: CleaningState) -> bool:
    return state.name == "PAUSED"
