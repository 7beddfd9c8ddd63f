"""design.md#jbod's "whole disk, or one log" decision (storage/failure_scope.py) as a table, and the
disk availability probe (open question 1) against the file seam."""

import errno

import pytest

from broker.storage.failure_scope import (
    PROBE_FILE,
    ProbeResult,
    Scope,
    failure_scope,
    probe_log_dir,
)
from broker.storage.fileops import FaultInjectingFileOps, FileOps

OK = ProbeResult(True)
FAILED = ProbeResult(False, errno.EIO, "fsync: EIO")
TIMED_OUT = ProbeResult(False, None, "took longer than 5 s", timed_out=True)


@pytest.mark.parametrize("err, partition, probe, scope", [
    # one partition's file fails, the dir answers the probe: only that log (seed step 3)
    (errno.EIO, "t-0", OK, Scope.PARTITION),
    (errno.ENOENT, "t-0", OK, Scope.PARTITION),     # its partition dir was removed
    (None, "t-0", OK, Scope.PARTITION),             # a log that failed earlier refuses writes
    # the probe fails or stalls: the whole dir, whatever the error named (seed step 2)
    (errno.EIO, "t-0", FAILED, Scope.LOG_DIR),
    (errno.EIO, "t-0", TIMED_OUT, Scope.LOG_DIR),
    (errno.ENOENT, "t-0", ProbeResult(False, errno.ENOENT), Scope.LOG_DIR),  # the dir is gone
    # errnos about the file system, not a file: the dir, even when the probe's file fit
    (errno.EROFS, "t-0", OK, Scope.LOG_DIR),
    (errno.ENOSPC, "t-0", OK, Scope.LOG_DIR),
    (errno.EDQUOT, "t-0", OK, Scope.LOG_DIR),
    (errno.ENODEV, "t-0", OK, Scope.LOG_DIR),
    (errno.ENOTCONN, "t-0", OK, Scope.LOG_DIR),
    # a dir-level file (offset checkpoints, meta.properties): every partition depends on it
    (errno.EIO, None, OK, Scope.LOG_DIR),
    (None, None, OK, Scope.LOG_DIR),
])
def test_failure_scope(err, partition, probe, scope):
    assert failure_scope(err, partition, probe) is scope


def test_the_probe_of_a_healthy_dir_leaves_nothing_behind(tmp_path):
    assert probe_log_dir(str(tmp_path), FileOps()) == ProbeResult(True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("op, err", [("open", errno.EROFS), ("write", errno.ENOSPC),
                                     ("fsync", errno.EIO), ("unlink", errno.EIO)])
def test_the_probe_fails_on_any_step_a_log_write_needs(tmp_path, op, err):
    fo = FaultInjectingFileOps()
    fo.fail(str(tmp_path), err, ops={op})
    got = probe_log_dir(str(tmp_path), fo)
    assert not got.ok and got.errno == err and PROBE_FILE in got.detail


def test_the_probe_is_not_fooled_by_a_fault_on_one_partitions_files(tmp_path):
    fo = FaultInjectingFileOps()
    fo.fail(str(tmp_path / "t-0"), errno.EIO)
    assert probe_log_dir(str(tmp_path), fo).ok


def test_the_probe_of_a_missing_dir_fails(tmp_path):
    got = probe_log_dir(str(tmp_path / "gone"), FileOps())
    assert not got.ok and got.errno == errno.ENOENT
