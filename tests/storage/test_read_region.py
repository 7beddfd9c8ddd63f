"""Log.read_region: the zero-copy Fetch's view of the log. It must name exactly the bytes
Log.read returns (whole batches, KIP-74's first batch, the HW bound, segment ends), without
reading the records, and stay readable when the segment is deleted under it."""

import os
import random

import pytest

from broker.storage.file_region import FileRegion
from broker.storage.log import Log, LogConfig
from common.errors import OffsetOutOfRangeError
from common.names import TopicPartition
from tests.storage.helpers import Clock, batch

TP = TopicPartition("orders", 0)


def open_log(tmp_path, **cfg):
    return Log.open(str(tmp_path), TP, LogConfig(**cfg), clock=Clock(), needs_recovery=False)


def region_bytes(r) -> bytes:
    if isinstance(r, FileRegion):
        try:
            return r.read()
        finally:
            r.close()
    return r


@pytest.mark.parametrize("seed", range(6))
def test_region_names_the_bytes_read_returns(tmp_path, seed):
    rnd = random.Random(seed)
    # Small segments and index interval: reads cross segment ends and index entries.
    log = open_log(tmp_path, segment_bytes=rnd.choice([600, 2000, 1 << 20]),
                   index_interval_bytes=rnd.choice([1, 200, 4096]))
    for _ in range(40):
        log.append_as_leader(batch(rnd.randint(1, 5), size=rnd.randint(1, 120)),
                             leader_epoch=1)
    leo = log.log_end_offset
    for _ in range(300):
        start = rnd.randint(0, leo)
        max_bytes = rnd.choice([0, 1, 50, 100, 300, 1000, 5000, 1 << 20])
        upper = rnd.choice([None, rnd.randint(0, leo)])
        one = rnd.random() < 0.8
        want = log.read(start, max_bytes, upper, one)
        assert region_bytes(log.read_region(start, max_bytes, upper, one)) == want, \
            (start, max_bytes, upper, one)


def test_region_does_not_read_the_records(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    log.append_as_leader(batch(3, size=50_000), leader_epoch=1)
    reads = []
    real = log.fileops.pread
    monkeypatch.setattr(log.fileops, "pread",
                        lambda fd, n, off: reads.append(n) or real(fd, n, off))
    r = log.read_region(0, 1 << 20)
    assert isinstance(r, FileRegion) and len(r) == log.active_segment.size
    # Only batch headers were read to place the region (chunked header scans), not the
    # 150 KB of values that Log.read copies.
    assert sum(reads) < 20_000
    reads.clear()
    assert len(log.read(0, 1 << 20)) == len(r) and sum(reads) >= len(r)
    r.close()


def test_region_survives_deleting_its_segment(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), leader_epoch=1)
    want = log.read(0, 1 << 20)
    r = log.read_region(0, 1 << 20)
    os.unlink(log.active_segment.log_path)
    assert region_bytes(r) == want


def test_region_out_of_range_raises_as_read(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), leader_epoch=1)
    with pytest.raises(OffsetOutOfRangeError):
        log.read_region(5, 100)
    assert log.read_region(2, 100) == b""
