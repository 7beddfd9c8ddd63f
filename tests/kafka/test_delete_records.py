"""DeleteRecords (issue 41 item 8, KIP-107): ``replog delete-records --offset-json-file`` (gRPC)
and librdkafka's AdminClient.delete_records (the Kafka listener's API 21) move a partition's
log start through its leader, the followers follow, and consumers - librdkafka, kafka-python
and ``replog consume`` - then start there."""
from __future__ import annotations

import json

import pytest

from tests.kafka.test_clients import create_topic, replog
from tests.polling import wait_until

pytestmark = pytest.mark.integration
TOPIC = "d"


def produce(kb: str, topic: str, partitions: int, n: int) -> None:
    import confluent_kafka
    p = confluent_kafka.Producer({"bootstrap.servers": kb, "acks": "all"})
    for part in range(partitions):
        for i in range(n):
            p.produce(topic, value=f"p{part}-{i}".encode(), partition=part)
    assert p.flush(30) == 0


def librdkafka_first(kb: str, topic: str, partition: int) -> int:
    import confluent_kafka
    c = confluent_kafka.Consumer({"bootstrap.servers": kb, "group.id": "unused",
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(topic, partition,
                                             confluent_kafka.OFFSET_BEGINNING)])
    try:
        m = c.poll(30)
        assert m is not None and m.error() is None, m and m.error()
        return m.offset()
    finally:
        c.close()


def test_delete_records_moves_the_log_start_and_consumers_start_there(cluster_factory,
                                                                      tmp_path):
    import confluent_kafka
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from kafka import KafkaConsumer, TopicPartition

    cluster = cluster_factory(brokers=3)
    kb = cluster.kafka_bootstrap_servers
    create_topic(cluster, TOPIC, partitions=4, rf=3)
    produce(kb, TOPIC, 4, 10)

    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [
        {"topic": TOPIC, "partition": 0, "offset": 4},
        {"topic": TOPIC, "partition": 1, "offset": -1},
        {"topic": TOPIC, "partition": 2, "offset": 100}], "version": 1}))
    done = replog("delete-records", "--bootstrap-server", cluster.bootstrap_servers,
                  "--offset-json-file", str(offsets))
    assert done.returncode == 0, done.stderr
    # low watermarks: every replica followed (the leader waited for them)
    assert done.stdout.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: d-0\tlow_watermark: 4",
        "partition: d-1\tlow_watermark: 10",
        ("partition: d-2\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: "
         "The requested offset is not within the range of offsets maintained by the server.")]

    # through the Kafka listener: librdkafka's admin client
    admin = ConfluentAdmin({"bootstrap.servers": kb})
    [f] = admin.delete_records([confluent_kafka.TopicPartition(TOPIC, 3, 7)],
                               request_timeout=30).values()
    assert f.result(timeout=30).low_watermark == 7

    # consumers start at the new log start
    assert librdkafka_first(kb, TOPIC, 0) == 4
    assert librdkafka_first(kb, TOPIC, 3) == 7
    kc = KafkaConsumer(bootstrap_servers=kb, enable_auto_commit=False)
    tps = [TopicPartition(TOPIC, p) for p in range(4)]
    assert kc.beginning_offsets(tps) == dict(zip(tps, [4, 10, 0, 7]))
    kc.close()
    consumed = replog("consume", "--bootstrap-server", cluster.bootstrap_servers, "--topic",
                      TOPIC, "--partition", "0", "--from-beginning", "--max-messages", "6",
                      "--timeout-ms", "20000")
    assert consumed.stdout.split() == [f"p0-{i}" for i in range(4, 10)], consumed.stderr

    # a compacted-only topic refuses (its records are not deleted by offset)
    create_topic(cluster, "compact-only", partitions=1, rf=1)
    from tests.kafka.test_config_apis import AlterConfigOpType, ConfigResource, alter, op
    alter(admin, ConfigResource("TOPIC", "compact-only", incremental_configs=[
        op("cleanup.policy", AlterConfigOpType.SET, "compact")]))

    def policy_error():
        [f] = admin.delete_records([confluent_kafka.TopicPartition("compact-only", 0, 0)],
                                   request_timeout=30).values()
        try:
            f.result(timeout=30)
            return None
        except confluent_kafka.KafkaException as e:
            return e.args[0].code()
    wait_until(lambda: policy_error() == confluent_kafka.KafkaError.POLICY_VIOLATION,
               timeout=30, what="the leader applies cleanup.policy=compact")


def test_bad_offset_files_are_one_line(cluster_factory, tmp_path):
    cluster = cluster_factory(brokers=1)
    cases = {
        "not json": "The input string is not a valid JSON",
        json.dumps({"partitions": [], "version": 2}): "Not supported version field value 2",
        json.dumps({"version": 1}): "Missing partitions field",
        json.dumps({"partitions": [{"topic": "t", "partition": 0, "offset": 1},
                                   {"topic": "t", "partition": 0, "offset": 2}]}):
            "Offset json file contains duplicate topic partitions: t-0",
    }
    for text, message in cases.items():
        f = tmp_path / "o.json"
        f.write_text(text)
        done = replog("delete-records", "--bootstrap-server", cluster.bootstrap_servers,
                      "--offset-json-file", str(f))
        assert done.returncode == 1 and done.stderr.strip().endswith(message), done.stderr
        assert "Traceback" not in done.stderr and "Executing" not in done.stdout
