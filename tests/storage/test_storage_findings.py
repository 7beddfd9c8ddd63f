"""Regression tests for the storage findings (corruption before the recovery
point; partial writes; the recovery point after an unclean recovery; segment contiguity),
on real files, with faults through the file-operation seam."""

from __future__ import annotations

import errno
import os

import pytest

from broker.storage.errors import LogAppendError
from broker.storage.fileops import FaultInjectingFileOps
from broker.storage.log import Log, LogConfig
from common.names import TopicPartition
from common.records import decode_all, iter_batches
from tests.storage.helpers import batch

TP = TopicPartition("t", 0)
CFG = LogConfig(segment_bytes=3000)


def _three_segments(tmp_path) -> list[tuple[int, str]]:
    log = Log.open(str(tmp_path), TP, CFG, needs_recovery=False)
    for i in range(20):
        log.append_as_leader(batch(2, size=300, tag=f"{i}-"), 0)
    segs = [(s.base_offset, s.log_path) for s in log.segments]
    assert len(segs) >= 3
    log.close()
    return segs


def _flip_byte_in_batch(path: str, batch_no: int) -> int:
    with open(path, "rb") as f:
        raw = f.read()
    position = [b.position for b in iter_batches(raw)][batch_no]
    with open(path, "r+b") as f:
        f.seek(position + 100)
        byte = f.read(1)
        f.seek(position + 100)
        f.write(bytes([byte[0] ^ 0x5A]))
    return position


def _offsets(log: Log) -> list[int]:
    """Every offset in the log, read segment by segment as a consumer would."""
    out, pos = [], log.log_start_offset
    while pos < log.log_end_offset:
        got = [r.offset for r in decode_all(log.read(pos, 1 << 24))]
        out += got
        pos = got[-1] + 1
    return out


def test_corrupt_first_segment_before_recovery_point_is_truncated_not_fatal(tmp_path):
    """Finding 5: on the commit before, loading raised UnboundLocalError (not a storage
    error) and the whole broker failed to start."""
    segs = _three_segments(tmp_path)
    cut = _flip_byte_in_batch(segs[0][1], 2)
    log = Log.open(str(tmp_path), TP, CFG, needs_recovery=False)  # a clean shutdown: trusted
    assert _offsets(log) == [0, 1, 2, 3]  # two whole batches survive
    assert [s.base_offset for s in log.segments] == [0]
    assert os.path.getsize(segs[0][1]) == cut
    assert not any(os.path.exists(p) for _, p in segs[1:])
    assert log.load_problems and "corrupt" in log.load_problems[0]


def test_corrupt_second_segment_before_recovery_point_is_truncated_once(tmp_path):
    """Finding 5: on the commit before, the previous segment was recovered and listed twice
    ([0, 0]) and the corrupt file stayed in place for the next start."""
    segs = _three_segments(tmp_path)
    base1, path1 = segs[1]
    cut = _flip_byte_in_batch(path1, 1)
    log = Log.open(str(tmp_path), TP, CFG, needs_recovery=False)
    assert [s.base_offset for s in log.segments] == [0, base1]
    assert _offsets(log) == list(range(base1 + 2))
    assert os.path.getsize(path1) == cut
    log.close()
    again = Log.open(str(tmp_path), TP, CFG, needs_recovery=False)
    assert again.load_problems == []  # nothing corrupt is left to find
    assert _offsets(again) == list(range(base1 + 2))


def test_segment_gap_keeps_the_contiguous_prefix(tmp_path):
    segs = _three_segments(tmp_path)
    os.unlink(segs[1][1])  # a lost middle segment: offsets jump
    log = Log.open(str(tmp_path), TP, CFG, needs_recovery=False)
    assert [s.base_offset for s in log.segments] == [0]
    assert log.log_end_offset == segs[1][0]
    assert not any(os.path.exists(p) for _, p in segs[2:])
    assert "does not start" in log.load_problems[0]


def test_recovery_point_stays_at_checkpoint_after_unclean_recovery(tmp_path):
    """What recovery read back may sit only in the page cache: until a flush, the recovery
    point stays where the checkpoint had it, so a power loss now is recovered from there."""
    segs = _three_segments(tmp_path)
    log = Log.open(str(tmp_path), TP, CFG, recovery_point=segs[1][0], needs_recovery=True)
    assert log.recovery_point == segs[1][0]
    assert log.log_end_offset == 40
    log.flush()
    assert log.recovery_point == 40


def test_partial_write_is_cut_back_and_the_log_refuses_writes(tmp_path):
    """Finding 6: a write that put half a batch on disk before ENOSPC. On the commit before,
    the file kept the garbage, the next append landed after it, and recovery then dropped that
    acknowledged append."""
    fo = FaultInjectingFileOps()
    log = Log.open(str(tmp_path), TP, needs_recovery=False, fileops=fo)
    log.append_as_leader(batch(3, tag="a"), 0)
    size = log.active_segment.size
    fo.partial_write(str(tmp_path), 40, errno.ENOSPC)
    with pytest.raises(LogAppendError, match="No space left"):
        log.append_as_leader(batch(3, tag="b"), 0)
    assert os.path.getsize(log.active_segment.log_path) == size == log.active_segment.size
    acked = []
    try:  # the disk has room again; the log must still refuse until it is reloaded
        log.append_as_leader(batch(3, tag="c"), 0)
        acked.append("c")
    except LogAppendError as e:
        assert "refuses writes" in str(e)
    with pytest.raises(LogAppendError, match="refuses writes"):
        log.truncate_to(0)
    log._close_fds()
    reopened = Log.open(str(tmp_path), TP, needs_recovery=True)
    keys = [r.key for r in decode_all(reopened.read(0, 1 << 20))]
    assert keys[:3] == [b"a0", b"a1", b"a2"]
    assert all(k.startswith(b"c") for k in keys[3:]) and len(keys) == 3 + 3 * len(acked)
    assert acked == []


def test_retention_survives_its_log_dir_going_offline_mid_run(tmp_path):
    """Finding 7: retention (on the log dir's thread) walks the dir's logs while the event loop
    takes the dir offline. On the commit before, the walk then hit a log no longer in the
    manager (KeyError) - not a storage error, so the retention loop died silently."""
    import threading

    from broker.storage.log_manager import LogManager
    fo = FaultInjectingFileOps()
    cfg = LogConfig(segment_bytes=1000, retention_bytes=1)
    lm = LogManager([str(tmp_path / "d0")], 1, cfg, fileops=fo)
    lm.startup()
    tps = [TopicPartition("a", 0), TopicPartition("b", 0)]
    for tp in tps:
        log = lm.get_or_create_log(tp)
        for i in range(6):
            log.append_as_leader(batch(1, size=400, tag=f"{i}"), 0)
        log.high_watermark = log.log_end_offset
    held = fo.hold(str(tmp_path / "d0" / "a-0"), ops={"rename"})
    errors = []

    def retention():
        try:
            lm.cleanup(lm.dirs[0])
        except Exception as e:  # noqa: BLE001 - recorded for the assertion
            errors.append(e)
    t = threading.Thread(target=retention)
    t.start()
    assert held.entered.wait(10), "retention never reached a-0's segments"
    assert sorted(lm.mark_offline(lm.dirs[0].path, "test: disk gone")) == tps
    held.release()
    t.join(10)
    assert errors == []


async def test_supervised_loop_is_logged_counted_and_restarted(tmp_path):
    import asyncio
    import json

    from prometheus_client import CollectorRegistry

    from common.observability import configure_event_log
    from common.supervise import failures_counter, supervised
    events = configure_event_log(str(tmp_path / "ev.json"), "broker", broker=1)
    failures = failures_counter(CollectorRegistry())
    runs = []

    async def loop():
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("dictionary changed size during iteration")
    await asyncio.wait_for(supervised("hw-checkpoint", loop, events, failures, backoff_s=0),
                           30)
    assert len(runs) == 2
    assert failures.labels(task="hw-checkpoint")._value.get() == 1
    logged = [json.loads(line) for line in (tmp_path / "ev.json").read_text().splitlines()]
    assert [(e["event"], e["task"]) for e in logged] == [("background_task_failed",
                                                          "hw-checkpoint")]


def test_failed_log_takes_writes_again_once_reloaded_from_its_files(tmp_path):
    from broker.storage.log_manager import LogManager
    fo = FaultInjectingFileOps()
    lm = LogManager([str(tmp_path / "d0")], 1, fileops=fo)
    lm.startup()
    log = lm.get_or_create_log(TP)
    log.append_as_leader(batch(3, tag="a"), 0)
    fo.partial_write(str(tmp_path), 25, errno.EIO)
    with pytest.raises(LogAppendError):
        log.append_as_leader(batch(3, tag="b"), 0)
    assert log.failed is not None
    fresh = lm.reload_log(TP)
    assert lm.get_log(TP) is fresh and fresh.failed is None and log.closed
    fresh.append_as_leader(batch(2, tag="c"), 0)
    assert [r.key for r in decode_all(fresh.read(0, 1 << 20))] == \
        [b"a0", b"a1", b"a2", b"c0", b"c1"]


def test_retention_renames_to_deleted_and_removes_after_the_delay(tmp_path):
    """Retention: a segment leaving the log is renamed at once and removed only
    after file.delete.delay.ms, so a read already holding its fd finishes; on the commit
    before, its fd was closed under such reads."""
    from tests.storage.helpers import Clock
    clock = Clock()
    log = Log.open(str(tmp_path), TP, LogConfig(segment_bytes=1000, retention_bytes=1,
                                                file_delete_delay_ms=60_000),
                   needs_recovery=False, clock=clock)
    for i in range(5):
        log.append_as_leader(batch(1, size=400, tag=f"{i}"), 0)
    log.high_watermark = log.log_end_offset
    first = log.segments[0]
    fd = first.fd
    assert log.delete_old_segments()
    assert first.log_path.endswith(".log.deleted") and os.path.exists(first.log_path)
    assert first.read(0, 100)  # an in-flight read on the old fd still works
    assert log.delete_due_segments() == 0
    clock.now += 60_001
    assert log.delete_due_segments() >= 1
    assert first.fd == -1 and not os.path.exists(first.log_path)
    assert fd >= 0
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".deleted")]


def test_new_segments_directory_entries_are_fsynced_by_the_next_flush(tmp_path):
    """Power-loss durability: a rolled segment's directory entry reaches the disk
    with the flush, or a power loss could lose the whole file although its data was fsynced."""
    synced = []

    class RecordingFileOps(FaultInjectingFileOps):
        def fsync_dir(self, path):
            synced.append(os.path.abspath(path))
            super().fsync_dir(path)
    log = Log.open(str(tmp_path), TP, LogConfig(segment_bytes=1000), needs_recovery=False,
                   fileops=RecordingFileOps())
    for i in range(4):
        log.append_as_leader(batch(1, size=400, tag=f"{i}"), 0)
    assert len(log.segments) > 1
    log.flush()
    assert os.path.abspath(str(tmp_path / "t-0")) in synced  # the partition dir
    assert os.path.abspath(str(tmp_path)) in synced  # the log dir (new partition dir)
    synced.clear()
    log.flush()
    assert synced == []  # nothing new in either directory


def test_leader_epoch_checkpoint_is_synced_by_the_flush_not_by_each_new_epoch(tmp_path):
    """KAFKA-15046's rule: a new leader epoch rewrites leader-epoch-checkpoint without an
    fsync (two fsyncs per partition made a broker taking over 10k leaderships spend ~10 s);
    the next flush syncs it together with the data it describes."""
    synced = []

    class RecordingFileOps(FaultInjectingFileOps):
        def fsync(self, fd):
            synced.append(self._paths.get(fd, "?"))
            super().fsync(fd)
    log = Log.open(str(tmp_path), TP, needs_recovery=False, fileops=RecordingFileOps())
    log.append_as_leader(batch(2), 3)
    log.epoch_cache.assign(4, log.log_end_offset)  # becoming leader of epoch 4
    log.append_as_leader(batch(2), 4)
    assert not [p for p in synced if "leader-epoch-checkpoint" in p]
    assert log.epoch_cache.entries == [(3, 0), (4, 2)]
    log.flush()
    assert [p for p in synced if "leader-epoch-checkpoint" in p]
    reopened = Log.open(str(tmp_path), TP, needs_recovery=False)
    assert reopened.epoch_cache.entries == [(3, 0), (4, 2)]


def test_torn_leader_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path):
    """What a power loss can leave of an unsynced checkpoint: the log is recovered from its
    first segment and the cache rebuilt from the batches' leader epochs."""
    log = Log.open(str(tmp_path), TP, CFG, needs_recovery=False)
    for epoch in (1, 1, 2, 5):
        for _ in range(4):
            log.append_as_leader(batch(2, size=300), epoch)
    expected = log.epoch_cache.entries
    assert len(log.segments) > 2 and expected == [(1, 0), (2, 16), (5, 24)]
    log.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_bytes(b"0\n3\n1 0\n2 1")
    reopened = Log.open(str(tmp_path), TP, CFG, needs_recovery=False)
    assert reopened.epoch_cache.entries == expected
    assert any("malformed" in p for p in reopened.load_problems)
    assert reopened.log_end_offset == 32
