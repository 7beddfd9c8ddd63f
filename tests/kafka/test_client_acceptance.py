"""Acceptance of the Kafka listener with real clients against real replog processes (design.md#c12):
librdkafka through a leader's SIGKILL, records crossing between every client pair, kcat's
metadata against replog's own AdminClient, and the KIP-966 and JBOD behaviour as a Kafka client
sees it."""
from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import confluent_kafka
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from chaos import disk
from client.admin_client import AdminClient
from common import zk_layout as zl
from tests.cluster.test_elr_recovery import ELR_ON, _state
from tests.kafka.test_clients import (
    TOPIC,
    assigned_consumer,
    describe,
    kafka_python_producer,
    read,
    replog,
)
from tests.polling import async_wait_until, wait_until

pytestmark = pytest.mark.integration

# As the cluster tests' FAST: a SIGKILLed broker's ZooKeeper session expires and a lagging
# follower leaves the ISR within seconds, so a kill costs seconds, not the 18 s/30 s defaults.
FAST = {"zookeeper.session.timeout.ms": 3000, "replica.lag.time.max.ms": 3000,
        "replica.fetch.wait.max.ms": 200, "auto.leader.rebalance.enable": "false"}
MIN_ISR_2 = {"min.insync.replicas": "2"}


# ---------------------------------------------------------------------------- helpers

def create(cluster, name: str, partitions: int, rf: int, configs=None, assignment=None) -> None:
    """A topic through replog's AdminClient (gRPC), waiting until every partition has a leader
    and a full ISR, so the first Kafka-client request finds it served."""
    async def go():
        async with AdminClient(cluster.bootstrap_servers, request_timeout_ms=10000) as admin:
            await admin.create_topic(name, None if assignment else partitions,
                                     None if assignment else rf, configs=configs,
                                     replica_assignment=assignment)
            async def replicated() -> bool:
                t = (await admin.describe_topics([name]))[name]
                return len(t.partitions) == partitions and all(
                    p.leader >= 0 and len(p.isr) == rf for p in t.partitions)
            await async_wait_until(replicated, 30, f"{name} fully replicated", interval=0.1)
    asyncio.run(go())

def rd_consume_all(bootstrap: str, topic: str, partitions, timeout: float = 60.0
                   ) -> dict[tuple[int, int], bytes]:
    """Every record of ``partitions`` from the beginning to the high watermark read when the
    read starts, with a librdkafka consumer in assign mode: {(partition, offset): value}."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
        "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends = {p: consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, p), timeout=30)[1] for p in partitions}
        consumer.assign([confluent_kafka.TopicPartition(topic, p,
                                                        confluent_kafka.OFFSET_BEGINNING)
                         for p in partitions if ends[p] > 0])
        out: dict[tuple[int, int], bytes] = {}
        pos = {p: 0 for p in partitions}

        def read_some() -> bool:  # one consume round; True once every partition is read
            for m in consumer.consume(10000, 1.0):
                if m.error() is not None:
                    if m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"consumer error: {m.error()}")
                if m.offset() < ends[m.partition()]:
                    out[(m.partition(), m.offset())] = m.value()
                    pos[m.partition()] = max(pos[m.partition()], m.offset() + 1)
            return not any(pos[p] < ends[p] for p in partitions)
        if any(pos[p] < ends[p] for p in partitions):
            wait_until(read_some, timeout, f"the read up to the high watermarks {ends}",
                       interval=0)
        return out
    finally:
        consumer.close()


def assert_read_back(read: dict[tuple[int, int], bytes],
                     delivered: dict[tuple[int, int], bytes], partitions) -> None:
    """Offsets gap-free from 0 in each partition; every delivered record at the partition and
    offset its delivery report gave. A value may also appear elsewhere (a retry across a
    leader change duplicates, as in Kafka without idempotence)."""
    for p in partitions:
        offsets = {o for q, o in read if q == p}
        gaps = sorted(set(range(max(offsets, default=-1) + 1)) - offsets)
        assert not gaps, f"partition {p}: offsets missing below its end: {gaps[:10]}"
    wrong = [(k, v, read.get(k)) for k, v in delivered.items() if read.get(k) != v]
    assert not wrong, f"{len(wrong)} of {len(delivered)} delivered records not at their " \
                      f"reported offsets, e.g. {wrong[:5]}"


# ---------------------------------------------------------------------------- 1

class TailingConsumer(threading.Thread):
    """A librdkafka consumer in assign mode reading every partition from the beginning while
    the test produces and kills brokers: its fetches cross the leader change (KIP-320's
    leader-epoch validation). ``finish(ends)`` stops it once it has read up to ``ends``."""

    def __init__(self, bootstrap: str, topic: str, partitions):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, list(partitions)
        self.read: dict[tuple[int, int], bytes] = {}
        self.errors: list[str] = []
        self.ends: dict[int, int] | None = None
        self.pos = {p: 0 for p in self.partitions}

    def run(self) -> None:
        c = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap,
                                      "group.id": "unused-assign-only",
                                      "enable.auto.commit": False})
        try:
            c.assign([confluent_kafka.TopicPartition(self.topic, p,
                                                     confluent_kafka.OFFSET_BEGINNING)
                      for p in self.partitions])
            while self.ends is None or any(self.pos[p] < self.ends[p] for p in self.ends):
                for m in c.consume(10000, 0.5):
                    if m.error() is not None:
                        # transport errors while a broker is down are the client's to retry
                        self.errors.append(str(m.error()))
                        if m.error().fatal():
                            return
                        continue
                    self.read[(m.partition(), m.offset())] = m.value()
                    self.pos[m.partition()] = max(self.pos[m.partition()], m.offset() + 1)
        finally:
            c.close()

    def finish(self, ends: dict[int, int], timeout: float = 60) -> None:
        self.ends = ends
        self.join(timeout)
        assert not self.is_alive() and all(self.pos[p] >= ends[p] for p in ends), \
            f"the tailing consumer stopped at {self.pos} of {ends}; errors {self.errors[-5:]}"


def test_librdkafka_100k_records_through_a_leader_kill(cluster_factory):
    """A librdkafka producer (acks=all, no idempotence) sends 100k small records to a
    6-partition RF-3 topic with min.insync.replicas=2; partition 0's leader is SIGKILLed once
    a third of them are delivered. Every delivery report is kept; a librdkafka consumer in
    assign mode then reads every partition from the beginning to its end: each delivered
    record is at the partition and offset its report gave, offsets are gap-free, nothing is
    missing (duplicates from retries across the kill are allowed, as in Kafka). A second
    consumer tailing the partitions throughout saw only what the final logs hold."""
    records = 100_000
    cluster = cluster_factory(brokers=3, overrides=FAST)
    topic, partitions = "acc", range(6)
    create(cluster, topic, 6, 3, MIN_ISR_2)
    kb = cluster.kafka_bootstrap_servers
    leader0 = describe(cluster, topic).partition(0).leader
    delivered: dict[tuple[int, int], bytes] = {}
    failed: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            delivered[(msg.partition(), msg.offset())] = msg.value()

    producer = confluent_kafka.Producer({
        "bootstrap.servers": kb, "acks": "all", "enable.idempotence": False,
        "linger.ms": 20, "batch.num.messages": 5000,
        "queue.buffering.max.messages": records + 1000,
        # retried across the leader change; long enough that nothing times out while the
        # controller moves partition 0 (ZooKeeper session expiry, then the election)
        "message.timeout.ms": 120_000, "request.timeout.ms": 10_000})
    tail = TailingConsumer(kb, topic, partitions)
    tail.start()
    kill_at = records // 3
    killed = False
    for i in range(records):
        producer.produce(topic, value=b"v%d" % i, partition=i % 6, on_delivery=on_delivery)
        if i % 1000 == 0:
            producer.poll(0)
        if not killed and i == kill_at + records // 10:
            # mid-stream: a third delivered, a tenth more queued or in flight, the rest to come
            wait_until(lambda: producer.poll(0.1) is not None
                       and len(delivered) + len(failed) >= kill_at,
                       60, f"{kill_at} delivery reports", interval=0)
            cluster.broker(leader0).kill()
            killed = True
    assert producer.flush(180) == 0, "records still queued after 180 s"
    assert not failed, f"{len(failed)} records failed, e.g. {failed[:3]}"
    assert len(set(delivered.values())) == records
    assert describe(cluster, topic).partition(0).leader not in (leader0, -1)

    read = rd_consume_all(kb, topic, partitions)
    assert_read_back(read, delivered, partitions)
    assert set(read.values()) == {b"v%d" % i for i in range(records)}
    tail.finish({p: max((o for q, o in read if q == p), default=-1) + 1 for p in partitions})
    # Consumers read only below the HW, so nothing they saw is ever truncated away.
    assert_read_back(read, tail.read, partitions)
    assert len(tail.read) == len(read)


# ---------------------------------------------------------------------------- 2

# Each producer's records: (key, value, headers), a null key and a null value (a tombstone)
# among them, so every client's record codec meets the nullable fields of the v2 format.
def _records(name: str, headers_on_all: bool = False) -> list[tuple]:
    h = [("src", name.encode()), ("empty", b"")]
    return [(f"{name}-k0".encode(), f"{name}-v0".encode(), h),
            (None, f"{name}-v1".encode(), h if headers_on_all else [("src", name.encode())]),
            (f"{name}-k2".encode(), None, h if headers_on_all else [])]


def _produce_kafka_python(cluster, recs) -> list[int]:
    producer = kafka_python_producer(cluster)
    try:
        return [producer.send(TOPIC, key=k, value=v, headers=h, partition=0).get(timeout=30)
                .offset for k, v, h in recs]
    finally:
        producer.close()


def _produce_aiokafka(cluster, recs) -> list[int]:
    from aiokafka import AIOKafkaProducer

    async def go():
        p = AIOKafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers, acks="all")
        await p.start()
        try:
            return [(await p.send_and_wait(TOPIC, v, key=k, partition=0, headers=h)).offset
                    for k, v, h in recs]
        finally:
            await p.stop()
    return asyncio.run(go())


def _produce_librdkafka(cluster, recs) -> list[int]:
    reports: list = []
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers,
                                         "acks": "all", "enable.idempotence": False})
    for k, v, h in recs:
        producer.produce(TOPIC, value=v, key=k, headers=h, partition=0,
                         on_delivery=lambda err, m: reports.append((err, m.offset())))
    assert producer.flush(30) == 0
    assert all(err is None for err, _ in reports), reports
    return [o for _, o in reports]


def _produce_replog_cli(cluster, recs) -> None:
    assert all(not h for _, _, h in recs), "replog produce's line reader sends no headers"
    lines = "".join(f"{(k or b'NULL').decode()}|{(v or b'NULL').decode()}\n" for k, v, _ in recs)
    out = replog("produce", "--bootstrap-server", cluster.bootstrap_servers, "--topic", TOPIC,
                 "--request-timeout-ms", "30000", "--property", "parse.key=true", "--property", "key.separator=|",
                 "--property", "null.marker=NULL", stdin=lines)
    assert out.returncode == 0, out.stderr


def _produce_kcat(cluster, recs) -> None:
    (h,) = {tuple(h) for _, _, h in recs}  # kcat -H puts the same headers on every record
    lines = "".join(f"{(k or b'').decode()}|{(v or b'').decode()}\n" for k, v, _ in recs)
    cmd = ["kcat", "-b", cluster.kafka_bootstrap_servers, "-P", "-t", TOPIC, "-p", "0",
           "-X", "acks=all", "-K", "|", "-Z"]  # -Z: an empty key or value is sent as NULL
    for name, value in h:
        cmd += ["-H", f"{name}={value.decode()}"]
    subprocess.run(cmd, input=lines, text=True, timeout=60, check=True)


def _consume_kafka_python(cluster, n: int) -> list[tuple]:
    consumer = assigned_consumer(cluster, [0])
    try:
        return [(m.offset, m.key, m.value, list(m.headers or [])) for m in read(consumer, n)]
    finally:
        consumer.close()


def _consume_aiokafka(cluster, n: int) -> list[tuple]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    async def go():
        c = AIOKafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers,
                             enable_auto_commit=False)
        await c.start()
        try:
            tp = AioTopicPartition(TOPIC, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            out: list[tuple] = []

            async def read_some() -> bool:
                batches = await c.getmany(timeout_ms=1000)
                out.extend((m.offset, m.key, m.value, list(m.headers or []))
                           for ms in batches.values() for m in ms)
                return len(out) >= n
            await async_wait_until(read_some, 30, f"aiokafka reading {n} records", interval=0)
            return out
        finally:
            await c.stop()
    return asyncio.run(go())


def _consume_librdkafka(cluster, n: int) -> list[tuple]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers,
                                         "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        out: list[tuple] = []
        while len(out) < n:
            m = consumer.poll(30)
            assert m is not None and m.error() is None, m and m.error()
            out.append((m.offset(), m.key(), m.value(), list(m.headers() or [])))
        return out
    finally:
        consumer.close()


def _null(text: str) -> bytes | None:
    return None if text == "NULL" else text.encode()


def _consume_kcat(cluster, n: int) -> list[tuple]:
    out = subprocess.run(["kcat", "-b", cluster.kafka_bootstrap_servers, "-C", "-t", TOPIC,
                          "-p", "0", "-o", "beginning", "-e", "-Z", "-f", "%o|%k|%s|%h\n"],
                         capture_output=True, text=True, timeout=60, check=True)
    got = []
    for line in out.stdout.splitlines():
        offset, key, value, headers = line.split("|")
        got.append((int(offset), _null(key), _null(value),
                    [(a, b.encode()) for a, _, b in (x.partition("=") for x in
                                                      headers.split(",") if x)]))
    assert len(got) == n, out.stdout
    return got


def _consume_replog_cli(cluster, n: int) -> list[tuple]:
    out = replog("consume", "--bootstrap-server", cluster.bootstrap_servers, "--topic", TOPIC,
                 "--from-beginning", "--max-messages", str(n), "--timeout-ms", "20000",
                 "--property", "print.offset=true", "--property", "print.key=true",
                 "--property", "print.headers=true", "--property", "key.separator=|",
                 "--property", "null.literal=NULL")
    assert out.returncode == 0, out.stderr
    got = []
    for line in out.stdout.splitlines():
        offset, headers, key, value = line.split("|")
        hs = [] if headers == "NO_HEADERS" else \
            [(a, b.encode()) for a, _, b in (x.partition(":") for x in headers.split(","))]
        got.append((int(offset.removeprefix("Offset:")), _null(key), _null(value), hs))
    return got


def test_records_cross_between_every_client_and_the_replog_cli(cluster_factory):
    """aiokafka, kafka-python, librdkafka, kcat and `replog produce` each write records (keys,
    headers, a null key, a tombstone) to one partition; aiokafka, kafka-python, librdkafka,
    kcat and `replog consume` each read all of them back, the same records at the same
    offsets. test_clients.py covers kafka-python <-> the CLI and librdkafka <-> aiokafka;
    this adds every other pair (aiokafka <-> kafka-python, aiokafka <-> the CLI, the CLI and
    kcat -> librdkafka/aiokafka, kafka-python/aiokafka/librdkafka -> kcat, ...)."""
    if shutil.which("kcat") is None:
        pytest.skip("kcat is missing: `make setup` installs Debian's kcat (as root)")
    cluster = cluster_factory(brokers=3)
    create(cluster, TOPIC, 1, 3)
    expected: list[tuple] = []
    for name, produce, recs in [
            ("aiokafka", _produce_aiokafka, _records("aiokafka")),
            ("kafka-python", _produce_kafka_python, _records("kafka-python")),
            ("librdkafka", _produce_librdkafka, _records("librdkafka")),
            ("cli", _produce_replog_cli,
             [(k, v, []) for k, v, _ in _records("cli")]),
            ("kcat", _produce_kcat, _records("kcat", headers_on_all=True))]:
        offsets = produce(cluster, recs)
        first = len(expected)
        if offsets is not None:  # the Kafka clients' own reports: the offsets they were given
            assert offsets == list(range(first, first + len(recs))), name
        expected += [(first + i, k, v, list(h)) for i, (k, v, h) in enumerate(recs)]

    for name, consume in [("aiokafka", _consume_aiokafka),
                          ("kafka-python", _consume_kafka_python),
                          ("librdkafka", _consume_librdkafka), ("kcat", _consume_kcat),
                          ("replog consume", _consume_replog_cli)]:
        assert consume(cluster, len(expected)) == expected, name


def _bulk_kafka_python(cluster, topic: str, n: int, parts: int, start: threading.Barrier
                       ) -> dict[tuple[int, int], bytes]:
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers, acks="all",
                             enable_idempotence=False, linger_ms=5, request_timeout_ms=10000)
    try:
        start.wait(30)
        futures = []
        for r in range(0, n, 100):  # rounds, so the other client's batches come in between
            futures += [(f"kp{i}".encode(), producer.send(topic, value=f"kp{i}".encode(),
                                                          partition=i % parts))
                        for i in range(r, min(n, r + 100))]
            producer.flush(60)
        return {(md.partition, md.offset): v for v, md in
                ((v, f.get(timeout=30)) for v, f in futures)}
    finally:
        producer.close()


def _bulk_aiokafka(cluster, topic: str, n: int, parts: int, start: threading.Barrier
                   ) -> dict[tuple[int, int], bytes]:
    from aiokafka import AIOKafkaProducer

    async def go():
        p = AIOKafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers, acks="all",
                             linger_ms=5)
        await p.start()
        try:
            await asyncio.to_thread(start.wait, 30)
            out: dict[tuple[int, int], bytes] = {}
            for r in range(0, n, 100):
                values = [f"aio{i}".encode() for i in range(r, min(n, r + 100))]
                futures = [await p.send(topic, v, partition=i % parts)
                           for i, v in enumerate(values, r)]
                out.update({(md.partition, md.offset): v
                            for v, md in zip(values, await asyncio.gather(*futures))})
            return out
        finally:
            await p.stop()
    return asyncio.run(go())


def _read_all_kafka_python(cluster, topic: str, parts: int) -> dict[tuple[int, int], bytes]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers,
                             enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        tps = [TopicPartition(topic, p) for p in range(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        out: dict[tuple[int, int], bytes] = {}

        def read_some() -> bool:
            if all(consumer.position(tp) >= ends[tp] for tp in tps):
                return True
            for ms in consumer.poll(timeout_ms=1000).values():
                out.update({(m.partition, m.offset): m.value for m in ms})
            return False
        wait_until(read_some, 60, "kafka-python reading to the end offsets", interval=0)
        return out
    finally:
        consumer.close()


def _read_all_aiokafka(cluster, topic: str, parts: int) -> dict[tuple[int, int], bytes]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    async def go():
        c = AIOKafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers,
                             enable_auto_commit=False)
        await c.start()
        try:
            tps = [AioTopicPartition(topic, p) for p in range(parts)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            ends = await c.end_offsets(tps)
            out: dict[tuple[int, int], bytes] = {}

            async def read_some() -> bool:
                if all([await c.position(tp) >= ends[tp] for tp in tps]):
                    return True
                for ms in (await c.getmany(timeout_ms=1000)).values():
                    out.update({(m.partition, m.offset): m.value for m in ms})
                return False
            await async_wait_until(read_some, 60, "aiokafka reading to the end offsets",
                                   interval=0)
            return out
        finally:
            await c.stop()
    return asyncio.run(go())


def test_kafka_python_and_aiokafka_batched_records_read_by_every_client(cluster_factory):
    """kafka-python and aiokafka, at the same time, each send 3,000 records (linger 5 ms:
    many records per batch, many batches per partition) over 3 partitions in rounds of 100,
    so their batches interleave in each log; kafka-python, aiokafka and librdkafka each read every partition
    from the beginning to its end across many fetches, and see exactly the records the
    producers were acknowledged for, at the offsets they were given, with no gap."""
    cluster = cluster_factory(brokers=3)
    create(cluster, "bulk", 3, 3)
    start = threading.Barrier(2)
    with ThreadPoolExecutor(2) as pool:
        kp = pool.submit(_bulk_kafka_python, cluster, "bulk", 3000, 3, start)
        aio = pool.submit(_bulk_aiokafka, cluster, "bulk", 3000, 3, start)
        delivered = {**kp.result(timeout=120), **aio.result(timeout=120)}
    assert len(delivered) == 6000
    for name, read_all in [("kafka-python", _read_all_kafka_python),
                           ("aiokafka", _read_all_aiokafka),
                           ("librdkafka", lambda c, t, n: rd_consume_all(
                               c.kafka_bootstrap_servers, t, range(n)))]:
        got = read_all(cluster, "bulk", 3)
        assert_read_back(got, delivered, range(3))
        assert got == delivered, name


# ---------------------------------------------------------------------------- 3

def _kcat(cluster, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(["kcat", "-b", cluster.kafka_bootstrap_servers, *args], input=stdin,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, f"kcat {' '.join(args)}: {out.stderr}"
    return out.stdout


# librdkafka's text for Kafka's LEADER_NOT_AVAILABLE (5), as kcat -L -J prints it
LEADER_NOT_AVAILABLE = "Broker: Leader not available"


def _kcat_view(listing: dict) -> dict:
    """kcat -L -J reduced to what replog's AdminClient also describes."""
    return {
        "brokers": {b["id"]: b["name"] for b in listing["brokers"]},
        "controller": listing["controllerid"],
        "topics": {t["topic"]: (t.get("error"), [
            (p["partition"], p["leader"], [r["id"] for r in p["replicas"]],
             [r["id"] for r in p["isrs"]], p.get("error"))
            for p in t["partitions"]]) for t in listing["topics"]}}


def _replog_view(cluster, originating: int) -> dict:
    async def go():
        async with AdminClient(cluster.bootstrap_servers, request_timeout_ms=10000) as admin:
            live = await admin.live_brokers()
            return live, await admin.describe_topics()
    live, topics = asyncio.run(go())
    return {
        "brokers": {b: cluster.broker(b).kafka_address for b in live},
        # the answering broker stands in for replog's controller, which is not a broker
        "controller": originating,
        "topics": {name: (None, [(p.partition, p.leader, list(p.replicas), list(p.isr),
                                  LEADER_NOT_AVAILABLE if p.leader == -1 else None)
                                 for p in t.partitions])
                   for name, t in topics.items()}}


def test_kcat_metadata_matches_the_admin_client_after_a_broker_dies(cluster_factory):
    """kcat -L -J over every topic - brokers, leaders, replicas, ISRs and the partition
    errors - is what replog's own AdminClient describes, also once a broker is SIGKILLed (the
    dead broker gone from the broker list and the ISRs, its single-replica partition
    leaderless with LEADER_NOT_AVAILABLE). kcat's records produced before the kill (librdkafka's
    partitioner spreading keys over the partitions) are read back by kcat -C from the new
    leaders."""
    if shutil.which("kcat") is None:
        pytest.skip("kcat is missing: `make setup` installs Debian's kcat (as root)")
    cluster = cluster_factory(brokers=3, overrides=FAST)
    create(cluster, "a", 3, 3)
    create(cluster, "b", 2, 2)
    create(cluster, "c", 1, 1, assignment={0: [3]})
    lines = [f"k{i}|v{i}" for i in range(60)]
    _kcat(cluster, "-P", "-t", "a", "-K", "|", "-X", "acks=all", stdin="\n".join(lines) + "\n")

    def agree() -> tuple[dict, dict] | None:
        listing = json.loads(_kcat(cluster, "-L", "-J"))
        ours = _replog_view(cluster, listing["originating_broker"]["id"])
        theirs = _kcat_view(listing)
        return (theirs, ours) if theirs == ours else None

    theirs, _ = wait_until(agree, timeout=30, what="kcat's metadata to match replog's",
                              interval=0.5)
    assert sorted(theirs["topics"]) == ["a", "b", "c"]
    assert len(theirs["brokers"]) == 3

    cluster.broker(3).kill()

    def moved() -> dict | None:
        view = _replog_view(cluster, 0)
        return view if set(view["brokers"]) == {1, 2} and all(
            3 not in isr and leader in (1, 2) for name, (_, parts) in view["topics"].items()
            if name != "c" for _, leader, _, isr, _ in parts) else None
    wait_until(moved, timeout=60, what="broker 3 out of the brokers, leaders and ISRs")
    theirs, _ = wait_until(agree, timeout=30, what="kcat's metadata to match replog's after "
                           "the kill", interval=0.5)
    # The last replica standing stays in the ISR of its leaderless partition (Kafka's
    # offline election leaves the ISR as it was when no replica can lead).
    assert theirs["topics"]["c"] == (None, [(0, -1, [3], [3], LEADER_NOT_AVAILABLE)]), theirs["topics"]["c"]

    out = _kcat(cluster, "-C", "-t", "a", "-o", "beginning", "-e", "-f", "%p|%o|%k|%s\n")
    got = [line.split("|") for line in out.splitlines()]
    assert sorted(f"{k}|{v}" for _, _, k, v in got) == sorted(lines)
    assert len({p for p, _, _, _ in got}) > 1, "librdkafka's partitioner used one partition"
    for p in {p for p, _, _, _ in got}:
        offsets = sorted(int(o) for q, o, _, _ in got if q == p)
        assert offsets == list(range(len(offsets))), f"partition {p}: {offsets}"


# ---------------------------------------------------------------------------- 4

def _zk_until(c, topic: str, pred, what: str, timeout: float = 60):
    """Partition 0's state in ZooKeeper once ``pred`` holds for it."""
    def check():
        s = _state(c, topic)
        return s if pred(s) else None
    return wait_until(check, timeout=timeout, what=f"{topic}-0: {what}")


class RdProducer:
    """A librdkafka producer (acks=all, no idempotence) keeping every delivery report:
    ``delivered`` {(partition, offset): value} and ``failed`` [(error code, value)]."""

    def __init__(self, cluster, topic: str, **config):
        self.topic = topic
        self.delivered: dict[tuple[int, int], bytes] = {}
        self.failed: list[tuple[int, bytes]] = []
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all",
            "enable.idempotence": False, "linger.ms": 5, **config})

    def _report(self, err, msg) -> None:
        if err is None:
            self.delivered[(msg.partition(), msg.offset())] = msg.value()
        else:
            self.failed.append((err.code(), msg.value()))

    def send(self, tag: str, n: int, partition: int = 0) -> list[bytes]:
        values = [f"{tag}-{i}".encode() for i in range(n)]
        for v in values:
            self.producer.produce(self.topic, value=v, partition=partition,
                                  on_delivery=self._report)
        self.producer.poll(0)
        return values

    def flush(self, timeout: float = 60) -> None:
        assert self.producer.flush(timeout) == 0, f"records still queued after {timeout} s"

    def metadata(self, partition: int = 0):
        """This client's own Metadata request for the topic: the partition's entry."""
        return self.producer.list_topics(self.topic, timeout=10).topics[self.topic] \
            .partitions[partition]


def test_librdkafka_through_a_kip966_leaderless_partition(cluster_factory):
    """KIP-966 through the Kafka protocol (Kafka's eligible_leader_replicas_test with a
    librdkafka producer): RF 3 on brokers 1-3 of 4, min.insync.replicas 2, ELR on. The
    followers stop cleanly one by one (at ISR {1} acks=all answers NOT_ENOUGH_REPLICAS), then
    the leader is SIGKILLed: the partition is leaderless with ELR {1, 3}. The client's
    Metadata (from broker 4) shows leader -1 and LEADER_NOT_AVAILABLE, and a send with a short
    message.timeout.ms fails. Records sent meanwhile with a long timeout wait; once ELR member
    3 comes back it leads (the controller's clean ELR election) and, with broker 2 back in the
    ISR, they are delivered. Every record ever delivered is read back at its reported
    offset."""
    # Broker 4 holds no replica: it stays up to answer the clients' Metadata while every
    # replica of the partition is down.
    c = cluster_factory(brokers=4, overrides=ELR_ON)
    create(c, "e", 1, 3, MIN_ISR_2, assignment={0: [1, 2, 3]})
    _zk_until(c, "e", lambda s: s.leader == 1 and len(s.isr) == 3, "led by 1, full ISR")
    main = RdProducer(c, "e", **{"message.timeout.ms": 120_000})
    strict = RdProducer(c, "e", **{"message.send.max.retries": 0, "message.timeout.ms": 10_000})
    main.send("full-isr", 100)
    main.flush()

    c.broker(2).stop()
    _zk_until(c, "e", lambda s: set(s.isr) == {1, 3} and not s.elr, "ISR {1,3}, no ELR")
    main.send("min-isr", 100)
    main.flush()

    c.broker(3).stop()
    _zk_until(c, "e", lambda s: s.isr == (1,) and s.elr == (3,), "ISR {1}, ELR {3}")
    # Below min ISR an acks=all produce is refused before the append (Kafka's
    # Partition.appendRecordsToLeader): the retriable NOT_ENOUGH_REPLICAS.
    strict.send("below-min-isr", 1)
    strict.flush()
    assert strict.failed == [(confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS,
                              b"below-min-isr-0")]

    c.broker(1).kill()
    _zk_until(c, "e", lambda s: s.leader == -1 and not s.isr and s.elr == (1, 3),
                 "leaderless, ELR {1,3}")
    md = wait_until(lambda: (m := strict.metadata()).leader == -1 and m,
                          timeout=30, what="librdkafka's metadata to show no leader")
    assert md.error is not None and \
        md.error.code() == confluent_kafka.KafkaError.LEADER_NOT_AVAILABLE, md.error
    short = RdProducer(c, "e", **{"message.timeout.ms": 2000})
    short.send("leaderless", 1)
    short.flush()
    assert short.failed == [(confluent_kafka.KafkaError._MSG_TIMED_OUT, b"leaderless-0")]
    waiting = main.send("while-leaderless", 50)

    # The clean ELR member comes back and leads; acks=all needs a second ISR member (min ISR
    # 2), so broker 2 (stopped cleanly, out of the ISR and ELR) comes back too.
    c.broker(3).start()
    s = _zk_until(c, "e", lambda s: s.leader == 3, "led by ELR member 3")
    assert s.leader_recovery_state == zl.LEADER_RECOVERED and 1 in s.elr, s
    c.broker(2).start()
    main.flush(120)
    assert not main.failed, main.failed[:5]
    assert set(waiting) <= set(main.delivered.values())
    wait_until(lambda: strict.metadata().leader == 3, timeout=30,
               what="the client's metadata to name leader 3")
    main.send("resumed", 100)
    main.flush()
    assert not main.failed, main.failed[:5]
    read = rd_consume_all(c.kafka_bootstrap_servers, "e", [0])
    assert_read_back(read, main.delivered, [0])
    assert len(main.delivered) == 350


def _logged(node, event: str) -> list[dict]:
    try:
        with open(node.event_log_file, encoding="utf-8") as f:
            return [e for e in map(json.loads, f) if e.get("event") == event]
    except FileNotFoundError:
        return []


def test_librdkafka_gets_kafka_storage_error_and_moves_to_the_new_leader(cluster_factory,
                                                                        tmp_path):
    """JBOD (KIP-112) through the Kafka protocol: broker 2 has two log dirs and leads
    partitions 0 and 1 of an RF-3 topic, one in each. The dir holding partition 0 fails - a
    real ext4 error (the loop-mounted dir remounts read-only) where the machine allows loop
    mounts, else EIO through the broker's file-operation seam, as tests/cluster/test_jbod.py
    does. A librdkafka producer without retries gets KAFKA_STORAGE_ERROR for partition 0, and
    once the controller moves the leadership its later sends go to the new leader and
    succeed; partition 1 stays led by broker 2 from its healthy dir. Every delivered record is
    read back at its reported offset, also by a consumer that was fetching throughout."""
    victim = 2
    real = disk.unavailable() is None
    rules = tmp_path / "faults.json"
    rules.write_text("[]")
    c = cluster_factory(brokers=3, log_dirs_per_broker=2, overrides=FAST, start=False,
                        per_broker_overrides=None if real else {
                            victim: {"fault.injection.file": str(rules)}})
    mounts = [disk.LoopMountedLogDir(d, tmp_path / f"broker{victim}-{d.name}.img")
              for d in c.broker(victim).log_dirs] if real else []
    try:
        for m in mounts:
            m.create_and_mount()
        c.start()
        _storage_error_scenario(c, victim, mounts, rules)
    finally:
        c.stop(graceful=False)
        for m in mounts:
            m.unmount()


def _storage_error_scenario(c, victim: int, mounts, rules) -> None:
    create(c, "j", 2, 3, MIN_ISR_2, assignment={0: [victim, 1, 3], 1: [victim, 3, 1]})
    dirs = {p: [d for d in c.broker(victim).log_dirs if (d / f"j-{p}").is_dir()]
            for p in (0, 1)}
    assert len(dirs[0]) == len(dirs[1]) == 1 and dirs[0] != dirs[1], \
        f"partitions 0 and 1 should sit in different dirs of broker {victim}: {dirs}"
    failed_dir = dirs[0][0]
    main = RdProducer(c, "j", **{"message.timeout.ms": 120_000})
    strict = RdProducer(c, "j", **{"message.send.max.retries": 0, "message.timeout.ms": 10_000})
    for p in (0, 1):
        main.send(f"before-p{p}", 200, partition=p)
    main.flush()
    strict.send("warm", 1)
    strict.flush()
    assert not main.failed and not strict.failed, (main.failed, strict.failed)
    assert strict.metadata().leader == victim
    tail = TailingConsumer(c.kafka_bootstrap_servers, "j", [0, 1])
    tail.start()

    if mounts:
        next(m for m in mounts if m.log_dir == failed_dir).trigger_error()
    else:
        rules.write_text(json.dumps([{"path": str(failed_dir), "errno": "EIO"}]))
        wait_until(lambda: any(e.get("rules") for e in
                               _logged(c.broker(victim), "fault_injection_rules")),
                   timeout=30, what="broker 2 applies the fault rule")

    # One record at a time, no retries: each delivery report is the broker's answer (or, once
    # the client sees no leader, its own timeout), until one lands on the new leader.
    errors: list[int] = []
    sends = itertools.count()

    def one_send_succeeds() -> bool:
        before = len(strict.delivered)
        strict.send(f"after-{next(sends)}", 1)
        strict.flush()
        if len(strict.delivered) > before:
            return True
        errors.append(strict.failed[-1][0])
        return False
    wait_until(one_send_succeeds, 60, "a send on the new leader", interval=0.1)
    assert errors and errors[0] == confluent_kafka.KafkaError.KAFKA_STORAGE_ERROR, errors
    assert set(errors) <= {confluent_kafka.KafkaError.KAFKA_STORAGE_ERROR,
                           confluent_kafka.KafkaError.NOT_LEADER_FOR_PARTITION,
                           confluent_kafka.KafkaError.LEADER_NOT_AVAILABLE,
                           confluent_kafka.KafkaError._MSG_TIMED_OUT}, errors
    wait_until(lambda: strict.metadata().leader in (1, 3), timeout=30,
               what="the client's metadata to name the new leader")
    assert _logged(c.broker(victim), "log_dir_offline")

    for p in (0, 1):
        main.send(f"after-p{p}", 200, partition=p)
    main.flush()
    assert not main.failed, main.failed[:5]
    assert strict.metadata(1).leader == victim, "broker 2 still leads from its healthy dir"
    read = rd_consume_all(c.kafka_bootstrap_servers, "j", [0, 1])
    assert_read_back(read, {**main.delivered, **strict.delivered}, [0, 1])
    # A consumer fetching partition 0 from broker 2 when its dir failed moved on too.
    tail.finish({p: max(o for q, o in read if q == p) + 1 for p in (0, 1)})
    assert_read_back(read, tail.read, [0, 1])
    assert len(tail.read) == len(read)


def test_kafka_python_and_aiokafka_follow_a_leader_move(cluster_factory):
    """kafka-python and aiokafka keep sending acks=all records to partition 0 while its leader
    shuts down cleanly (the controlled shutdown moves the leadership, and the clients find
    the new leader through their Metadata and retry) and comes back; every acknowledged record
    is read back at its offset."""
    from aiokafka import AIOKafkaProducer

    cluster = cluster_factory(brokers=3, overrides=FAST)
    create(cluster, "mv", 1, 3, MIN_ISR_2)
    leader = describe(cluster, "mv").partition(0).leader
    acked: dict[tuple[int, int], bytes] = {}
    stop = threading.Event()

    def kafka_python() -> None:
        producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers,
                                 acks="all", enable_idempotence=False, retries=1000,
                                 retry_backoff_ms=100, request_timeout_ms=10000)
        try:
            i = 0
            while not stop.is_set():
                v = f"kp{i}".encode()
                md = producer.send("mv", value=v, partition=0).get(timeout=60)
                acked[(md.partition, md.offset)] = v
                i += 1
        finally:
            producer.close()

    async def aiokafka() -> None:
        p = AIOKafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers, acks="all",
                             retry_backoff_ms=100, request_timeout_ms=10000)
        await p.start()
        try:
            i = 0
            while not stop.is_set():
                v = f"aio{i}".encode()
                md = await p.send_and_wait("mv", v, partition=0)
                acked[(md.partition, md.offset)] = v
                i += 1
        finally:
            await p.stop()

    def more_acks(what: str) -> None:
        n = len(acked)
        wait_until(lambda: len(acked) >= n + 200 or any(r.done() for r in runs), timeout=60,
                   what=what)
        for r in runs:
            if r.done():
                r.result()  # a producer that gave up: its error
                raise AssertionError(f"a producer stopped before {what}")

    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(kafka_python), pool.submit(asyncio.run, aiokafka())]
        try:
            more_acks("records acked before the move")
            cluster.broker(leader).stop()
            wait_until(lambda: describe(cluster, "mv").partition(0).leader not in (leader, -1),
                       timeout=60, what="a new leader")
            more_acks("acks from the new leader")
            cluster.broker(leader).start()
            more_acks("acks after the restart")
        finally:
            stop.set()
        for r in runs:
            r.result(timeout=120)
    assert {v[:2] for v in acked.values()} == {b"kp", b"ai"}
    read = rd_consume_all(cluster.kafka_bootstrap_servers, "mv", [0])
    assert_read_back(read, acked, [0])
