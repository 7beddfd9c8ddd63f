"""The log cleaner's decisions (broker/storage/cleaner_rules.py), the offset map and the
LogLoader swap rules (broker/storage/swap_files.py): pure, every branch."""

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.storage import cleaner_rules as r
from broker.storage import swap_files as sf
from broker.storage.offset_map import SkimpyOffsetMap

S = r.SegmentStats


def log(*segs, start=None, hw=None, **cfg):
    """Segments given as (base, size[, largest ts[, first batch ts]]); each ends where the next
    begins, the last one (active) at base + 10."""
    out = []
    for i, s in enumerate(segs):
        base, size, *ts = s
        nxt = segs[i + 1][0] if i + 1 < len(segs) else base + 10
        out.append(S(base, size, nxt, *(ts + [-1, -1])[:2]))
    leo = out[-1].next_offset
    return r.LogStats(out[0].base_offset if start is None else start, leo,
                      leo if hw is None else hw, tuple(out), r.CompactionConfig(**cfg))


# ------------------------------------------------------------------ which offsets

def test_first_dirty_is_the_checkpoint_or_the_log_start():
    lg = log((0, 100), (10, 100), (20, 100), start=5)
    assert r.cleanable_offsets(lg, None, 0).first_dirty_offset == 5
    assert r.cleanable_offsets(lg, 12, 0) == r.OffsetsToClean(12, 20, False)


@pytest.mark.parametrize("checkpoint", [4, 31])
def test_a_checkpoint_outside_the_log_resets_to_the_log_start(checkpoint):
    lg = log((0, 100), (10, 100), (20, 100), start=5)
    assert r.cleanable_offsets(lg, checkpoint, 0) == r.OffsetsToClean(5, 20, True)


def test_never_the_active_segment():
    lg = log((0, 100), (10, 100), (20, 100))
    assert r.cleanable_offsets(lg, 0, 0).first_uncleanable_dirty_offset == 20


def test_never_past_the_last_stable_offset():
    lg = log((0, 100), (10, 100), (20, 100), hw=13)
    assert r.cleanable_offsets(lg, 0, 0).first_uncleanable_dirty_offset == 13
    # ... which the cleanable bytes round down to the segment holding it
    assert r.cleanable_bytes(lg, 0, 13) == (10, 100)


def test_min_compaction_lag_stops_at_the_first_too_young_segment():
    lg = log((0, 100, 500), (10, 100, 950), (20, 100, 600), (30, 1, 990),
             min_compaction_lag_ms=100)
    # now - lag = 900: segment 10 (largest ts 950) is too young, and so is all after it
    assert r.cleanable_offsets(lg, 0, 1000).first_uncleanable_dirty_offset == 10
    assert r.cleanable_offsets(lg, 0, 1100).first_uncleanable_dirty_offset == 30


def test_the_first_uncleanable_offset_is_never_below_the_first_dirty():
    lg = log((0, 100), (10, 100), (20, 100), hw=3)
    assert r.cleanable_offsets(lg, 12, 0).first_uncleanable_dirty_offset == 12


def test_cleanable_bytes_are_whole_segments_from_first_dirty():
    lg = log((0, 100), (10, 200), (20, 300), (30, 5))
    assert r.cleanable_bytes(lg, 15, 30) == (30, 500)
    assert r.cleanable_bytes(lg, 0, 30) == (30, 600)
    assert r.cleanable_bytes(lg, 30, 30) == (30, 0)


def test_max_compaction_delay_from_the_oldest_dirty_first_batch():
    lg = log((0, 100, 10, 100), (10, 100, 10, 300), (20, 1, 10, 900),
             max_compaction_lag_ms=500)
    assert r.max_compaction_delay(lg, 0, 1000) == 400   # 1000 - 500 - 100
    assert r.max_compaction_delay(lg, 10, 1000) == 200  # the clean segment does not count
    assert r.max_compaction_delay(lg, 0, 550) == 0
    no_stamps = log((0, 100), (10, 1), max_compaction_lag_ms=1)
    assert r.max_compaction_delay(no_stamps, 0, 10**9) == 0


# ------------------------------------------------------------------ which log

def candidate(key, clean, cleanable, ratio=0.5, now=False):
    return r.LogToClean(key, 0, 0, clean, cleanable, now, ratio)


def test_ratio_and_eligibility():
    c = candidate("a", 100, 300)
    assert c.total_bytes == 400 and c.cleanable_ratio == 0.75 and c.eligible
    assert not candidate("b", 300, 300).eligible  # 0.5 is not above 0.5
    assert candidate("c", 300, 300, ratio=0.49).eligible
    assert candidate("d", 1000, 1, now=True).eligible  # max.compaction.lag.ms overdue
    assert not candidate("e", 1000, 0, now=True).eligible  # ... but nothing to clean
    assert candidate("f", 0, 0).cleanable_ratio == 0.0


def test_choose_the_dirtiest_eligible_log_and_report_the_dirtiest_ratio():
    a, b, c = candidate("a", 100, 300), candidate("b", 10, 990, ratio=1.0), \
        candidate("c", 50, 150)
    assert r.choose_filthiest([a, b, c]) == (0.99, a)  # b is dirtier but not eligible
    assert r.choose_filthiest([candidate("x", 0, 0)]) == (0.0, None)  # empty logs skipped
    assert r.choose_filthiest([]) == (0.0, None)
    assert r.choose_filthiest([candidate("y", 300, 100)]) == (0.25, None)


def test_log_to_clean_ties_the_rules_together():
    lg = log((0, 100, 10, 10), (10, 300, 10, 10), (20, 7), max_compaction_lag_ms=50)
    c, delay = r.log_to_clean("t-0", lg, 10, 1000)
    assert (c.first_dirty_offset, c.first_uncleanable_offset) == (10, 20)
    assert (c.clean_bytes, c.cleanable_bytes) == (100, 300)
    assert delay == 940 and c.need_compaction_now


# ------------------------------------------------------------------ grouping

def test_groups_stay_within_segment_bytes():
    segs = [S(0, 40, 10), S(10, 40, 20), S(20, 40, 30), S(30, 100, 40)]
    groups = r.group_segments_by_size(segs, 100, 1 << 20, 40)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20], [30]]


def test_groups_stay_within_the_index_size():
    segs = [S(0, 1, 10, index_bytes=8), S(10, 1, 20, index_bytes=8), S(20, 1, 30,
                                                                           time_index_bytes=30)]
    groups = r.group_segments_by_size(segs, 100, 30, 30)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10, 20]]
    groups = r.group_segments_by_size(segs, 100, 16, 30)  # the time index is too large
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20]]
    groups = r.group_segments_by_size(segs, 100, 15, 30)
    assert [[s.base_offset for s in g] for g in groups] == [[0], [10], [20]]


def test_groups_keep_offsets_within_one_segment():
    big = r.MAX_RELATIVE_OFFSET
    segs = [S(0, 1, 10), S(10, 1, big + 5), S(big + 5, 1, big + 9)]
    groups = r.group_segments_by_size(segs, 100, 100, big + 9)
    assert [[s.base_offset for s in g] for g in groups] == [[0], [10, big + 5]]
    groups = r.group_segments_by_size(segs, 100, 100, big + 12)
    assert [[s.base_offset for s in g] for g in groups] == [[0], [10], [big + 5]]
    # an empty segment joins whatever its offsets
    segs = [S(0, 1, 10), S(10, 0, big + 5)]
    assert len(r.group_segments_by_size(segs, 100, 100, big + 20)) == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=12), st.integers(1, 120))
def test_grouping_is_a_partition_in_order(sizes, max_size):
    segs, base = [], 0
    for size in sizes:
        segs.append(S(base, size, base + 10))
        base += 10
    groups = r.group_segments_by_size(segs, max_size, 1 << 30, base)
    assert [s for g in groups for s in g] == segs
    for g in groups:
        assert len(g) == 1 or sum(s.size for s in g) <= max_size


# ------------------------------------------------------------------ records and batches

@pytest.mark.parametrize("offset,key,value,latest,horizon,now,kept", [
    (50, True, True, 10, None, 0, True),        # past the map: not this round's
    (5, False, True, 5, None, 0, False),        # no key: dropped
    (5, True, True, 9, None, 0, False),         # superseded
    (9, True, True, 9, None, 0, True),          # the latest value
    (9, True, True, -1, None, 0, True),         # key not in the dirty section: kept
    (9, True, False, 9, None, 0, True),         # tombstone, no horizon yet
    (9, True, False, 9, 100, 99, True),         # tombstone before its horizon
    (9, True, False, 9, 100, 100, False),       # tombstone at its horizon: gone
    (9, True, True, 9, 100, 100, True),         # a value survives any horizon
])
def test_retain_record(offset, key, value, latest, horizon, now, kept):
    assert r.retain_record(offset, key, value, latest, 20, horizon, now) is kept


def test_batch_retention():
    R = r.BatchRetention
    assert r.batch_retention(next_offset=5, group_end_offset=9,
                             is_last_batch_of_active_producer=False) is R.DELETE_EMPTY
    assert r.batch_retention(next_offset=9, group_end_offset=9,
                             is_last_batch_of_active_producer=False) is R.RETAIN_EMPTY
    assert r.batch_retention(next_offset=5, group_end_offset=9,
                             is_last_batch_of_active_producer=True) is R.RETAIN_EMPTY
    assert r.batch_retention(next_offset=5, group_end_offset=9,
                             is_last_batch_of_active_producer=False, discard=True) is R.DELETE


def test_delete_horizon_is_set_once():
    assert r.new_delete_horizon(True, None, 1000, 50) == 1050
    assert r.new_delete_horizon(True, 700, 1000, 50) == 700
    assert r.new_delete_horizon(False, None, 1000, 50) is None
    assert r.copy_unchanged(3, 3, None, False)
    assert not r.copy_unchanged(3, 3, None, True)   # needs its horizon written
    assert r.copy_unchanged(3, 3, 10, True)
    assert not r.copy_unchanged(2, 3, None, False)


# ------------------------------------------------------------------ cleaning states

EVENTS = ("start", "done", "abort_and_pause", "resume")
TABLE = {
    (r.NONE, "start"): r.IN_PROGRESS,
    (r.NONE, "abort_and_pause"): r.paused(1),
    (r.IN_PROGRESS, "done"): r.NONE,
    (r.IN_PROGRESS, "abort_and_pause"): r.ABORTED,
    (r.ABORTED, "done"): r.paused(1),
    (r.paused(1), "abort_and_pause"): r.paused(2),
    (r.paused(1), "resume"): r.NONE,
    (r.paused(2), "abort_and_pause"): r.paused(3),
    (r.paused(2), "resume"): r.paused(1),
}


@pytest.mark.parametrize("state,event", list(itertools.product(
    [r.NONE, r.IN_PROGRESS, r.ABORTED, r.paused(1), r.paused(2)], EVENTS)))
def test_every_state_and_event(state, event):
    want = TABLE.get((state, event))
    if want is None:
        with pytest.raises(r.CleaningStateError, match=re.escape(f"in state {state}")):
            r.transition(state, event, "t-0")
    else:
        assert r.transition(state, event, "t-0") == want


def test_unknown_event_and_names():
    with pytest.raises(ValueError):
        r.transition(r.NONE, "explode")
    assert str(r.paused(2)) == "LogCleaningPaused(2)" and str(r.ABORTED) == "LogCleaningAborted"
    assert r.is_paused(r.paused(1)) and not r.is_paused(r.ABORTED)


# ------------------------------------------------------------------ offset map

def test_offset_map_keeps_the_last_offset_and_its_capacity():
    m = SkimpyOffsetMap(3 * 24)
    assert m.slots == 3 and m.get(b"a") == -1
    m.put(b"a", 1)
    m.put(b"b", 2)
    m.put(b"a", 3)
    assert (m.get(b"a"), m.get(b"b"), m.size, m.latest_offset) == (3, 2, 2, 3)
    m.put(b"c", 4)
    assert m.utilization == 1.0
    m.put(b"c", 5)  # an existing key still fits
    with pytest.raises(OverflowError):
        m.put(b"d", 6)
    m.update_latest_offset(9)
    assert m.latest_offset == 9
    m.clear()
    assert (m.size, m.latest_offset, m.get(b"a")) == (0, -1, -1)
    with pytest.raises(ValueError):
        SkimpyOffsetMap(100, "SHA1")


# ------------------------------------------------------------------ LogLoader's swap rules

def names(base, *suffixes):
    return [f"{base:020d}{s}" for s in suffixes]


SEG = (".log", ".index", ".timeindex")


def test_step_1_crash_deletes_the_cleaned_files():
    files = names(0, *SEG) + names(10, *SEG) + names(0, *(s + ".cleaned" for s in SEG))
    fp = sf.first_pass(files)
    assert sorted(fp.delete) == sorted(names(0, *(s + ".cleaned" for s in SEG)))
    assert fp.swap_logs == ()


def test_step_2_crash_with_some_files_renamed_aborts_the_swap():
    files = names(0, *SEG) + names(0, ".log.swap", ".index.cleaned", ".timeindex.cleaned")
    fp = sf.first_pass(files)
    assert sorted(fp.delete) == sorted(names(0, ".log.swap", ".index.cleaned",
                                             ".timeindex.cleaned"))
    assert fp.swap_logs == ()


def test_a_swap_below_every_cleaned_file_is_kept():
    files = names(0, ".log.swap") + names(20, ".log.cleaned") + names(30, ".log.swap")
    fp = sf.first_pass(files)
    assert fp.swap_logs == (0,)
    assert sorted(fp.delete) == sorted(names(20, ".log.cleaned") + names(30, ".log.swap"))


def test_step_3_crash_completes_the_swap():
    files = (names(0, *SEG) + names(10, ".log.deleted") + names(10, ".index", ".timeindex")
             + names(20, *SEG) + names(0, *(s + ".swap" for s in SEG))
             + ["leader-epoch-checkpoint", "leader-epoch-checkpoint.tmp"])
    fp = sf.first_pass(files)
    assert sorted(fp.delete) == sorted(names(10, ".log.deleted") + ["leader-epoch-checkpoint.tmp"])
    left = [f for f in files if f not in fp.delete]
    # the swap log [0, 20) replaces segments 0 and 10, not 20
    assert sf.replaced_files(left, {0: 20}) == sorted(names(0, *SEG)
                                                       + names(10, ".index", ".timeindex"))
    assert sf.swap_renames(left) == [(n, n[:-5]) for n in sorted(names(0, *(s + ".swap"
                                                                               for s in SEG)))]


def test_step_4_crash_renames_the_rest():
    files = names(0, ".log", ".index.swap", ".timeindex.swap") + names(20, *SEG)
    fp = sf.first_pass(files)
    assert fp.delete == () and fp.swap_logs == ()
    assert sf.replaced_files(files, {}) == []
    assert sf.swap_renames(files) == [(names(0, ".index.swap")[0], names(0, ".index")[0]),
                                      (names(0, ".timeindex.swap")[0],
                                       names(0, ".timeindex")[0])]


def test_other_files_are_left_alone():
    files = ["leader-epoch-checkpoint", "partition.metadata", "00000000000000000010.snapshot",
             "0.log.swap"]
    assert sf.first_pass(files).delete == ()
    assert sf.replaced_files(files, {0: 100}) == []
    assert sf.swap_renames(files) == []
    assert sf.base_offset_of("x.log") is None and sf.base_offset_of(names(7, ".log")[0]) == 7
