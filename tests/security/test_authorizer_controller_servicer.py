"""The controller's gRPC servicer with an authorizer: per-topic refusals are not passed on to
the controller, cluster operations are refused whole before they reach its event queue.

A real gRPC server; the Controller is a recorder of what reaches it (its own behaviour is
tested in tests/controller)."""

from __future__ import annotations

import grpc
import pytest

from common.errors import ErrorCode
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
from controller import events as E
from controller.servicer import ControllerServicer
from tests.security.test_authorizer_broker_servicer import ALICE, HeaderPrincipals, allow


class RecordingController:
    def __init__(self):
        self.calls: list[tuple] = []

    async def create_topics(self, topics, validate_only, timeout_ms):
        self.calls.append(("create", tuple(t.name for t in topics)))
        return [E.TopicResult(name=t.name, error_code=0, topic_id="id", num_partitions=1,
                              replication_factor=1) for t in topics]

    async def create_partitions(self, topics, validate_only, timeout_ms):
        self.calls.append(("create_partitions", tuple(t.name for t in topics)))
        return [E.PartitionsResult(name=t.name, error_code=0) for t in topics]

    async def delete_topics(self, names, timeout_ms):
        self.calls.append(("delete", tuple(names)))
        return [E.DeletionResult(name=n, topic_id="id", error_code=0) for n in names]

    async def alter_partition(self, *args):
        self.calls.append(("alter_partition",))
        return []

    async def controlled_shutdown(self, broker_id, broker_epoch):
        self.calls.append(("controlled_shutdown",))
        return []

    async def elect_leaders(self, *args):
        self.calls.append(("elect",))
        return []

    async def alter_partition_reassignments(self, *args):
        self.calls.append(("reassign",))
        return []

    async def list_partition_reassignments(self, tps):
        self.calls.append(("list_reassignments",))
        return []


@pytest.fixture
async def controller():
    recorder = RecordingController()
    authorizer = AclAuthorizer(zk=None, super_users=frozenset())
    server = grpc.aio.server()
    replog_pb2_grpc.add_ControllerServicer_to_server(ControllerServicer(
        recorder, principal_builder=HeaderPrincipals(), authorizer=authorizer), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    recorder.stub = replog_pb2_grpc.ControllerStub(channel)
    recorder.authorizer = authorizer
    yield recorder
    await channel.close()
    await server.stop(0)


def create(*names):
    return pb.CreateTopicsRequest(topics=[pb.CreatableTopic(name=n, num_partitions=1,
                                                            replication_factor=1)
                                          for n in names])


async def test_create_topics_needs_create_on_the_topic_or_the_cluster(controller):
    allow(controller.authorizer, topic("mine"), AclOperation.CREATE)
    resp = await controller.stub.CreateTopics(create("theirs", "mine"), metadata=ALICE)
    assert [(t.name, t.error_code) for t in resp.topics] == [
        ("theirs", ErrorCode.TOPIC_AUTHORIZATION_FAILED), ("mine", ErrorCode.NONE)]
    assert controller.calls == [("create", ("mine",))]
    allow(controller.authorizer, CLUSTER_RESOURCE, AclOperation.CREATE)
    resp = await controller.stub.CreateTopics(create("theirs"), metadata=ALICE)
    assert [t.error_code for t in resp.topics] == [ErrorCode.NONE]


async def test_nothing_authorized_reaches_nothing(controller):
    resp = await controller.stub.CreateTopics(create("a", "b"), metadata=ALICE)
    assert {t.error_code for t in resp.topics} == {ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    resp = await controller.stub.DeleteTopics(pb.DeleteTopicsRequest(topic_names=["a"]),
                                              metadata=ALICE)
    assert [r.error_code for r in resp.responses] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    resp = await controller.stub.CreatePartitions(pb.CreatePartitionsRequest(
        topics=[pb.CreatePartitionsTopic(name="a", count=2)]), metadata=ALICE)
    assert [r.error_code for r in resp.results] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    assert controller.calls == []


async def test_delete_needs_delete_and_create_partitions_alter(controller):
    allow(controller.authorizer, topic("a"), AclOperation.DELETE)
    allow(controller.authorizer, topic("b"), AclOperation.ALTER)
    resp = await controller.stub.DeleteTopics(pb.DeleteTopicsRequest(topic_names=["a", "b"]),
                                              metadata=ALICE)
    assert [(r.name, r.error_code) for r in resp.responses] == [
        ("a", ErrorCode.NONE), ("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    resp = await controller.stub.CreatePartitions(pb.CreatePartitionsRequest(
        topics=[pb.CreatePartitionsTopic(name=n, count=2) for n in ("a", "b")]),
        metadata=ALICE)
    assert [(r.name, r.error_code) for r in resp.results] == [
        ("a", ErrorCode.TOPIC_AUTHORIZATION_FAILED), ("b", ErrorCode.NONE)]
    assert controller.calls == [("delete", ("a",)), ("create_partitions", ("b",))]


@pytest.mark.parametrize("rpc,request_,needs,reaches", [
    ("AlterPartition", pb.AlterPartitionRequest(broker_id=1, broker_epoch=1),
     AclOperation.CLUSTER_ACTION, "alter_partition"),
    ("ControlledShutdown", pb.ControlledShutdownRequest(broker_id=1, broker_epoch=1),
     AclOperation.CLUSTER_ACTION, "controlled_shutdown"),
    ("ElectLeaders", pb.ElectLeadersRequest(election_type=pb.PREFERRED,
                                            all_topic_partitions=True),
     AclOperation.ALTER, "elect"),
    ("AlterPartitionReassignments", pb.AlterPartitionReassignmentsRequest(),
     AclOperation.ALTER, "reassign"),
    ("ListPartitionReassignments", pb.ListPartitionReassignmentsRequest(),
     AclOperation.DESCRIBE, "list_reassignments"),
])
async def test_cluster_operations_are_refused_whole(controller, rpc, request_, needs, reaches):
    call = getattr(controller.stub, rpc)
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await call(request_, metadata=ALICE)
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error_code_of(e.value) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert controller.calls == []
    # the one operation it needs, and nothing else, lets it through
    for other in AclOperation:
        if other not in (needs, AclOperation.ALL) and not (
                needs == AclOperation.DESCRIBE and other in (
                    AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                    AclOperation.ALTER)):
            allow(controller.authorizer, CLUSTER_RESOURCE, other)
    with pytest.raises(grpc.aio.AioRpcError):
        await call(request_, metadata=ALICE)
    allow(controller.authorizer, CLUSTER_RESOURCE, needs)
    await call(request_, metadata=ALICE)
    assert controller.calls == [(reaches,)]


async def test_a_deny_on_the_cluster_wins(controller):
    allow(controller.authorizer, CLUSTER_RESOURCE, AclOperation.ALL)
    controller.authorizer.acls[CLUSTER_RESOURCE] |= {AccessControlEntry(
        "User:alice", "*", AclOperation.CLUSTER_ACTION, AclPermissionType.DENY)}
    with pytest.raises(grpc.aio.AioRpcError):
        await controller.stub.AlterPartition(pb.AlterPartitionRequest(), metadata=ALICE)
    await controller.stub.ElectLeaders(pb.ElectLeadersRequest(
        election_type=pb.PREFERRED, all_topic_partitions=True), metadata=ALICE)
