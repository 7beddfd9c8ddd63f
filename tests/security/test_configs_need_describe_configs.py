"""A topic's configs are DescribeConfigs' to give (issue 42 defect 5): the gRPC Metadata with
``include_topic_configs`` and the Kafka CreateTopics answer (KIP-525) list them only to a
principal holding DescribeConfigs on the topic. Describe alone gives the partitions; the
CreateTopics answer then carries TOPIC_AUTHORIZATION_FAILED on ``topic_config_error_code``
with no configs, as Kafka's KafkaApis.handleCreateTopicsRequest answers."""

from __future__ import annotations

from broker import kafka_admin
from common.errors import ErrorCode
from common.kafka_protocol.api import APIS
from common.kafka_protocol.api import ApiKey as AdminApiKey
from common.kafka_protocol.primitives import Reader
from common.rpc import replog_pb2 as pb
from common.security.acl import AclOperation, topic
from tests.security.test_authorizer_broker_servicer import ALICE, broker  # noqa: F401
from tests.security.test_authorizer_broker_servicer import allow as allow_grpc
from tests.security.test_authorizer_kafka_listener import allow, listener  # noqa: F401


async def test_grpc_metadata_gives_topic_configs_only_with_describe_configs(broker):  # noqa: F811
    await broker.stub.UpdateMetadata(pb.UpdateMetadataRequest(  # as the controller
        controller_id=0, controller_epoch=1, broker_epoch=broker.rm.broker_epoch,
        live_brokers=[pb.BrokerEndpoint(broker_id=1, host="127.0.0.1", port=1)],
        partition_states=[pb.UpdateMetadataPartitionState(
            topic="t", partition=0, leader=1, leader_epoch=1, isr=[1], replicas=[1, 2])]))
    broker.rm.topic_configs["t"] = {"retention.ms": "1000"}
    allow_grpc(broker.authorizer, topic("t"), AclOperation.DESCRIBE)
    req = pb.MetadataRequest(topics=["t"], include_topic_configs=True)
    [t] = (await broker.stub.Metadata(req, metadata=ALICE)).topics
    assert t.error_code == ErrorCode.NONE and t.partitions  # Describe: the partitions
    assert dict(t.configs) == {}
    allow_grpc(broker.authorizer, topic("t"), AclOperation.DESCRIBE_CONFIGS)
    [t] = (await broker.stub.Metadata(req, metadata=ALICE)).topics
    assert dict(t.configs) == {"retention.ms": "1000"}


def _create_request() -> dict:
    return {"topics": [{"name": "new", "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout_ms": 5000, "validate_only": False}


async def _create(k) -> dict:
    apis = kafka_admin._AdminApis(k)

    async def forward(rpc, request, timeout_ms):  # the controller creates it
        assert rpc == "CreateTopics"
        return pb.CreateTopicsResponse(topics=[pb.CreatableTopicResult(
            name="new", topic_id="6f1c2e3a-0b6d-4a43-9a6e-2f3c4d5e6f70", num_partitions=1,
            replication_factor=1, configs={"retention.ms": "1000"})])
    apis._forward = forward
    body = await apis.create_topics(_create_request(), 7)
    # what the wire carries, at the highest served version
    [t] = APIS[AdminApiKey.CREATE_TOPICS].response.decode(
        Reader(APIS[AdminApiKey.CREATE_TOPICS].response.encode(body, 7)), 7).to_dict()["topics"]
    return t


async def test_create_topics_answers_configs_only_with_describe_configs(listener):  # noqa: F811
    k, _, authorizer = listener
    allow(authorizer, topic("new"), AclOperation.CREATE)
    t = await _create(k)
    assert t["error_code"] == ErrorCode.NONE  # created all the same
    assert t["topic_config_error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert t["configs"] == [] and (t["num_partitions"], t["replication_factor"]) == (-1, -1)
    allow(authorizer, topic("new"), AclOperation.DESCRIBE_CONFIGS)
    t = await _create(k)
    assert t["topic_config_error_code"] == ErrorCode.NONE
    assert {c["name"]: c["value"] for c in t["configs"]}["retention.ms"] == "1000"
    assert (t["num_partitions"], t["replication_factor"]) == (1, 1)

