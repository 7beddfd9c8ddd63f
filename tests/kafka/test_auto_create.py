"""Topic auto-creation (issue 41 item 5): a Metadata request with allow_auto_topic_creation for
an unknown topic creates it through the controller with the broker's num.partitions and
default.replication.factor, LEADER_NOT_AVAILABLE until it exists; not for Kafka's internal
topics, not when the request or auto.create.topics.enable says no, and a replication factor
above the live brokers is the controller's INVALID_REPLICATION_FACTOR, as Kafka's ZooKeeper
mode answers it."""
from __future__ import annotations

import asyncio

import pytest

from client.admin_client import AdminClient
from common.errors import ErrorCode
from common.kafka_protocol.primitives import ZERO_UUID
from tests.kafka.test_clients import replog
from tests.kafka.test_config_apis import raw
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def metadata(cluster, names, allow=True, broker_id=1) -> dict[str, int]:
    got = raw(cluster, broker_id, 3, 12, {
        "topics": [{"name": n, "topic_id": ZERO_UUID} for n in names],
        "allow_auto_topic_creation": allow, "include_topic_authorized_operations": False})
    return {t["name"]: t["error_code"] for t in got["topics"]}


def topics_of(cluster) -> dict[str, tuple[int, int]]:
    async def go():
        async with AdminClient(cluster.bootstrap_servers, request_timeout_ms=10000) as admin:
            names = await admin.list_topics()
            described = await admin.describe_topics(names) if names else {}
            return {n: (len(t.partitions), len(t.partitions[0].replicas))
                    for n, t in described.items()}
    return asyncio.run(go())


def test_librdkafka_produces_and_consumes_on_a_fresh_cluster(cluster_factory):
    import confluent_kafka
    cluster = cluster_factory(brokers=3, broker_overrides={"num.partitions": 2,
                                                           "default.replication.factor": 2})
    kb = cluster.kafka_bootstrap_servers
    reports: list = []
    p = confluent_kafka.Producer({"bootstrap.servers": kb, "acks": "all"})
    for i in range(10):
        p.produce("fresh", value=f"v{i}".encode(), partition=i % 2,
                  on_delivery=lambda err, m, out=reports: out.append((err, m.partition())))
    assert p.flush(60) == 0
    assert sorted(reports, key=str) == sorted([(None, i % 2) for i in range(10)], key=str)
    assert topics_of(cluster) == {"fresh": (2, 2)}
    c = confluent_kafka.Consumer({"bootstrap.servers": kb, "group.id": "unused",
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition("fresh", p, 0) for p in range(2)])
    got = []
    try:
        while len(got) < 10:
            m = c.poll(30)
            assert m is not None and m.error() is None, m and m.error()
            got.append(m.value())
    finally:
        c.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(10))

    # replog produce (gRPC) creates too, and waits up to Kafka's max.block.ms default
    done = replog("produce", "--bootstrap-server", cluster.bootstrap_servers, "--topic",
                  "by-replog", stdin="a\nb\n")
    assert done.returncode == 0, done.stderr
    done = replog("consume", "--bootstrap-server", cluster.bootstrap_servers, "--topic",
                  "by-replog", "--from-beginning", "--max-messages", "2", "--timeout-ms", "20000")
    assert sorted(done.stdout.split()) == ["a", "b"], done.stderr


def test_what_is_not_created(cluster_factory):
    cluster = cluster_factory(brokers=1, per_broker_overrides={
        1: {"default.replication.factor": 2}})
    # the request says no; Kafka's internal topics (their coordinators create them)
    assert metadata(cluster, ["no-1"], allow=False) == {
        "no-1": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert metadata(cluster, ["__consumer_offsets", "__transaction_state"]) == {
        "__consumer_offsets": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "__transaction_state": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert metadata(cluster, ["bad name"]) == {"bad name": ErrorCode.INVALID_TOPIC_EXCEPTION}
    # default.replication.factor 2 with one live broker: the controller's refusal, as is
    assert metadata(cluster, ["too-big"]) == {"too-big": ErrorCode.INVALID_REPLICATION_FACTOR}
    assert topics_of(cluster) == {}


def test_auto_create_topics_enable_false(cluster_factory):
    cluster = cluster_factory(brokers=1, broker_overrides={"auto.create.topics.enable": False})
    assert metadata(cluster, ["nope"]) == {"nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert topics_of(cluster) == {}


def test_leader_not_available_then_the_topic(cluster_factory):
    cluster = cluster_factory(brokers=1)
    assert metadata(cluster, ["lna"]) == {"lna": ErrorCode.LEADER_NOT_AVAILABLE}
    wait_until(lambda: metadata(cluster, ["lna"]) == {"lna": ErrorCode.NONE}, timeout=30,
               what="the auto-created topic in the broker's metadata")
    assert topics_of(cluster) == {"lna": (1, 1)}
    # the gRPC Metadata, as replog's producer sends it, answers the same way
    assert grpc_metadata(cluster, "lna-grpc") == ErrorCode.LEADER_NOT_AVAILABLE
    wait_until(lambda: grpc_metadata(cluster, "lna-grpc") == ErrorCode.NONE, timeout=30,
               what="the topic auto-created through gRPC")


def grpc_metadata(cluster, name: str) -> int:
    async def go():
        async with AdminClient(cluster.bootstrap_servers, request_timeout_ms=10000) as admin:
            admin.metadata.allow_auto_topic_creation = True  # what the producer sets
            return (await admin.metadata.fetch([name])).topics[name].error_code
    return asyncio.run(go())
