"""LogDirFailureChannel (Kafka's, KIP-112): every storage I/O error of a log dir's work reaches
it, naming the dir; the first error of a dir is queued once. Faults are injected through the
real FaultInjectingFileOps seam, not mocks."""

import asyncio
import errno
import threading

import pytest

from broker.storage.errors import KafkaStorageError, LogAppendError, LogDirOfflineError
from broker.storage.fileops import FaultInjectingFileOps
from broker.storage.log_dir_failure_channel import LogDirFailureChannel
from broker.storage.log_manager import LogManager
from common.names import TopicPartition as TP
from tests.storage.helpers import batch


def manager(tmp_path, n=2, fileops=None):
    lm = LogManager([str(tmp_path / f"d{i}") for i in range(n)], broker_id=1, cluster_id="c1",
                    fileops=fileops)
    lm.startup()
    return lm


def test_a_dir_is_queued_once_and_later_errors_only_recorded():
    ch = LogDirFailureChannel()
    assert ch.maybe_add_offline_log_dir("/d0", "EIO on append") is True
    assert ch.maybe_add_offline_log_dir("/d0", "EIO on flush") is False
    assert ch.maybe_add_offline_log_dir("/d1", "ENOSPC") is True
    assert [ch.poll().log_dir, ch.poll().log_dir, ch.poll()] == ["/d0", "/d1", None]
    assert ch.has_offline_log_dir("/d0") and ch.offline_log_dirs == ["/d0", "/d1"]


async def test_take_wakes_for_a_failure_reported_from_another_thread():
    ch = LogDirFailureChannel()
    taking = asyncio.ensure_future(ch.take())
    await asyncio.sleep(0)  # the consumer waits before anything is reported
    threading.Thread(target=ch.maybe_add_offline_log_dir, args=("/d1", "EIO")).start()
    failure = await asyncio.wait_for(taking, 10)
    assert (failure.log_dir, failure.message) == ("/d1", "EIO")


async def test_an_injected_io_error_of_a_dirs_work_reaches_the_channel_naming_that_dir(tmp_path):
    fo = FaultInjectingFileOps()
    lm = manager(tmp_path, fileops=fo)
    t0, t1 = TP("t", 0), TP("t", 1)
    a = lm.get_or_create_log(t0, log_dir=str(tmp_path / "d0"))
    b = lm.get_or_create_log(t1, log_dir=str(tmp_path / "d1"))
    fo.fail(str(tmp_path / "d1"), errno.EIO, ops={"write"})
    await lm.run(t0, a.append_as_leader, batch(1), 0)  # the healthy dir reports nothing
    with pytest.raises(LogAppendError):  # the caller still gets its error
        await lm.run(t1, b.append_as_leader, batch(1), 0)
    failure = await asyncio.wait_for(lm.failure_channel.take(), 10)
    assert failure.log_dir == lm.dirs[1].path
    assert isinstance(failure.error, LogAppendError) and failure.error.errno == errno.EIO
    assert "EIO" in failure.message
    assert lm.failure_channel.poll() is None
    lm.shutdown()


def test_a_dir_failing_at_startup_or_log_creation_is_reported(tmp_path):
    fo = FaultInjectingFileOps()
    fo.fail(str(tmp_path / "d0"), errno.EIO, ops={"mkdir"})
    lm = manager(tmp_path, fileops=fo)
    assert lm.failure_channel.poll().log_dir == lm.dirs[0].path
    fo.fail(str(tmp_path / "d1"), errno.EIO, ops={"mkdir"})
    with pytest.raises(KafkaStorageError):
        lm.get_or_create_log(TP("t", 0))
    assert lm.failure_channel.poll().log_dir == lm.dirs[1].path
    lm.shutdown()


async def test_work_refused_by_an_already_offline_dir_is_no_new_failure(tmp_path):
    lm = manager(tmp_path, n=1)
    log = lm.get_or_create_log(TP("t", 0))
    d = lm.dirs[0]
    d.online = False  # taken offline by its handler: the refusal below is not an I/O error
    with pytest.raises(LogDirOfflineError):
        await lm.run(TP("t", 0), log.append_as_leader, batch(1), 0)
    lm.report_failure(d, LogDirOfflineError(d.path, detail="offline"))
    assert lm.failure_channel.poll() is None
    d.online = True
    lm.shutdown()
