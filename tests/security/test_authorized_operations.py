"""KIP-430's authorized operations and KIP-516's Metadata by topic id, on the Kafka listener
in-process (a real ReplicaManager; the connection's principal set as the listener sets it).

- ``include_topic_authorized_operations`` (Metadata) and ``include_cluster_authorized_operations``
  (DescribeCluster, and Metadata v8-10) answer Kafka's bit fields: every supported operation
  without an authorizer (8 on a topic, 7 on the cluster, which librdkafka's admin expects), the
  principal's allowed set with one; INT32_MIN ("not provided") only when not asked.
- Metadata v10+ by id: a topic the principal may not Describe is named null with
  TOPIC_AUTHORIZATION_FAILED (its id does not disclose its name); an id no broker knows is
  UNKNOWN_TOPIC_ID."""

from __future__ import annotations

import uuid

import pytest

from broker.kafka_listener import KafkaListener, current_kafka_client_host
from broker.servicer import leader_and_isr_request, update_metadata_request
from common.errors import ErrorCode
from common.kafka_protocol.api import ApiKey
from common.kafka_protocol.api import ApiKey as AdminApiKey
from common.kafka_protocol.primitives import ZERO_UUID
from common.observability import configure_event_log
from common.rpc import replog_pb2 as pb
from common.security.acl import (
    CLUSTER_RESOURCE,
    OPERATION_CODES,
    AclOperation,
    topic,
)
from common.security.authorizer import AclAuthorizer
from common.security.principal import KafkaPrincipal, current_kafka_principal
from tests.broker.inprocess import Node, leader_and_isr
from tests.security.test_authorizer_kafka_listener import allow, call

INT32_MIN = -(2 ** 31)
TOPIC_ID = uuid.UUID("6f1c2e3a-0b6d-4a43-9a6e-2f3c4d5e6f70")
TOPIC_OPS = {"Read", "Write", "Create", "Describe", "Delete", "Alter", "DescribeConfigs",
             "AlterConfigs"}
CLUSTER_OPS = {"Create", "ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite",
               "Alter", "Describe"}


def ops(bits: int) -> set[str]:
    return {op.value for op, code in OPERATION_CODES.items() if bits & (1 << code)}


async def _listener(tmp_path, authorizer):
    node = Node(1, tmp_path)
    await node.rm.leader_and_isr(leader_and_isr_request(
        leader_and_isr(node, 1, 1, [1], [1], [])))
    node.rm.update_metadata(update_metadata_request(pb.UpdateMetadataRequest(
        controller_id=0, controller_epoch=1, broker_epoch=node.rm.broker_epoch,
        live_brokers=[pb.BrokerEndpoint(broker_id=1, host="127.0.0.1", port=1)],
        partition_states=[pb.UpdateMetadataPartitionState(
            topic="t", partition=0, leader=1, leader_epoch=1, isr=[1], replicas=[1])],
        topic_ids={"t": str(TOPIC_ID)})))
    k = KafkaListener(node.rm, 1, "PLAINTEXT", "127.0.0.1", 0,
                      configure_event_log(str(tmp_path / "events.json"), "broker"),
                      authorizer=authorizer)
    current_kafka_principal.set(KafkaPrincipal("User", "alice"))
    current_kafka_client_host.set("10.0.0.7")
    return k, node


@pytest.fixture
async def secured(tmp_path):
    authorizer = AclAuthorizer(zk=None)
    k, node = await _listener(tmp_path, authorizer)
    yield k, authorizer
    await node.rm.fetcher_manager.shutdown()
    await node.rm.stop_background()
    node.lm.shutdown()


@pytest.fixture
async def open_listener(tmp_path):
    k, node = await _listener(tmp_path, None)
    yield k
    await node.rm.fetcher_manager.shutdown()
    await node.rm.stop_background()
    node.lm.shutdown()


def metadata_by_name(include_ops: bool = True) -> dict:
    return {"topics": [{"name": "t", "topic_id": ZERO_UUID}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": include_ops}


def metadata_by_id(*ids: bytes) -> dict:
    return {"topics": [{"name": None, "topic_id": i} for i in ids],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


DESCRIBE_CLUSTER = {"include_cluster_authorized_operations": True, "endpoint_type": 1}


async def test_without_an_authorizer_every_supported_operation_is_listed(open_listener):
    k = open_listener
    [t] = (await call(k, ApiKey.METADATA, metadata_by_name()))["topics"]
    assert ops(t["topic_authorized_operations"]) == TOPIC_OPS and len(TOPIC_OPS) == 8
    got = await call(k, AdminApiKey.DESCRIBE_CLUSTER, DESCRIBE_CLUSTER)
    assert ops(got["cluster_authorized_operations"]) == CLUSTER_OPS and len(CLUSTER_OPS) == 7


async def test_not_asked_is_not_provided(open_listener):
    k = open_listener
    [t] = (await call(k, ApiKey.METADATA, metadata_by_name(include_ops=False)))["topics"]
    assert t["topic_authorized_operations"] == INT32_MIN
    got = await call(k, AdminApiKey.DESCRIBE_CLUSTER,
                     {**DESCRIBE_CLUSTER, "include_cluster_authorized_operations": False})
    assert got["cluster_authorized_operations"] == INT32_MIN


async def test_with_an_authorizer_the_principals_allowed_set(secured):
    k, authorizer = secured
    allow(authorizer, topic("t"), AclOperation.READ)  # Read implies Describe
    allow(authorizer, topic("t"), AclOperation.ALTER_CONFIGS)  # implies DescribeConfigs
    [t] = (await call(k, ApiKey.METADATA, metadata_by_name()))["topics"]
    assert ops(t["topic_authorized_operations"]) == {"Read", "Describe", "AlterConfigs",
                                                     "DescribeConfigs"}
    assert ops((await call(k, AdminApiKey.DESCRIBE_CLUSTER, DESCRIBE_CLUSTER))[
        "cluster_authorized_operations"]) == set()
    allow(authorizer, CLUSTER_RESOURCE, AclOperation.DESCRIBE)
    assert ops((await call(k, AdminApiKey.DESCRIBE_CLUSTER, DESCRIBE_CLUSTER))[
        "cluster_authorized_operations"]) == {"Describe"}


async def test_metadata_by_id_hides_the_name_of_a_topic_that_may_not_be_described(secured):
    k, authorizer = secured
    unknown = uuid.uuid4().bytes
    got = (await call(k, ApiKey.METADATA, metadata_by_id(TOPIC_ID.bytes, unknown)))["topics"]
    assert [(t["name"], t["topic_id"], t["error_code"]) for t in got] == [
        (None, TOPIC_ID.bytes, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID)]
    assert all(not t["partitions"] for t in got)
    allow(authorizer, topic("t"), AclOperation.DESCRIBE)
    got = (await call(k, ApiKey.METADATA, metadata_by_id(TOPIC_ID.bytes)))["topics"]
    assert [(t["name"], t["topic_id"], t["error_code"]) for t in got] == [
        ("t", TOPIC_ID.bytes, ErrorCode.NONE)]
    assert got[0]["partitions"]


async def test_metadata_by_an_unknown_id_is_unknown_topic_id_without_an_authorizer(
        open_listener):
    unknown = uuid.uuid4().bytes
    [t] = (await call(open_listener, ApiKey.METADATA, metadata_by_id(unknown)))["topics"]
    assert (t["name"], t["topic_id"], t["error_code"]) == (
        None, unknown, ErrorCode.UNKNOWN_TOPIC_ID)
