"""The fetcher's offset reset when the leader refuses its ListOffsets (Kafka's
AbstractFetcherThread.handleOutOfRangeError).

A Fetch answered OFFSET_OUT_OF_RANGE makes the follower ask the leader for its log end. If the
leader has moved on meanwhile, that ListOffsets is answered NOT_LEADER_OR_FOLLOWER or
UNKNOWN_LEADER_EPOCH: Kafka delays the partition and retries (the next LeaderAndIsr names the
new leader); only FENCED_LEADER_EPOCH at the epoch the fetcher holds marks it failed
(onPartitionFenced). The commit before treated every error code as a local storage error and
failed the partition (KIP-461's failed set), so a leadership change racing an offset reset
stopped the replica from fetching until a higher leader epoch reached it.

The fetcher runs over the transport seam (``stub_factory``): one Fetch answer is handed to
``handle_response`` and the stub answers the ListOffsets; the log is a real one.
"""

from __future__ import annotations

import pytest

from broker.fetcher import ReplicaFetcherManager
from broker.metrics import BrokerMetrics
from broker.partition import Partition
from broker.storage.log import LogConfig
from broker.storage.log_manager import LogManager
from common.config import build_config
from common.errors import ErrorCode
from common.names import TopicPartition
from common.observability import configure_event_log
from common.rpc import replog_pb2 as pb
from tests.storage.helpers import batch

TP = TopicPartition("t", 0)
LEADER, FOLLOWER, EPOCH = 1, 2, 4


class _Stub:
    """The leader: every ListOffsets of TP is answered ``code``."""

    def __init__(self, code: int):
        self.code = code
        self.list_offsets = 0

    async def ListOffsets(self, req, *, timeout):  # noqa: N802 - the gRPC method's name
        self.list_offsets += 1
        return pb.ListOffsetsResponse(topics=[pb.ListOffsetsTopicResponse(
            topic=TP.topic, partitions=[pb.ListOffsetsPartitionResponse(
                partition=TP.partition, error_code=self.code, offset=-1)])])


def _out_of_range() -> pb.FetchResponse:
    return pb.FetchResponse(responses=[pb.FetchTopicResponse(topic=TP.topic, partitions=[
        pb.FetchPartitionResponse(partition=TP.partition,
                                  error_code=ErrorCode.OFFSET_OUT_OF_RANGE)])])


@pytest.mark.parametrize("code, failed", [
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, False),
    (ErrorCode.UNKNOWN_LEADER_EPOCH, False),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False),
    (ErrorCode.FENCED_LEADER_EPOCH, True),
])
async def test_a_refused_list_offsets_delays_the_partition_unless_fenced(tmp_path, code, failed):
    stub = _Stub(code)
    cfg = build_config([("broker.id", str(FOLLOWER), "test")])
    events = configure_event_log(str(tmp_path / "b2.json"), "broker", broker=FOLLOWER)
    now = [100.0]
    lm = LogManager([str(tmp_path / "data")], FOLLOWER, LogConfig())
    lm.startup()
    m = ReplicaFetcherManager(FOLLOWER, lambda: 7, cfg, lm, BrokerMetrics(FOLLOWER), events,
                              monotonic=lambda: now[0], stub_factory=lambda leader, address: stub)
    log = lm.get_or_create_log(TP)
    log.append_as_leader(batch(3), 2)
    p = Partition(TP, FOLLOWER)
    p.leader_id, p.leader_epoch = LEADER, EPOCH
    p.isr = p.replicas = (LEADER, FOLLOWER)
    p.log = log
    m.addresses[LEADER] = "leader:1"
    f = m.track(TP, p)
    state = f.partitions[TP]
    try:
        await f.handle_response(_out_of_range(), f.partitions.copy())
        assert stub.list_offsets == 1
        assert log.log_end_offset == 3  # nothing learned from the leader: the log is kept
        if failed:
            assert TP in m.failed_partitions and TP not in f.partitions
        else:
            assert TP not in m.failed_partitions
            assert f.partitions[TP] is state
            assert state.delayed_until == now[0] + m.backoff_s  # retried after the back-off
    finally:
        lm.shutdown()
