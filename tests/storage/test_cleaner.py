"""The Cleaner on real files (broker/storage/cleaner.py): a round keeps each key's last record
at its own offset, removes tombstones once their delete horizon passed, rebuilds the indexes,
keeps the segments contiguous, and is refused by a log that changed under it. Crashes at each
step of the swap are in test_cleaner_crash.py."""

import os

import pytest

from broker.storage.cleaner import log_stats
from broker.storage.log import CleaningAbortedError, Log
from broker.storage.segment import OFFSET_INDEX_ENTRY
from common import records as rec
from tests.storage.cleaner_helpers import (
    CFG,
    TP,
    clean_once,
    fill,
    keyed,
    latest,
    new_cleaner,
    records,
)
from tests.storage.helpers import Clock, kafka_python_read


def open_log(tmp_path, clock=None, cfg=CFG, recovery=False):
    return Log.open(str(tmp_path), TP, cfg, clock=clock or Clock(10_000),
                    needs_recovery=recovery)


def expected(written, upto):
    """What a cleaned log holds: each key's last record below ``upto``, everything after."""
    keep = {off for off, _ in latest(written, upto).values()}
    return [(off, *written[off]) for off in sorted(written) if off in keep or off >= upto]


def test_a_round_keeps_the_last_record_of_each_key_at_its_offset(tmp_path):
    log = open_log(tmp_path)
    written = fill(log)
    leo, size = log.log_end_offset, log.size
    before = len(log.segments)
    end, stats = clean_once(log, new_cleaner(), 10_000)
    assert end == log.active_segment.base_offset == leo  # everything but the active segment
    assert records(log) == expected(written, end)
    assert log.log_end_offset == leo and log.size < size / 3
    assert len(log.segments) == before  # groups are sized by the segments before cleaning
    assert (stats.messages_read, stats.messages_written) == (40, 8)
    assert stats.bytes_written < stats.bytes_read and 0 < stats.buffer_utilization < 1
    # an independent parser reads the rewritten files
    data = b"".join(open(s.log_path, "rb").read() for s in log.segments)
    assert [(o, k, v) for o, k, v in kafka_python_read(data)] == records(log)


def test_the_rewritten_log_loads_and_its_indexes_are_rebuilt(tmp_path):
    log = open_log(tmp_path, cfg=CFG.__class__(**{**CFG.__dict__, "index_interval_bytes": 0}))
    written = fill(log, rounds=6)
    clean_once(log, new_cleaner(), 10_000)
    want = records(log)
    counts = []
    for seg in log.segments[:-1]:
        entries = len(open(seg.index_path, "rb").read()) // OFFSET_INDEX_ENTRY.size
        assert entries == len(seg.idx_entries)
        counts.append(entries)
    assert sum(counts) > 0
    log.close()
    for recovery in (False, True):
        again = open_log(tmp_path, recovery=recovery)
        assert again.load_problems == []
        assert records(again) == want
        # reads at any offset, through the index: the batches from the one holding it
        for off in range(0, again.log_end_offset, 7):
            got = list(rec.iter_batches(again.read(off, 300)))
            assert got and got[0].header.last_offset >= off
            assert got[0].header.base_offset <= off or all(o < off for o, _, _ in want
                                                           if o < got[0].header.base_offset)
        # time index: ListOffsets by time still answers
        assert again.offset_for_timestamp(0, again.log_end_offset)[1] == want[0][0]
        again.close()
    assert sorted(os.listdir(tmp_path / TP.dir_name)) == sorted(
        n for n in os.listdir(tmp_path / TP.dir_name) if not n.endswith((".cleaned", ".swap",
                                                                         ".deleted")))
    assert written


def test_segments_stay_contiguous_and_empty_batches_keep_the_ends(tmp_path):
    log = open_log(tmp_path)
    fill(log, rounds=8, keys=2)
    clean_once(log, new_cleaner(), 10_000)
    segs = log.segments
    assert all(a.next_offset == b.base_offset for a, b in zip(segs, segs[1:]))
    empties = [b.header for s in segs[:-1]
               for b in rec.iter_batches(open(s.log_path, "rb").read())
               if b.header.records_count == 0]
    assert empties  # a group whose last batch lost its records keeps its header
    assert all(h.base_timestamp == -1 for h in empties)


def test_tombstones_get_a_horizon_then_go(tmp_path):
    clock = Clock(10_000)
    log = open_log(tmp_path, clock)
    written = fill(log, rounds=2, keys=4)
    for k in (b"k0", b"k1"):
        info = log.append_as_leader(keyed(k, None), 0)
        written[info.first_offset] = (k, None)
    log.roll()
    log.high_watermark = log.log_end_offset
    cleaner = new_cleaner()
    end, _ = clean_once(log, cleaner, clock.now)
    kept = {k: v for _, k, v in records(log)}
    assert kept[b"k0"] is None and kept[b"k1"] is None  # kept, with their horizon now set
    horizons = {b.header.base_timestamp for s in log.segments
                for b in rec.iter_batches(open(s.log_path, "rb").read())
                if b.header.attributes & rec.DELETE_HORIZON_MASK}
    assert horizons == {clock.now + CFG.delete_retention_ms}
    # before the horizon a new round keeps them; at it, they go
    clock.now += CFG.delete_retention_ms - 1
    more = log.append_as_leader(keyed(b"k3", b"new"), 0)
    log.roll()
    log.high_watermark = log.log_end_offset
    end, _ = clean_once(log, cleaner, clock.now, checkpoint=end)
    assert {k for _, k, v in records(log) if v is None} == {b"k0", b"k1"}
    clock.now += 1
    log.append_as_leader(keyed(b"k2", b"newer"), 0)  # a round needs dirty records to run
    log.roll()
    log.high_watermark = log.log_end_offset
    assert clean_once(log, cleaner, clock.now, checkpoint=end) is not None
    left = {k: (o, v) for o, k, v in records(log)}
    assert b"k0" not in left and b"k1" not in left
    assert left[b"k3"] == (more.first_offset, b"new")
    assert left[b"k2"][1] == b"newer" and len(log.segments) == 2  # merged as they shrank


def test_never_the_active_segment_nor_past_the_high_watermark(tmp_path):
    log = open_log(tmp_path)
    written = fill(log)
    hw = log.segments[3].base_offset + 1
    log.high_watermark = hw
    end, _ = clean_once(log, new_cleaner(), 10_000)
    assert end == log.segments[-1].base_offset or end <= hw
    assert end <= hw
    assert records(log) == expected(written, end)


def test_a_round_the_map_cannot_hold_cleans_what_it_read(tmp_path):
    log = open_log(tmp_path)
    written = fill(log, rounds=3, keys=8)
    cleaner = new_cleaner(memory=5 * 24)  # 4 keys at load factor 0.9
    end, stats = clean_once(log, cleaner, 10_000)
    assert end < log.active_segment.base_offset
    assert stats.buffer_utilization == 0.8
    assert records(log) == expected(written, end)  # past the map's end: untouched
    end2, _ = cleaner.clean(log, end, log.active_segment.base_offset, 10_000)
    assert end2 > end
    assert records(log) == expected(written, end2)


def test_a_truncation_under_a_round_aborts_it_and_leaves_no_files(tmp_path):
    log = open_log(tmp_path)
    fill(log)
    before = records(log)

    def truncate_then_swap(lg, fn):
        lg.truncate_to(lg.log_end_offset - 1)
        fn()

    with pytest.raises(CleaningAbortedError, match="truncated"):
        clean_once(log, new_cleaner(swap=truncate_then_swap), 10_000)
    assert records(log) == before[:-1]
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]


def test_retention_removing_a_segment_under_a_round_aborts_it(tmp_path):
    log = open_log(tmp_path)
    fill(log)

    def delete_head_then_swap(lg, fn):
        lg.increment_log_start_offset(lg.segments[1].base_offset)
        lg.delete_old_segments()
        fn()

    with pytest.raises(CleaningAbortedError, match="no longer in the log"):
        clean_once(log, new_cleaner(swap=delete_head_then_swap), 10_000)
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]


def test_a_closed_log_refuses_the_swap(tmp_path):
    log = open_log(tmp_path)
    fill(log)

    def close_then_swap(lg, fn):
        lg.close()
        fn()

    with pytest.raises(CleaningAbortedError, match="closed"):
        clean_once(log, new_cleaner(swap=close_then_swap), 10_000)


def test_nothing_to_clean_in_a_clean_log(tmp_path):
    log = open_log(tmp_path)
    fill(log)
    end, _ = clean_once(log, new_cleaner(), 10_000)
    assert clean_once(log, new_cleaner(), 10_000, checkpoint=end) is None
    assert log_stats(log).log_end_offset == log.log_end_offset


def test_compressed_batches_are_rewritten_in_their_codec(tmp_path):
    from common.compression import codec_of
    log = open_log(tmp_path)
    for r in range(4):
        recs = [rec.ProducerRecord(f"k{k}".encode(), f"v{r}".encode() * 20, timestamp=1_000)
                for k in range(5)]
        b = rec.build_batch(recs)
        log.append_as_leader(rec.with_codec(b, rec.parse_header(b), codec_of("gzip")), 0)
    log.roll()
    log.high_watermark = log.log_end_offset
    clean_once(log, new_cleaner(), 10_000)
    data = log.read(0, 1 << 20)
    assert {b.header.compression for b in rec.iter_batches(data)} == {codec_of("gzip")}
    assert [(r.key, r.value) for r in rec.decode_all(data)] == \
        [(f"k{k}".encode(), b"v3" * 20) for k in range(5)]
    assert [r.offset for r in rec.decode_all(data)] == list(range(15, 20))
