"""Segment, index, time-index and checkpoint files fuzzed at load (broker/storage/).

A log is written (small segments and index intervals, so there are several of each), closed,
one of its files is damaged (bytes flipped, cut or spliced in: a torn write, a bit flip, a
hostile edit), and the log is loaded again. Properties:

- a damaged ``.log`` loaded with recovery keeps every batch that lies wholly before the first
  damaged byte and truncates at the first invalid batch (Kafka's LogSegment.recover): what
  remains is a prefix of what was written, never less than that good prefix;
- a damaged ``.index`` or ``.timeindex`` (loaded without recovery, after a clean shutdown)
  costs nothing: every offset still reads the batch that holds it (the index is checked and
  rebuilt, as Kafka's sanity check does);
- a damaged ``leader-epoch-checkpoint`` is rebuilt from the batches;
- a damaged log-dir checkpoint: the recovery point and the log start offset are reset as
  Kafka's LogManager.loadLogs does (recover everything; the first segment's base), so the dir
  stays online; a damaged ``replication-offset-checkpoint`` takes the dir offline with a
  CheckpointIOError naming the file (Kafka's KafkaStorageException) - no data is touched.
Nothing raises anything but the storage error family (KafkaStorageError).
"""
from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.storage import checkpoints as C
from broker.storage.errors import KafkaStorageError, LogDirError
from broker.storage.log import Log, LogConfig
from broker.storage.log_manager import LogManager
from common import records as R
from common.names import TopicPartition
from tests.security.fuzzing import FUZZ, byte_mutations

TP = TopicPartition("t", 0)
CFG = LogConfig(segment_bytes=700, index_interval_bytes=100)


def _write_log(path: str, batches: list[int]) -> list[tuple[int, bytes]]:
    """A log of one batch per entry (n records each); returns (offset, value) per record."""
    log = Log.open(path, TP, CFG, needs_recovery=False)
    out = []
    for i, n in enumerate(batches):
        recs = [R.ProducerRecord(None, f"{i}.{j}".encode() * 3, timestamp=1000 + i)
                for j in range(n)]
        info = log.append_as_leader(R.build_batch(recs), leader_epoch=1 + i // 4)
        out += [(info.first_offset + j, r.value) for j, r in enumerate(recs)]
    log.flush()
    log.close()
    return out


def _records(log: Log, start: int = 0) -> list[tuple[int, bytes]]:
    """Every record from ``start`` on (one read stops at its segment's end)."""
    out: list[tuple[int, bytes]] = []
    while start < log.log_end_offset:
        got = [(r.offset, r.value) for r in R.decode_all(log.read(start, 1 << 30))]
        if not got:
            break
        out += got if not out else [g for g in got if g[0] > out[-1][0]]
        start = out[-1][0] + 1
    return out


def _files(path: str, suffix: str) -> list[str]:
    d = os.path.join(path, TP.dir_name)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(suffix))


def _damage(path: str, data) -> tuple[bytes, bytes]:
    with open(path, "rb") as f:
        before = f.read()
    after = data.draw(byte_mutations(before))
    with open(path, "wb") as f:
        f.write(after)
    return before, after


def _first_difference(a: bytes, b: bytes) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


_BATCHES = st.lists(st.integers(1, 4), min_size=2, max_size=14)


@FUZZ
@given(batches=_BATCHES, data=st.data())
def test_a_damaged_segment_keeps_its_good_prefix_after_recovery(tmp_path_factory, batches,
                                                                data):
    path = str(tmp_path_factory.mktemp("d"))
    written = _write_log(path, batches)
    segs = _files(path, ".log")
    seg = data.draw(st.sampled_from(segs))
    before, after = _damage(seg, data)
    cut = _first_difference(before, after)
    # every record of a batch that ends before the first damaged byte is kept
    base = int(os.path.basename(seg)[:20])
    good = _whole_batches_before(before, cut)
    log = Log.open(path, TP, CFG, needs_recovery=True)
    try:
        got = _records(log)
        kept_offsets = {o for o, _ in got}
        assert {o for o, _ in written if o < base} <= kept_offsets
        assert set(good) <= kept_offsets
        # nothing that was not written: values at their offsets, a prefix in order
        assert [v for _, v in got] == [v for _, v in written][:len(got)]
    finally:
        log.close()


def _whole_batches_before(seg: bytes, cut: int) -> list[int]:
    out: list[int] = []
    try:
        for b in R.iter_batches(seg, validate=False, allow_partial_tail=True):
            if b.position + b.header.size > cut:
                break
            out += range(b.header.base_offset, b.header.next_offset)
    except R.CorruptRecordError:
        pass  # not reached: ``seg`` is the file before the damage
    return out


@FUZZ
@given(batches=_BATCHES, suffix=st.sampled_from([".index", ".timeindex"]), data=st.data())
def test_a_damaged_index_costs_nothing(tmp_path_factory, batches, suffix, data):
    path = str(tmp_path_factory.mktemp("d"))
    written = _write_log(path, batches)
    _damage(data.draw(st.sampled_from(_files(path, suffix))), data)
    log = Log.open(path, TP, CFG, recovery_point=len(written), needs_recovery=False)
    try:
        assert log.log_end_offset == len(written)
        assert _records(log) == written
        for offset, value in written:  # every offset reads the batch that holds it
            first = _records(log, offset)
            assert first and first[0][0] <= offset and (offset, value) in first
        ts = log.offset_for_timestamp(1000 + len(batches) - 1, len(written))
        assert ts is not None and ts[1] == len(written) - batches[-1]
    finally:
        log.close()


@FUZZ
@given(batches=_BATCHES, data=st.data())
def test_a_damaged_leader_epoch_checkpoint_loads(tmp_path_factory, batches, data):
    path = str(tmp_path_factory.mktemp("d"))
    written = _write_log(path, batches)
    _damage(os.path.join(path, TP.dir_name, C.LEADER_EPOCH_CHECKPOINT), data)
    log = Log.open(path, TP, CFG, recovery_point=len(written), needs_recovery=False)
    try:
        assert _records(log) == written
    finally:
        log.close()


@FUZZ
@given(name=st.sampled_from([C.RECOVERY_POINT_CHECKPOINT, C.LOG_START_OFFSET_CHECKPOINT,
                             C.REPLICATION_OFFSET_CHECKPOINT]),
       data=st.data(), clean=st.booleans())
def test_a_damaged_log_dir_checkpoint_is_reset_or_refused_clearly(tmp_path_factory, name,
                                                                   data, clean):
    d = str(tmp_path_factory.mktemp("dir"))
    written = _write_log(d, [2, 3, 1, 4])
    entries = {TP: len(written), TopicPartition("u", 3): 7}
    for n in (C.RECOVERY_POINT_CHECKPOINT, C.LOG_START_OFFSET_CHECKPOINT,
              C.REPLICATION_OFFSET_CHECKPOINT):
        C.OffsetCheckpointFile(d, n, _fileops()).write(
            {tp: 0 if n == C.LOG_START_OFFSET_CHECKPOINT else o for tp, o in entries.items()})
    _damage(os.path.join(d, name), data)
    if clean:
        open(os.path.join(d, ".kafka_cleanshutdown"), "wb").close()
    lm = LogManager([d], 1, CFG)
    try:
        lm.startup()
        log = lm.logs[TP]  # a log start offset the damage left readable is the file's word
        assert _records(log, log.log_start_offset) == written[log.log_start_offset:]
    except LogDirError as e:
        # the only dir went offline: allowed for the HW checkpoint alone, naming the file
        assert name == C.REPLICATION_OFFSET_CHECKPOINT and name in str(e)
    finally:
        _close(lm)


def _fileops():
    from broker.storage.fileops import FileOps
    return FileOps()


def _close(lm: LogManager) -> None:
    for log in list(lm.logs.values()):
        try:
            log.close()
        except KafkaStorageError:
            pass
    for d in lm.dirs:
        d.executor.shutdown(wait=True)


@pytest.mark.parametrize("text", [b"", b"0\n", b"0\nx\n", b"1\n0\n", b"0\n1\nt 0\n",
                                  b"0\n2\nt 0 5\n", b"\xff\xfe", b"0\n1\nt x 5\n"])
def test_a_malformed_offset_checkpoint_raises_the_malformed_error(tmp_path, text):
    (tmp_path / C.RECOVERY_POINT_CHECKPOINT).write_bytes(text)
    with pytest.raises(C.MalformedCheckpointError, match=C.RECOVERY_POINT_CHECKPOINT):
        C.OffsetCheckpointFile(str(tmp_path), C.RECOVERY_POINT_CHECKPOINT, _fileops()).read()


# ------------------------------------------------------------------ what the fuzzing found

def _rewrite_entry(path: str, i: int, entry: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(i * len(entry))
        f.write(entry)


def test_what_the_fuzzing_found_an_index_entry_naming_the_wrong_batch(tmp_path):
    """An .index entry that passes the sanity check (order, bounds) but names another batch's
    position: reads of the offsets before it returned the later batch (a consumer skipped
    records still in the log), and truncate_to would have cut at the wrong batch."""
    written = _write_log(str(tmp_path), [3, 3, 3, 3])
    index = _files(str(tmp_path), ".index")[0]
    with open(index, "rb") as f:
        entries = f.read()
    assert len(entries) >= 24  # (last offset, position) entries; load re-walks from the last
    last, position = struct.unpack(">ii", entries[:8])  # the batch ending at ``last``
    first_rel = last - 3  # the previous batch's last offset, at this batch's position
    _rewrite_entry(index, 0, struct.pack(">ii", first_rel, position))
    log = Log.open(str(tmp_path), TP, CFG, recovery_point=len(written), needs_recovery=False)
    assert _records(log, first_rel)[0][0] <= first_rel  # the batch holding it, not a later one
    assert (first_rel, written[first_rel][1]) in _records(log, first_rel)
    assert log.segments[0].index_suspect
    log.truncate_to(4)
    assert _records(log) == written[:3]  # the batch holding 4 (3..5) goes whole
    log.close()
    log = Log.open(str(tmp_path), TP, CFG, recovery_point=3, needs_recovery=False)
    assert not log.segments[0].index_suspect and _records(log) == written[:3]
    log.close()


def test_what_the_fuzzing_found_a_time_index_with_a_wrong_last_timestamp(tmp_path):
    """A .timeindex whose last entry says a later timestamp than the batch holds: the
    segment's max timestamp (ListOffsets by time, time-based roll) came from it."""
    written = _write_log(str(tmp_path), [1] * 8)
    tindex = _files(str(tmp_path), ".timeindex")[0]
    with open(tindex, "rb") as f:
        n = len(f.read()) // 12
    assert n >= 1
    with open(tindex, "rb") as f:
        f.seek((n - 1) * 12)
        _, rel = struct.unpack(">qi", f.read(12))
    _rewrite_entry(tindex, n - 1, struct.pack(">qi", 2**56, rel))
    log = Log.open(str(tmp_path), TP, CFG, recovery_point=len(written), needs_recovery=False)
    try:
        assert log.segments[0].max_timestamp < 2**56
        assert log.offset_for_timestamp(2**56, len(written)) is None
    finally:
        log.close()


def test_what_the_fuzzing_found_a_segment_name_of_non_ascii_digits_is_not_a_segment(tmp_path):
    """'²'.isdigit() is True: a file '²².log' in a partition dir made the load call int()
    on it and fail with a bare ValueError (not a storage error), stopping the broker."""
    written = _write_log(str(tmp_path), [2, 2])
    (tmp_path / TP.dir_name / "\u00b2\u00b2.log").write_bytes(b"junk")
    log = Log.open(str(tmp_path), TP, CFG, recovery_point=len(written), needs_recovery=False)
    try:
        assert _records(log) == written
    finally:
        log.close()
