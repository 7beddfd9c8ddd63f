"""Log.offset_for_timestamp: ListOffsets by time (Kafka's fetchOffsetByTimestamp), checked
against a brute-force scan of every record, across segments, index entries and batches whose
records are out of timestamp order (CreateTime is the producer's clock)."""

import random

import pytest

from broker.storage.log import MAX_TIMESTAMP, Log, LogConfig
from common.names import TopicPartition
from common.records import ProducerRecord, build_batch, decode_all
from tests.storage.helpers import Clock

TP = TopicPartition("orders", 0)


def expected(records, ts, upper):
    if ts == MAX_TIMESTAMP:
        best = max(records, key=lambda r: (r.timestamp, -r.offset))
        return (best.timestamp, best.offset) if best.offset < upper else None
    found = next((r for r in records if r.timestamp >= ts), None)
    return None if found is None or found.offset >= upper else (found.timestamp, found.offset)


@pytest.mark.parametrize("seed", range(5))
def test_the_first_record_at_or_after_a_time(tmp_path, seed):
    rnd = random.Random(seed)
    log = Log.open(str(tmp_path), TP, LogConfig(segment_bytes=rnd.choice([700, 5000, 1 << 20]),
                                                index_interval_bytes=rnd.choice([1, 300])),
                   clock=Clock(), needs_recovery=False)
    t = 1_000
    for _ in range(60):
        n = rnd.randint(1, 4)
        stamps = [t + rnd.randint(-30, 50) for _ in range(n)]
        t += rnd.randint(0, 40)
        log.append_as_leader(build_batch([ProducerRecord(None, b"v" * rnd.randint(1, 60),
                                                         timestamp=s) for s in stamps]),
                             leader_epoch=3)
    leo = log.log_end_offset
    records = []
    while len(records) < leo:  # a read stops at its segment's end
        records += decode_all(log.read(len(records), 1 << 30))
    for ts in [MAX_TIMESTAMP, 0, *(rnd.randint(900, t + 100) for _ in range(150))]:
        upper = rnd.choice([leo, rnd.randint(0, leo)])
        got = log.offset_for_timestamp(ts, upper)
        want = expected(records, ts, upper)
        assert (None if got is None else got[:2]) == want, (ts, upper)
        if got is not None:
            assert got[2] == 3  # the leader epoch of the batch holding it
