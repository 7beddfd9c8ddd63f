"""The log cleaner in a LogManager (broker/storage/log_cleaner.py, log_cleaner_manager.py):
its own threads compact compacted logs and only those, write ``cleaner-offset-checkpoint``,
swap on the log dir's executor, stop for a deletion without a deadlock, follow truncations,
and report Kafka's gauges. Real files, real threads."""

import dataclasses
import os
import threading
import time

import pytest

from broker.storage import cleaner_rules as rules
from broker.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from broker.storage.fileops import FaultInjectingFileOps
from broker.storage.log import CleaningAbortedError, LogConfig
from broker.storage.log_cleaner import CleanerConfig
from broker.storage.log_manager import LogManager
from common.names import TopicPartition
from tests.polling import wait_until
from tests.storage.cleaner_helpers import fill, latest, records

COMPACT = LogConfig(segment_bytes=1024, cleanup_policy="compact", file_delete_delay_ms=0)
DELETE = dataclasses.replace(COMPACT, cleanup_policy="delete")
FAST = CleanerConfig(threads=2, dedupe_buffer_size=1 << 20, io_buffer_size=1 << 16,
                     backoff_ms=10)


def manager(tmp_path, fileops=None, cleaner=FAST):
    lm = LogManager([str(tmp_path / "d0"), str(tmp_path / "d1")], 1, COMPACT,
                    fileops=fileops, cleaner_config=cleaner)
    lm.config_for = lambda topic: COMPACT if topic.startswith("c") else DELETE
    return lm


def filled(lm, tp, **kw):
    log = lm.get_or_create_log(tp)
    return log, fill(log, **kw)


def test_compacted_logs_are_cleaned_by_the_cleaner_threads_and_checkpointed(tmp_path):
    lm = manager(tmp_path)
    c0, c1, plain = TopicPartition("c", 0), TopicPartition("c", 1), TopicPartition("p", 0)
    # fill before the cleaner starts, so a round sees whole logs
    lm.startup()
    lm.cleaner.shutdown()
    logs = {tp: filled(lm, tp) for tp in (c0, c1, plain)}
    sizes = {tp: log.size for tp, (log, _) in logs.items()}
    lm.cleaner.startup()
    for tp in (c0, c1):
        log, written = logs[tp]
        assert lm.cleaner.await_cleaned(tp, log.active_segment.base_offset, 30)
        offsets = {o for o, _, _ in records(log)}
        assert offsets == {o for o, _ in latest(written).values()}
        assert log.size < sizes[tp] / 3
        d = lm.log_dir_of(tp).path
        assert OffsetCheckpointFile(d, CLEANER_OFFSET_CHECKPOINT, lm.fileops).read()[tp] == \
            log.active_segment.base_offset
    assert logs[plain][0].size == sizes[plain]  # cleanup.policy=delete: never compacted
    assert plain not in lm.cleaner.manager.all_checkpoints()
    cl = lm.cleaner
    assert 0 < cl.cleaner_recopy_percent() < 40
    assert 0 < cl.max_buffer_utilization_percent() <= 100
    assert cl.max_clean_time_secs() >= 0 and cl.dead_thread_count() == 0
    assert cl.max_dirty_percent() == 0  # nothing dirty is left
    assert 0 <= cl.time_since_last_run_ms() < 10_000
    names = {t.name for t in threading.enumerate()}
    assert {"kafka-log-cleaner-thread-0", "kafka-log-cleaner-thread-1"} <= names
    lm.shutdown()
    assert not any(t.name.startswith("kafka-log-cleaner") for t in threading.enumerate())


def test_disabled_cleaner_runs_no_thread(tmp_path):
    lm = manager(tmp_path, cleaner=dataclasses.replace(FAST, enable=False))
    lm.startup()
    assert lm.cleaner is None
    lm.shutdown()


async def test_a_deletion_during_a_round_stops_it_without_a_deadlock(tmp_path):
    fo = FaultInjectingFileOps()
    lm = manager(tmp_path, fileops=fo, cleaner=dataclasses.replace(FAST, threads=1))
    lm.startup()
    lm.cleaner.shutdown()
    tp = TopicPartition("c", 0)
    log, _ = filled(lm, tp, rounds=8)
    partition_dir = log.dir
    # every read of the cleaner thread is slow: the deletion arrives mid-round
    fo.slow(partition_dir, 0.05, ops={"pread"})
    lm.cleaner.startup()
    wait_until(lambda: lm.cleaner.manager.state(tp) == rules.IN_PROGRESS, 30,
               "the round in progress", interval=0.02)
    started = time.monotonic()
    await lm.run(tp, lm.delete_log, tp)
    assert time.monotonic() - started < 20
    assert not os.path.exists(partition_dir)
    assert lm.cleaner.manager.state(tp) == rules.NONE
    assert tp not in lm.cleaner.manager.all_checkpoints()
    fo.clear()
    lm.shutdown()


async def test_a_swap_queued_behind_a_deletion_is_called_off(tmp_path):
    """The deletion runs on the dir's executor and waits for the round; the round's swap is
    queued on that executor: the cleaner calls it off instead of waiting for it."""
    lm = manager(tmp_path, cleaner=dataclasses.replace(FAST, threads=1))
    lm.startup()
    lm.cleaner.shutdown()
    tp = TopicPartition("c", 0)
    log, written = filled(lm, tp)
    d = lm.log_dir_of(tp)
    block, entered = threading.Event(), threading.Event()

    def hold():  # occupies the executor until released
        entered.set()
        block.wait(10)

    fut = lm.run_in_dir(d, hold)
    await asyncio_to_thread(entered.wait)
    lm.cleaner.startup()
    wait_until(lambda: any(n.endswith(".cleaned") for n in os.listdir(log.dir)), 30,
               "a .cleaned segment written", interval=0.02)
    # the round is waiting for its swap now; abort it from the executor's side
    aborted = await asyncio_to_thread(lm.cleaner.manager.abort_and_pause, tp, 10)
    assert aborted
    block.set()
    await fut
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(log.dir))
    assert {o for o, _, _ in records(log)} == set(written)  # untouched
    lm.cleaner.manager.resume(tp)
    assert lm.cleaner.await_cleaned(tp, log.active_segment.base_offset, 30)
    lm.shutdown()


async def asyncio_to_thread(fn, *args):
    import asyncio
    return await asyncio.to_thread(fn, *args)


def test_a_truncation_lowers_the_cleaner_checkpoint(tmp_path):
    lm = manager(tmp_path)
    lm.startup()
    lm.cleaner.shutdown()
    tp = TopicPartition("c", 0)
    log, _ = filled(lm, tp)
    d = lm.log_dir_of(tp).path
    lm.cleaner.manager.update_checkpoints(d, add=(tp, log.log_end_offset))
    log.truncate_to(10)
    assert lm.cleaner.manager.all_checkpoints()[tp] == 10
    lm.shutdown()


def test_a_kip_113_swap_moves_the_checkpoint(tmp_path):
    lm = manager(tmp_path)
    lm.startup()
    lm.cleaner.shutdown()
    tp = TopicPartition("c", 0)
    log, _ = filled(lm, tp)
    src = lm.log_dir_of(tp)
    dst = next(d for d in lm.dirs if d is not src)
    lm.cleaner.manager.update_checkpoints(src.path, add=(tp, 30))
    lm.replace_current_with_future(tp, log, dst, None)
    assert OffsetCheckpointFile(dst.path, CLEANER_OFFSET_CHECKPOINT, lm.fileops).read() == \
        {tp: 30}
    assert OffsetCheckpointFile(src.path, CLEANER_OFFSET_CHECKPOINT, lm.fileops).read() == {}
    lm.shutdown()


def test_a_failing_round_marks_the_partition_uncleanable(tmp_path):
    lm = manager(tmp_path, cleaner=dataclasses.replace(FAST, threads=1))
    lm.startup()
    lm.cleaner.shutdown()
    tp = TopicPartition("c", 0)
    log, _ = filled(lm, tp)
    # a segment whose bytes are not what its CRC says: not an I/O error, the data is bad
    seg = log.segments[1]
    with open(seg.log_path, "r+b") as f:
        f.seek(70)
        f.write(b"\xff\xff")
    d = lm.log_dir_of(tp).path
    lm.cleaner.startup()
    wait_until(lambda: tp in lm.cleaner.manager.uncleanable(d), 30,
               "the partition marked uncleanable", interval=0.02)
    assert lm.cleaner.dead_thread_count() == 0
    assert lm.cleaner.manager.uncleanable_bytes(d) > 0
    assert not any(n.endswith(".cleaned") for n in os.listdir(log.dir))
    assert lm.failure_channel is not None and all(x.online for x in lm.dirs)
    lm.shutdown()


def test_checks_done_raises_once_aborted(tmp_path):
    lm = manager(tmp_path)
    lm.startup()
    lm.cleaner.shutdown()
    tp = TopicPartition("c", 0)
    filled(lm, tp)
    m = lm.cleaner.manager
    got = m.grab_filthiest_compacted_log()
    assert got is not None and got[0] == tp and m.state(tp) == rules.IN_PROGRESS
    assert m.grab_filthiest_compacted_log() is None  # in progress: not a candidate
    threading.Timer(0.2, lambda: m.done_cleaning(tp, got[2], None)).start()
    assert m.abort_and_pause(tp, 5)  # waits for the round to end
    assert m.state(tp) == rules.paused(1) and m.grab_filthiest_compacted_log() is None
    m.resume(tp)
    got = m.grab_filthiest_compacted_log()
    assert not m.abort_and_pause(tp, 0.05)  # the round goes on: not paused yet
    with pytest.raises(CleaningAbortedError):
        m.check_aborted(tp)  # ... but its next check stops it
    m.done_cleaning(tp, got[2], 99)
    assert m.state(tp) == rules.paused(1) and tp not in m.all_checkpoints()
    lm.shutdown()
