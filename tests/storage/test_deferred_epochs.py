"""The deferred leader-epoch entry (becoming leader writes ``leader-epoch-checkpoint``
after LeaderAndIsr is answered) against what a crash leaves on disk: a truncation checkpoints
the lowered recovery point at once, and the deferred writer follows a swapped log (KIP-113).

A crash is a LogManager dropped without shutdown (helpers.crash) and a fresh one started over
the same dirs: the recovery point, HW and log start come from the checkpoint files, never from
the crashed objects."""

import asyncio
import os

from broker import alter_log_dirs as ald
from broker.metrics import BrokerMetrics
from broker.replication_quota import ReplicationQuota
from broker.storage.log import Log
from broker.storage.log_manager import LogManager
from common.names import TopicPartition
from tests.storage.helpers import batch, crash

TP = TopicPartition("t", 0)


def _restart(dirs: list[str]) -> LogManager:
    lm = LogManager(dirs, 1)
    lm.startup()
    return lm


def test_a_truncation_checkpoints_the_recovery_point_so_a_deferred_epoch_survives_a_crash(
        tmp_path):
    """Defect 5. A follower truncates its divergent suffix to 6, becomes leader of epoch 7 at 6
    (the entry deferred) and appends; the broker crashes before the deferred write and before
    the periodic checkpoint. Recovery re-adds epochs only from the segment holding the
    checkpointed recovery point: were it still 9, epoch 7 would start at 9, and a follower of
    this leader asking for epoch 5's end would be told 9 and keep offsets 6..8 of another
    history. Kafka's LogManager.truncateTo checkpoints the recovery point after a truncation."""
    dirs = [str(tmp_path / "d0")]
    lm = _restart(dirs)
    log = lm.get_or_create_log(TP)
    log.append_as_leader(batch(6), 5)              # epoch 5: offsets 0..5
    log.append_as_leader(batch(3), 5)              # 6..8
    log.flush()
    lm.checkpoint()                                # the 5 s job: recovery point 9 on disk
    assert log.truncate_to(6)                      # divergent suffix 6..8 removed
    log.epoch_cache.assign(7, 6, defer=True)       # become leader (replica_manager._assign_epochs)
    log.append_as_leader(batch(3), 7)              # 6..8
    log.roll()                                     # a segment starting at 9
    log.append_as_leader(batch(3), 7)              # 9..11
    assert log.epoch_cache.entries == [(5, 0), (7, 6)]
    crash(lm)
    again = _restart(dirs)
    assert again.get_log(TP).epoch_cache.entries == [(5, 0), (7, 6)]
    assert again.get_log(TP).end_offset_for_epoch(5) == (5, 6)
    again.shutdown()


def test_a_crash_before_the_deferred_write_rebuilds_the_epoch_from_the_batches(tmp_path):
    """Without a truncation the entry a crash can lose starts at or past the checkpointed
    recovery point (a flush writes the file before moving it), so recovery - from the segment
    holding that point, here not the first one - rebuilds it from the batches' epochs."""
    dirs = [str(tmp_path / "d0")]
    lm = _restart(dirs)
    log = lm.get_or_create_log(TP)
    log.append_as_leader(batch(2), 3)
    log.roll()
    log.append_as_leader(batch(2), 3)
    log.flush()
    lm.checkpoint()                                # recovery point 4 on disk
    log.epoch_cache.assign(4, log.log_end_offset, defer=True)
    log.append_as_leader(batch(3), 4)
    assert log._epoch_checkpoint.read() == [(3, 0)]
    crash(lm)
    again = _restart(dirs)
    assert again.get_log(TP).recovery_point == 4   # read from disk, not from the crashed log
    assert again.get_log(TP).epoch_cache.entries == [(3, 0), (4, 4)]
    assert again.get_log(TP).log_end_offset == 7
    again.shutdown()


def test_the_deferred_epoch_writer_follows_a_swapped_log(tmp_path):
    """Defect 9 (storage). The writer holds the log that became leader; a KIP-113 swap may run
    before it (alter_log_dirs._swap_on_write_path) and rename that copy to -delete. Its write
    must go to the live copy (``moved_to``), as every other call queued for the old log does:
    written to the old copy it failed (ENOENT: the dir is gone) and blamed a healthy log dir.
    The swap already gave the live copy every epoch entry it keeps (_copy_tail), so nothing is
    left to write there."""
    dirs = [str(tmp_path / "d0"), str(tmp_path / "d1")]
    lm = _restart(dirs)
    src, target = lm.dirs
    current = lm.get_or_create_log(TP, src.path)
    current.append_as_leader(batch(2), 3)
    current.epoch_cache.assign(4, 2, defer=True)   # become leader; the writer is queued
    future = Log.open(target.path, TP, partition_dir=os.path.join(
        target.path, ald.future_dir_name(TP, "f")))
    host = ald.ReplicaHost({}, asyncio.Lock(), lambda: 1, lambda tp, reason: None)
    mover = ald.ReplicaAlterLogDirsManager(host, lm, None, BrokerMetrics(1),
                                           ReplicationQuota(lambda: 0.0))
    new, doomed, record = mover._swap_on_write_path(ald.Move(TP, target, future), current, src)
    lm.replace_current_with_future(TP, new, target, record)  # as _complete does
    assert current.moved_to is new and not os.path.exists(current.dir)
    on_disk = new._epoch_checkpoint.read()
    current.write_deferred_epochs()                # the writer, after the swap
    assert new._epoch_checkpoint.read() == on_disk == new.epoch_cache.entries
    assert not new.epoch_cache.deferred
    assert not os.path.exists(current.dir) and os.path.isdir(doomed)
    current._close_fds()
    lm.shutdown()
