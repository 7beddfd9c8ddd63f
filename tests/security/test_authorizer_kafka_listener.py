"""The Kafka listener with an authorizer, in-process (a real ReplicaManager and log; the
connection's principal set as the listener sets it): Kafka's codes per API in Kafka's shapes,
nothing appended or read for a refused topic, all-topic Metadata lists only what may be
described."""

from __future__ import annotations

import pytest

from broker.kafka_listener import KafkaListener, current_kafka_client_host
from broker.servicer import leader_and_isr_request, update_metadata_request
from common.errors import ErrorCode
from common.kafka_protocol.api import APIS, ApiKey
from common.kafka_protocol.headers import RequestHeader, read_response_header, write_request_header
from common.kafka_protocol.primitives import ZERO_UUID, Reader, Writer
from common.observability import configure_event_log
from common.records import ProducerRecord, build_batch
from common.rpc import replog_pb2 as pb
from common.security.acl import (
    CLUSTER_RESOURCE,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    topic,
)
from common.security.authorizer import AclAuthorizer
from common.security.principal import KafkaPrincipal, current_kafka_principal
from tests.broker.inprocess import TP, Node, leader_and_isr


@pytest.fixture
async def listener(tmp_path):
    node = Node(1, tmp_path)
    await node.rm.leader_and_isr(leader_and_isr_request(
        leader_and_isr(node, 1, 1, [1], [1], [])))
    node.rm.update_metadata(update_metadata_request(pb.UpdateMetadataRequest(
        controller_id=0, controller_epoch=1, broker_epoch=node.rm.broker_epoch,
        live_brokers=[pb.BrokerEndpoint(broker_id=1, host="127.0.0.1", port=1)],
        partition_states=[pb.UpdateMetadataPartitionState(
            topic="t", partition=0, leader=1, leader_epoch=1, isr=[1], replicas=[1])])))
    authorizer = AclAuthorizer(zk=None)
    k = KafkaListener(node.rm, 1, "PLAINTEXT", "127.0.0.1", 0,
                      configure_event_log(str(tmp_path / "events.json"), "broker"),
                      authorizer=authorizer)
    current_kafka_principal.set(KafkaPrincipal("User", "alice"))
    current_kafka_client_host.set("10.0.0.7")
    yield k, node, authorizer
    await node.rm.fetcher_manager.shutdown()
    await node.rm.stop_background()
    node.lm.shutdown()


def allow(authorizer, resource, op, host="*"):
    authorizer.acls[resource] = authorizer.acls.get(resource, frozenset()) | {
        AccessControlEntry("User:alice", host, op, AclPermissionType.ALLOW)}


async def call(k: KafkaListener, api_key: int, body: dict) -> dict:
    version = APIS[api_key].served.hi
    w = Writer()
    write_request_header(w, RequestHeader(api_key, version, 1, "test"))
    answer = await k.handle(w.getvalue() + APIS[api_key].request.encode(body, version))
    r = Reader(answer)
    read_response_header(r, api_key, version)
    return APIS[api_key].response.decode(r, version).to_dict()


def produce_body() -> dict:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": "t", "partition_data": [
            {"index": 0, "records": build_batch([ProducerRecord(None, b"v")])}]}]}


def fetch_body() -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1}]}]}


async def test_produce_needs_write_and_appends_nothing_without_it(listener):
    k, node, authorizer = listener
    (t,) = (await call(k, ApiKey.PRODUCE, produce_body()))["responses"]
    assert t["partition_responses"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert node.rm.partitions[TP].log_end_offset == 0
    allow(authorizer, topic("t"), AclOperation.WRITE, host="10.0.0.8")  # another host
    (t,) = (await call(k, ApiKey.PRODUCE, produce_body()))["responses"]
    assert t["partition_responses"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    allow(authorizer, topic("t"), AclOperation.WRITE, host="10.0.0.7")  # the client's
    (t,) = (await call(k, ApiKey.PRODUCE, produce_body()))["responses"]
    assert t["partition_responses"][0]["error_code"] == ErrorCode.NONE
    assert node.rm.partitions[TP].log_end_offset == 1


async def test_fetch_needs_read(listener):
    k, _, authorizer = listener
    allow(authorizer, topic("t"), AclOperation.WRITE)
    await call(k, ApiKey.PRODUCE, produce_body())
    (p,) = (await call(k, ApiKey.FETCH, fetch_body()))["responses"][0]["partitions"]
    assert p["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED and not p["records"]
    allow(authorizer, topic("t"), AclOperation.READ)
    (p,) = (await call(k, ApiKey.FETCH, fetch_body()))["responses"][0]["partitions"]
    assert p["error_code"] == ErrorCode.NONE and p["records"]


async def test_metadata_list_offsets_and_epochs_need_describe(listener):
    k, _, authorizer = listener
    md = await call(k, ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})
    assert md["topics"] == []
    md = await call(k, ApiKey.METADATA, {"topics": [
        {"name": n, "topic_id": ZERO_UUID} for n in ("t", "missing")],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    assert [(t["name"], t["error_code"]) for t in md["topics"]] == [
        ("t", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("missing", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    lo = await call(k, ApiKey.LIST_OFFSETS, {"replica_id": -1, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    assert lo["topics"][0]["partitions"][0]["error_code"] == \
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    epochs = {"replica_id": -1, "topics": [{"topic": "t", "partitions": [
        {"partition": 0, "leader_epoch": 1, "current_leader_epoch": 1}]}]}
    assert (await call(k, ApiKey.OFFSET_FOR_LEADER_EPOCH, epochs))["topics"][0][
        "partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    allow(authorizer, CLUSTER_RESOURCE, AclOperation.CLUSTER_ACTION)  # covers every topic
    assert (await call(k, ApiKey.OFFSET_FOR_LEADER_EPOCH, epochs))["topics"][0][
        "partitions"][0]["error_code"] == ErrorCode.NONE
    allow(authorizer, topic("t"), AclOperation.READ)  # Read implies Describe
    md = await call(k, ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})
    assert [t["name"] for t in md["topics"]] == ["t"]
    lo = await call(k, ApiKey.LIST_OFFSETS, {"replica_id": -1, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    assert lo["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE


EVERY = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}


async def test_acl_apis_need_describe_or_alter_on_the_cluster(listener):
    k, _, authorizer = listener
    got = await call(k, 29, EVERY)  # DescribeAcls
    assert (got["error_code"], got["resources"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    creation = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
                "principal": "User:alice", "host": "*", "operation": 2, "permission_type": 3}
    got = await call(k, 30, {"creations": [creation]})  # CreateAcls
    assert [r["error_code"] for r in got["results"]] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    got = await call(k, 31, {"filters": [EVERY]})  # DeleteAcls
    assert [r["error_code"] for r in got["filter_results"]] == [
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    assert authorizer.acls == {}
    allow(authorizer, topic("t"), AclOperation.READ)
    allow(authorizer, CLUSTER_RESOURCE, AclOperation.ALTER)  # Alter implies Describe
    got = await call(k, 29, EVERY)
    assert got["error_code"] == 0
    assert sorted((r["resource_type"], r["resource_name"], len(r["acls"]))
                  for r in got["resources"]) == [(2, "t", 1), (4, "kafka-cluster", 1)]
    got = await call(k, 29, {**EVERY, "operation": 0})  # UNKNOWN is no filter
    assert got["error_code"] == ErrorCode.INVALID_REQUEST


async def test_acl_apis_without_an_authorizer_are_security_disabled(tmp_path):
    k = KafkaListener(None, 1, "PLAINTEXT", "127.0.0.1", 0,
                      configure_event_log(str(tmp_path / "events.json"), "broker"))
    assert (await call(k, 29, EVERY))["error_code"] == ErrorCode.SECURITY_DISABLED
    got = await call(k, 31, {"filters": [EVERY]})
    assert [r["error_code"] for r in got["filter_results"]] == [ErrorCode.SECURITY_DISABLED]


async def test_auto_creation_needs_create_on_the_cluster_or_the_topic(listener):
    """KafkaApis.handleTopicMetadataRequest: an unknown topic the requester may Describe is
    created only with Create on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED.
    (This listener forwards to no controller: an allowed creation stays unknown here.)"""
    k, _, authorizer = listener

    async def md(allow_creation: bool = True):
        got = await call(k, ApiKey.METADATA, {"topics": [{"name": "new", "topic_id": ZERO_UUID}],
                                              "allow_auto_topic_creation": allow_creation,
                                              "include_topic_authorized_operations": False})
        return [(t["name"], t["error_code"]) for t in got["topics"]]
    allow(authorizer, topic("new"), AclOperation.DESCRIBE)
    assert await md() == [("new", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    assert await md(allow_creation=False) == [("new", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    allow(authorizer, topic("new"), AclOperation.CREATE)
    assert await md() == [("new", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
