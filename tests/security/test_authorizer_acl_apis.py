"""The broker's CreateAcls / DescribeAcls / DeleteAcls (Kafka's Admin API for ACLs) over a real
gRPC server and a real ZooKeeper: who may call them, what they write, per-item refusals."""

from __future__ import annotations

import grpc
import pytest

from broker.servicer import BrokerServicer
from common.errors import ErrorCode
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.rpc_status import error_code_of
from common.security.acl import (
    OPERATION_CODES,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
    decode_acls,
    topic,
)
from common.security.acl_wire import binding_from_pb, binding_pb, filter_pb
from common.security.authorizer import AclAuthorizer, Requester
from common.security.principal import KafkaPrincipal
from common.zk_async import AsyncZk
from tests.security.test_authorizer_broker_servicer import ALICE, BROKER, HeaderPrincipals

READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)


async def _serve(servicer):
    server = grpc.aio.server()
    replog_pb2_grpc.add_BrokerServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    return server, channel, replog_pb2_grpc.BrokerStub(channel)


@pytest.fixture
async def broker(zk_hosts):
    zk = AsyncZk(zk_hosts, session_timeout_ms=6000)
    await zk.start()
    authorizer = AclAuthorizer(zk, super_users=frozenset({BROKER}))
    await authorizer.start()
    server, channel, stub = await _serve(BrokerServicer(
        None, 1, principal_builder=HeaderPrincipals(), authorizer=authorizer))
    stub.authorizer = authorizer
    yield stub
    await channel.close()
    await server.stop(0)
    await authorizer.stop()
    await zk.stop()


async def _status(call):
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await call
    return e.value.code(), error_code_of(e.value)


def _every() -> pb.AclBindingFilter:
    return filter_pb(AclBindingFilter(ResourcePatternFilter(None, None, PatternType.ANY)))


async def test_without_an_authorizer_acl_requests_are_security_disabled():
    server, channel, stub = await _serve(BrokerServicer(None, 1))
    try:
        assert await _status(stub.DescribeAcls(pb.DescribeAclsRequest(filter=_every()))) == (
            grpc.StatusCode.FAILED_PRECONDITION, ErrorCode.SECURITY_DISABLED)
    finally:
        await channel.close()
        await server.stop(0)


async def test_changing_acls_needs_alter_and_reading_them_describe(broker):
    create = pb.CreateAclsRequest(creations=[binding_pb(AclBinding(topic("t"), READ))])
    denied = (grpc.StatusCode.PERMISSION_DENIED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    assert await _status(broker.CreateAcls(create, metadata=ALICE)) == denied
    assert await _status(broker.DescribeAcls(pb.DescribeAclsRequest(filter=_every()),
                                             metadata=ALICE)) == denied
    assert await _status(broker.DeleteAcls(pb.DeleteAclsRequest(filters=[_every()]),
                                           metadata=ALICE)) == denied
    assert broker.authorizer.acls == {}


async def test_create_describe_delete(broker, zk):
    bad = binding_pb(AclBinding(topic("t"), READ))
    bad.resource_type, bad.resource_name = 4, "other-cluster"  # CLUSTER must be kafka-cluster
    unknown = binding_pb(AclBinding(topic("t"), READ))
    unknown.operation = 99
    resp = await broker.CreateAcls(pb.CreateAclsRequest(creations=[
        binding_pb(AclBinding(topic("t"), READ)), bad, unknown]))
    assert [r.error_code for r in resp.results] == [0, ErrorCode.INVALID_REQUEST,
                                                   ErrorCode.INVALID_REQUEST]
    assert "kafka-cluster" in resp.results[1].error_message
    assert decode_acls(zk.get("/kafka-acl/Topic/t")[0]) == {READ}
    # this broker decides with it at once, before its notification comes back
    assert broker.authorizer.authorize(Requester(KafkaPrincipal("User", "alice"), "h"), AclOperation.READ,
                                       topic("t"))
    described = await broker.DescribeAcls(pb.DescribeAclsRequest(filter=_every()))
    assert [binding_from_pb(b) for b in described.acls] == [AclBinding(topic("t"), READ)]
    only_writes = AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "t",
                                                         PatternType.LITERAL),
                                   operation=AclOperation.WRITE)
    described = await broker.DescribeAcls(pb.DescribeAclsRequest(filter=filter_pb(only_writes)))
    assert list(described.acls) == []
    matching = filter_pb(AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "t",
                                                                PatternType.MATCH)))
    bad_filter = filter_pb(AclBindingFilter(ResourcePatternFilter(None, None,
                                                                  PatternType.ANY)))
    bad_filter.operation = 0  # UNKNOWN
    resp = await broker.DeleteAcls(pb.DeleteAclsRequest(filters=[matching, bad_filter]))
    assert [r.error_code for r in resp.filter_results] == [0, ErrorCode.INVALID_REQUEST]
    assert [binding_from_pb(b) for b in resp.filter_results[0].matching_acls] == [
        AclBinding(topic("t"), READ)]
    assert zk.exists("/kafka-acl/Topic/t") is None
    assert broker.authorizer.acls == {}


def test_operation_codes_are_kafkas():
    assert {op.name: code for op, code in OPERATION_CODES.items()} == {
        "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
        "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
        "IDEMPOTENT_WRITE": 12, "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}
