"""Unmodified Kafka clients against real replog processes through the Kafka listener
(design.md#c12, phase 1): kafka-python and kcat produce, consume with assign() and read metadata,
and records cross between them and replog's own CLI (gRPC) in both directions."""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from client.admin_client import AdminClient
from harness.local_cluster import REPO_ROOT

pytestmark = pytest.mark.integration
TOPIC = "t"


def create_topic(cluster, name: str = TOPIC, partitions: int = 3, rf: int = 3) -> None:
    async def go():
        async with AdminClient(cluster.bootstrap_servers, request_timeout_ms=10000) as admin:
            await admin.create_topic(name, partitions, rf)
    asyncio.run(go())


def describe(cluster, name: str = TOPIC):
    async def go():
        async with AdminClient(cluster.bootstrap_servers, request_timeout_ms=10000) as admin:
            return (await admin.describe_topics([name]))[name]
    return asyncio.run(go())


def kafka_python_producer(cluster) -> KafkaProducer:
    # enable_idempotence=False: InitProducerId is not served yet (docs/kafka-protocol.md), and
    # kafka-python 3 turns idempotence on by default, as the Java producer does.
    return KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers, acks="all",
                         enable_idempotence=False, retries=10, request_timeout_ms=10000)


def assigned_consumer(cluster, partitions) -> KafkaConsumer:
    c = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers,
                      enable_auto_commit=False, consumer_timeout_ms=10000)
    c.assign([TopicPartition(TOPIC, p) for p in partitions])
    c.seek_to_beginning()
    return c


def read(consumer: KafkaConsumer, count: int) -> list:
    out = []
    for m in consumer:
        out.append(m)
        if len(out) == count:
            break
    return out


def replog(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "admin.cli", *args], cwd=REPO_ROOT, check=False,
                          input=stdin, capture_output=True, text=True, timeout=60)


def test_cluster_json_and_the_kafka_bootstrap_servers(cluster_factory):
    cluster = cluster_factory(brokers=2)
    info = json.loads(cluster.cluster_json_path.read_text())
    assert info["kafka_bootstrap_servers"] == cluster.kafka_bootstrap_servers
    assert len(cluster.kafka_bootstrap_servers.split(",")) == 2
    assert {b["kafka_address"] for b in info["brokers"]} == \
        set(cluster.kafka_bootstrap_servers.split(","))


def test_kafka_python_producer_acks_all_to_an_assigned_consumer(cluster_factory):
    cluster = cluster_factory(brokers=3)
    create_topic(cluster)
    producer = kafka_python_producer(cluster)
    sent = {}
    for i in range(30):
        md = producer.send(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode(),
                           partition=i % 3).get(timeout=30)
        sent[(md.partition, md.offset)] = (f"k{i}".encode(), f"v{i}".encode())
    producer.close()
    # offsets gap-free from 0 in each partition, as the delivery reports gave them
    for p in range(3):
        assert sorted(o for q, o in sent if q == p) == list(range(10))
    consumer = assigned_consumer(cluster, range(3))
    got = {(m.partition, m.offset): (m.key, m.value) for m in read(consumer, 30)}
    consumer.close()
    assert got == sent


def test_kcat_lists_metadata_and_round_trips(cluster_factory):
    if shutil.which("kcat") is None:
        pytest.fail("kcat is missing: `make setup` installs Debian's kcat (as root)")
    cluster = cluster_factory(brokers=3)
    create_topic(cluster, partitions=2)
    kb = cluster.kafka_bootstrap_servers
    listing = subprocess.run(["kcat", "-b", kb, "-L", "-J", "-t", TOPIC], capture_output=True,
                             text=True, timeout=60, check=True)
    md = json.loads(listing.stdout)
    assert {b["id"]: b["name"] for b in md["brokers"]} == {
        h.id: h.kafka_address for h in cluster.brokers.values()}
    (topic,) = md["topics"]
    ours = describe(cluster)
    assert [(p["partition"], p["leader"], [r["id"] for r in p["replicas"]],
             [r["id"] for r in p["isrs"]]) for p in topic["partitions"]] == \
        [(p.partition, p.leader, list(p.replicas), list(p.isr)) for p in ours.partitions]

    subprocess.run(["kcat", "-b", kb, "-P", "-t", TOPIC, "-p", "1", "-X", "acks=all"],
                   input="one\ntwo\nthree\n", text=True, timeout=60, check=True)
    out = subprocess.run(["kcat", "-b", kb, "-C", "-t", TOPIC, "-o", "beginning", "-e",
                          "-f", "%p %o %s\n"], capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.splitlines() == ["1 0 one", "1 1 two", "1 2 three"]


def test_records_cross_between_kafka_python_and_replog_cli(cluster_factory):
    cluster = cluster_factory(brokers=3)
    create_topic(cluster, partitions=1)
    producer = kafka_python_producer(cluster)
    for i in range(3):
        producer.send(TOPIC, value=f"from-kafka-python-{i}".encode(), partition=0).get(timeout=30)
    producer.close()
    produced = replog("produce", "--bootstrap-server", cluster.bootstrap_servers, "--topic",
                      TOPIC, "--request-timeout-ms", "30000", stdin="".join(f"from-replog-{i}\n" for i in range(3)))
    assert produced.returncode == 0, produced.stderr

    consumed = replog("consume", "--bootstrap-server", cluster.bootstrap_servers, "--topic",
                      TOPIC, "--from-beginning", "--max-messages", "6",
                      "--timeout-ms", "20000")
    assert consumed.returncode == 0, consumed.stderr
    expected = [f"from-kafka-python-{i}" for i in range(3)] + \
        [f"from-replog-{i}" for i in range(3)]
    assert consumed.stdout.splitlines() == expected

    consumer = assigned_consumer(cluster, [0])
    assert [(m.offset, m.value.decode()) for m in read(consumer, 6)] == \
        list(enumerate(expected))
    consumer.close()


def test_librdkafka_and_aiokafka_round_trips(cluster_factory):
    """A first look at the other two clients (their acceptance runs are a later phase): each
    produces with acks=all and reads back everything, its own records and the other's."""
    import confluent_kafka
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    cluster = cluster_factory(brokers=3)
    create_topic(cluster, partitions=1)
    kb = cluster.kafka_bootstrap_servers
    reports = []
    producer = confluent_kafka.Producer({"bootstrap.servers": kb, "acks": "all"})
    for i in range(5):
        producer.produce(TOPIC, value=f"rd{i}".encode(), partition=0,
                         on_delivery=lambda err, m: reports.append((err, m.offset())))
    assert producer.flush(30) == 0
    assert reports == [(None, i) for i in range(5)]

    async def aiokafka_round_trip() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=kb, acks="all")
        await p.start()
        try:
            for i in range(5):
                md = await p.send_and_wait(TOPIC, f"aio{i}".encode(), partition=0)
                assert md.offset == 5 + i
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=kb, enable_auto_commit=False)
        await c.start()
        try:
            tp = AioTopicPartition(TOPIC, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            out: list[bytes] = []
            while len(out) < 10:
                batches = await asyncio.wait_for(c.getmany(timeout_ms=1000), 30)
                out += [m.value for ms in batches.values() for m in ms]
            return out
        finally:
            await c.stop()

    expected = [f"rd{i}".encode() for i in range(5)] + [f"aio{i}".encode() for i in range(5)]
    assert asyncio.run(aiokafka_round_trip()) == expected

    consumer = confluent_kafka.Consumer({"bootstrap.servers": kb, "group.id": "unused",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    got = []
    while len(got) < 10:
        m = consumer.poll(30)
        assert m is not None and m.error() is None, m and m.error()
        got.append(m.value())
    consumer.close()
    assert got == expected
