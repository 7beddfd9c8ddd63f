"""broker/producer_state.py and broker/storage/producer_snapshot.py: Kafka's producer-state rules
(ProducerAppendInfo, ProducerStateEntry, ProducerStateManager, UnifiedLog's producer part) and
its .snapshot file format."""

from __future__ import annotations

import errno
import os
import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.producer_state import (
    INT32_MAX,
    NUM_BATCHES_TO_RETAIN,
    AppendOrigin,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    ProducerStateMisuse,
    decrement_sequence,
    increment_sequence,
    last_sequence,
    rebuild_producer_state,
    take_snapshot,
)
from broker.storage.fileops import FaultInjectingFileOps, FileOps
from broker.storage.producer_snapshot import (
    ENTRY_SIZE,
    CorruptSnapshotError,
    FileSnapshotDir,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    snapshot_file_name,
)
from common.errors import ErrorCode
from common.records import BatchHeader, ProducerRecord, build_batch, parse_header

OOO = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
FENCED = ErrorCode.INVALID_PRODUCER_EPOCH


def hdr(base_offset: int, pid: int, epoch: int, seq: int, n: int = 1, ts: int = 1_000
        ) -> BatchHeader:
    """A v2 batch header of ``n`` records from producer ``pid`` (-1: not idempotent)."""
    return BatchHeader(base_offset, 0, 0, 2, 0, 0, n - 1, ts, ts, pid, epoch, seq, n)


class Log:
    """A partition log reduced to its batch headers, with offsets assigned as a leader does."""

    def __init__(self) -> None:
        self.batches: list[BatchHeader] = []

    @property
    def end(self) -> int:
        return self.batches[-1].next_offset if self.batches else 0

    def stamp(self, pid, epoch, seq, n=1, ts=1_000) -> BatchHeader:
        return hdr(self.end, pid, epoch, seq, n, ts)

    def produce(self, state: ProducerStateManager, pid, epoch, seq, n=1, ts=1_000):
        """The leader's produce path: analyze, append, apply (or answer the retry/error)."""
        h = self.stamp(pid, epoch, seq, n, ts)
        a = state.analyze([h])
        if a.appendable:
            self.batches.append(h)
            state.apply(a)
        return a

    def truncate(self, offset: int) -> None:
        self.batches = [b for b in self.batches if b.next_offset <= offset]

    def batches_from(self, start: int, end: int):
        return [b for b in self.batches if b.base_offset >= start and b.next_offset <= end]


class MemorySnapshotDir:
    """The in-memory twin of FileSnapshotDir."""

    def __init__(self) -> None:
        self.files: dict[int, bytes] = {}

    def offsets(self):
        return sorted(self.files)

    def read(self, offset):
        return self.files[offset]

    def write(self, offset, data):
        self.files[offset] = bytes(data)

    def delete(self, offset):
        self.files.pop(offset, None)


def replayed(batches, expiration_ms: int = 10**15) -> ProducerStateManager:
    s = ProducerStateManager(expiration_ms)
    s.append_replicated(batches)
    return s


# ---------------------------------------------------------------------------- sequences

def test_sequence_arithmetic_wraps_at_int32_max():
    # DefaultRecordBatch.incrementSequence / decrementSequence
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    assert decrement_sequence(5, 2) == 3
    assert last_sequence(hdr(0, 1, 0, INT32_MAX - 1, n=3)) == 0
    assert BatchMetadata(1, 10, 2, 0).first_seq == INT32_MAX


def test_header_fields_come_from_the_v2_batch_parser():
    raw = build_batch([ProducerRecord(b"k", b"v"), ProducerRecord(b"k", b"w")], base_offset=7,
                      producer_id=42, producer_epoch=3, base_sequence=10, now_ms=5)
    s = ProducerStateManager()
    s.append_replicated([parse_header(raw)])
    assert s.last_entry(42) == ProducerStateEntry(42, 3, (BatchMetadata(11, 8, 1, 5),), 5)
    assert s.map_end_offset == 9


# ---------------------------------------------------------------------------- client rules

@pytest.mark.parametrize("seq", [0, 17, INT32_MAX])
def test_a_new_producer_id_is_accepted_at_any_sequence(seq):
    # ProducerAppendInfo.checkSequence: no current epoch -> any sequence (Kafka 2.5+)
    log, s = Log(), ProducerStateManager()
    assert log.produce(s, 1, 0, seq).error == ErrorCode.NONE
    assert s.last_entry(1).last_seq == seq


def test_the_next_batch_continues_the_sequence_and_a_gap_is_out_of_order():
    log, s = Log(), ProducerStateManager()
    log.produce(s, 1, 0, 0, n=3)
    assert log.produce(s, 1, 0, 3, n=2).appendable
    a = log.produce(s, 1, 0, 6)
    assert a.error == OOO and "4 (current end sequence number)" in a.message
    assert log.end == 5 and s.last_entry(1).last_seq == 4


def test_sequences_continue_across_int32_max():
    log, s = Log(), ProducerStateManager()
    log.produce(s, 1, 0, INT32_MAX - 1, n=3)  # sequences MAX-1, MAX, 0
    assert s.last_entry(1).last_seq == 0
    assert log.produce(s, 1, 0, 1).appendable
    log2, s2 = Log(), ProducerStateManager()
    log2.produce(s2, 1, 0, INT32_MAX)
    assert log2.produce(s2, 1, 0, 0).appendable  # ProducerAppendInfo.inSequence
    assert log2.produce(s2, 1, 0, 2).error == OOO


def test_a_retry_of_any_of_the_last_five_batches_is_answered_with_its_offsets():
    # UnifiedLog.analyzeAndValidateProducerState: no error, the original offsets, not stored
    log, s = Log(), ProducerStateManager()
    for i in range(7):
        log.produce(s, 1, 0, 2 * i, n=2, ts=100 + i)
    before = (list(log.batches), dict(s.producers), s.map_end_offset)
    for i in range(7 - NUM_BATCHES_TO_RETAIN, 7):
        a = log.produce(s, 1, 0, 2 * i, n=2)
        assert a.error == ErrorCode.NONE and not a.appendable
        assert (a.duplicate.first_offset, a.duplicate.last_offset) == (2 * i, 2 * i + 1)
        assert a.duplicate.timestamp == 100 + i
    assert (log.batches, s.producers, s.map_end_offset) == before
    # older than the last five: out of order, never DUPLICATE_SEQUENCE_NUMBER
    for i in range(7 - NUM_BATCHES_TO_RETAIN):
        assert log.produce(s, 1, 0, 2 * i, n=2).error == OOO


def test_a_retry_must_match_the_exact_sequence_range():
    log, s = Log(), ProducerStateManager()
    log.produce(s, 1, 0, 0, n=3)
    assert log.produce(s, 1, 0, 0, n=2).error == OOO
    assert log.produce(s, 1, 0, 1, n=2).error == OOO


def test_an_older_epoch_is_fenced_even_for_a_retry():
    log, s = Log(), ProducerStateManager()
    log.produce(s, 1, 0, 0)
    log.produce(s, 1, 1, 0)
    a = log.produce(s, 1, 0, 0)  # the epoch-0 batch is no longer a duplicate: fenced
    assert a.error == FENCED and "smaller than the last seen epoch 1" in a.message
    assert log.produce(s, 1, 0, 1).error == FENCED


def test_a_bumped_epoch_restarts_at_zero_and_forgets_the_old_batches():
    # KIP-360: the client bumps its epoch and resets its sequence to 0
    log, s = Log(), ProducerStateManager()
    log.produce(s, 1, 0, 0)
    log.produce(s, 1, 0, 1)
    a = log.produce(s, 1, 1, 5)
    assert a.error == OOO and "new epoch" in a.message
    assert log.produce(s, 1, 1, 0).appendable
    e = s.last_entry(1)
    assert e.producer_epoch == 1 and [b.first_seq for b in e.batches] == [0]
    assert log.produce(s, 1, 1, 1).appendable


def test_producers_are_independent():
    log, s = Log(), ProducerStateManager()
    log.produce(s, 1, 0, 0)
    log.produce(s, 2, 4, 9)
    assert log.produce(s, 1, 0, 1).appendable and log.produce(s, 2, 4, 10).appendable
    assert log.produce(s, 2, 4, 12).error == OOO


def test_batches_of_one_request_are_checked_against_each_other():
    s = ProducerStateManager()
    a = s.analyze([hdr(0, 1, 0, 0, n=2), hdr(2, 1, 0, 2), hdr(3, 2, 0, 0)])
    assert a.appendable and a.end_offset == 4
    s.apply(a)
    assert [b.last_offset for b in s.last_entry(1).batches] == [1, 2]
    # a refusal anywhere refuses the whole request and changes nothing
    before = dict(s.producers)
    a = s.analyze([hdr(4, 1, 0, 3), hdr(5, 1, 0, 9)])
    assert a.error == OOO and not a.updates
    assert s.producers == before and s.map_end_offset == 4


def test_a_bump_inside_one_request_keeps_only_the_new_epoch():
    s = ProducerStateManager()
    s.apply(s.analyze([hdr(0, 1, 0, 0)]))
    s.apply(s.analyze([hdr(1, 1, 0, 1), hdr(2, 1, 1, 0)]))
    e = s.last_entry(1)
    assert e.producer_epoch == 1 and e.batches == (BatchMetadata(0, 2, 0, 1_000),)


def test_batches_without_a_producer_id_only_move_the_map_end():
    s = ProducerStateManager()
    s.apply(s.analyze([hdr(0, -1, -1, -1, n=4)]))
    assert s.is_empty() and s.map_end_offset == 4


def test_analyze_and_apply_have_nothing_between_them():
    s = ProducerStateManager()
    a = s.analyze([hdr(0, 1, 0, 0)])
    b = s.analyze([hdr(0, 2, 0, 0)])
    s.apply(a)
    with pytest.raises(ProducerStateMisuse, match="nothing between"):
        s.apply(b)
    with pytest.raises(ProducerStateMisuse, match="refused or duplicate"):
        s.apply(s.analyze([hdr(1, 1, 0, 0)]))


# ---------------------------------------------------------------------------- followers

def test_a_follower_builds_the_leaders_state_without_checks():
    leader_log, leader = Log(), ProducerStateManager()
    for pid, epoch, seq, n in [(1, 0, 0, 2), (2, 0, 5, 1), (1, 0, 2, 1), (1, 1, 0, 3)]:
        assert leader_log.produce(leader, pid, epoch, seq, n).appendable
    follower = replayed(leader_log.batches)
    assert follower.producers == leader.producers
    # the new leader dedups a retry from its first request
    a = follower.analyze([hdr(follower.map_end_offset, 1, 1, 0, n=3)])
    assert a.duplicate is not None and a.duplicate.first_offset == 4
    # replication does not refuse what a client append would (a gap, an older epoch)
    follower.append_replicated([hdr(7, 1, 1, 10), hdr(8, 1, 0, 0)])
    assert follower.last_entry(1).producer_epoch == 0


# ---------------------------------------------------------------------------- expiry, log start

def test_producer_id_expiration_removes_idle_producers():
    # KIP-854: producer.id.expiration.ms, measured from the last batch's timestamp
    log, s = Log(), ProducerStateManager(producer_id_expiration_ms=1_000)
    log.produce(s, 1, 0, 0, ts=5_000)
    log.produce(s, 2, 0, 0, ts=5_500)
    assert s.remove_expired_producers(5_999) == []
    assert s.remove_expired_producers(6_000) == [1]
    assert s.last_entry(1) is None and s.last_entry(2) is not None
    # an expired producer id has no state: any sequence is accepted again
    assert log.produce(s, 1, 0, 77, ts=6_000).appendable


def test_a_log_start_move_keeps_the_producers():
    # KAFKA-7190 (KIP-360): producers stay until they expire, so a producer whose data was
    # deleted by retention keeps its sequence (and a late retry of its last batch is a dup)
    log, s = Log(), ProducerStateManager()
    log.produce(s, 1, 0, 0)
    log.produce(s, 2, 0, 0)
    s.snapshot_written(1)
    s.on_log_start_offset_incremented(5)
    assert s.last_entry(1) is not None and s.map_end_offset == 5
    assert s.analyze([hdr(5, 1, 0, 0)]).duplicate is not None
    assert s.analyze([hdr(5, 1, 0, 3)]).error == OOO
    assert s.delete_snapshots_before(5) == [1] and s.snapshot_offsets == []


# ---------------------------------------------------------------------------- snapshot format

def test_snapshot_bytes_are_kafkas_layout():
    # ProducerSnapshot.json v1: int16 version, uint32 crc, int32 count, 46-byte entries
    rows = [SnapshotEntry(7, 2, 41, 1_000, 3, 1_700_000_000_000, -1, -1),
            SnapshotEntry(2**40, 0, INT32_MAX, 0, 0, -1, 5, 10)]
    data = encode_snapshot(rows)
    body = struct.pack(">i", 2)
    body += bytes.fromhex("0000000000000007" "0002" "00000029" "00000000000003e8" "00000003"
                          "0000018bcfe56800" "ffffffff" "ffffffffffffffff")
    body += bytes.fromhex("0000010000000000" "0000" "7fffffff" "0000000000000000" "00000000"
                          "ffffffffffffffff" "00000005" "000000000000000a")
    assert ENTRY_SIZE == 46 and len(data) == 6 + 4 + 2 * 46
    assert data == b"\x00\x01" + crc32c(body).to_bytes(4, "big") + body
    assert decode_snapshot(data) == rows
    assert decode_snapshot(encode_snapshot([])) == []


def test_snapshot_file_names_are_20_digit_offsets(tmp_path):
    assert snapshot_file_name(1234) == "00000000000000001234.snapshot"
    for name in ("00000000000000000007.snapshot", "00000000000000001234.snapshot",
                 "00000000000000000009.snapshot.tmp", "00000000000000000000.log",
                 "leader-epoch-checkpoint", "x.snapshot"):
        (tmp_path / name).write_bytes(b"")
    assert FileSnapshotDir(FileOps(), str(tmp_path)).offsets() == [7, 1234]
    assert FileSnapshotDir(FileOps(), str(tmp_path / "absent")).offsets() == []


@pytest.mark.parametrize("damage", ["crc", "body", "version", "short", "extra", "count"])
def test_a_corrupt_snapshot_does_not_decode(damage):
    data = bytearray(encode_snapshot([SnapshotEntry(7, 2, 41, 1_000, 3, 99)]))
    if damage == "crc":
        data[3] ^= 1
    elif damage == "body":
        data[20] ^= 0x80
    elif damage == "version":
        data[1] = 2
    elif damage == "short":
        del data[-1]
    elif damage == "extra":
        data += b"\x00"
    elif damage == "count":
        data[9] = 2
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(b"\x00")


def test_a_snapshot_keeps_the_last_batch_of_each_producer():
    log, s = Log(), ProducerStateManager()
    for i in range(3):
        log.produce(s, 9, 1, i, ts=10 + i)
    due = s.snapshot_due()
    assert due.offset == 3
    (row,) = decode_snapshot(due.data)
    assert row == SnapshotEntry(9, 1, 2, 2, 0, 12, -1, -1)
    assert ProducerStateEntry.from_snapshot_entry(row) == ProducerStateEntry(
        9, 1, (BatchMetadata(2, 2, 0, 12),), 12)
    s.snapshot_written(due.offset)
    assert s.snapshot_due() is None  # nothing new since
    assert ProducerStateEntry.from_snapshot_entry(
        SnapshotEntry(9, 1, -1, -1, 0, 12)).batches == ()


# ---------------------------------------------------------------------------- truncation, load

def _with_snapshots(offsets_at, n=6):
    """A log of one producer's single-record batches with snapshots taken at ``offsets_at``."""
    log, s, snaps = Log(), ProducerStateManager(), MemorySnapshotDir()
    for i in range(n):
        if log.end in offsets_at:
            take_snapshot(s, snaps)
        log.produce(s, 1, 0, i)
    return log, s, snaps


def _rebuild(log, s, snaps, offset, log_start=0, bases=()):
    log.truncate(offset)  # at a batch boundary, as a log truncates
    rebuild_producer_state(s, snaps, log_start_offset=log_start, last_offset=log.end,
                           now_ms=0, batches_from=log.batches_from,
                           segment_base_offsets=bases)


def test_truncation_rolls_back_to_a_snapshot_below_and_replays():
    log, s, snaps = _with_snapshots({2, 5})
    _rebuild(log, s, snaps, 4)
    assert snaps.offsets() == [2, 4]  # 5 is above the truncation point; 4 is the new end
    assert s.last_entry(1).last_seq == 3 and s.map_end_offset == 4
    assert log.produce(s, 1, 0, 4).appendable  # the producer's retry of seq 4 is stored again


def test_a_corrupt_snapshot_falls_back_to_an_older_one_or_a_full_replay():
    log, s, snaps = _with_snapshots({2, 4})
    snaps.files[4] = snaps.files[4][:-1]
    _rebuild(log, s, snaps, 5)
    assert 4 not in snaps.offsets() and s.last_entry(1).last_seq == 4
    snaps.files = {o: b"garbage" for o in snaps.files}
    _rebuild(log, s, snaps, 3)
    assert snaps.offsets() == [3] and s.producers == replayed(log.batches).producers


def test_truncation_to_the_current_end_keeps_the_state():
    log, s, snaps = _with_snapshots({2})
    before = dict(s.producers)
    _rebuild(log, s, snaps, 6)
    assert s.producers == before and snaps.offsets() == [2, 6]


def test_snapshots_at_or_below_the_log_start_are_not_loaded():
    log, s, snaps = _with_snapshots({2})
    _rebuild(log, s, snaps, 4, log_start=2)
    assert 2 not in snaps.offsets()
    # replayed from the log start: only batches 2 and 3 are known
    assert [b.last_seq for b in s.last_entry(1).batches] == [2, 3]


def test_the_replay_snapshots_the_last_two_segment_bases():
    # UnifiedLog.rebuildProducerState's offsetsToSnapshot
    log, s, snaps = _with_snapshots(set(), n=8)
    s2 = ProducerStateManager()
    rebuild_producer_state(s2, snaps, log_start_offset=0, last_offset=8, now_ms=0,
                           batches_from=log.batches_from, segment_base_offsets=[0, 3, 6])
    assert snaps.offsets() == [3, 6, 8] and s2.producers == s.producers


def test_expired_producers_are_not_loaded_from_a_snapshot():
    log, s, snaps = Log(), ProducerStateManager(1_000), MemorySnapshotDir()
    log.produce(s, 1, 0, 0, ts=100)
    log.produce(s, 2, 0, 0, ts=5_000)
    take_snapshot(s, snaps)
    fresh = ProducerStateManager(1_000, snaps.offsets())
    rebuild_producer_state(fresh, snaps, log_start_offset=0, last_offset=2, now_ms=5_500,
                           batches_from=log.batches_from)
    assert list(fresh.producers) == [2]


def test_restart_from_snapshot_files_through_fileops(tmp_path):
    # a crash: the new manager knows only the partition dir's files
    log, s = Log(), ProducerStateManager()
    files = FileSnapshotDir(FileOps(), str(tmp_path))
    for i in range(4):
        log.produce(s, 1, 0, i)
        log.produce(s, 2, 3, 10 + i)
        if i == 1:
            assert take_snapshot(s, files) == 4
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000004.snapshot"]
    after = ProducerStateManager(snapshot_offsets=files.offsets())
    rebuild_producer_state(after, files, log_start_offset=0, last_offset=log.end, now_ms=0,
                           batches_from=log.batches_from)
    assert sorted(os.listdir(tmp_path)) == [snapshot_file_name(4), snapshot_file_name(8)]
    for pid in (1, 2):
        assert after.last_entry(pid).batches == s.last_entry(pid).batches[-3:]
    # a torn file is skipped and deleted; the replay starts at the log start
    with open(tmp_path / snapshot_file_name(8), "r+b") as f:
        f.truncate(20)
    again = ProducerStateManager(snapshot_offsets=files.offsets())
    rebuild_producer_state(again, files, log_start_offset=0, last_offset=8, now_ms=0,
                           batches_from=log.batches_from)
    assert files.offsets() == [4, 8]
    assert again.producers == after.producers
    assert decode_snapshot((tmp_path / snapshot_file_name(8)).read_bytes())


def test_a_snapshot_read_error_is_a_storage_error_not_a_corrupt_snapshot(tmp_path):
    fops = FaultInjectingFileOps()
    files = FileSnapshotDir(fops, str(tmp_path))
    log, s = Log(), ProducerStateManager()
    log.produce(s, 1, 0, 0)
    take_snapshot(s, files)
    log.produce(s, 1, 0, 1)
    fops.fail(str(tmp_path), errno.EIO, ops={"read_file"})
    fresh = ProducerStateManager(snapshot_offsets=files.offsets())
    with pytest.raises(OSError):
        rebuild_producer_state(fresh, files, log_start_offset=0, last_offset=2, now_ms=0,
                               batches_from=log.batches_from)
    fops.clear()
    assert files.offsets() == [1]  # not deleted as if corrupt


def test_a_failed_snapshot_write_changes_nothing(tmp_path):
    fops = FaultInjectingFileOps()
    files = FileSnapshotDir(fops, str(tmp_path))
    log, s = Log(), ProducerStateManager()
    log.produce(s, 1, 0, 0)
    fops.fail(str(tmp_path), errno.ENOSPC, ops={"write"})
    with pytest.raises(OSError):
        take_snapshot(s, files)
    assert s.snapshot_offsets == [] and s.snapshot_due() is not None


# ---------------------------------------------------------------------------- the property

def _projection(s: ProducerStateManager):
    return {pid: (e.producer_epoch, e.batches[-1] if e.batches else None, e.last_timestamp)
            for pid, e in s.producers.items()}


_produce = st.tuples(st.just("produce"), st.integers(1, 3),
                    st.sampled_from(["next", "next", "next", "retry", "retry", "gap", "bump",
                                     "bump_bad", "old"]),
                    st.integers(1, 3), st.sampled_from([0, 7, INT32_MAX - 2]))
_ops = st.lists(st.one_of(
    _produce, _produce, _produce,
    st.tuples(st.just("roll")),
    st.tuples(st.just("truncate"), st.integers(0, 100)),
    st.tuples(st.just("restart")),
    st.tuples(st.just("corrupt")),
), min_size=15, max_size=60)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ops, st.booleans())
def test_any_history_leaves_the_state_of_a_replay_of_the_surviving_batches(ops, snapshots_on):
    """Appends, retries, gaps, epoch bumps and fencing, segment rolls (snapshots), truncations,
    restarts and corrupt snapshots: the state always equals a full replay of the log that
    survives, except that a reload from a snapshot knows only each producer's last batch
    before it (Kafka's snapshot keeps one), so its batches are a suffix of the replay's.
    When every snapshot is corrupt at each reload it is equal outright. And the log never holds a (producer, epoch,
    sequence) twice, nor one producer epoch's sequences out of order, and a retry of a
    producer's last stored batch is answered with no error and that batch's offsets."""
    log, s, snaps = Log(), ProducerStateManager(10**15), MemorySnapshotDir()
    sent: dict[int, list[tuple[int, int, int]]] = {}  # pid -> the (epoch, seq, n) sent
    clock = 1_000
    for op in ops:
        clock += 1
        if op[0] == "produce":
            _, pid, how, n, first = op
            hist = sent.setdefault(pid, [])
            if not hist:
                epoch, seq = 0, first  # a new producer id, at any sequence
            elif how == "retry":
                epoch, seq, n = hist[-1 - (clock % min(len(hist), 7))]
            else:
                epoch, last, last_n = hist[-1]
                seq = increment_sequence(last, last_n + (2 if how == "gap" else 0))
                if how == "bump":
                    epoch, seq = epoch + 1, 0  # KIP-360
                elif how == "bump_bad":
                    epoch += 1
                elif how == "old" and epoch > 0:
                    epoch -= 1  # never below 0: no client sends NO_PRODUCER_EPOCH with an id
            mine = [b for b in log.batches if b.producer_id == pid]
            a = log.produce(s, pid, epoch, seq, n, ts=clock)
            if mine and (mine[-1].producer_epoch, mine[-1].base_sequence,
                         mine[-1].records_count) == (epoch, seq, n):
                # a retry of the producer's last stored batch: no error, its offsets
                assert a.error == ErrorCode.NONE and a.duplicate is not None
                assert a.duplicate.first_offset == mine[-1].base_offset
            if a.appendable:
                hist.append((epoch, seq, n))
        elif op[0] == "roll" and snapshots_on:
            take_snapshot(s, snaps)
        elif op[0] in ("truncate", "restart") and not snapshots_on:
            # every snapshot unreadable: each reload falls back to a replay from log start
            snaps.files = dict.fromkeys(snaps.files, b"")
        if op[0] == "truncate":
            _rebuild(log, s, snaps, min(op[1], log.end))
        elif op[0] == "restart":
            s = ProducerStateManager(10**15, snaps.offsets())
            rebuild_producer_state(s, snaps, log_start_offset=0, last_offset=log.end,
                                   now_ms=clock, batches_from=log.batches_from)
        elif op[0] == "corrupt" and snaps.files:
            top = max(snaps.files)
            snaps.files[top] = snaps.files[top][:-2] + b"\xff\xff"
        full = replayed(log.batches)
        assert s.map_end_offset == log.end
        assert _projection(s) == _projection(full)
        for pid, e in s.producers.items():
            f = full.producers[pid].batches
            assert f[len(f) - len(e.batches):] == e.batches
        if not snapshots_on:
            assert s.producers == full.producers
    seen = set()
    last_seq: dict[tuple[int, int], int] = {}
    for b in log.batches:
        for i in range(b.records_count):
            key = (b.producer_id, b.producer_epoch, increment_sequence(b.base_sequence, i))
            assert key not in seen, f"{key} stored twice"
            seen.add(key)
        k = (b.producer_id, b.producer_epoch)
        if k in last_seq:
            assert b.base_sequence == increment_sequence(last_seq[k], 1), \
                f"{k} out of order at offset {b.base_offset}"
        last_seq[k] = last_sequence(b)


def test_appendorigin_names():
    assert {o.value for o in AppendOrigin} == {"client", "replication"}


def test_a_producer_id_with_epoch_minus_one_is_never_checked():
    # Kafka parity (ProducerAppendInfo.checkSequence): NO_PRODUCER_EPOCH means "no state", so
    # such batches are accepted at any sequence; real clients never send them
    log, s = Log(), ProducerStateManager()
    assert log.produce(s, 1, -1, 4).appendable and log.produce(s, 1, -1, 9).appendable
