"""Dynamic configs against a real ZooKeeper and real gRPC: IncrementalAlterConfigs writes the
config znode and a /config/changes notification together (or nothing), DescribeConfigs reads
them back with Kafka's sources, other brokers reload the entity named by each notification,
old notifications are pruned, and a topic config that cannot be read does not weaken min ISR."""

from __future__ import annotations

import asyncio
import json
import time

import grpc
import pytest

from broker.config_manager import ConfigManager
from broker.servicer import BrokerServicer
from common import zk_layout as zl
from common.config import build_config
from common.errors import ErrorCode
from common.observability import configure_event_log
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.zk_async import AsyncZk
from tests.broker.inprocess import Node, leader_and_isr, produce_req, wait_until

TOPIC = "orders"


class RecordingReplicaManager:
    """What the config manager hands changes to, recorded (the replica manager's side is
    tested with a real one below)."""

    def __init__(self):
        self.reloaded: list[str] = []
        self.broker_configs: list[dict | None] = []
        self.defaults: list[dict | None] = []

    async def reload_topic_config(self, topic):
        self.reloaded.append(topic)

    def apply_broker_config(self, dynamic, default=None):
        self.broker_configs.append(dynamic)
        self.defaults.append(default)


@pytest.fixture
async def brokers(zk_hosts, zk, tmp_path):
    """Two brokers' config managers (1 serving gRPC), and a topic ``orders``."""
    zk.ensure_path(zl.TOPICS)
    zk.create(zl.topic_path(TOPIC), zl.encode_topic(zl.TopicAssignment(TOPIC, "id", {0: [1]})))
    zk.ensure_path(zl.CONFIG_TOPICS)
    zk.create(zl.topic_config_path(TOPIC), zl.encode_topic_config({"retention.ms": "1000"}))
    made = []
    for broker_id in (1, 2):
        client = AsyncZk(zk_hosts)
        await client.start()
        rm = RecordingReplicaManager()
        events = configure_event_log(str(tmp_path / f"b{broker_id}.json"), "broker",
                                     broker=broker_id)
        m = ConfigManager(client, broker_id, build_config([("broker.id", str(broker_id), "t")]),
                          rm, events)
        await m.start()
        made.append((m, rm, client, asyncio.ensure_future(m.run())))
    server = grpc.aio.server()
    replog_pb2_grpc.add_BrokerServicer_to_server(BrokerServicer(None, 1, made[0][0]), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    yield replog_pb2_grpc.BrokerStub(channel), made
    await channel.close()
    await server.stop(0)
    for _, _, client, task in made:
        task.cancel()
        await client.stop()


def alter_req(*configs, resource_type=pb.TOPIC, name=TOPIC, validate_only=False):
    r = pb.AlterConfigsResource(resource_type=resource_type, resource_name=name)
    for key, op, value in configs:
        c = r.configs.add(name=key, config_operation=op)
        if value is not None:
            c.value = value
    return pb.IncrementalAlterConfigsRequest(resources=[r], validate_only=validate_only)


def notifications(zk):
    return [json.loads(zk.get(f"{zl.CONFIG_CHANGES}/{c}")[0])
            for c in sorted(zk.get_children(zl.CONFIG_CHANGES))]


async def test_alter_writes_config_and_notification_together(brokers, zk):
    stub, _ = brokers
    resp = await stub.IncrementalAlterConfigs(alter_req(
        ("min.insync.replicas", pb.SET, "2"), ("retention.ms", pb.DELETE, None)))
    assert [(r.error_code, r.error_message) for r in resp.responses] == [(0, "")]
    assert zl.decode_topic_config(zk.get(zl.topic_config_path(TOPIC))[0]) == \
        {"min.insync.replicas": "2"}
    assert notifications(zk) == [{"version": 2, "entity_path": "topics/orders"}]


@pytest.mark.parametrize("req,code,message", [
    (alter_req(("min.insync.replicas", pb.SET, "2"), ("no.such", pb.SET, "1")),
     ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such"),
    (alter_req(("min.insync.replicas", pb.SET, "0")), ErrorCode.INVALID_CONFIG,
     "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
    (alter_req(("min.insync.replicas", pb.SET, "2"), name="missing"),
     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist."),
    (alter_req(("min.insync.replicas", pb.SET, "2"), ("min.insync.replicas", pb.DELETE, None)),
     ErrorCode.INVALID_REQUEST, "duplicate config keys"),
    (alter_req(("log.dirs", pb.SET, "/x"), resource_type=pb.BROKER, name="1"),
     ErrorCode.INVALID_CONFIG, "Cannot update these configs dynamically: log.dirs"),
    (alter_req(("min.insync.replicas", pb.SET, "2"), resource_type=pb.BROKER, name="2"),
     ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1"),
    # one min ISR for the controller and every leader
    (alter_req(("min.insync.replicas", pb.SET, "1"), resource_type=pb.BROKER, name="1"),
     ErrorCode.INVALID_CONFIG, "min.insync.replicas can only be set cluster-wide"),
    (alter_req(("min.insync.replicas", pb.SET, "2"), validate_only=True), ErrorCode.NONE, ""),
])
async def test_refused_or_validate_only_alterations_write_nothing(brokers, zk, req, code,
                                                                  message):
    stub, _ = brokers
    r = (await stub.IncrementalAlterConfigs(req)).responses[0]
    assert r.error_code == code
    assert message in r.error_message and "\n" not in r.error_message
    assert zl.decode_topic_config(zk.get(zl.topic_config_path(TOPIC))[0]) == \
        {"retention.ms": "1000"}
    assert notifications(zk) == []
    assert zk.exists(zl.entity_config_path("brokers", "1")) is None


async def test_describe_reads_back_the_change_with_kafkas_sources(brokers):
    stub, _ = brokers
    for req in (alter_req(("min.insync.replicas", pb.SET, "2")),
                alter_req(("min.insync.replicas", pb.SET, "3"), resource_type=pb.BROKER,
                          name="")):
        assert (await stub.IncrementalAlterConfigs(req)).responses[0].error_code == 0
    resp = await stub.DescribeConfigs(pb.DescribeConfigsRequest(include_synonyms=True, resources=[
        pb.DescribeConfigsResource(resource_type=pb.TOPIC, resource_name=TOPIC,
                                   configuration_keys=["min.insync.replicas"]),
        pb.DescribeConfigsResource(resource_type=pb.BROKER, resource_name=""),
        pb.DescribeConfigsResource(resource_type=pb.TOPIC, resource_name="missing")]))
    topic, default, missing = resp.results
    [e] = topic.configs
    assert (e.name, e.value, e.config_source) == ("min.insync.replicas", "2",
                                                  pb.DYNAMIC_TOPIC_CONFIG)
    assert [(pb.ConfigSource.Name(s.source), s.value) for s in e.synonyms] == [
        ("DYNAMIC_TOPIC_CONFIG", "2"), ("DYNAMIC_DEFAULT_BROKER_CONFIG", "3"),
        ("DEFAULT_CONFIG", "1")]
    assert [(c.name, c.value) for c in default.configs] == [("min.insync.replicas", "3")]
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_every_broker_reloads_what_a_notification_names(brokers):
    stub, made = brokers
    (_, rm1, _, _), (_, rm2, _, _) = made
    await stub.IncrementalAlterConfigs(alter_req(("min.insync.replicas", pb.SET, "2")))
    await wait_until(lambda: TOPIC in rm2.reloaded and TOPIC in rm1.reloaded)
    # broker 1's own config is not broker 2's business; the cluster default is everyone's
    await stub.IncrementalAlterConfigs(alter_req(
        ("leader.replication.throttled.rate", pb.SET, "100"), resource_type=pb.BROKER,
        name="1"))
    await stub.IncrementalAlterConfigs(alter_req(
        ("min.insync.replicas", pb.SET, "2"), resource_type=pb.BROKER, name=""))
    await wait_until(lambda: rm2.broker_configs[-1] == {"min.insync.replicas": "2"})
    await wait_until(lambda: rm1.broker_configs[-1] == {
        "min.insync.replicas": "2", "leader.replication.throttled.rate": "100"})
    assert all("leader.replication.throttled.rate" not in (c or {})
               for c in rm2.broker_configs)


async def test_processed_notifications_older_than_the_expiry_are_deleted(brokers, zk):
    stub, made = brokers
    m2, rm2 = made[1][0], made[1][1]
    m2.clock = lambda: int(time.time() * 1000) + 16 * 60 * 1000  # 16 minutes from now
    await stub.IncrementalAlterConfigs(alter_req(("min.insync.replicas", pb.SET, "2")))
    await wait_until(lambda: TOPIC in rm2.reloaded)
    await wait_until(lambda: zk.get_children(zl.CONFIG_CHANGES) == [])


async def test_topic_config_read_failure_does_not_weaken_min_isr(zk_hosts, zk, tmp_path):
    """Finding 4, first half. Before the fix a ZooKeeper error cached {} and min ISR fell back
    to 1, so acks=all was accepted with an ISR of 2 below the topic's min.insync.replicas=3."""
    zk.ensure_path(zl.CONFIG_TOPICS)
    zk.create(zl.topic_config_path("t"), zl.encode_topic_config({"min.insync.replicas": "3"}))
    client = AsyncZk(zk_hosts)
    await client.start()
    async def load(topic):
        got = await client.get_or_none(zl.topic_config_path(topic))
        return zl.decode_topic_config(got[0]) if got else {}

    node = Node(1, tmp_path, topic_config_loader=load)
    await node.start()
    try:
        await asyncio.get_running_loop().run_in_executor(None, client.client.stop)  # real error
        await node.stub.LeaderAndIsr(leader_and_isr(node, 1, 0, [1, 2], [1, 2, 3], [node]))
        p = node.rm.partitions[next(iter(node.rm.partitions))]
        assert p.min_isr == 3  # the replication factor while the config is unknown
        resp = await node.stub.Produce(produce_req("x"))
        assert resp.responses[0].partition_responses[0].error_code == \
            ErrorCode.NOT_ENOUGH_REPLICAS
        assert any(e["event"] == "topic_config_unavailable" for e in node.events_logged())
        # ZooKeeper is back: the background retry reads the real value and applies it
        await asyncio.get_running_loop().run_in_executor(None, client.client.start)
        zk.set(zl.topic_config_path("t"), zl.encode_topic_config({"min.insync.replicas": "2"}))
        await wait_until(lambda: p.min_isr == 2, timeout=30)
        assert node.rm.topic_configs["t"] == {"min.insync.replicas": "2"}
    finally:
        await node.stop()
        await client.stop()


async def test_applied_changes_re_derive_min_isr_of_the_topics_partitions(tmp_path):
    """What a notification ends in: the topic's override, else the broker's dynamic value,
    else server.properties - applied to the partition at once, not at its next LeaderAndIsr."""
    node = Node(1, tmp_path)
    await node.start()
    try:
        await node.stub.LeaderAndIsr(leader_and_isr(node, 1, 0, [1, 2], [1, 2, 3], [node]))
        p = node.rm.partitions[next(iter(node.rm.partitions))]
        assert p.min_isr == 1
        node.rm.apply_broker_config({"min.insync.replicas": "2"})
        assert p.min_isr == 2
        node.rm.apply_topic_config("t", {"min.insync.replicas": "3"})
        assert p.min_isr == 3
        resp = await node.stub.Produce(produce_req("x"))
        assert resp.responses[0].partition_responses[0].error_code == \
            ErrorCode.NOT_ENOUGH_REPLICAS
        node.rm.apply_topic_config("t", {})
        assert p.min_isr == 2
        node.rm.apply_broker_config(None)  # unreadable: the replication factor
        assert p.min_isr == 3
    finally:
        await node.stop()


async def test_topic_log_configs_reach_the_topics_logs_in_place(tmp_path):
    """Kafka's TopicConfigHandler -> LogManager.updateTopicConfig: a topic's segment.bytes,
    retention.ms and max.message.bytes apply to its logs at once; the broker's values are
    what is left when the override goes, and other topics keep the broker's."""
    node = Node(1, tmp_path)
    await node.start()
    try:
        await node.stub.LeaderAndIsr(leader_and_isr(node, 1, 0, [1, 2], [1, 2, 3], [node]))
        log = node.rm.partitions[next(iter(node.rm.partitions))].log
        broker = node.rm.log_manager.config
        node.rm.apply_topic_config("t", {"segment.bytes": "4096", "retention.ms": "60000",
                                         "max.message.bytes": "100", "min.insync.replicas": "1"})
        assert (log.config.segment_bytes, log.config.retention_ms,
                log.config.max_message_bytes) == (4096, 60000, 100)
        resp = await node.stub.Produce(produce_req("x" * 200))
        assert resp.responses[0].partition_responses[0].error_code == \
            ErrorCode.MESSAGE_TOO_LARGE
        node.rm.apply_topic_config("other", {"segment.bytes": "8192"})
        assert log.config.segment_bytes == 4096
        node.rm.apply_topic_config("t", {})
        assert log.config == broker
    finally:
        await node.stop()
