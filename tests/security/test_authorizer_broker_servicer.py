"""The broker's gRPC servicer with an authorizer: Kafka's checks and codes per RPC, and a
refused controller-only request changes nothing.

A real gRPC server and ReplicaManager (tests/broker/inprocess.py); the principal is chosen per
call by a metadata header through a PrincipalBuilder (the transport's job in production, tested
with H-TLS's builder elsewhere); the authorizer's cache is filled directly (its ZooKeeper side
is tested in test_authorizer_zk.py)."""

from __future__ import annotations

import grpc
import pytest

from broker.servicer import BrokerServicer
from common.errors import ErrorCode
from common.grpc_options import SERVER_OPTIONS
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.rpc_status import error_code_of
from common.security.acl import (
    CLUSTER_RESOURCE,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    topic,
)
from common.security.authorizer import AclAuthorizer
from common.security.principal import KafkaPrincipal, PrincipalBuilder
from tests.broker.inprocess import TP, Node, leader_and_isr, produce_req

BROKER = KafkaPrincipal("User", "broker")


class HeaderPrincipals(PrincipalBuilder):
    """``x-principal: User:alice`` names the caller; no header is the broker itself."""

    def from_grpc(self, context) -> KafkaPrincipal:
        for key, value in context.invocation_metadata() or ():
            if key == "x-principal":
                return KafkaPrincipal.parse(value)
        return BROKER


ALICE = (("x-principal", "User:alice"),)


def allow(authorizer, resource, op, who="User:alice"):
    authorizer.acls[resource] = authorizer.acls.get(resource, frozenset()) | {
        AccessControlEntry(who, "*", op, AclPermissionType.ALLOW)}


@pytest.fixture
async def broker(tmp_path):
    node = Node(1, tmp_path)
    authorizer = AclAuthorizer(zk=None, super_users=frozenset({BROKER}))
    server = grpc.aio.server(options=SERVER_OPTIONS)
    replog_pb2_grpc.add_BrokerServicer_to_server(
        BrokerServicer(node.rm, 1, principal_builder=HeaderPrincipals(), authorizer=authorizer),
        server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    node.server, node.port = server, port
    node.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    node.stub = replog_pb2_grpc.BrokerStub(node.channel)
    node.authorizer = authorizer
    # the controller (a super user) makes broker 1 the leader of t-0, replicas 1 and 2
    resp = await node.stub.LeaderAndIsr(leader_and_isr(node, 1, 1, [1], [1, 2], [node]))
    assert [p.error_code for p in resp.partition_errors] == [0]
    yield node
    await node.stop()


async def refused(call) -> tuple[grpc.StatusCode, int | None]:
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await call
    return e.value.code(), error_code_of(e.value)


def leo(node) -> int:
    return node.rm.partitions[TP].log_end_offset


async def test_produce_needs_write_on_the_topic(broker):
    resp = await broker.stub.Produce(produce_req("a", acks=1), metadata=ALICE)
    [p] = resp.responses[0].partition_responses
    assert p.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert leo(broker) == 0
    allow(broker.authorizer, topic("t"), AclOperation.WRITE)
    resp = await broker.stub.Produce(produce_req("a", acks=1), metadata=ALICE)
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert leo(broker) == 5


async def test_a_deny_overrides_the_allow_for_produce(broker):
    allow(broker.authorizer, topic("t"), AclOperation.WRITE)
    broker.authorizer.acls[topic("t")] |= {AccessControlEntry(
        "User:*", "*", AclOperation.WRITE, AclPermissionType.DENY)}
    resp = await broker.stub.Produce(produce_req("a", acks=1), metadata=ALICE)
    assert resp.responses[0].partition_responses[0].error_code == \
        ErrorCode.TOPIC_AUTHORIZATION_FAILED


def consumer_fetch(offset=0):
    return pb.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
        pb.FetchTopic(topic="t", partitions=[pb.FetchPartition(partition=0, fetch_offset=offset,
                                                               partition_max_bytes=1 << 20)])])


async def test_consumer_fetch_needs_read(broker):
    await broker.stub.Produce(produce_req("a", acks=1))
    resp = await broker.stub.Fetch(consumer_fetch(), metadata=ALICE)
    [p] = resp.responses[0].partitions
    assert p.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and not p.records
    allow(broker.authorizer, topic("t"), AclOperation.READ)
    resp = await broker.stub.Fetch(consumer_fetch(), metadata=ALICE)
    [p] = resp.responses[0].partitions
    assert p.error_code == ErrorCode.NONE and p.records


async def test_follower_fetch_needs_cluster_action_and_changes_nothing(broker):
    await broker.stub.Produce(produce_req("a", acks=1))
    part = broker.rm.partitions[TP]
    req = consumer_fetch(offset=5)
    req.replica_state.CopyFrom(pb.BrokerState(broker_id=2, broker_epoch=-1))
    # read access to the topic is not enough: a follower fetch is the cluster's own traffic
    allow(broker.authorizer, topic("t"), AclOperation.ALL)
    assert await refused(broker.stub.Fetch(req, metadata=ALICE)) == (
        grpc.StatusCode.PERMISSION_DENIED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    # nothing recorded of follower 2: the leader's fetch state for it is as it was created
    assert (part.followers[2].log_end_offset, part.followers[2].last_fetch_time_ms) == (-1, 0)
    allow(broker.authorizer, CLUSTER_RESOURCE, AclOperation.CLUSTER_ACTION)
    resp = await broker.stub.Fetch(req, metadata=ALICE)
    assert resp.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert part.followers[2].log_end_offset == 5  # the same fetch, allowed, is recorded


async def test_leader_and_isr_stop_replica_update_metadata_need_cluster_action(broker):
    await broker.stub.Produce(produce_req("a", acks=1))
    other = leader_and_isr(broker, 2, 2, [2], [1, 2], [broker])  # would make 1 a follower
    assert await refused(broker.stub.LeaderAndIsr(other, metadata=ALICE)) == (
        grpc.StatusCode.PERMISSION_DENIED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    part = broker.rm.partitions[TP]
    assert part.leader_epoch == 1 and part.is_leader
    stop = pb.StopReplicaRequest(
        controller_id=0, controller_epoch=1, broker_epoch=broker.rm.broker_epoch,
        partition_states=[pb.StopReplicaPartitionState(topic="t", partition=0, leader_epoch=2,
                                                       delete_partition=True)])
    assert await refused(broker.stub.StopReplica(stop, metadata=ALICE)) == (
        grpc.StatusCode.PERMISSION_DENIED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    assert broker.rm.partitions.get(TP) is part and leo(broker) == 5 and part.is_leader
    assert await refused(broker.stub.UpdateMetadata(pb.UpdateMetadataRequest(
        controller_id=0, controller_epoch=1, broker_epoch=broker.rm.broker_epoch),
        metadata=ALICE)) == (grpc.StatusCode.PERMISSION_DENIED,
                             ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    assert await refused(broker.stub.GetReplicaLogInfo(pb.GetReplicaLogInfoRequest(
        broker_id=1, broker_epoch=broker.rm.broker_epoch), metadata=ALICE)) == (
        grpc.StatusCode.PERMISSION_DENIED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


async def test_metadata_lists_only_describable_topics(broker):
    await broker.stub.UpdateMetadata(pb.UpdateMetadataRequest(
        controller_id=0, controller_epoch=1, broker_epoch=broker.rm.broker_epoch,
        live_brokers=[broker.endpoint()], partition_states=[pb.UpdateMetadataPartitionState(
            topic="t", partition=0, leader=1, leader_epoch=1, isr=[1], replicas=[1, 2])]))
    resp = await broker.stub.Metadata(pb.MetadataRequest(all_topics=True), metadata=ALICE)
    assert [t.topic for t in resp.topics] == []
    resp = await broker.stub.Metadata(pb.MetadataRequest(all_topics=True))
    assert [t.topic for t in resp.topics] == ["t"]
    # named: unauthorized is the same answer for a topic that exists and one that does not
    resp = await broker.stub.Metadata(pb.MetadataRequest(topics=["t", "missing"]),
                                      metadata=ALICE)
    assert [(t.topic, t.error_code) for t in resp.topics] == [
        ("t", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("missing", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    allow(broker.authorizer, topic("*"), AclOperation.WRITE)  # Write implies Describe
    resp = await broker.stub.Metadata(pb.MetadataRequest(topics=["t", "missing"]),
                                      metadata=ALICE)
    assert [(t.topic, t.error_code) for t in resp.topics] == [
        ("t", ErrorCode.NONE), ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


async def test_list_offsets_needs_describe(broker):
    req = pb.ListOffsetsRequest(topics=[pb.ListOffsetsTopic(
        topic="t", partitions=[pb.ListOffsetsPartition(partition=0, timestamp=-1)])])
    resp = await broker.stub.ListOffsets(req, metadata=ALICE)
    assert resp.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    allow(broker.authorizer, topic("t"), AclOperation.READ)
    resp = await broker.stub.ListOffsets(req, metadata=ALICE)
    assert resp.topics[0].partitions[0].error_code == ErrorCode.NONE


async def test_no_authorizer_allows_everything(tmp_path):
    node = Node(1, tmp_path)
    await node.start()  # BrokerServicer without an authorizer, as before ACLs
    try:
        await node.stub.LeaderAndIsr(leader_and_isr(node, 1, 1, [1], [1], [node]))
        resp = await node.stub.Produce(produce_req("a", acks=1), metadata=ALICE)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    finally:
        await node.stop()


async def test_a_follower_fetch_stream_from_a_client_ends_refused(broker):
    req = consumer_fetch()
    req.replica_state.CopyFrom(pb.BrokerState(broker_id=2, broker_epoch=-1))

    async def requests():
        yield req
    call = broker.stub.FetchStream(requests(), metadata=ALICE)
    with pytest.raises(grpc.aio.AioRpcError) as e:
        async for _ in call:
            pass
    assert (e.value.code(), error_code_of(e.value)) == (
        grpc.StatusCode.PERMISSION_DENIED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    assert broker.rm.partitions[TP].followers[2].last_fetch_time_ms == 0
    # the broker itself (a super user) is served on the same stream kind
    call = broker.stub.FetchStream(requests())
    async for resp in call:
        assert resp.responses[0].partitions[0].error_code == ErrorCode.NONE


async def test_auto_creation_and_delete_records_need_create_and_delete(broker):
    """The gRPC Metadata creates unknown topics only with Create (cluster or topic), as the
    Kafka listener does (this servicer forwards to no controller, so an allowed creation stays
    unknown); DeleteRecords needs Delete on the topic and moves nothing without it."""
    allow(broker.authorizer, topic("new"), AclOperation.DESCRIBE)
    req = pb.MetadataRequest(topics=["new"], allow_auto_topic_creation=True)
    resp = await broker.stub.Metadata(req, metadata=ALICE)
    assert [(t.topic, t.error_code) for t in resp.topics] == [
        ("new", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    allow(broker.authorizer, CLUSTER_RESOURCE, AclOperation.CREATE)
    resp = await broker.stub.Metadata(req, metadata=ALICE)
    assert [(t.topic, t.error_code) for t in resp.topics] == [
        ("new", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]

    delete = pb.DeleteRecordsRequest(timeout_ms=1000, topics=[pb.DeleteRecordsTopic(
        topic="t", partitions=[pb.DeleteRecordsPartition(partition=0, offset=-1)])])
    resp = await broker.stub.DeleteRecords(delete, metadata=ALICE)
    assert [(r.topic, r.partition, r.error_code) for r in resp.results] == [
        ("t", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    allow(broker.authorizer, topic("t"), AclOperation.DELETE)
    resp = await broker.stub.DeleteRecords(delete, metadata=ALICE)
    assert [(r.error_code, r.low_watermark) for r in resp.results] == [(ErrorCode.NONE, 0)]
