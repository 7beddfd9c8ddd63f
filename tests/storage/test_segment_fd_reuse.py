"""Issue 42, defect 3: a read on the fetch read pool must never use a segment's descriptor
number after another thread closed it, or it reads whatever file or socket took the number
next - a repro sent a ``public`` consumer the bytes of ``secret-0``'s segment.

Each test stops a read between loading the segment's descriptor and using it (a ``hold`` in
the file-ops seam, on the read's pread: no timing), closes the log the way one close path of
the broker does, then opens another partition's segment file until the kernel hands out the
closed number (the lowest free number is reused) or it is plain that it will not. The read
then ends on its own file's bytes, or with a clean LogClosedError; never another file's.
"""

import os
import threading

import pytest

from broker.storage.errors import LogClosedError
from broker.storage.file_region import FileRegion
from broker.storage.fileops import FaultInjectingFileOps
from broker.storage.log import Log
from broker.storage.log_manager import LogManager
from common.errors import ErrorCode
from common.names import TopicPartition as TP
from tests.storage.helpers import batch, kafka_python_read

RECYCLE_TRIES = 64


def _recycle(number: int, path: str) -> list[int]:
    """Open ``path`` until one of its descriptors gets ``number`` (or give up): what a segment
    roll, a checkpoint or a socket on another thread does to a closed number."""
    opened = []
    for _ in range(RECYCLE_TRIES):
        fd = os.open(path, os.O_RDONLY)
        opened.append(fd)
        if fd == number:
            break
    return opened


def _log(path, tp, fileops=None, tag="r") -> Log:
    log = Log.open(str(path), tp, fileops=fileops, needs_recovery=False)
    log.append_as_leader(batch(3, size=50, tag=tag), 0)
    log.high_watermark = log.log_end_offset
    return log


def _secret(tmp_path) -> tuple[Log, str]:
    """Another partition's segment: the same offsets, other records."""
    secret = _log(tmp_path / "other", TP("secret", 0), tag="secret")
    return secret, secret.segments[0].log_path


class _PausedRead:
    """``fn`` on another thread (the read pool), stopped at its first pread of ``log``'s
    files until ``resume()``; other threads' reads go on (reload_log's recovery)."""

    def __init__(self, fo: FaultInjectingFileOps, log: Log, fn):
        self.result = None
        self.error = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.hold = fo.hold(log.dir, ops={"pread"}, thread=self._thread)
        self._thread.start()
        assert self.hold.entered.wait(10), "the read never reached the file"

    def _run(self, fn):
        try:
            self.result = fn()
        except Exception as e:  # noqa: BLE001 - the test inspects it
            self.error = e

    def resume(self):
        self.hold.release()
        self._thread.join(10)
        assert not self._thread.is_alive()
        if isinstance(self.result, FileRegion):
            region = self.result
            try:
                self.result = region.read()
            finally:
                region.close()
        return self


def _keys(data: bytes) -> list[bytes]:
    return [k for _, k, _ in kafka_python_read(data)]


def _check_never_recycled(number: int, opened: list[int]) -> None:
    try:
        assert number not in opened, \
            "the paused read's descriptor number was closed and given to another file"
    finally:
        for fd in opened:
            os.close(fd)


@pytest.mark.parametrize("zero_copy", [False, True], ids=["read", "read_region"])
def test_delete_under_a_paused_read_never_hands_it_another_files_bytes(tmp_path, zero_copy):
    """StopReplica(delete): Log.delete closes the fds on the log dir's thread while a Fetch
    read is under way. Before the fix the read went on with the closed number, which the next
    open took: it served ``secret-0``'s records as ``public-0``'s."""
    fo = FaultInjectingFileOps()
    public = _log(tmp_path / "d0", TP("public", 0), fo, tag="public")
    _secret_log, secret_path = _secret(tmp_path)
    number = public.segments[0].fd
    read = public.read_region if zero_copy else public.read
    paused = _PausedRead(fo, public, lambda: read(0, 1 << 20, public.log_end_offset, True))
    public.delete()
    opened = _recycle(number, secret_path)
    paused.resume()
    try:
        if paused.error is None:
            assert all(k.startswith(b"public") for k in _keys(paused.result))
        else:
            assert isinstance(paused.error, LogClosedError), repr(paused.error)
            assert paused.error.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        _check_never_recycled(number, opened)
    # The read that held it closed it when it ended: no descriptor of the deleted segment
    # stays open.
    with pytest.raises(OSError):
        os.fstat(number)


def test_a_segment_read_paused_under_a_delete_returns_its_own_bytes(tmp_path):
    """The pause right where the bytes are read: the pread that returns the records. Before
    the fix it returned ``secret-0``'s segment bytes; now the deleted segment's own."""
    fo = FaultInjectingFileOps()
    public = _log(tmp_path / "d0", TP("public", 0), fo, tag="public")
    _secret_log, secret_path = _secret(tmp_path)
    seg = public.segments[0]
    own = seg.read(0, seg.size)
    number = seg.fd
    paused = _PausedRead(fo, public, lambda: seg.read(0, seg.size))
    public.delete()
    opened = _recycle(number, secret_path)
    paused.resume()
    try:
        assert paused.error is None, repr(paused.error)
        assert _keys(paused.result) == [b"public0", b"public1", b"public2"]
        assert paused.result == own
    finally:
        _check_never_recycled(number, opened)


def test_a_read_of_a_deleted_log_answers_cleanly(tmp_path):
    """After the close, a read is refused with LogClosedError (no I/O error: nothing would
    take the log dir offline), its code the one a client retries on elsewhere."""
    log = _log(tmp_path, TP("t", 0))
    log.delete()
    for read in (log.read, log.read_region):
        with pytest.raises(LogClosedError) as info:
            read(0, 1 << 20, log.log_end_offset, True)
        assert info.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(LogClosedError):
        log.offset_for_timestamp(0, log.log_end_offset)


def test_a_read_paused_across_a_kip113_swap_is_served_by_the_new_log(tmp_path):
    """``close_old`` after a KIP-113 swap (broker/alter_log_dirs.py): ``moved_to`` is set,
    then the old log's fds close behind the work queued for it. A read that loaded an fd of
    the old log starts over on the new one: the same records, never the recycled number's."""
    fo = FaultInjectingFileOps()
    old = _log(tmp_path / "d0", TP("public", 0), fo, tag="public")
    new = _log(tmp_path / "d1", TP("public", 0), tag="public")
    _secret_log, secret_path = _secret(tmp_path)
    number = old.segments[0].fd
    paused = _PausedRead(fo, old, lambda: old.read(0, 1 << 20, old.log_end_offset, True))
    old.moved_to = new  # what AlterLogDirs._swap does, then close_old on the old dir's thread
    old._close_fds()
    opened = _recycle(number, secret_path)
    paused.resume()
    try:
        assert paused.error is None, repr(paused.error)
        assert _keys(paused.result) == [b"public0", b"public1", b"public2"]
        assert paused.result == new.read(0, 1 << 20, new.log_end_offset)
    finally:
        _check_never_recycled(number, opened)


def _manager(tmp_path, fo) -> LogManager:
    lm = LogManager([str(tmp_path / "d0"), str(tmp_path / "d1")], broker_id=1,
                    cluster_id="c1", fileops=fo)
    lm.startup()
    return lm


def _drain(lm: LogManager, path: str) -> None:
    """Wait for what is queued on a log dir's executor (the fds close there)."""
    lm.dir_by_path(path).executor.submit(lambda: None).result(10)


def test_a_log_dir_taken_offline_under_a_paused_read(tmp_path):
    """LogManager._take_offline closes its logs' fds on the dir's thread. A read under way
    finishes on its own file or answers KAFKA_STORAGE_ERROR; the number is not recycled."""
    fo = FaultInjectingFileOps()
    lm = _manager(tmp_path, fo)
    d0 = str(tmp_path / "d0")
    log = lm.get_or_create_log(TP("public", 0), log_dir=d0)
    log.append_as_leader(batch(3, size=50, tag="public"), 0)
    log.high_watermark = log.log_end_offset
    _secret_log, secret_path = _secret(tmp_path)
    number = log.segments[0].fd
    paused = _PausedRead(fo, log, lambda: log.read(0, 1 << 20, log.log_end_offset, True))
    assert lm.mark_offline(d0, "EIO on d0") == [TP("public", 0)]
    _drain(lm, d0)
    opened = _recycle(number, secret_path)
    paused.resume()
    try:
        if paused.error is None:
            assert all(k.startswith(b"public") for k in _keys(paused.result))
        else:
            assert isinstance(paused.error, LogClosedError), repr(paused.error)
            assert paused.error.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    finally:
        _check_never_recycled(number, opened)
    with pytest.raises(LogClosedError) as info:
        log.read(0, 1 << 20, log.log_end_offset)
    assert info.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    lm.shutdown()


def test_reload_log_under_a_paused_read(tmp_path):
    """``reload_log`` (KIP-461: a failed log rebuilt from its files) closes the old log's fds
    and opens new ones. A read of the old log under way ends on its file, and a later one
    answers KAFKA_STORAGE_ERROR - not an I/O error, which would take the healthy dir offline;
    the reloaded log serves the records."""
    fo = FaultInjectingFileOps()
    lm = _manager(tmp_path, fo)
    d0 = str(tmp_path / "d0")
    tp = TP("public", 0)
    old = lm.get_or_create_log(tp, log_dir=d0)
    old.append_as_leader(batch(3, size=50, tag="public"), 0)
    old.high_watermark = old.log_end_offset
    old.failed = "a write failed"
    _secret_log, secret_path = _secret(tmp_path)
    number = old.segments[0].fd
    paused = _PausedRead(fo, old, lambda: old.read(0, 1 << 20, old.log_end_offset, True))
    fresh = lm.reload_log(tp)
    opened = _recycle(number, secret_path)
    paused.resume()
    try:
        if paused.error is None:
            assert all(k.startswith(b"public") for k in _keys(paused.result))
        else:
            assert isinstance(paused.error, LogClosedError), repr(paused.error)
            assert paused.error.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    finally:
        _check_never_recycled(number, opened)
    with pytest.raises(LogClosedError) as info:
        old.read(0, 1 << 20, old.log_end_offset)
    assert info.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert _keys(fresh.read(0, 1 << 20, fresh.log_end_offset)) == \
        [b"public0", b"public1", b"public2"]
    lm.shutdown()
