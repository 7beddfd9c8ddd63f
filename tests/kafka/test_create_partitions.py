"""CreatePartitions (Kafka API 37) on the Kafka listener: confluent-kafka's (librdkafka 2.16)
and kafka-python's admin clients grow a topic of a real cluster through it, librdkafka then
produces to and consumes from the new partitions, and every refusal comes back with Kafka's
code and message. The codec is checked against kafka-python's own encoders at every version."""
from __future__ import annotations

import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import NewPartitions
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from common.errors import ErrorCode
from common.kafka_protocol.api import APIS, ApiKey
from tests.kafka.test_clients import TOPIC, create_topic, describe
from tests.kafka.test_codec import _in_version, _plain, sample
from tests.kafka.test_wire import call, connect

CREATE_PARTITIONS = ApiKey.CREATE_PARTITIONS
API = APIS[CREATE_PARTITIONS]


@pytest.mark.parametrize("version", range(API.served.lo, API.served.hi + 1))
@pytest.mark.parametrize("kind", ["request", "response"])
def test_same_bytes_as_kafka_python(version, kind):
    m = getattr(API, kind)
    value = sample(m.body, version, version in m.flexible)
    data = m.encode(value, version)
    theirs = CreatePartitionsResponse if kind == "response" else CreatePartitionsRequest
    decoded = theirs.decode(data, version=version)
    assert _plain(decoded.to_dict(json=False)) == _in_version(value, m.body, version)
    assert bytes(decoded.encode()) == data
    assert m.decode(data, version).to_dict() == value


def test_a_null_assignment_list_is_not_an_empty_one():
    m = API.request
    for version in (0, 2):
        for assignments in (None, []):
            body = {"topics": [{"name": "t", "count": 3, "assignments": assignments}],
                    "timeout_ms": 0, "validate_only": False}
            assert m.decode(m.encode(body, version), version).to_dict()["topics"][0]["assignments"] \
                == assignments


def _refused(admin: KafkaAdmin, np: NewPartitions, **kw) -> confluent_kafka.KafkaError:
    with pytest.raises(confluent_kafka.KafkaException) as e:
        admin.create_partitions([np], request_timeout=30, **kw)[np.topic].result(timeout=60)
    return e.value.args[0]


@pytest.mark.integration
def test_confluent_kafka_grows_a_topic_and_librdkafka_uses_its_new_partitions(cluster_factory):
    cluster = cluster_factory(brokers=3)
    create_topic(cluster, partitions=2, rf=3)
    kb = cluster.kafka_bootstrap_servers
    admin = KafkaAdmin({"bootstrap.servers": kb})

    fs = admin.create_partitions([NewPartitions(TOPIC, 5)], operation_timeout=30,
                                 request_timeout=60)
    assert fs[TOPIC].result(timeout=90) is None
    t = describe(cluster)
    assert [p.partition for p in t.partitions] == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 3 and p.leader in p.replicas for p in t.partitions)

    e = _refused(admin, NewPartitions(TOPIC, 3))
    assert e.code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    assert "Topic currently has 5 partitions, which is higher than the requested 3." in e.str()
    e = _refused(admin, NewPartitions(TOPIC, 5))
    assert e.code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    assert "Topic already has 5 partitions." in e.str()
    e = _refused(admin, NewPartitions(TOPIC, 6, replica_assignment=[[1, 2, 9]]))
    assert e.code() == confluent_kafka.KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "Unknown broker(s) in replica assignment: 9." in e.str()
    e = _refused(admin, NewPartitions(TOPIC, 6, replica_assignment=[[1, 2]]))
    assert e.code() == confluent_kafka.KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "partition 0 has 3 while partitions [5] have replication factors [2]" in e.str()
    e = _refused(admin, NewPartitions("nosuch", 2))
    assert e.code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART
    # validate_only checks everything and adds nothing
    fs = admin.create_partitions([NewPartitions(TOPIC, 6, replica_assignment=[[3, 1, 2]])],
                                 validate_only=True, request_timeout=30)
    assert fs[TOPIC].result(timeout=60) is None
    assert len(describe(cluster).partitions) == 5

    fs = admin.create_partitions([NewPartitions(TOPIC, 6, replica_assignment=[[3, 1, 2]])],
                                 operation_timeout=30, request_timeout=60)
    assert fs[TOPIC].result(timeout=90) is None
    assert list(describe(cluster).partitions[5].replicas) == [3, 1, 2]

    # A new librdkafka client sees 6 partitions and round-trips records on the new ones.
    producer = confluent_kafka.Producer({"bootstrap.servers": kb, "acks": "all",
                                         "enable.idempotence": False})
    delivered: dict[tuple[int, int], bytes] = {}

    def on_delivery(err, msg):
        assert err is None, err
        delivered[(msg.partition(), msg.offset())] = msg.value()
    for p in range(2, 6):
        for i in range(5):
            producer.produce(TOPIC, value=b"p%d-%d" % (p, i), partition=p,
                             on_delivery=on_delivery)
    assert producer.flush(60) == 0
    assert sorted(delivered) == [(p, o) for p in range(2, 6) for o in range(5)]
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kb, "group.id": "unused",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(2, 6)])
    got: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 60
    while len(got) < len(delivered) and time.monotonic() < deadline:
        for m in consumer.consume(100, 1.0):
            assert m.error() is None, m.error()
            got[(m.partition(), m.offset())] = m.value()
    consumer.close()
    assert got == delivered


@pytest.mark.integration
def test_kafka_python_admin_and_the_raw_answers(cluster_factory):
    """kafka-python asks for CreatePartitions v3 (flexible); a topic listed twice gets one
    INVALID_REQUEST result, as Kafka's map-shaped answer has; with no controller running every
    topic gets NOT_CONTROLLER, so clients find the controller again."""
    cluster = cluster_factory(brokers=3)
    create_topic(cluster, partitions=1, rf=2)
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers,
                             request_timeout_ms=30000)
    try:
        admin.create_partitions({TOPIC: 3})
        assert len(describe(cluster).partitions) == 3
        r = admin.create_partitions({TOPIC: 2}, raise_errors=False)
        (result,) = r.results
    finally:
        admin.close()
    assert result.error_code == ErrorCode.INVALID_PARTITIONS
    assert result.error_message == \
        "Topic currently has 3 partitions, which is higher than the requested 2."

    body = {"topics": [{"name": TOPIC, "count": 4, "assignments": None}] * 2,
            "timeout_ms": 10000, "validate_only": False}
    with connect(cluster) as s:
        for version in (0, 3):
            got = call(s, CREATE_PARTITIONS, version, body, 10 + version)
            assert got["results"] == [{"name": TOPIC, "error_code": ErrorCode.INVALID_REQUEST,
                                       "error_message": "Duplicate topic in request."}]
    assert len(describe(cluster).partitions) == 3

    for h in cluster.controllers.values():
        h.kill()
    body["topics"] = body["topics"][:1]
    with connect(cluster) as s:
        got = call(s, CREATE_PARTITIONS, 2, body, 20)
    assert got["results"] == [{"name": TOPIC, "error_code": ErrorCode.NOT_CONTROLLER,
                               "error_message": None}]

