"""LogManager: several log dirs, placement, fault isolation, names, markers, executors."""

import asyncio
import errno
import os
import threading

import pytest

from broker.storage.errors import (
    CheckpointIOError,
    KafkaStorageError,
    LogAppendError,
    LogDirError,
    LogDirOfflineError,
)
from broker.storage.fileops import FaultInjectingFileOps, FileOps
from broker.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from broker.storage.meta import parse_properties
from common.errors import InvalidTopicError
from common.names import TopicPartition as TP
from common.names import validate_topic
from tests.storage.helpers import batch


def manager(tmp_path, n=2, fileops=None, broker_id=1, cluster_id="c1"):
    dirs = [str(tmp_path / f"d{i}") for i in range(n)]
    lm = LogManager(dirs, broker_id=broker_id, cluster_id=cluster_id, fileops=fileops)
    lm.startup()
    return lm


def test_new_partitions_go_to_the_dir_with_fewest_partitions(tmp_path):
    lm = manager(tmp_path, n=3)
    lm.get_or_create_log(TP("a", 0), log_dir=str(tmp_path / "d0"))
    lm.get_or_create_log(TP("a", 1), log_dir=str(tmp_path / "d0"))
    lm.get_or_create_log(TP("a", 2), log_dir=str(tmp_path / "d1"))
    placed = [lm.log_dir_of(lm.get_or_create_log(TP("b", p)).tp).path for p in range(3)]
    assert placed == [str(tmp_path / "d2"), str(tmp_path / "d1"), str(tmp_path / "d2")]
    assert os.path.isdir(tmp_path / "d2" / "b-0")


def test_meta_properties_and_clean_shutdown_marker(tmp_path):
    lm = manager(tmp_path)
    props = parse_properties((tmp_path / "d0" / "meta.properties").read_text())
    assert props["broker.id"] == "1" and props["cluster.id"] == "c1"
    assert len(props["directory.id"]) == 22
    assert not lm.had_clean_shutdown
    lm.get_or_create_log(TP("t", 0)).append_as_leader(batch(3), 0)
    lm.logs[TP("t", 0)].high_watermark = 2
    lm.registration_handled()  # else the next start still registers unclean (KIP-966)
    lm.shutdown()
    assert (tmp_path / "d0" / CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / "d0" / "replication-offset-checkpoint").read_text() == "0\n1\nt 0 2\n"
    assert (tmp_path / "d0" / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 3\n"
    lm2 = manager(tmp_path)
    assert lm2.had_clean_shutdown
    assert not (tmp_path / "d0" / CLEAN_SHUTDOWN_FILE).exists()  # removed once loaded
    assert lm2.get_log(TP("t", 0)).high_watermark == 2
    same = parse_properties((tmp_path / "d0" / "meta.properties").read_text())
    assert same["directory.id"] == props["directory.id"]


def test_log_dir_of_another_broker_goes_offline(tmp_path):
    manager(tmp_path, n=2).shutdown()
    (tmp_path / "d1" / "meta.properties").write_text("version=0\nbroker.id=7\n")
    lm = manager(tmp_path, n=2)
    assert [d.path for d in lm.offline_dirs] == [str(tmp_path / "d1")]
    assert "broker.id=7" in lm.offline_dirs[0].error
    (tmp_path / "d0" / "meta.properties").write_text("version=0\nbroker.id=7\n")
    with pytest.raises(LogDirError, match="no log dir could be loaded"):
        manager(tmp_path, n=2)


def test_eio_in_one_log_dir_names_it_and_leaves_the_other_writable(tmp_path):
    fo = FaultInjectingFileOps()
    lm = manager(tmp_path, fileops=fo)
    a = lm.get_or_create_log(TP("t", 0), log_dir=str(tmp_path / "d0"))
    b = lm.get_or_create_log(TP("t", 1), log_dir=str(tmp_path / "d1"))
    a.append_as_leader(batch(1), 0)
    fo.fail(str(tmp_path / "d0"), errno.EIO)
    with pytest.raises(LogAppendError) as info:
        a.append_as_leader(batch(1), 0)
    err = info.value
    assert err.log_dir == str(tmp_path / "d0") and err.partition == "t-0"
    assert err.errno == errno.EIO
    assert str(tmp_path / "d0") in str(err) and "t-0" in str(err) and "EIO" in str(err)
    assert b.append_as_leader(batch(2), 0).last_offset == 1
    with pytest.raises(CheckpointIOError, match=str(tmp_path / "d0")):
        lm.checkpoint(lm.dirs[0])
    lm.checkpoint(lm.dirs[1])
    assert lm.mark_offline(str(tmp_path / "d0"), "EIO") == [TP("t", 0)]
    assert lm.get_log(TP("t", 0)) is None
    assert lm.log_dir_of(lm.get_or_create_log(TP("t", 2)).tp).path == str(tmp_path / "d1")


def test_enospc_is_a_storage_error_too(tmp_path):
    fo = FaultInjectingFileOps()
    lm = manager(tmp_path, n=1, fileops=fo)
    log = lm.get_or_create_log(TP("t", 0))
    fo.fail(str(tmp_path / "d0"), errno.ENOSPC, ops={"write"})
    with pytest.raises(KafkaStorageError, match="ENOSPC"):
        log.append_as_leader(batch(1), 0)


@pytest.mark.parametrize("name", ["../x", "a/b", "x" * 250, ".", "..", "", "a b", "ü", "a\x00"])
def test_hostile_topic_names_are_refused(tmp_path, name):
    lm = manager(tmp_path, n=1)
    with pytest.raises(InvalidTopicError):
        lm.get_or_create_log(TP(name, 0))
    assert os.listdir(tmp_path / "d0") == ["meta.properties"]


def test_legal_topic_names_pass():
    for name in ("orders", "a.b_c-d", "x" * 249, "..."):
        assert validate_topic(name) == name


def test_appends_run_on_the_log_dirs_own_thread(tmp_path):
    threads = []

    class Recording(FileOps):
        def writev(self, fd, buffers, total=None):
            threads.append(threading.current_thread().name)
            return super().writev(fd, buffers, total)

    lm = manager(tmp_path, fileops=Recording())
    lm.get_or_create_log(TP("t", 0), log_dir=str(tmp_path / "d0"))
    lm.get_or_create_log(TP("t", 1), log_dir=str(tmp_path / "d1"))

    threads.clear()  # meta.properties and segment creation happened on this thread

    async def go():
        main = threading.current_thread().name
        await lm.append_as_leader(TP("t", 0), batch(1), 0)
        await lm.append_as_leader(TP("t", 1), batch(1), 0)
        info = await lm.append_as_follower(TP("t", 1), b"")
        return main, info

    main, info = asyncio.run(go())
    # each append writes its batch and (new epoch) its leader-epoch-checkpoint
    assert [t.rsplit("_", 1)[0] for t in threads] == ["log-dir-0"] * 2 + ["log-dir-1"] * 2
    assert main not in threads
    assert info.num_records == 0


def test_concurrent_appends_keep_submission_order(tmp_path):
    lm = manager(tmp_path, n=1)
    lm.get_or_create_log(TP("t", 0))

    async def go():
        return await asyncio.gather(*(lm.append_as_leader(TP("t", 0), batch(2, tag=f"{i}-"), 0)
                                      for i in range(50)))

    infos = asyncio.run(go())
    assert [i.first_offset for i in infos] == list(range(0, 100, 2))
    from common.records import decode_all
    keys = [r.key for r in decode_all(lm.get_log(TP("t", 0)).read(0, 1 << 20))]
    assert keys == [f"{i}-{j}".encode() for i in range(50) for j in range(2)]


async def test_work_queued_for_a_dir_fails_fast_when_it_goes_offline(tmp_path):
    """design.md#jbod-step-2-1: the dir's thread is stuck in a write (a hung disk); work queued
    behind it fails at once when the dir goes offline, not when (if ever) the disk answers."""
    fo = FaultInjectingFileOps()
    lm = LogManager([str(tmp_path / "d0"), str(tmp_path / "d1")], broker_id=1, fileops=fo)
    lm.startup()
    tp = TP("t", 0)
    log = lm.get_or_create_log(tp, log_dir=lm.dirs[0].path)
    hold = fo.hold(log.dir, ops={"write"})
    stuck = lm.submit(tp, log.append_as_leader, batch(1), 0)
    await asyncio.get_running_loop().run_in_executor(None, hold.entered.wait)
    queued = lm.submit(tp, log.append_as_leader, batch(1), 0)
    assert lm.mark_offline(lm.dirs[0].path, "hung disk") == [tp]
    with pytest.raises(LogDirOfflineError):
        await queued
    with pytest.raises(LogDirOfflineError):
        await lm.run_in_dir(lm.dirs[0], lm.checkpoint, lm.dirs[0])
    hold.release()
    await stuck  # the write under way finishes on its own
    lm.shutdown()
