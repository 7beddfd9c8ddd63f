"""The replica fetcher's back-off follows the monotonic clock it is given, not the process's.

A partition whose Fetch answer is NOT_LEADER_OR_FOLLOWER is delayed for
``replica.fetch.backoff.ms`` (Kafka's delayPartitions). With a manual clock that stands still,
the fetcher keeps looking at the partition - it reads the clock - and never fetches it again;
once the clock passes ``delayed_until`` the partition is fetched at once. A fetcher reading
``time.monotonic()`` anywhere fails one half: it never reads this clock (or reads it for one
side of the comparison only, and the manual time is nowhere near the real one).
"""

from __future__ import annotations

from types import SimpleNamespace

from broker.fetcher import ReplicaFetcherManager
from broker.metrics import BrokerMetrics
from broker.partition import Partition
from common.clock import ManualClock
from common.config import build_config
from common.errors import ErrorCode
from common.names import TopicPartition
from common.observability import configure_event_log
from common.rpc import replog_pb2 as pb
from tests.broker.fetch_stream_fake import stream_stream
from tests.polling import async_wait_until

TP = TopicPartition("t", 0)
LEADER, FOLLOWER, EPOCH = 1, 2, 4
BACKOFF_MS = 20


class _CountingClock(ManualClock):
    """Counts monotonic reads: each fetcher round reads the clock once, so more reads with no
    new Fetch prove the fetcher looked at the delayed partition and left it out."""

    def __init__(self):
        # Far from any real monotonic reading (seconds since boot), in either direction.
        super().__init__(monotonic=1e9)
        self.reads = 0

    def monotonic(self) -> float:
        self.reads += 1
        return super().monotonic()


class _Answered:
    """A Fetch call that has its answer."""

    def __init__(self, resp: pb.FetchResponse):
        self.resp = resp

    def cancel(self):
        return False

    def __await__(self):
        return self._answer().__await__()

    async def _answer(self):
        return self.resp


class _NotLeaderChannel:
    """The leader's side: every Fetch of TP is answered NOT_LEADER_OR_FOLLOWER."""

    def __init__(self):
        self.fetches = 0

    def unary_unary(self, path, *args, **kwargs):
        def invoke(request, timeout=None, **kw):
            assert path.endswith("/Fetch"), path
            return self._fetch(request)
        return invoke

    def stream_stream(self, path, *args, **kwargs):
        return stream_stream(path, self._fetch)

    def _fetch(self, request):
        self.fetches += 1
        return _Answered(pb.FetchResponse(responses=[pb.FetchTopicResponse(
            topic=TP.topic, partitions=[pb.FetchPartitionResponse(
                partition=TP.partition,
                error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)])]))

    async def close(self):
        pass


def _follower_partition() -> Partition:
    p = Partition(TP, FOLLOWER)
    p.leader_id, p.leader_epoch = LEADER, EPOCH
    p.isr = p.replicas = (LEADER, FOLLOWER)
    p.log = SimpleNamespace(log_end_offset=0, latest_epoch=-1, log_start_offset=0,
                            high_watermark=0)
    return p


async def test_a_delayed_partition_is_fetched_again_when_the_injected_clock_passes_its_delay(
        tmp_path):
    clock = _CountingClock()
    channel = _NotLeaderChannel()
    cfg = build_config([("broker.id", str(FOLLOWER), "test"),
                        ("replica.fetch.backoff.ms", str(BACKOFF_MS), "test")])
    events = configure_event_log(str(tmp_path / "b2.json"), "broker", broker=FOLLOWER)
    m = ReplicaFetcherManager(FOLLOWER, lambda: 7, cfg, None, BrokerMetrics(FOLLOWER), events,
                              channel_factory=lambda address, options: channel,
                              monotonic=clock.monotonic)
    leader = SimpleNamespace(host="127.0.0.1", port=1)
    m.add_partitions({TP: _follower_partition()}, {LEADER: leader})
    try:
        (fetcher,) = m.fetchers.values()
        state = fetcher.partitions[TP]
        await async_wait_until(lambda: state.delayed_until, timeout=10,
                               what="TP delayed after NOT_LEADER_OR_FOLLOWER")
        assert channel.fetches == 1
        assert state.delayed_until == clock.now_s + BACKOFF_MS / 1000
        seen = clock.reads
        await async_wait_until(lambda: clock.reads >= seen + 5, timeout=10,
                               what="fetcher rounds reading the injected clock")
        assert channel.fetches == 1  # the clock stood still: still delayed
        clock.advance(BACKOFF_MS / 1000)
        await async_wait_until(lambda: channel.fetches >= 2, timeout=10,
                               what="TP fetched again once the clock passed delayed_until")
    finally:
        await m.shutdown()
