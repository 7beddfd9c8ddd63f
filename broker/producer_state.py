"""The idempotent producer's state of one partition (KIP-98, KIP-360, KIP-854): pure, no I/O.

Kafka's ProducerStateManager, ProducerStateEntry and ProducerAppendInfo, and the producer part
of UnifiedLog.analyzeAndValidateProducerState / rebuildProducerState. Everything that decides
whether a producer's batch is appended, answered as a duplicate or refused lives here; the log,
the network and the snapshot files are the caller's (``rebuild_producer_state`` reaches the
files only through the ``SnapshotDir`` it is handed, see broker/storage/producer_snapshot.py).

Rules (each names where it comes from):

- Per producer id the last ``NUM_BATCHES_TO_RETAIN`` = 5 batches are kept, each as (last
  sequence, last offset, offset delta, max timestamp), with the producer's epoch and the last
  batch's timestamp (ProducerStateEntry; 5 = the producer's max.in.flight limit).
- A client batch whose epoch and exact sequence range match one of those five is a duplicate
  (a retry): it is not appended and is answered with no error and the original batch's offsets
  (UnifiedLog.analyzeAndValidateProducerState; the broker never sends DUPLICATE_SEQUENCE_NUMBER).
- An epoch older than the producer's current one: INVALID_PRODUCER_EPOCH (ProducerAppendInfo.
  checkProducerEpoch; the code since Kafka 2.7, KIP-588). Replicated batches are not refused.
- A newer epoch must start at sequence 0 (the KIP-360 bump), unless the producer id has no
  state here: OUT_OF_ORDER_SEQUENCE_NUMBER otherwise (ProducerAppendInfo.checkSequence).
- The same epoch must continue at last sequence + 1, with Int32 max followed by 0; a gap, or a
  retry older than the five kept batches, is OUT_OF_ORDER_SEQUENCE_NUMBER. A producer id with no
  state (new, expired, or removed with its data) is accepted at any sequence (Kafka 2.5+).
- As in Kafka, a batch with a producer id and epoch -1 (NO_PRODUCER_EPOCH), which no client
  sends, is never fenced or sequence-checked: a producer id "without state" stays so.
- Follower and log-recovery appends (``AppendOrigin.REPLICATION``) are not validated and build
  the same state, so a new leader dedups from its first request.
- ``analyze`` then ``apply``: nothing may change the state in between (Kafka holds the log lock
  across both); ``apply`` only after the batches are in the log. A stale or refused analysis
  raises ProducerStateMisuse.
- A producer with no ongoing transaction whose last timestamp is ``producer.id.expiration.ms``
  old is removed (KIP-854; ProducerStateManager.isProducerExpired), also when a snapshot loads.
- A log start offset move keeps the producers in memory (KAFKA-7190, part of KIP-360: removing
  them made retried producers fail with UNKNOWN_PRODUCER_ID); they go by expiry, or at a reload
  when no snapshot above the log start holds them.
- Truncation rolls the state back: snapshots above the new log end (or at or below the log
  start) are dropped, the latest remaining readable one is loaded and the log is replayed from
  it (ProducerStateManager.truncateAndReload, UnifiedLog.rebuildProducerState). A corrupt
  snapshot is deleted and the next older one tried; with none the replay starts at log start.

Partial: transactions are not modelled. Transactional batches follow the same sequence rules,
but ongoing transactions, end markers, coordinator epochs and verification guards are not kept;
``coordinator_epoch`` and ``current_txn_first_offset`` only round-trip through snapshots.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import NamedTuple, Protocol

from broker.storage.producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
)
from common.errors import ErrorCode
from common.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1
# KIP-854: producer.id.expiration.ms, default one day
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


def increment_sequence(sequence: int, increment: int) -> int:
    """DefaultRecordBatch.incrementSequence: sequences wrap from Int32 max to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """DefaultRecordBatch.decrementSequence, the inverse of increment_sequence."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """ProducerAppendInfo.inSequence: the next batch starts right after the last one."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def last_sequence(h: BatchHeader) -> int:
    """DefaultRecordBatch.lastSequence."""
    if h.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return increment_sequence(h.base_sequence, h.last_offset_delta)


def has_producer_id(h: BatchHeader) -> bool:
    return h.producer_id > NO_PRODUCER_ID


class BatchMetadata(NamedTuple):
    """One retained batch of a producer (Kafka's BatchMetadata)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True)
class ProducerStateEntry:
    """What a partition remembers of one producer id (Kafka's ProducerStateEntry), immutable:
    the batches oldest first, at most NUM_BATCHES_TO_RETAIN."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: tuple[BatchMetadata, ...] = ()
    last_timestamp: int = NO_TIMESTAMP
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # -1: none (transactions are not modelled)

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def with_batch(self, epoch: int, batch: BatchMetadata) -> ProducerStateEntry:
        """ProducerStateEntry.addBatch: a new epoch forgets the old epoch's batches."""
        kept = self.batches if epoch == self.producer_epoch else ()
        return replace(self, producer_epoch=epoch,
                       batches=(kept + (batch,))[-NUM_BATCHES_TO_RETAIN:],
                       last_timestamp=batch.timestamp)

    def updated_by(self, nxt: ProducerStateEntry) -> ProducerStateEntry:
        """ProducerStateEntry.update(nextEntry): ``nxt`` holds the batches of one append."""
        kept = self.batches if nxt.producer_epoch == self.producer_epoch else ()
        return replace(nxt, batches=(kept + nxt.batches)[-NUM_BATCHES_TO_RETAIN:])

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """ProducerStateEntry.findDuplicateBatch: a retained batch of the same epoch with the
        exact sequence range."""
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def to_snapshot_entry(self) -> SnapshotEntry:
        """ProducerStateManager.writeSnapshot's row: the last batch only."""
        return SnapshotEntry(self.producer_id, self.producer_epoch, self.last_seq,
                             self.last_data_offset, self.last_offset_delta, self.last_timestamp,
                             self.coordinator_epoch, self.current_txn_first_offset)

    @classmethod
    def from_snapshot_entry(cls, e: SnapshotEntry) -> ProducerStateEntry:
        """ProducerStateManager.readSnapshot: a row with lastOffset < 0 has no batch."""
        batches = ((BatchMetadata(e.last_sequence, e.last_offset, e.offset_delta, e.timestamp),)
                   if e.last_offset >= 0 else ())
        return cls(e.producer_id, e.epoch, batches, e.timestamp, e.coordinator_epoch,
                   e.current_txn_first_offset)


class AppendOrigin(Enum):
    """Kafka's AppendOrigin, the two replog has: a producer's request (validated) and a
    follower's or log recovery's replay (not validated)."""

    CLIENT = "client"
    REPLICATION = "replication"


class ProducerStateMisuse(Exception):
    """A caller broke one of the ordering rules of the module docstring (names the rule)."""


@dataclass(frozen=True)
class AppendAnalysis:
    """The outcome of ``analyze`` for one partition's batches.

    - ``error`` NONE and ``duplicate`` None: append the batches, then ``apply`` this.
    - ``duplicate`` set: a retry; append nothing and answer NONE with its offsets
      (``duplicate.first_offset``; Kafka answers the first offset and the log append time -1).
    - ``error`` set: refuse the whole partition's batches with it; append nothing.
    """

    error: ErrorCode = ErrorCode.NONE
    message: str = ""
    duplicate: BatchMetadata | None = None
    updates: Mapping[int, ProducerStateEntry] = field(default_factory=dict)
    end_offset: int | None = None  # the offset after the last batch analyzed
    generation: int = -1

    @property
    def appendable(self) -> bool:
        return self.error == ErrorCode.NONE and self.duplicate is None


@dataclass(frozen=True)
class PendingSnapshot:
    """A snapshot to write as ``<offset>.snapshot``; call ``snapshot_written`` after."""

    offset: int
    data: bytes


class ProducerStateManager:
    """The producer state of one partition (Kafka's ProducerStateManager, without
    transactions). Not thread-safe; every method is a plain state change or a value.

    ``map_end_offset`` is the offset below which every batch has been applied; snapshot
    offsets are the ones known to exist as files (the caller deletes the files of the offsets
    that methods return as dropped)."""

    def __init__(self, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 snapshot_offsets: Iterable[int] = ()):
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self.last_snap_offset = 0
        self.snapshot_offsets: list[int] = sorted(set(snapshot_offsets))
        self._generation = 0  # bumped by every change; an analysis is valid for one

    # ------------------------------------------------------------------ reading

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def is_empty(self) -> bool:
        return not self.producers

    def latest_snapshot_offset(self) -> int | None:
        return self.snapshot_offsets[-1] if self.snapshot_offsets else None

    # ------------------------------------------------------------------ appends

    def analyze(self, batches: Sequence[BatchHeader],
                origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendAnalysis:
        """UnifiedLog.analyzeAndValidateProducerState over batches whose headers carry the
        offsets they will be stored at. Batches without a producer id are passed over."""
        pending: dict[int, ProducerStateEntry] = {}
        end = None
        for h in batches:
            end = h.next_offset
            if not has_producer_id(h):
                continue
            pid = h.producer_id
            current = self.producers.get(pid)
            first_seq, last_seq = h.base_sequence, last_sequence(h)
            if origin is AppendOrigin.CLIENT and current is not None:
                dup = current.find_duplicate(h.producer_epoch, first_seq, last_seq)
                if dup is not None:
                    return AppendAnalysis(duplicate=dup, generation=self._generation)
            base = current or ProducerStateEntry(pid)
            # ProducerAppendInfo's updatedEntry: the current epoch and timestamp, no batches
            updated = pending.get(pid) or replace(base, batches=())
            refusal = _check_batch(base, updated, h, first_seq, origin)
            if refusal is not None:
                code, message = refusal
                return AppendAnalysis(error=code, message=message, generation=self._generation)
            pending[pid] = updated.with_batch(h.producer_epoch, BatchMetadata(
                last_seq, h.last_offset, h.last_offset_delta, h.max_timestamp))
        return AppendAnalysis(updates=pending, end_offset=end, generation=self._generation)

    def apply(self, analysis: AppendAnalysis) -> None:
        """ProducerStateManager.update for each producer, then updateMapEndOffset: after the
        analyzed batches were appended to the log."""
        if analysis.generation != self._generation:
            raise ProducerStateMisuse("apply of an analysis made before the state last changed "
                                      "(analyze and apply must have nothing between them)")
        if not analysis.appendable:
            raise ProducerStateMisuse(f"apply of a refused or duplicate analysis "
                                      f"({analysis.error.name}, duplicate={analysis.duplicate})")
        for pid, entry in analysis.updates.items():
            current = self.producers.get(pid)
            self.producers[pid] = entry if current is None else current.updated_by(entry)
        if analysis.end_offset is not None:
            self.map_end_offset = analysis.end_offset
        self._generation += 1

    def append_replicated(self, batches: Iterable[BatchHeader]) -> None:
        """A follower's fetched batches, or log recovery's replay: the same state, no checks."""
        self.apply(self.analyze(list(batches), AppendOrigin.REPLICATION))

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset
        self._generation += 1

    # ------------------------------------------------------------------ expiry, log start

    def is_producer_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        """KIP-854 (ProducerStateManager.isProducerExpired)."""
        return (entry.current_txn_first_offset < 0
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """The periodic producer-id expiration check; returns the producer ids removed."""
        gone = [pid for pid, e in self.producers.items() if self.is_producer_expired(now_ms, e)]
        for pid in gone:
            del self.producers[pid]
        if gone:
            self._generation += 1
        return gone

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """ProducerStateManager.onLogStartOffsetIncremented. Producers are kept (KAFKA-7190);
        the snapshots of deleted segments go with them (``delete_snapshots_before``)."""
        if self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self.last_snap_offset = log_start_offset if latest is None else latest
        self._generation += 1

    def delete_snapshots_before(self, offset: int) -> list[int]:
        """ProducerStateManager.deleteSnapshotsBefore: the snapshot offsets below ``offset``,
        forgotten here; the caller deletes their files."""
        i = bisect.bisect_left(self.snapshot_offsets, offset)
        gone, self.snapshot_offsets = self.snapshot_offsets[:i], self.snapshot_offsets[i:]
        return gone

    # ------------------------------------------------------------------ snapshots

    def snapshot_due(self) -> PendingSnapshot | None:
        """ProducerStateManager.takeSnapshot: a snapshot at the map end offset, unless the
        last one is there already. Write it, then ``snapshot_written``."""
        if self.map_end_offset <= self.last_snap_offset:
            return None
        rows = [e.to_snapshot_entry() for _, e in sorted(self.producers.items())]
        return PendingSnapshot(self.map_end_offset, encode_snapshot(rows))

    def snapshot_written(self, offset: int) -> None:
        if offset not in self.snapshot_offsets:
            bisect.insort(self.snapshot_offsets, offset)
        self.last_snap_offset = offset

    def truncate_fully_and_start_at(self, offset: int) -> list[int]:
        """ProducerStateManager.truncateFullyAndStartAt: the state and every snapshot go;
        returns the snapshot offsets to delete."""
        gone, self.snapshot_offsets = self.snapshot_offsets, []
        self.producers.clear()
        self.last_snap_offset = 0
        self.map_end_offset = offset
        self._generation += 1
        return gone

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int,
                            read_snapshot: Callable[[int], bytes]) -> list[int]:
        """ProducerStateManager.truncateAndReload: drop the snapshots out of (log start, log
        end], and unless the state already ends at ``log_end_offset`` load the latest readable
        snapshot (corrupt ones dropped too). Returns the dropped snapshot offsets, for the
        caller to delete. The caller then replays the log from ``map_end_offset``.
        ``read_snapshot`` returns a snapshot file's bytes; its OSError propagates."""
        dropped = [o for o in self.snapshot_offsets
                   if o > log_end_offset or o <= log_start_offset]
        self.snapshot_offsets = [o for o in self.snapshot_offsets if o not in dropped]
        self._generation += 1
        if log_end_offset == self.map_end_offset:
            self.on_log_start_offset_incremented(log_start_offset)
            return dropped
        self.producers.clear()
        while self.snapshot_offsets:
            offset = self.snapshot_offsets[-1]
            try:
                rows = decode_snapshot(read_snapshot(offset))
            except CorruptSnapshotError:
                dropped.append(self.snapshot_offsets.pop())
                continue
            for row in rows:
                entry = ProducerStateEntry.from_snapshot_entry(row)
                if not self.is_producer_expired(now_ms, entry):
                    self.producers[entry.producer_id] = entry
            self.last_snap_offset = self.map_end_offset = offset
            return dropped
        self.last_snap_offset = self.map_end_offset = log_start_offset
        return dropped


def _check_batch(current: ProducerStateEntry, updated: ProducerStateEntry, h: BatchHeader,
                 first_seq: int, origin: AppendOrigin) -> tuple[ErrorCode, str] | None:
    """ProducerAppendInfo.checkProducerEpoch and checkSequence for one data batch.
    ``current``: the state before this append; ``updated``: it with this append's earlier
    batches of the same producer. None: the batch may be appended."""
    if origin is AppendOrigin.REPLICATION:
        return None  # Kafka only logs an older epoch here; the leader validated the batch
    pid, epoch = h.producer_id, h.producer_epoch
    if epoch < updated.producer_epoch:
        return (ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch of producer {pid} at offset {h.base_offset} is {epoch}, which is "
                f"smaller than the last seen epoch {updated.producer_epoch}")
    if epoch != updated.producer_epoch:
        # KIP-360: a bumped epoch restarts at 0; a producer id without state may start anywhere
        if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
            return (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"invalid sequence number for new epoch of producer {pid} at offset "
                    f"{h.base_offset}: {epoch} (request epoch), {first_seq} (seq. number), "
                    f"{updated.producer_epoch} (current producer epoch)")
        return None
    if not updated.is_empty:
        current_last_seq = updated.last_seq
    elif epoch == current.producer_epoch:
        current_last_seq = current.last_seq
    else:
        current_last_seq = NO_SEQUENCE
    # no current epoch (the producer's data was removed, or it is new): any sequence goes
    if current.producer_epoch == NO_PRODUCER_EPOCH or in_sequence(current_last_seq, first_seq):
        return None
    return (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"out of order sequence number for producer {pid} at offset {h.base_offset}: "
            f"{first_seq} (incoming seq. number), {current_last_seq} (current end sequence "
            f"number)")


# ---------------------------------------------------------------------------- rebuild

class SnapshotDir(Protocol):
    """Where a partition's snapshot files are: the real one is producer_snapshot.py's
    FileSnapshotDir over FileOps; tests use an in-memory twin."""

    def offsets(self) -> list[int]: ...
    def read(self, offset: int) -> bytes: ...
    def write(self, offset: int, data: bytes) -> None: ...
    def delete(self, offset: int) -> None: ...


def take_snapshot(state: ProducerStateManager, snapshots: SnapshotDir) -> int | None:
    """Write the due snapshot, if one is (at a segment roll, a clean shutdown, after a
    recovery); returns its offset. A failed write leaves the state as it was."""
    due = state.snapshot_due()
    if due is None:
        return None
    snapshots.write(due.offset, due.data)
    state.snapshot_written(due.offset)
    return due.offset


def rebuild_producer_state(state: ProducerStateManager, snapshots: SnapshotDir, *,
                           log_start_offset: int, last_offset: int, now_ms: int,
                           batches_from: Callable[[int, int], Iterable[BatchHeader]],
                           segment_base_offsets: Sequence[int] = ()) -> None:
    """UnifiedLog.rebuildProducerState: the state as of ``last_offset`` (exclusive) from the
    latest usable snapshot plus a replay of the log, then a snapshot at ``last_offset``. Used
    at log load (after a crash too), on truncation and after a recovery.

    ``batches_from(start, end)`` yields the headers of the log's batches from ``start`` up to
    ``end`` in offset order. Snapshots are also taken at the bases of the last two segments
    when the replay passes them (Kafka's offsetsToSnapshot), so that a later truncation into
    them does not replay from the start."""
    was_empty = state.is_empty() and state.map_end_offset >= last_offset
    for offset in state.truncate_and_reload(log_start_offset, last_offset, now_ms,
                                            snapshots.read):
        snapshots.delete(offset)
    to_snapshot = set(sorted(segment_base_offsets)[-2:])
    if last_offset > state.map_end_offset and not was_empty:
        start = max(state.map_end_offset, log_start_offset)
        state.update_map_end_offset(start)
        for h in batches_from(start, last_offset):
            if h.base_offset < start:
                continue
            if h.next_offset > last_offset:
                break
            due = sorted(b for b in to_snapshot if state.map_end_offset <= b <= h.base_offset)
            for base in due:
                state.update_map_end_offset(base)
                take_snapshot(state, snapshots)
                to_snapshot.discard(base)
            state.append_replicated([h])
    state.update_map_end_offset(last_offset)
    take_snapshot(state, snapshots)
