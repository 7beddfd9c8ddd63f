"""The group coordinator over a real ReplicaManager and log, in-process: LeaderAndIsr for a
__consumer_offsets partition makes this broker its coordinator (onLeadershipChange), a commit
is appended to that log with acks=all and read back by a reload after a StopReplica and a new
LeaderAndIsr, and the Kafka listener's group APIs check the group and topic ACLs
(GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED) before anything reaches the core."""
from __future__ import annotations

import asyncio

import pytest
from prometheus_client import generate_latest

from broker.group.config import GroupConfig
from broker.group.coordinator import OFFSETS_TOPIC, GroupCoordinator, ReplicaManagerLog
from broker.group_gauges import register_group_gauges
from broker.kafka_listener import KafkaListener, current_kafka_client_host
from broker.servicer import leader_and_isr_request, stop_replica_request, update_metadata_request
from common.errors import ErrorCode
from common.kafka_protocol.api import APIS, ApiKey
from common.kafka_protocol.headers import RequestHeader, read_response_header, write_request_header
from common.kafka_protocol.primitives import Reader, Writer
from common.names import TopicPartition
from common.observability import configure_event_log
from common.records import ProducerRecord, build_batch, decode_all
from common.rpc import replog_pb2 as pb
from common.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
    topic,
)
from common.security.authorizer import AclAuthorizer
from common.security.principal import KafkaPrincipal, current_kafka_principal
from tests.broker.inprocess import Node, leader_and_isr

OFFSETS = TopicPartition(OFFSETS_TOPIC, 0)
DATA = TopicPartition("t", 0)


@pytest.fixture
async def broker(tmp_path):
    node = Node(1, tmp_path)
    groups = GroupCoordinator(ReplicaManagerLog(node.rm), GroupConfig(num_partitions=1))
    groups.start()
    for tp in (DATA, OFFSETS):
        await node.rm.leader_and_isr(leader_and_isr_request(
            leader_and_isr(node, 1, 1, [1], [1], [], tp=tp)))
    node.rm.update_metadata(update_metadata_request(pb.UpdateMetadataRequest(
        controller_id=0, controller_epoch=1, broker_epoch=node.rm.broker_epoch,
        live_brokers=[pb.BrokerEndpoint(broker_id=1, host="127.0.0.1", port=1)],
        partition_states=[pb.UpdateMetadataPartitionState(
            topic=tp.topic, partition=0, leader=1, leader_epoch=1, isr=[1], replicas=[1])
            for tp in (DATA, OFFSETS)])))
    authorizer = AclAuthorizer(zk=None)
    k = KafkaListener(node.rm, 1, "PLAINTEXT", "127.0.0.1", 0,
                      configure_event_log(str(tmp_path / "events.json"), "broker"),
                      authorizer=authorizer, groups=groups)
    current_kafka_principal.set(KafkaPrincipal("User", "alice"))
    current_kafka_client_host.set("10.0.0.7")
    yield k, node, groups, authorizer
    await groups.stop()
    await node.rm.fetcher_manager.shutdown()
    await node.rm.stop_background()
    node.lm.shutdown()


def allow(authorizer, resource, op):
    authorizer.acls[resource] = authorizer.acls.get(resource, frozenset()) | {
        AccessControlEntry("User:alice", "*", op, AclPermissionType.ALLOW)}


def group(name: str) -> ResourcePattern:
    return ResourcePattern(ResourceType.GROUP, name)


async def call(k: KafkaListener, api_key: int, body: dict, version: int | None = None) -> dict:
    version = APIS[api_key].served.hi if version is None else version
    w = Writer()
    write_request_header(w, RequestHeader(api_key, version, 1, "client-1"))
    answer = await k.handle(w.getvalue() + APIS[api_key].request.encode(body, version))
    r = Reader(answer)
    read_response_header(r, api_key, version)
    return APIS[api_key].response.decode(r, version).to_dict()


def commit_body(g: str, offset: int) -> dict:
    return {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "",
            "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": offset}]}]}


def fetch_body(g: str) -> dict:
    return {"groups": [{"group_id": g, "topics": [{"name": "t", "partition_indexes": [0]}]}]}


async def served(k, g: str) -> dict:
    for _ in range(500):
        r = await call(k, ApiKey.OFFSET_FETCH, fetch_body(g))
        if r["groups"][0]["error_code"] == 0:
            return r
        await asyncio.sleep(0.01)
    raise AssertionError(r)


def commit_errors(r: dict) -> list[int]:
    return [p["error_code"] for t in r["topics"] for p in t["partitions"]]


async def test_a_commit_lands_in_the_log_and_a_new_leadership_reloads_it(broker):
    k, node, groups, authorizer = broker
    allow(authorizer, group("g"), AclOperation.READ)
    allow(authorizer, group("g"), AclOperation.DESCRIBE)
    allow(authorizer, topic("t"), AclOperation.READ)
    allow(authorizer, topic("t"), AclOperation.DESCRIBE)
    await served(k, "g")
    assert commit_errors(await call(k, ApiKey.OFFSET_COMMIT, commit_body("g", 42))) == [0]
    # the gauges: Kafka's GroupMetadataManager ones and kafka_exporter's, at scrape time
    node.rm.partitions[DATA].log.append_as_leader(build_batch(
        [ProducerRecord(None, b"x")] * 50), 1)
    node.rm.partitions[DATA].maybe_advance_hw()
    register_group_gauges(node.rm.metrics, groups, node.rm)
    text = generate_latest(node.rm.metrics.registry).decode()
    for line in ('kafka_coordinator_group_groupmetadatamanager_numgroups 1.0',
                 'kafka_coordinator_group_groupmetadatamanager_numoffsets 1.0',
                 'kafka_coordinator_group_groupmetadatamanager_numgroupsempty 1.0',
                 'kafka_consumergroup_members{consumergroup="g"} 0.0',
                 'kafka_consumergroup_current_offset{consumergroup="g",partition="0",topic="t"}'
                 ' 42.0',
                 'kafka_consumergroup_lag{consumergroup="g",partition="0",topic="t"} 8.0'):
        assert line in text, (line, [t for t in text.splitlines() if "group" in t])
    # acks=all with an ISR of one: the record is in the log, below the HW, when answered
    p = node.rm.partitions[OFFSETS]
    assert p.high_watermark == p.log_end_offset == 1
    [rec] = decode_all(p.log.read(0, 1 << 20))
    assert rec.key is not None and rec.value is not None
    # StopReplica: no longer the coordinator
    await node.rm.stop_replica(stop_replica_request(pb.StopReplicaRequest(
        controller_id=0, controller_epoch=1, broker_epoch=node.rm.broker_epoch,
        partition_states=[pb.StopReplicaPartitionState(topic=OFFSETS_TOPIC, partition=0,
                                                       leader_epoch=2)])))
    for _ in range(100):
        r = await call(k, ApiKey.OFFSET_FETCH, fetch_body("g"))
        if r["groups"][0]["error_code"] == ErrorCode.NOT_COORDINATOR:
            break
        await asyncio.sleep(0.01)
    assert r["groups"][0]["error_code"] == ErrorCode.NOT_COORDINATOR
    # leader again at a newer epoch: the offset is loaded from the log
    await node.rm.leader_and_isr(leader_and_isr_request(
        leader_and_isr(node, 1, 3, [1], [1], [], tp=OFFSETS)))
    r = await served(k, "g")
    assert r["groups"][0]["topics"][0]["partitions"][0]["committed_offset"] == 42


async def test_the_group_apis_check_group_and_topic_acls(broker):
    k, node, groups, authorizer = broker
    # no ACL at all: every group API is refused on the group, before the core
    r = await call(k, ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": ["g"]})
    assert r["coordinators"][0]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    r = await call(k, ApiKey.JOIN_GROUP, {"group_id": "g", "session_timeout_ms": 10000,
                                          "rebalance_timeout_ms": 10000, "member_id": "",
                                          "protocol_type": "consumer", "protocols": []})
    assert r["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    r = await call(k, ApiKey.HEARTBEAT, {"group_id": "g", "generation_id": 1, "member_id": "m"})
    assert r["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    r = await call(k, ApiKey.OFFSET_COMMIT, commit_body("g", 1))
    assert commit_errors(r) == [ErrorCode.GROUP_AUTHORIZATION_FAILED]
    r = await call(k, ApiKey.OFFSET_FETCH, fetch_body("g"))
    assert r["groups"][0]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    r = await call(k, ApiKey.DESCRIBE_GROUPS, {"groups": ["g"]})
    assert r["groups"][0]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    r = await call(k, ApiKey.DELETE_GROUPS, {"groups_names": ["g"]})
    assert r["results"][0]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    # Read on the group but not on the topic: the commit is refused per topic, nothing stored
    allow(authorizer, group("g"), AclOperation.READ)
    allow(authorizer, group("g"), AclOperation.DESCRIBE)
    await served(k, "g")
    r = await call(k, ApiKey.OFFSET_COMMIT, commit_body("g", 7))
    assert commit_errors(r) == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    assert node.rm.partitions[OFFSETS].log_end_offset == 0
    # an unknown topic is UNKNOWN_TOPIC_OR_PARTITION
    body = commit_body("g", 7)
    body["topics"][0]["name"] = "nope"
    allow(authorizer, topic("nope"), AclOperation.READ)
    assert commit_errors(await call(k, ApiKey.OFFSET_COMMIT, body)) == \
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    allow(authorizer, topic("t"), AclOperation.READ)
    assert commit_errors(await call(k, ApiKey.OFFSET_COMMIT, commit_body("g", 7))) == [0]
    # a fetch of every offset (Read implies Describe, as in Kafka's AclAuthorizer)
    every = {"groups": [{"group_id": "g", "topics": None}]}
    r = await call(k, ApiKey.OFFSET_FETCH, every)
    assert [(t["name"], t["partitions"][0]["committed_offset"])
            for t in r["groups"][0]["topics"]] == [("t", 7)]
    # ListGroups without Describe on the cluster: only the groups it may Describe
    r = await call(k, ApiKey.LIST_GROUPS, {})
    assert [g["group_id"] for g in r["groups"]] == ["g"]
    # FindCoordinator names this broker now
    r = await call(k, ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": ["g"]})
    assert (r["coordinators"][0]["error_code"], r["coordinators"][0]["node_id"]) == (0, 1)


async def test_a_lost_offsets_replica_gives_the_partition_up(broker):
    """A log failure takes __consumer_offsets-0 offline (design.md#jbod-step-3): the
    coordinator resigns it at once (onLeadershipChange), not at the next LeaderAndIsr."""
    k, node, groups, authorizer = broker
    allow(authorizer, group("g"), AclOperation.DESCRIBE)
    allow(authorizer, topic("t"), AclOperation.DESCRIBE)
    await served(k, "g")
    node.rm.handle_log_failure(OFFSETS, "injected")
    for _ in range(100):
        r = await call(k, ApiKey.OFFSET_FETCH, fetch_body("g"))
        if r["groups"][0]["error_code"] == ErrorCode.NOT_COORDINATOR:
            break
        await asyncio.sleep(0.01)
    assert r["groups"][0]["error_code"] == ErrorCode.NOT_COORDINATOR
