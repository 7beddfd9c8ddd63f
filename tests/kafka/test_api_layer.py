"""Each client-facing operation is reachable from both front-ends and lands in the same
broker/apis/ function (issue 41 item 2).

One in-process broker: a real ReplicaManager and log, a real ConfigManager on a real
ZooKeeper, the gRPC BrokerServicer on a real gRPC server and the Kafka listener on a real TCP
socket. Each operation is sent once as a gRPC call and once as a Kafka-protocol request; the
broker/apis function is wrapped (the real one still runs) and must have been called by each,
and the two answers must agree on what they say (error codes, offsets, entries)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from broker.apis import acls, admin, configs, fetch, log_dirs, metadata, offsets, produce
from broker.config_manager import ConfigManager
from broker.kafka_listener import KafkaListener
from broker.servicer import BrokerServicer, leader_and_isr_request, update_metadata_request
from common.config import build_config
from common.errors import ErrorCode
from common.grpc_options import SERVER_OPTIONS
from common.kafka_protocol.api import APIS, ApiKey
from common.kafka_protocol.headers import RequestHeader, read_response_header, write_request_header
from common.kafka_protocol.primitives import ZERO_UUID, Reader, Writer
from common.names import TopicPartition
from common.observability import configure_event_log
from common.records import ProducerRecord, build_batch
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.rpc_status import error_code_of
from common.zk_async import AsyncZk
from tests.broker.inprocess import Node, leader_and_isr

BATCH = build_batch([ProducerRecord(b"k", b"v")])
BROKER = pb.BROKER


@dataclass
class Broker:
    node: Node
    stub: replog_pb2_grpc.BrokerStub
    kafka_port: int


@pytest.fixture
async def broker(tmp_path, zk_hosts):
    node = Node(1, tmp_path)
    await node.rm.leader_and_isr(leader_and_isr_request(leader_and_isr(node, 1, 1, [1], [1], [])))
    zk = AsyncZk(zk_hosts)
    await zk.start()
    events = configure_event_log(str(tmp_path / "cfg.json"), "broker", broker=1)
    cm = ConfigManager(zk, 1, build_config([("broker.id", "1", "t")]), node.rm, events)
    await cm.start()
    server = grpc.aio.server(options=SERVER_OPTIONS)
    replog_pb2_grpc.add_BrokerServicer_to_server(BrokerServicer(node.rm, 1, configs=cm), server)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    kafka = KafkaListener(node.rm, 1, "PLAINTEXT", "127.0.0.1", 0, events, configs=cm)
    kafka_port = await kafka.start()
    node.rm.update_metadata(update_metadata_request(pb.UpdateMetadataRequest(
        controller_id=0, controller_epoch=1, broker_epoch=node.rm.broker_epoch,
        live_brokers=[pb.BrokerEndpoint(broker_id=1, host="127.0.0.1", port=grpc_port)],
        partition_states=[pb.UpdateMetadataPartitionState(
            topic="t", partition=0, leader=1, leader_epoch=1, isr=[1], replicas=[1])])))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}")
    yield Broker(node, replog_pb2_grpc.BrokerStub(channel), kafka_port)
    await channel.close()
    await kafka.stop()
    await server.stop(0)
    await zk.stop()
    await node.rm.fetcher_manager.shutdown()
    await node.rm.stop_background()
    node.lm.shutdown()


async def kafka_call(port: int, api_key: int, body: dict) -> dict:
    """One Kafka-protocol request over a TCP connection to the listener, at the highest
    version served."""
    version = APIS[api_key].served.hi
    w = Writer()
    write_request_header(w, RequestHeader(api_key, version, 7, "api-layer-test"))
    frame = w.getvalue() + APIS[api_key].request.encode(body, version)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(len(frame).to_bytes(4, "big") + frame)
        await writer.drain()
        size = int.from_bytes(await reader.readexactly(4), "big")
        r = Reader(await reader.readexactly(size))
    finally:
        writer.close()
    read_response_header(r, api_key, version)
    return APIS[api_key].response.decode(r, version).to_dict()


async def grpc_code(call) -> int:
    """A gRPC call refused whole: the Kafka code its status carries."""
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await call
    return error_code_of(e.value)


def _tp(topic="t"):
    return [pb.TopicPartitions(topic=topic, partitions=[0])]


ACL_FILTER = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
              "principal_filter": None, "host_filter": None, "operation": 1,
              "permission_type": 1}
ACL_FILTER_PB = pb.AclBindingFilter(resource_type=1, pattern_type=1, operation=1,
                                    permission_type=1)
ACL_CREATION = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
                "principal": "User:alice", "host": "*", "operation": 2, "permission_type": 3}


@dataclass
class Op:
    """One operation: the broker/apis function, its gRPC call and its Kafka request, each
    answer reduced to what both must say."""

    module: Any
    function: str
    grpc: Any  # async (Broker) -> comparable
    kafka: Any  # async (Broker) -> comparable


async def _metadata_grpc(b):
    r = await b.stub.Metadata(pb.MetadataRequest(topics=["t", "missing"]))
    return [(t.topic, t.error_code, [(p.partition, p.leader_id) for p in t.partitions])
            for t in r.topics], [x.broker_id for x in r.brokers]


async def _metadata_kafka(b):
    r = await kafka_call(b.kafka_port, ApiKey.METADATA, {
        "topics": [{"name": n, "topic_id": ZERO_UUID} for n in ("t", "missing")],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    return [(t["name"], t["error_code"], [(p["partition_index"], p["leader_id"])
                                          for p in t["partitions"]]) for t in r["topics"]], \
        [x["node_id"] for x in r["brokers"]]


async def _produce_grpc(b):
    r = await b.stub.Produce(pb.ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
        pb.ProduceTopicData(topic="t", partition_data=[
            pb.ProducePartitionData(partition=0, records=BATCH)])]))
    return [(t.topic, p.error_code) for t in r.responses for p in t.partition_responses]


async def _produce_kafka(b):
    r = await kafka_call(b.kafka_port, ApiKey.PRODUCE, {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": BATCH}]}]})
    return [(t["name"], p["error_code"]) for t in r["responses"]
            for p in t["partition_responses"]]


async def _fetch_grpc(b):
    r = await b.stub.Fetch(pb.FetchRequest(max_wait_ms=0, max_bytes=1 << 20, topics=[
        pb.FetchTopic(topic="t", partitions=[pb.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]))
    return [(t.topic, p.error_code, p.high_watermark, bool(p.records))
            for t in r.responses for p in t.partitions]


async def _fetch_kafka(b):
    r = await kafka_call(b.kafka_port, ApiKey.FETCH, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
             "current_leader_epoch": -1}]}]})
    return [(t["topic"], p["error_code"], p["high_watermark"], bool(p["records"]))
            for t in r["responses"] for p in t["partitions"]]


async def _list_offsets_grpc(b):
    r = await b.stub.ListOffsets(pb.ListOffsetsRequest(topics=[pb.ListOffsetsTopic(
        topic="t", partitions=[pb.ListOffsetsPartition(partition=0, timestamp=-1)])]))
    return [(p.error_code, p.offset, p.leader_epoch) for t in r.topics for p in t.partitions]


async def _list_offsets_kafka(b):
    r = await kafka_call(b.kafka_port, ApiKey.LIST_OFFSETS, {"replica_id": -1, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return [(p["error_code"], p["offset"], p["leader_epoch"])
            for t in r["topics"] for p in t["partitions"]]


async def _epoch_grpc(b):
    r = await b.stub.OffsetForLeaderEpoch(pb.OffsetForLeaderEpochRequest(topics=[
        pb.OffsetForLeaderTopic(topic="t", partitions=[
            pb.OffsetForLeaderPartition(partition=0, leader_epoch=1)])]))
    return [(p.error_code, p.leader_epoch, p.end_offset) for t in r.topics
            for p in t.partitions]


async def _epoch_kafka(b):
    r = await kafka_call(b.kafka_port, ApiKey.OFFSET_FOR_LEADER_EPOCH, {
        "replica_id": -1, "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "leader_epoch": 1, "current_leader_epoch": -1}]}]})
    return [(p["error_code"], p["leader_epoch"], p["end_offset"]) for t in r["topics"]
            for p in t["partitions"]]


KEYS: list[str] = []  # every key


async def _describe_configs_grpc(b):
    r = await b.stub.DescribeConfigs(pb.DescribeConfigsRequest(resources=[
        pb.DescribeConfigsResource(resource_type=BROKER, resource_name="1",
                                   configuration_keys=KEYS)]))
    assert len(r.results[0].configs) > 10  # the broker's configs, all of them
    return [(x.error_code, sorted((c.name, c.value if c.HasField("value") else None,
                                    c.config_source) for c in x.configs)) for x in r.results]


async def _describe_configs_kafka(b):
    r = await kafka_call(b.kafka_port, ApiKey.DESCRIBE_CONFIGS, {
        "resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": KEYS}],
        "include_synonyms": False, "include_documentation": False})
    return [(x["error_code"], sorted((c["name"], c["value"], c["config_source"])
                                     for c in x["configs"])) for x in r["results"]]


async def _alter_configs_grpc(b):
    r = await b.stub.IncrementalAlterConfigs(pb.IncrementalAlterConfigsRequest(
        validate_only=True, resources=[pb.AlterConfigsResource(
            resource_type=BROKER, resource_name="1", configs=[
                pb.AlterableConfig(name="log.retention.ms", config_operation=pb.SET,
                                   value="1000"),
                pb.AlterableConfig(name="no.such.config", config_operation=pb.SET,
                                   value="1")])]))
    return [x.error_code for x in r.responses]


async def _alter_configs_kafka(b):
    r = await kafka_call(b.kafka_port, ApiKey.INCREMENTAL_ALTER_CONFIGS, {
        "validate_only": True, "resources": [{"resource_type": 4, "resource_name": "1",
                                              "configs": [
            {"name": "log.retention.ms", "config_operation": 0, "value": "1000"},
            {"name": "no.such.config", "config_operation": 0, "value": "1"}]}]})
    return [x["error_code"] for x in r["responses"]]


async def _describe_acls_grpc(b):
    return await grpc_code(b.stub.DescribeAcls(pb.DescribeAclsRequest(filter=ACL_FILTER_PB)))


async def _describe_acls_kafka(b):
    return (await kafka_call(b.kafka_port, ApiKey.DESCRIBE_ACLS, ACL_FILTER))["error_code"]


async def _create_acls_grpc(b):
    return await grpc_code(b.stub.CreateAcls(pb.CreateAclsRequest(creations=[pb.AclBinding(
        resource_type=2, resource_name="t", pattern_type=3, principal="User:alice", host="*",
        operation=2, permission_type=3)])))


async def _create_acls_kafka(b):
    r = await kafka_call(b.kafka_port, ApiKey.CREATE_ACLS, {"creations": [ACL_CREATION]})
    return r["results"][0]["error_code"]


async def _delete_acls_grpc(b):
    return await grpc_code(b.stub.DeleteAcls(pb.DeleteAclsRequest(filters=[ACL_FILTER_PB])))


async def _delete_acls_kafka(b):
    r = await kafka_call(b.kafka_port, ApiKey.DELETE_ACLS, {"filters": [ACL_FILTER]})
    return r["filter_results"][0]["error_code"]


async def _describe_log_dirs_grpc(b):
    r = await b.stub.DescribeLogDirs(pb.DescribeLogDirsRequest(topics=_tp()))
    return [(d.error_code, d.log_dir, [(t.topic, [p.partition for p in t.partitions])
                                       for t in d.topics]) for d in r.results]


async def _describe_log_dirs_kafka(b):
    r = await kafka_call(b.kafka_port, ApiKey.DESCRIBE_LOG_DIRS, {
        "topics": [{"topic": "t", "partitions": [0]}]})
    return [(d["error_code"], d["log_dir"], [(t["name"], [p["partition_index"]
                                                          for p in t["partitions"]])
                                             for t in d["topics"]]) for d in r["results"]]


async def _alter_log_dirs_grpc(b):
    r = await b.stub.AlterReplicaLogDirs(pb.AlterReplicaLogDirsRequest(dirs=[
        pb.AlterReplicaLogDir(path="/no/such/dir", topics=_tp())]))
    return [(p.topic, p.partition, p.error_code) for p in r.results]


async def _alter_log_dirs_kafka(b):
    r = await kafka_call(b.kafka_port, ApiKey.ALTER_REPLICA_LOG_DIRS, {"dirs": [
        {"path": "/no/such/dir", "topics": [{"name": "t", "partitions": [0]}]}]})
    return [(t["topic_name"], p["partition_index"], p["error_code"]) for t in r["results"]
            for p in t["partitions"]]


async def _delete_records_grpc(b):
    r = await b.stub.DeleteRecords(pb.DeleteRecordsRequest(timeout_ms=5000, topics=[
        pb.DeleteRecordsTopic(topic="t", partitions=[
            pb.DeleteRecordsPartition(partition=0, offset=0)])]))
    return [(x.topic, x.partition, x.error_code, x.low_watermark) for x in r.results]


async def _delete_records_kafka(b):
    r = await kafka_call(b.kafka_port, ApiKey.DELETE_RECORDS, {"timeout_ms": 5000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "offset": 0}]}]})
    return [(t["name"], p["partition_index"], p["error_code"], p["low_watermark"])
            for t in r["topics"] for p in t["partitions"]]


OPS = {
    "Metadata": Op(metadata, "metadata", _metadata_grpc, _metadata_kafka),
    "Produce": Op(produce, "produce", _produce_grpc, _produce_kafka),
    "Fetch": Op(fetch, "fetch", _fetch_grpc, _fetch_kafka),
    "ListOffsets": Op(offsets, "list_offsets", _list_offsets_grpc, _list_offsets_kafka),
    "OffsetForLeaderEpoch": Op(offsets, "offset_for_leader_epoch", _epoch_grpc, _epoch_kafka),
    "DescribeConfigs": Op(configs, "describe_configs", _describe_configs_grpc,
                          _describe_configs_kafka),
    "IncrementalAlterConfigs": Op(configs, "alter_configs", _alter_configs_grpc,
                                  _alter_configs_kafka),
    "DescribeAcls": Op(acls, "describe_acls", _describe_acls_grpc, _describe_acls_kafka),
    "CreateAcls": Op(acls, "create_acls", _create_acls_grpc, _create_acls_kafka),
    "DeleteAcls": Op(acls, "delete_acls", _delete_acls_grpc, _delete_acls_kafka),
    "DescribeLogDirs": Op(log_dirs, "describe_log_dirs", _describe_log_dirs_grpc,
                          _describe_log_dirs_kafka),
    "AlterReplicaLogDirs": Op(log_dirs, "alter_replica_log_dirs", _alter_log_dirs_grpc,
                              _alter_log_dirs_kafka),
    "DeleteRecords": Op(log_dirs, "delete_records", _delete_records_grpc,
                        _delete_records_kafka),
}


def _spy(monkeypatch, module, function) -> list:
    """Wrap ``module.function`` (the real one still runs); the contexts it was called with."""
    real = getattr(module, function)
    calls: list[Any] = []

    if asyncio.iscoroutinefunction(real):
        async def spy(ctx, *args, **kwargs):
            calls.append(ctx)
            return await real(ctx, *args, **kwargs)
    else:
        def spy(ctx, *args, **kwargs):
            calls.append(ctx)
            return real(ctx, *args, **kwargs)
    monkeypatch.setattr(module, function, spy)
    return calls


@pytest.mark.parametrize("name", list(OPS))
async def test_each_operation_lands_in_one_api_function_from_both_front_ends(
        broker, monkeypatch, name):
    op = OPS[name]
    calls = _spy(monkeypatch, op.module, op.function)
    if name == "Fetch":  # something to read, appended through neither front-end
        await broker.node.rm.produce(1, 5000, [(TopicPartition("t", 0), BATCH)])
    via_grpc = await op.grpc(broker)
    assert len(calls) == 1, f"{name} over gRPC did not reach broker.apis.{op.function}"
    via_kafka = await op.kafka(broker)
    assert len(calls) == 2, f"{name} over Kafka did not reach broker.apis.{op.function}"
    assert via_grpc == via_kafka
    assert via_grpc, f"{name} answered nothing to compare"
    assert calls[0].rm is calls[1].rm is broker.node.rm


# The admin APIs a broker forwards: on gRPC they are the controller's RPCs, not the broker's,
# so the Kafka listener is their one broker front-end; their checks are broker/apis/admin.py's.
# This listener has no controller: each is refused (NOT_CONTROLLER) after its check.
ADMIN = {
    "CreateTopics": ("create_topics_denied", ApiKey.CREATE_TOPICS, {
        "topics": [{"name": "new", "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}], "timeout_ms": 1000,
        "validate_only": False}, lambda r: [t["error_code"] for t in r["topics"]]),
    "DeleteTopics": ("delete_topics_denied", ApiKey.DELETE_TOPICS, {
        "topics": [{"name": "t", "topic_id": ZERO_UUID}], "timeout_ms": 1000},
        lambda r: [t["error_code"] for t in r["responses"]]),
    "CreatePartitions": ("create_partitions_denied", ApiKey.CREATE_PARTITIONS, {
        "topics": [{"name": "t", "count": 2, "assignments": None}], "timeout_ms": 1000,
        "validate_only": False}, lambda r: [t["error_code"] for t in r["results"]]),
    "ElectLeaders": ("cluster_refusal", ApiKey.ELECT_LEADERS, {
        "election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0]}],
        "timeout_ms": 1000}, lambda r: [r["error_code"]]),
    "AlterPartitionReassignments": ("cluster_refusal", ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
        "timeout_ms": 1000, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "replicas": [1]}]}]}, lambda r: [r["error_code"]]),
    "ListPartitionReassignments": ("cluster_refusal", ApiKey.LIST_PARTITION_REASSIGNMENTS, {
        "timeout_ms": 1000, "topics": None}, lambda r: [r["error_code"]]),
    "DescribeCluster": ("describe_cluster", ApiKey.DESCRIBE_CLUSTER, {
        "include_cluster_authorized_operations": True, "endpoint_type": 1},
        lambda r: [r["error_code"], [b["broker_id"] for b in r["brokers"]]]),
}


@pytest.mark.parametrize("name", list(ADMIN))
async def test_each_admin_operation_is_checked_in_broker_apis(broker, monkeypatch, name):
    function, api_key, body, said = ADMIN[name]
    calls = _spy(monkeypatch, admin, function)
    answer = said(await kafka_call(broker.kafka_port, api_key, body))
    assert calls, f"{name} over Kafka did not reach broker.apis.admin.{function}"
    expected = [ErrorCode.NONE, [1]] if name == "DescribeCluster" else \
        [ErrorCode.NOT_CONTROLLER]
    assert answer == expected


def test_every_broker_apis_function_is_covered():
    """A new operation in broker/apis/ gets a row in OPS."""
    modules = (metadata, produce, fetch, offsets, configs, acls, log_dirs, admin)
    public = {(m.__name__, n) for m in modules for n, f in vars(m).items()
              if callable(f) and not n.startswith("_") and not isinstance(f, type)
              and getattr(f, "__module__", None) == m.__name__
              and f.__code__.co_varnames[:1] == ("ctx",)}
    assert public == {(o.module.__name__, o.function) for o in OPS.values()} | {
        (admin.__name__, f) for f, *_ in ADMIN.values()} | {
        (admin.__name__, "created_configs_hidden")}  # CreateTopics' answer, with a controller
