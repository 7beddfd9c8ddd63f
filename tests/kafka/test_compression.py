"""Compressed batches through the Kafka listener (issue 41 item 7, acceptance): librdkafka
producers with each of gzip, snappy, lz4 and zstd, and records read back by librdkafka,
aiokafka, kafka-python and ``replog consume``; ``replog produce --compression-codec`` the other
way round, over gRPC."""
from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest

from tests.kafka.test_clients import create_topic, replog

pytestmark = pytest.mark.integration
CODECS = ("gzip", "snappy", "lz4", "zstd")
N = 30


def values(codec: str) -> list[bytes]:
    return [f"{codec}-{i}-".encode() * 10 for i in range(N)]


def librdkafka_consume(kb: str, topic: str, n: int) -> list[bytes]:
    import confluent_kafka
    c = confluent_kafka.Consumer({"bootstrap.servers": kb, "group.id": "unused",
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    out = []
    try:
        while len(out) < n:
            m = c.poll(30)
            assert m is not None and m.error() is None, m and m.error()
            out.append(m.value())
    finally:
        c.close()
    return out


def aiokafka_consume(kb: str, topic: str, n: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    async def go():
        c = AIOKafkaConsumer(bootstrap_servers=kb, enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            out: list[bytes] = []
            while len(out) < n:
                batches = await asyncio.wait_for(c.getmany(timeout_ms=1000), 30)
                out += [m.value for ms in batches.values() for m in ms]
            return out
        finally:
            await c.stop()
    return asyncio.run(go())


def kafka_python_consume(kb: str, topic: str, n: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=kb, enable_auto_commit=False, consumer_timeout_ms=20000)
    c.assign([TopicPartition(topic, 0)])
    c.seek_to_beginning()
    out = []
    for m in c:
        out.append(m.value)
        if len(out) == n:
            break
    c.close()
    return out


def replog_consume(cluster, topic: str, n: int) -> list[bytes]:
    done = replog("consume", "--bootstrap-server", cluster.bootstrap_servers, "--topic", topic,
                  "--from-beginning", "--max-messages", str(n), "--timeout-ms", "20000")
    assert done.returncode == 0, done.stderr
    return [line.encode() for line in done.stdout.splitlines()]


def test_librdkafka_compressed_produce_is_read_by_every_client(cluster_factory):
    import confluent_kafka
    cluster = cluster_factory(brokers=1)
    kb = cluster.kafka_bootstrap_servers
    for codec in CODECS:
        create_topic(cluster, f"c-{codec}", partitions=1, rf=1)
        reports: list = []
        p = confluent_kafka.Producer({"bootstrap.servers": kb, "acks": "all",
                                      "compression.type": codec, "linger.ms": 50,
                                      "message.timeout.ms": 20000})
        for v in values(codec):
            p.produce(f"c-{codec}", value=v, partition=0,
                      on_delivery=lambda err, m, out=reports: out.append((err, m.offset())))
        assert p.flush(30) == 0
        assert sorted(reports) == [(None, i) for i in range(N)], reports[:3]
    for codec in CODECS:
        topic = f"c-{codec}"
        want = values(codec)
        assert librdkafka_consume(kb, topic, N) == want, codec
        assert aiokafka_consume(kb, topic, N) == want, codec
        assert kafka_python_consume(kb, topic, N) == want, codec
        assert replog_consume(cluster, topic, N) == want, codec
        # stored as librdkafka sent it (compression.type=producer): the batch is compressed
        dumped = replog("dump-log", "--files", ",".join(sorted(
            str(p) for p in cluster.data_dir.rglob(f"{topic}-0/*.log"))), "--print-data-log")
        assert f"compresscodec: {codec}" in dumped.stdout, dumped.stdout[-2000:]
        assert "payload: " + want[0].decode() in dumped.stdout


def test_replog_produce_compresses_for_kafka_clients(cluster_factory):
    cluster = cluster_factory(brokers=1)
    kb = cluster.kafka_bootstrap_servers
    create_topic(cluster, "r", partitions=1, rf=1)
    lines = [f"line-{i}" for i in range(20)]
    done = replog("produce", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "r",
                  "--compression-codec", "zstd", stdin="".join(f"{x}\n" for x in lines))
    assert done.returncode == 0, done.stderr
    done = replog("produce", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "r",
                  "--producer-property", "compression.type=snappy",
                  stdin="".join(f"{x}\n" for x in lines))
    assert done.returncode == 0, done.stderr
    want = [x.encode() for x in lines] * 2
    assert librdkafka_consume(kb, "r", 40) == want
    assert kafka_python_consume(kb, "r", 40) == want
    bad = replog("produce", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "r",
                 "--producer-property", "compression.type=brotli", stdin="x\n")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr


def test_kcat_compressed_produce_and_consume(cluster_factory):
    """kcat (Debian's, librdkafka 2.0) with -z: each codec in, the same records out."""
    if shutil.which("kcat") is None:
        pytest.fail("kcat is missing: `make setup` installs Debian's kcat (as root)")
    cluster = cluster_factory(brokers=1)
    kb = cluster.kafka_bootstrap_servers
    create_topic(cluster, "k", partitions=1, rf=1)
    lines = []
    for codec in CODECS:
        batch = [f"{codec}-{i}" for i in range(5)]
        subprocess.run(["kcat", "-b", kb, "-P", "-t", "k", "-p", "0", "-z", codec,
                        "-X", "acks=all"], input="".join(f"{x}\n" for x in batch),
                       text=True, timeout=60, check=True)
        lines += batch
    out = subprocess.run(["kcat", "-b", kb, "-C", "-t", "k", "-o", "beginning", "-e"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.splitlines() == lines
    assert replog_consume(cluster, "k", len(lines)) == [x.encode() for x in lines]
