"""A follower Fetch (replica_id >= 0) from a broker that is not one of the partition's replicas
is refused per partition, without an authorizer, as Kafka's Partition.followerReplicaOrThrow
refuses it: UNKNOWN_LEADER_EPOCH when it carries a leader epoch, NOT_LEADER_OR_FOLLOWER when it
does not. Nothing is read and the leader records nothing for it. Before, the leader served it
records up to its log end offset, above the high watermark."""

from __future__ import annotations

import pytest

from broker.fencing import follower_fetch_error
from client import AdminClient, Producer
from client.transport import default_channel_factory
from common.errors import ErrorCode
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from harness.testing import *  # the real-cluster fixtures (cluster_factory)
from tests.cluster.helpers import partition_state

TOPIC = "assigned-to-one"

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("replica_id,assigned,leader,epoch,expected", [
    (2, (1, 2), 1, 5, None),                                 # an assigned follower
    (2, (1, 2), 1, None, None),
    (3, (1, 2), 1, 5, ErrorCode.UNKNOWN_LEADER_EPOCH),       # not assigned, epoch sent
    (3, (1, 2), 1, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER),    # not assigned, no epoch
    (3, (1, 2), 1, None, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (1, (1, 2), 1, 5, ErrorCode.UNKNOWN_LEADER_EPOCH),       # the leader is no remote replica
])
def test_follower_fetch_error(replica_id, assigned, leader, epoch, expected):
    assert follower_fetch_error(replica_id, assigned, leader, epoch) == expected


def _fetch(replica_id: int, epoch: int | None) -> pb.FetchRequest:
    part = pb.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    if epoch is not None:
        part.current_leader_epoch = epoch
    req = pb.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
        pb.FetchTopic(topic=TOPIC, partitions=[part])])
    if replica_id >= 0:
        req.replica_state.CopyFrom(pb.BrokerState(broker_id=replica_id, broker_epoch=-1))
    return req


async def test_a_real_leader_refuses_a_follower_fetch_from_a_non_replica(zk_server,
                                                                          cluster_factory):
    c = cluster_factory(brokers=2, log_dirs_per_broker=1)
    async with AdminClient(c.bootstrap_servers, request_timeout_ms=5000) as admin:
        await admin.create_topic(TOPIC, replica_assignment={0: [1]})
    async with Producer(c.bootstrap_servers, acks="all") as prod:
        for i in range(3):
            await (await prod.send(TOPIC, f"r{i}".encode(), partition=0))
    before = await partition_state(c.bootstrap_servers, TOPIC)
    assert before.leader == 1

    async with default_channel_factory()(c.broker(1).address) as ch:
        stub = replog_pb2_grpc.BrokerStub(ch)

        async def answer(replica_id: int, epoch: int | None):
            resp = await stub.Fetch(_fetch(replica_id, epoch), timeout=5)
            (topic,) = resp.responses
            (part,) = topic.partitions
            return part

        for epoch, code in ((before.leader_epoch, ErrorCode.UNKNOWN_LEADER_EPOCH),
                            (None, ErrorCode.NOT_LEADER_OR_FOLLOWER)):
            got = await answer(2, epoch)  # broker 2 holds no replica of the partition
            assert (got.error_code, got.records) == (code, b""), got
        consumer = await answer(-1, None)  # a consumer is served as before
        assert consumer.error_code == ErrorCode.NONE and consumer.records
        assert consumer.high_watermark == 3

    after = await partition_state(c.bootstrap_servers, TOPIC)
    assert (after.leader, after.leader_epoch, after.isr) == \
        (before.leader, before.leader_epoch, before.isr)
