"""A Fetch's log reads: one executor hand-off for all of its partitions, within the response's
max_bytes in partition order (KIP-74: the first partition with data gets a whole batch even
past the limit; later ones only what is left). One hand-off per partition in turn made a
leader take 10-20 ms to answer a follower fetch of 20-30 partitions under acks=all load."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from broker.replica_types import FetchPartitionRequest
from common.records import ProducerRecord, build_batch, decode_all
from tests.broker.test_idle_follower_fetch import TPS, Clock, _leader


class CountingPool(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submits = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submits += 1
        return super().submit(fn, *args, **kwargs)


def _batch(i: int) -> bytes:
    return build_batch([ProducerRecord(b"k", bytes([i]) * 1000)])


async def test_all_partitions_are_read_in_one_hand_off_within_max_bytes(tmp_path):
    pool = CountingPool()
    rm, lm = await _leader(tmp_path, "b1", Clock(), [1], read_pool=pool)
    try:
        for i, tp in enumerate(TPS):
            assert (await rm.produce(1, 5000, [(tp, _batch(i))]))[0].error == 0
        size = len(_batch(0))
        req = [FetchPartitionRequest(tp, 0, 1 << 20) for tp in TPS]

        everything = await rm.fetch(-1, -1, 0, 1, 1 << 20, req)
        assert [len(decode_all(r.records)) for r in everything] == [1, 1, 1, 1]
        assert [decode_all(r.records)[0].value[0] for r in everything] == [0, 1, 2, 3]
        assert pool.submits == 1

        # Room for two and a half batches: the first two partitions fill it, the third's
        # batch does not fit in what is left, and the fourth gets nothing either.
        limited = await rm.fetch(-1, -1, 0, 1, size * 5 // 2, req)
        assert [len(r.records) for r in limited] == [size, size, 0, 0]

        # Less than one batch: the first partition's batch comes whole all the same.
        tiny = await rm.fetch(-1, -1, 0, 1, 10, req)
        assert [len(r.records) for r in tiny] == [size, 0, 0, 0]
        assert pool.submits == 3
    finally:
        pool.shutdown()
        lm.shutdown()
