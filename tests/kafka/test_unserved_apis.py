"""The Kafka APIs for features replog does not have (transactions, SASL), and those of the group
coordinator that used to be answered as by a broker without one: their messages against
kafka-python's encoders, Kafka's error answers on the wire at every served version of the
unserved ones, and what real clients then do: assign-mode consumers with a group.id read and
commit (the group coordinator is served now: tests/kafka/test_groups.py), idempotent producers
fail clearly (InitProducerId is not listed) while non-idempotent ones keep working."""
from __future__ import annotations

import asyncio
import time

import confluent_kafka as ck
import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import IncompatibleBrokerVersion
from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from broker.kafka_unserved import (
    COORDINATOR_NOT_AVAILABLE,
    ILLEGAL_SASL_STATE,
    INVALID_GROUP_ID,
    INVALID_REQUEST,
    NOT_COORDINATOR,
)
from common.kafka_protocol.api import APIS
from common.kafka_protocol.api import ApiKey as K
from tests.kafka import test_wire
from tests.kafka.test_clients import TOPIC, kafka_python_producer
from tests.kafka.test_codec import _in_version, _plain, sample
from tests.kafka.test_wire import api_versions, call, connect

# the APIs of features replog does not have (broker/kafka_unserved.py)
UNSERVED = [APIS[k] for k in (8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 24, 25, 26, 28, 36, 42, 47)]

# answered by broker/kafka_unserved.py on a broker with a group coordinator too
STILL_UNSERVED = [APIS[k] for k in (24, 25, 26, 28, 17, 36)]

module_cluster = test_wire.module_cluster  # the one-broker cluster fixture, shared

INIT_PRODUCER_ID = 22

KAFKA_PYTHON = {
    K.FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    K.JOIN_GROUP: (JoinGroupRequest, JoinGroupResponse),
    K.HEARTBEAT: (HeartbeatRequest, HeartbeatResponse),
    K.LEAVE_GROUP: (LeaveGroupRequest, LeaveGroupResponse),
    K.SYNC_GROUP: (SyncGroupRequest, SyncGroupResponse),
    K.DESCRIBE_GROUPS: (DescribeGroupsRequest, DescribeGroupsResponse),
    K.LIST_GROUPS: (ListGroupsRequest, ListGroupsResponse),
    K.DELETE_GROUPS: (DeleteGroupsRequest, DeleteGroupsResponse),
    K.OFFSET_COMMIT: (OffsetCommitRequest, OffsetCommitResponse),
    K.OFFSET_FETCH: (OffsetFetchRequest, OffsetFetchResponse),
    K.OFFSET_DELETE: (OffsetDeleteRequest, OffsetDeleteResponse),
    K.ADD_PARTITIONS_TO_TXN: (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    K.ADD_OFFSETS_TO_TXN: (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    K.END_TXN: (EndTxnRequest, EndTxnResponse),
    K.TXN_OFFSET_COMMIT: (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    K.SASL_HANDSHAKE: (SaslHandshakeRequest, SaslHandshakeResponse),
    K.SASL_AUTHENTICATE: (SaslAuthenticateRequest, SaslAuthenticateResponse),
}


def _versions():
    """Every served version kafka-python also has (its JSON files drop some old ones, KIP-896)."""
    for api in UNSERVED:
        theirs = KAFKA_PYTHON[api.key][0]
        lo, hi = max(api.served.lo, theirs.min_version), min(api.served.hi, theirs.max_version)
        for version in range(lo, hi + 1):
            for kind in ("request", "response"):
                yield pytest.param(api.key, version, kind, id=f"{api.name}{kind.title()}-v{version}")


# ---------------------------------------------------------------------------- codec

def test_every_unserved_api_is_listed_and_init_producer_id_is_not():
    assert {a.key for a in UNSERVED} == set(KAFKA_PYTHON)
    assert all(APIS[a.key] is a for a in UNSERVED)
    assert INIT_PRODUCER_ID not in APIS


# Round trips and truncations at every served version: tests/kafka/test_codec.py, over all APIS.
@pytest.mark.parametrize(("api_key", "version", "kind"), list(_versions()))
def test_same_bytes_as_kafka_python(api_key, version, kind):
    """kafka-python (its classes generated from Kafka's JSON files) reads what replog writes
    to the same values, and writes it back byte for byte."""
    m = getattr(APIS[api_key], kind)
    value = sample(m.body, version, version in m.flexible)
    data = m.encode(value, version)
    decoded = KAFKA_PYTHON[api_key][kind == "response"].decode(data, version=version)
    assert _plain(decoded.to_dict(json=False)) == _in_version(value, m.body, version)
    assert bytes(decoded.encode()) == data


# ---------------------------------------------------------------------------- on the wire

def _request(api_key: int, version: int, key: str = "g") -> dict:
    """A valid request of every field, with ``key`` as its group / transactional id."""
    m = APIS[api_key].request
    req = sample(m.body, version, version in m.flexible)
    for name in ("group_id", "transactional_id", "v3_and_below_transactional_id"):
        if name in req:
            req[name] = key
    if api_key == K.FIND_COORDINATOR:
        req.update(key_type=0, key=key, coordinator_keys=[key, key + "2"])
    for g in req.get("groups") or []:
        if isinstance(g, dict) and "group_id" in g:
            g["group_id"] = key
    for t in req.get("transactions") or []:
        t["transactional_id"] = key
    if api_key in (K.DESCRIBE_GROUPS, K.DELETE_GROUPS):
        req["groups" if api_key == K.DESCRIBE_GROUPS else "groups_names"] = [key, key]
    return req


def _errors(api_key: int, resp: dict, version: int) -> set[int]:
    """Every error code of an answer."""
    if api_key == K.FIND_COORDINATOR:
        return {c["error_code"] for c in resp["coordinators"]} if version >= 4 \
            else {resp["error_code"]}
    if api_key in (K.OFFSET_COMMIT, K.TXN_OFFSET_COMMIT):
        return {p["error_code"] for t in resp["topics"] for p in t["partitions"]}
    if api_key == K.OFFSET_FETCH:
        if version >= 8:
            return {g["error_code"] for g in resp["groups"]}
        if version >= 2:
            return {resp["error_code"]}
        return {p["error_code"] for t in resp["topics"] for p in t["partitions"]}
    if api_key == K.DESCRIBE_GROUPS:
        return {g["error_code"] for g in resp["groups"]}
    if api_key == K.DELETE_GROUPS:
        return {r["error_code"] for r in resp["results"]}
    if api_key == K.ADD_PARTITIONS_TO_TXN:
        results = resp["results_by_topic_v3_and_below"] if version < 4 else [
            t for r in resp["results_by_transaction"] for t in r["topic_results"]]
        return {p["partition_error_code"] for t in results for p in t["results_by_partition"]}
    return {resp["error_code"]}


# What a Kafka broker whose coordinators are unavailable answers (broker/kafka_unserved.py).
EXPECTED = {
    K.FIND_COORDINATOR: COORDINATOR_NOT_AVAILABLE,
    **{k: NOT_COORDINATOR for k in (
        K.JOIN_GROUP, K.HEARTBEAT, K.LEAVE_GROUP, K.SYNC_GROUP, K.DESCRIBE_GROUPS,
        K.DELETE_GROUPS, K.OFFSET_COMMIT, K.OFFSET_FETCH, K.OFFSET_DELETE,
        K.ADD_PARTITIONS_TO_TXN, K.ADD_OFFSETS_TO_TXN, K.END_TXN, K.TXN_OFFSET_COMMIT)},
    K.LIST_GROUPS: 0,
    K.SASL_HANDSHAKE: ILLEGAL_SASL_STATE,
    K.SASL_AUTHENTICATE: ILLEGAL_SASL_STATE,
}
# An empty id: GroupCoordinator.isValidGroupId allows it only for the offset and
# describe/delete APIs; TransactionCoordinator refuses an empty transactional id.
EMPTY_ID = {K.JOIN_GROUP: INVALID_GROUP_ID, K.HEARTBEAT: INVALID_GROUP_ID,
            K.SYNC_GROUP: INVALID_GROUP_ID, K.LEAVE_GROUP: INVALID_GROUP_ID,
            K.OFFSET_DELETE: INVALID_GROUP_ID, K.TXN_OFFSET_COMMIT: INVALID_GROUP_ID,
            K.OFFSET_COMMIT: NOT_COORDINATOR, K.OFFSET_FETCH: NOT_COORDINATOR,
            K.DESCRIBE_GROUPS: NOT_COORDINATOR, K.DELETE_GROUPS: NOT_COORDINATOR,
            K.ADD_PARTITIONS_TO_TXN: INVALID_REQUEST, K.ADD_OFFSETS_TO_TXN: INVALID_REQUEST,
            K.END_TXN: INVALID_REQUEST}


def test_every_version_gets_kafkas_error_and_the_connection_stays_open(module_cluster):
    got, want = {}, {}
    with connect(module_cluster) as s:
        n = 100
        for api in STILL_UNSERVED:
            for version in range(api.served.lo, api.served.hi + 1):
                cases = [("g", EXPECTED[api.key])]
                if api.key in EMPTY_ID:
                    cases.append(("", EMPTY_ID[api.key]))
                for key, code in cases:
                    n += 1
                    resp = call(s, api.key, version, _request(api.key, version, key), n)
                    got[api.name, version, key] = _errors(api.key, resp, version)
                    want[api.name, version, key] = {code}
        assert api_versions(s)["error_code"] == 0  # still the same connection
    assert got == want


def test_find_coordinator_for_transactions_answers_no_node(module_cluster):
    with connect(module_cluster) as s:
        old = call(s, K.FIND_COORDINATOR, 3, {"key": "g", "key_type": 1}, 1)
        batched = call(s, K.FIND_COORDINATOR, 4,
                       {"key_type": 1, "coordinator_keys": ["a", "b", "c"]}, 2)
        share = call(s, K.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": ["x"]}, 3)
    # Kafka's Node.noNode() and Errors.COORDINATOR_NOT_AVAILABLE.message()
    assert (old["node_id"], old["host"], old["port"], old["error_message"]) == \
        (-1, "", -1, "The coordinator is not available.")
    assert [(c["key"], c["error_code"], c["node_id"]) for c in batched["coordinators"]] == \
        [(k, COORDINATOR_NOT_AVAILABLE, -1) for k in "abc"]
    assert share["coordinators"][0]["error_code"] == INVALID_REQUEST  # no share coordinator


def test_api_versions_lists_the_group_apis_but_not_init_producer_id(module_cluster):
    with connect(module_cluster) as s:
        keys = {a["api_key"]: (a["min_version"], a["max_version"])
                for a in api_versions(s)["api_keys"]}
    assert INIT_PRODUCER_ID not in keys
    assert keys[K.FIND_COORDINATOR] == (0, 6) and keys[K.OFFSET_COMMIT] == (0, 9)


# ---------------------------------------------------------------------------- real clients

def _produce(cluster, tag: str, n: int = 5) -> list[bytes]:
    producer = kafka_python_producer(cluster)
    values = [f"{tag}-{i}".encode() for i in range(n)]
    for v in values:
        producer.send(TOPIC, value=v)
    producer.flush()
    producer.close()
    return values


def _read_librdkafka(consumer: ck.Consumer, wanted: list[bytes], deadline_s: float = 30):
    seen: list[bytes] = []
    end = time.monotonic() + deadline_s
    while not set(wanted) <= set(seen) and time.monotonic() < end:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m.value())
    return [v for v in seen if v in wanted]


@pytest.mark.parametrize("settings", [{"enable.auto.commit": False}, {}],
                         ids=["no-auto-commit", "default-settings"])
def test_librdkafka_consumer_with_a_group_id_reads_in_assign_mode(module_cluster, settings):
    """librdkafka looks for the coordinator in the background (FindCoordinator answers
    COORDINATOR_NOT_AVAILABLE while __consumer_offsets is created) and fetches the assigned
    partitions meanwhile; its commit then succeeds."""
    wanted = _produce(module_cluster, f"rdk{len(settings)}")
    # librdkafka waits for a coordinator up to session.timeout.ms (45 s by default) before a
    # commit fails, and close() makes a last commit when auto-commit is on.
    c = ck.Consumer({"bootstrap.servers": module_cluster.kafka_bootstrap_servers,
                     "group.id": "g-librdkafka", "session.timeout.ms": 6000, **settings})
    try:
        c.assign([ck.TopicPartition(TOPIC, 0, ck.OFFSET_BEGINNING)])
        assert _read_librdkafka(c, wanted) == wanted
        position = c.position([ck.TopicPartition(TOPIC, 0)])[0].offset
        c.commit(asynchronous=False)
        assert c.committed([ck.TopicPartition(TOPIC, 0)], timeout=30)[0].offset == position
    finally:
        c.close()


def test_librdkafka_producer_default_works_and_idempotence_is_a_fatal_error(module_cluster):
    bootstrap = module_cluster.kafka_bootstrap_servers
    delivered = []
    p = ck.Producer({"bootstrap.servers": bootstrap})  # librdkafka: idempotence off by default
    p.produce(TOPIC, b"plain", on_delivery=lambda err, _m: delivered.append(err))
    assert p.flush(30) == 0 and delivered == [None]

    fatal = []

    def on_error(err: ck.KafkaError) -> None:
        fatal.append(err)

    failed = []
    idem = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                        "error_cb": on_error})
    idem.produce(TOPIC, b"idempotent", on_delivery=lambda err, _m: failed.append(err))
    end = time.monotonic() + 30
    while not (fatal and failed) and time.monotonic() < end:
        try:
            idem.poll(0.5)
        except ck.KafkaException as e:  # confluent-kafka raises the fatal error from poll too
            fatal.append(e.args[0])
        if fatal:
            idem.purge()  # after a fatal error the record can only fail
    assert {(e.code(), e.fatal()) for e in fatal} == {(ck.KafkaError._UNSUPPORTED_FEATURE, True)}
    assert "Idempotent producer not supported" in fatal[0].str()
    assert len(failed) == 1 and failed[0] is not None  # the record is not delivered


def test_kafka_python_commits_and_idempotence_is_refused(module_cluster):
    bootstrap = module_cluster.kafka_bootstrap_servers
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id="g-kafka-python",
                      enable_auto_commit=False)
    try:
        c.assign([KafkaTopicPartition(TOPIC, 0)])
        c.commit({KafkaTopicPartition(TOPIC, 0): OffsetAndMetadata(1, "", -1)},
                 timeout_ms=30000)
        assert c.committed(KafkaTopicPartition(TOPIC, 0)) == 1
    finally:
        c.close()
    with pytest.raises(IncompatibleBrokerVersion, match="InitProducerId"):
        p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        try:
            p.send(TOPIC, b"idempotent").get(timeout=30)
        finally:
            p.close(timeout=5)
    assert _produce(module_cluster, "kp-after")  # without idempotence it still produces


def test_aiokafka_consumer_with_a_group_id_reads_and_idempotence_is_refused(module_cluster):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioTopicPartition
    from aiokafka.errors import IncompatibleBrokerVersion as AioIncompatibleBrokerVersion

    bootstrap = module_cluster.kafka_bootstrap_servers
    wanted = _produce(module_cluster, "aio")

    async def go():
        tp = AioTopicPartition(TOPIC, 0)
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id="g-aiokafka",
                             enable_auto_commit=False)
        await c.start()
        try:
            c.assign([tp])
            await c.seek_to_beginning(tp)
            seen = []
            while not set(wanted) <= set(seen):
                seen.append((await asyncio.wait_for(c.getone(), 30)).value)
            await asyncio.wait_for(c.commit({tp: 1}), 60)
            assert await c.committed(tp) == 1
        finally:
            await c.stop()
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        try:
            with pytest.raises(AioIncompatibleBrokerVersion, match="InitProducerId"):
                await p.start()  # it asks for a producer id before it returns
        finally:
            await asyncio.wait_for(p.stop(), 30)
        return [v for v in seen if v in wanted]

    assert asyncio.run(go()) == wanted
