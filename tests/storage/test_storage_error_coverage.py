"""design.md#jbod-step-1: every I/O error of the storage engine surfaces as a storage error naming
its log dir and partition - append, roll, index, flush, read, truncation, the leader-epoch and the
dir checkpoints, retention and recovery - and, for work run on the dir's executor, reaches the
LogDirFailureChannel (the one handler) with that partition. EIO comes through the file seam."""

import errno
import os

import pytest

from broker.storage.errors import (
    CheckpointIOError,
    KafkaStorageError,
    LogAppendError,
    LogDeletionError,
    LogFlushError,
    LogLoadError,
    LogReadError,
    LogTruncationError,
)
from broker.storage.fileops import FaultInjectingFileOps
from broker.storage.log import Log, LogConfig
from broker.storage.log_manager import LogManager
from common.names import TopicPartition
from tests.storage.helpers import batch

TP = TopicPartition("t", 0)
FIRST = "00000000000000000000"


def _roll(log):
    log.roll()
    log.append_as_leader(batch(1), 0)


def _retention(log):
    log.roll()
    log.high_watermark = log.log_end_offset
    return log.delete_old_segments()


# (what, file under the partition dir or "" for the dir itself, ops, call, error class)
CASES = [
    ("append", "", {"write"}, lambda log: log.append_as_leader(batch(2), 0), LogAppendError),
    ("roll", "", {"open"}, _roll, LogAppendError),
    ("index", f"{FIRST}.index", {"open", "write"}, _roll, LogAppendError),
    ("flush", "", {"fsync"}, lambda log: log.flush(), LogFlushError),
    ("truncation", "", {"truncate"}, lambda log: log.truncate_to(1), LogTruncationError),
    ("leader-epoch checkpoint", "leader-epoch-checkpoint", {"open", "write", "rename"},
     lambda log: log.append_as_leader(batch(1), 7), CheckpointIOError),
    ("retention", "", {"rename"}, _retention, LogDeletionError),
]


@pytest.mark.parametrize("what, under, ops, call, error", CASES, ids=[c[0] for c in CASES])
async def test_executor_work_errors_name_dir_and_partition_and_reach_the_channel(
        tmp_path, what, under, ops, call, error):
    fo = FaultInjectingFileOps()
    lm = LogManager([str(tmp_path / "d0")], 1, LogConfig(retention_ms=0, index_interval_bytes=1), fileops=fo)
    lm.startup()
    log = lm.get_or_create_log(TP)
    for n in (3, 2):  # two batches: the second gets an index entry (interval 1 byte)
        await lm.run(TP, log.append_as_leader, batch(n), 0)
    fo.fail(os.path.join(log.dir, under) if under else log.dir, errno.EIO, ops=ops)
    with pytest.raises(error) as raised:
        await lm.run(TP, call, log)
    assert (raised.value.log_dir, raised.value.partition, raised.value.errno) == \
        (lm.dirs[0].path, "t-0", errno.EIO)
    failure = lm.failure_channel.poll()
    assert (failure.log_dir, failure.partition) == (lm.dirs[0].path, "t-0")
    fo.clear()
    lm.shutdown()


def test_read_and_recovery_errors_name_dir_and_partition(tmp_path):
    fo = FaultInjectingFileOps()
    log = Log.open(str(tmp_path), TP, fileops=fo)
    log.append_as_leader(batch(3), 0)
    fo.fail(log.dir, errno.EIO, ops={"pread"})
    with pytest.raises(LogReadError) as read:
        log.read(0, 1 << 20)
    log.close()
    with pytest.raises(LogLoadError) as load:  # recovery re-reads every batch
        Log.open(str(tmp_path), TP, fileops=fo, needs_recovery=True)
    for e in (read.value, load.value):
        assert (e.log_dir, e.partition, e.errno) == (str(tmp_path), "t-0", errno.EIO)


async def test_a_dir_checkpoint_error_names_the_dir_only(tmp_path):
    fo = FaultInjectingFileOps()
    lm = LogManager([str(tmp_path / "d0")], 1, fileops=fo)
    lm.startup()
    lm.get_or_create_log(TP)
    d = lm.dirs[0]
    fo.fail(os.path.join(d.path, "recovery-point-offset-checkpoint"), errno.EIO)
    with pytest.raises(CheckpointIOError) as raised:
        await lm.run_in_dir(d, lm.checkpoint, d)
    assert (raised.value.log_dir, raised.value.partition) == (d.path, None)
    assert isinstance(raised.value, KafkaStorageError)
    failure = lm.failure_channel.poll()
    assert (failure.log_dir, failure.partition) == (d.path, None)
    fo.clear()
    lm.shutdown()
