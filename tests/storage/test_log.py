"""Log: offsets, reads, rolls, indexes, truncation, retention, epochs — on real files."""

import os

import pytest

from broker.storage.log import Log, LogConfig, RecordTooLargeError
from broker.storage.segment import OFFSET_INDEX_ENTRY
from common.errors import CorruptRecordError, OffsetOutOfRangeError
from common.names import TopicPartition
from common.records import decode_all, iter_batches
from tests.storage.helpers import Clock, batch, kafka_python_read

TP = TopicPartition("orders", 0)


def open_log(tmp_path, clock=None, **cfg):
    return Log.open(str(tmp_path), TP, LogConfig(**cfg), clock=clock or Clock(),
                    needs_recovery=False)


def offsets(data):
    return [r.offset for r in decode_all(data)]


def test_leader_append_assigns_consecutive_offsets_and_stamps_epoch(tmp_path):
    log = open_log(tmp_path)
    a = log.append_as_leader(batch(3), leader_epoch=5)
    b = log.append_as_leader(batch(2) + batch(4), leader_epoch=5)
    assert (a.first_offset, a.last_offset) == (0, 2)
    assert (b.first_offset, b.last_offset, b.num_records) == (3, 8, 6)
    assert log.log_end_offset == 9
    data = log.read(0, 1 << 20)
    assert offsets(data) == list(range(9))
    assert {x.header.partition_leader_epoch for x in iter_batches(data)} == {5}
    assert log.epoch_cache.entries == [(5, 0)]


def test_kafka_parser_reads_segment_file(tmp_path):
    log = open_log(tmp_path, segment_bytes=4096)
    for i in range(30):
        log.append_as_leader(batch(i % 5 + 1, size=50, tag=f"b{i}-"), leader_epoch=i // 10)
    log.close()
    seen = []
    for seg in log.segments:
        seen += kafka_python_read(open(seg.log_path, "rb").read())
    ours = [(r.offset, r.key, r.value)
            for r in decode_all(b"".join(open(s.log_path, "rb").read() for s in log.segments))]
    assert seen == ours
    assert [o for o, _, _ in seen] == list(range(len(seen)))
    assert len(log.segments) > 1


def test_invalid_batch_is_refused_and_nothing_is_written(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), 0)
    good, bad = batch(1), bytearray(batch(1))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="corrupt"):
        log.append_as_leader(good + bytes(bad), 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(b"", 0)
    assert log.log_end_offset == 2
    assert log.active_segment.size == len(batch(2))


def test_batch_larger_than_message_max_bytes_is_refused(tmp_path):
    log = open_log(tmp_path, max_message_bytes=500)
    with pytest.raises(RecordTooLargeError, match="message.max.bytes"):
        log.append_as_leader(batch(1, size=600), 0)
    assert log.log_end_offset == 0


def test_roll_by_size_and_time_with_20_digit_names(tmp_path):
    clock = Clock()
    log = open_log(tmp_path, clock=clock, segment_bytes=1000, segment_ms=60_000)
    for _ in range(10):
        log.append_as_leader(batch(1, size=300, ts=clock.now), 0)
    assert len(log.segments) >= 4
    bases = [s.base_offset for s in log.segments]
    names = sorted(n for n in os.listdir(log.dir) if n.endswith(".log"))
    assert names == [f"{b:020d}.log" for b in bases]
    n = len(log.segments)
    log2 = open_log(tmp_path / "t", clock=clock, segment_ms=60_000)
    log2.append_as_leader(batch(1, ts=clock.now), 0)
    clock.now += 61_000
    log2.append_as_leader(batch(1, ts=clock.now), 0)
    assert [s.base_offset for s in log2.segments] == [0, 1]
    assert n == len(log.segments)


def test_read_respects_max_offset_and_returns_whole_batches(tmp_path):
    log = open_log(tmp_path)
    for _ in range(10):
        log.append_as_leader(batch(3, size=100), 0)
    assert offsets(log.read(0, 1 << 20, max_offset=9)) == list(range(9))
    assert log.read(9, 1 << 20, max_offset=9) == b""
    # max_bytes cuts at a batch boundary, never mid-batch
    one = len(batch(3, size=100))
    assert len(log.read(0, one * 2 + 10)) == one * 2
    # the first batch is returned whole even if larger than max_bytes (KIP-74)
    assert len(log.read(0, 10)) == one
    assert log.read(0, 10, min_one_batch=False) == b""
    # an offset inside a batch returns the whole batch holding it
    assert offsets(log.read(4, 1 << 20))[:3] == [3, 4, 5]
    assert log.read(30, 100) == b""
    with pytest.raises(OffsetOutOfRangeError, match="log end offset 30"):
        log.read(31, 100)


def test_index_maps_offsets_to_positions_after_reopen(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=1000)
    for _ in range(50):
        log.append_as_leader(batch(2, size=200), 0)
    seg = log.active_segment
    entries = list(seg.idx_entries)
    assert len(entries) > 10
    log.close()
    raw = open(seg.index_path, "rb").read()
    on_disk = [(seg.base_offset + r, p) for r, p in OFFSET_INDEX_ENTRY.iter_unpack(raw)]
    assert on_disk == entries
    log = open_log(tmp_path, index_interval_bytes=1000)
    assert list(log.active_segment.idx_entries) == entries
    for o in (0, 17, 55, 99):
        assert offsets(log.read(o, 1))[0] == o - o % 2


def test_index_lookup_never_pairs_an_offset_with_another_entrys_position(tmp_path, monkeypatch):
    # Index reads: lookup() runs on the fetch read pool while the log dir's thread
    # truncates and appends. Replayed deterministically: right after the reader's bisect, the
    # index is truncated and a later batch indexed in the reader's slot. With offsets and
    # positions in two lists the reader paired its offset with that batch's position - a read
    # starting past the offset it asked for (99_999 here). Entries are now one (offset,
    # position) unit, and a slot that no longer holds an entry <= the offset sends the reader
    # to the walk from the segment's start.
    import bisect

    log = open_log(tmp_path, index_interval_bytes=100)
    for _ in range(10):
        log.append_as_leader(batch(1, size=200), 0)
    seg = log.active_segment
    asked = 7
    expected = seg.lookup(asked)
    assert expected > 0
    real = bisect.bisect_right

    def bisect_then_the_writer_runs(a, x, *args, **kwargs):
        i = real(a, x, *args, **kwargs)
        monkeypatch.setattr(bisect, "bisect_right", real)
        seg._truncate_indexes_from_position(expected)  # from the reader's slot on
        seg._index_batch(asked + 100, 0, 99_999, 1)  # a later batch takes the slot
        return i

    seg.bytes_since_last_index = seg.index_interval_bytes + 1
    monkeypatch.setattr(bisect, "bisect_right", bisect_then_the_writer_runs)
    assert seg.lookup(asked) in (0, expected)  # a batch start at or before 7, never 99_999


def test_stale_index_is_repaired_on_open(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=100)
    for _ in range(20):
        log.append_as_leader(batch(1, size=200), 0)
    entries = list(log.active_segment.idx_entries)
    log.close()
    with open(log.active_segment.index_path, "r+b") as f:
        f.truncate(3 * OFFSET_INDEX_ENTRY.size)  # as if the process died before persisting it
    log = open_log(tmp_path, index_interval_bytes=100)
    assert list(log.active_segment.idx_entries) == entries
    assert log.log_end_offset == 20


def test_follower_append_keeps_leader_offsets_and_epochs(tmp_path):
    leader = open_log(tmp_path / "leader")
    leader.append_as_leader(batch(2), 1)
    leader.append_as_leader(batch(3), 2)
    follower = open_log(tmp_path / "follower")
    data = leader.read(0, 1 << 20)
    info = follower.append_as_follower(data + data[:20])  # partial tail ignored
    assert (info.first_offset, info.last_offset) == (0, 4)
    assert follower.epoch_cache.entries == [(1, 0), (2, 2)]
    assert follower.read(0, 1 << 20) == data
    with pytest.raises(CorruptRecordError, match="out of order"):
        follower.append_as_follower(data)


def test_truncate_to_removes_whole_batches_and_epochs(tmp_path):
    log = open_log(tmp_path, segment_bytes=600)
    for epoch in (1, 1, 2, 2, 3, 3):
        log.append_as_leader(batch(2, size=150), epoch)
    assert len(log.segments) > 2
    log.high_watermark = 12
    assert log.truncate_to(5)  # offset 5 is mid-batch [4, 5]: the batch goes whole
    assert log.log_end_offset == 4
    assert log.high_watermark == 4
    assert log.epoch_cache.entries == [(1, 0)]  # epochs 2 and 3 started at/after 4
    assert offsets(log.read(0, 1 << 20)) == [0, 1]  # one batch per segment here
    assert offsets(log.read(2, 1 << 20)) == [2, 3]
    assert [s.base_offset for s in log.segments][-1] <= 4
    log.append_as_leader(batch(1), 4)
    assert log.log_end_offset == 5
    assert log.epoch_cache.entries == [(1, 0), (4, 4)]
    assert not log.truncate_to(100)


def test_truncate_fully_and_start_at(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(batch(5), 1)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert os.listdir(log.dir).count(f"{1000:020d}.log") == 1
    assert log.epoch_cache.entries == []
    log.append_as_leader(batch(1), 2)
    assert offsets(log.read(1000, 100)) == [1000]


def test_end_offset_for_epoch(tmp_path):
    log = open_log(tmp_path)
    for epoch, n in ((1, 3), (3, 2), (5, 4)):
        log.append_as_leader(batch(n), epoch)
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(2) == (1, 3)
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(5) == (5, 9)
    # older than every entry: Kafka's (requested epoch, first entry's start offset)
    assert log.end_offset_for_epoch(0) == (0, 0)


def test_retention_by_time_deletes_whole_old_segments_below_hw(tmp_path):
    clock = Clock(now=10_000_000)
    log = open_log(tmp_path, clock=clock, segment_bytes=700, retention_ms=60_000)
    for i in range(12):
        log.append_as_leader(batch(1, size=300, ts=clock.now + i), 0)
    sizes_before = {s.base_offset: os.path.getsize(s.log_path) for s in log.segments}
    clock.now += 120_000
    assert log.delete_old_segments() == []  # HW is 0: nothing replicated, nothing deleted
    log.high_watermark = log.log_end_offset
    deleted = log.delete_old_segments()
    assert deleted == sorted(sizes_before)[:-1]  # everything but the active segment
    assert log.log_start_offset == log.segments[0].base_offset
    for base in deleted:
        assert not os.path.exists(os.path.join(log.dir, f"{base:020d}.log"))
    # the surviving segment is byte-for-byte untouched
    assert os.path.getsize(log.active_segment.log_path) == sizes_before[log.active_segment.base_offset]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)


def test_retention_by_size(tmp_path):
    log = open_log(tmp_path, segment_bytes=700, retention_bytes=1500)
    for _ in range(12):
        log.append_as_leader(batch(1, size=300), 0)
    log.high_watermark = log.log_end_offset
    log.delete_old_segments()
    # Kafka's rule: delete the oldest while the rest would still hold retention.bytes
    assert log.size >= 1500 > log.size - log.segments[0].size
    assert len(log.segments) < 12
    assert all(os.path.exists(s.log_path) for s in log.segments)
    assert offsets(log.read(log.log_start_offset, 1 << 20))[0] == log.log_start_offset


def test_log_start_offset_moves_forward_and_retention_drops_segments_below_it(tmp_path):
    """KIP-107 (DeleteRecords): never past the HW, never backwards; reads below it are out of
    range and the segments wholly below it go at the next retention pass."""
    log = open_log(tmp_path, segment_bytes=200, retention_ms=-1)
    for i in range(10):
        log.append_as_leader(batch(1, size=100, tag=f"r{i}-"), leader_epoch=0)
    log.high_watermark = 8
    with pytest.raises(OffsetOutOfRangeError, match="larger than the high watermark 8"):
        log.increment_log_start_offset(9)
    assert log.increment_log_start_offset(5) and not log.increment_log_start_offset(3)
    assert log.log_start_offset == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 1 << 20)
    assert offsets(log.read(5, 1 << 20))[0] == 5
    deleted = log.delete_old_segments()
    assert deleted and all(b < 5 for b in deleted)
    assert log.segments[0].base_offset <= 5 and log.log_start_offset == 5
