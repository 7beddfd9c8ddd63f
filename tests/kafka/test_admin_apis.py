"""The admin APIs a broker's Kafka listener forwards to replog's controller (KIP-590):
CreateTopics, DeleteTopics, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, and DescribeCluster answered from the broker's metadata.

Codec: every message against Kafka's JSON definition (as kafka-python bundles it; round trips
and kafka-python's encoders at every served version are in test_codec.py). Real clusters:
confluent-kafka's, kafka-python's and aiokafka's admin clients, whose results are compared
with replog's own AdminClient (gRPC);
bad input gets Kafka's per-item error and changes nothing; without a controller every item is
answered NOT_CONTROLLER on an open connection.
"""
from __future__ import annotations

import asyncio
import json
import re
import threading
import uuid
from pathlib import Path

import kafka
import kafka.protocol.admin as kp_admin
import pytest
from confluent_kafka import ElectionType, KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import NewTopic as CNewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition

from client.admin_client import AdminClient, AlterConfigOp
from client.errors import UnknownTopicError
from client.producer import Producer
from common.errors import ErrorCode
from common.kafka_protocol.api import APIS
from common.kafka_protocol.api import ApiKey as AdminApiKey
from common.kafka_protocol.headers import read_response_header
from common.kafka_protocol.primitives import ZERO_UUID, Reader, uuid_bytes
from common.kafka_protocol.schema import NONE, Array, Struct, versions
from tests.kafka.test_wire import api_versions, call, connect, recv_frame, request
from tests.polling import wait_until

# the admin APIs forwarded to the controller (CreatePartitions has its own tests)
ADMIN_APIS = [APIS[k] for k in (19, 20, 43, 45, 46, 60)]

KAFKA_PYTHON_JSON = Path(kafka.__file__).parent / "protocol" / "schemas" / "resources"


# ---------------------------------------------------------------------------- codec

def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


_JSON_DEFAULTS = {"null": None, "true": True, "false": False}


def _assert_same_fields(ours: Struct, theirs: list[dict], path: str) -> None:
    """Names, order, types, versions, nullable versions, tags and given defaults as in
    Kafka's JSON."""
    assert [fd.name for fd in ours.fields] == [_snake(j["name"]) for j in theirs], path
    for fd, j in zip(ours.fields, theirs):
        where = f"{path}.{fd.name}"
        assert fd.versions == versions(j["versions"]), where
        assert fd.nullable == versions(j.get("nullableVersions")), where
        assert fd.tag == j.get("tag"), where
        assert fd.tagged == (versions(j["taggedVersions"]) if "tag" in j else NONE), where
        t = j["type"]
        if t.startswith("[]"):
            assert isinstance(fd.type, Array), where
            if "fields" in j:
                _assert_same_fields(fd.type.element, j["fields"], where)
            else:
                assert fd.type.element == t[2:], where
        else:
            assert fd.type == t, where
        if "default" in j:
            text = j["default"]
            want = _JSON_DEFAULTS.get(text, text)
            assert fd.default_value() == (int(want) if isinstance(want, str) else want), where
        elif fd.nullable != NONE and isinstance(fd.type, str):
            # no default in the JSON: Kafka's generated classes start with "" or null
            assert fd.default_value() in ("", None), where


@pytest.mark.parametrize("api", ADMIN_APIS, ids=lambda a: a.name)
@pytest.mark.parametrize("kind", ["request", "response"])
def test_messages_are_kafkas_json_definitions(api, kind):
    m = getattr(api, kind)
    spec = json.loads(re.sub(r"^\s*//.*$", "", (KAFKA_PYTHON_JSON / f"{m.name}.json")
                             .read_text(), flags=re.MULTILINE))
    assert spec["apiKey"] == api.key
    assert versions(spec["flexibleVersions"]) == m.flexible
    assert versions(spec["validVersions"]).hi == api.served.hi
    _assert_same_fields(m.body, spec["fields"], m.name)


# What librdkafka 2.16 asks for (rd_kafka_broker_ApiVersion_supported in rdkafka_request.c).
LIBRDKAFKA = {AdminApiKey.CREATE_TOPICS: 4, AdminApiKey.DELETE_TOPICS: 4,
              AdminApiKey.ELECT_LEADERS: 2}


def test_the_served_versions_cover_what_the_clients_ask_for():
    """Each client uses the highest version both sides know: every admin API is served from
    v0 up to kafka-python's newest, which covers librdkafka's and aiokafka's."""
    from aiokafka.protocol import admin as aio
    for api in ADMIN_APIS:
        assert APIS[api.key] is api
        newest = getattr(kp_admin, f"{api.name}Request").max_version
        assert (api.served.lo, api.served.hi) == (0, newest), api.name
        aio_versions = [v for v in range(10) if hasattr(aio, f"{api.name}Request_v{v}")]
        assert set(aio_versions) <= set(range(api.served.lo, api.served.hi + 1)), api.name
        assert LIBRDKAFKA.get(api.key, 0) in api.served, api.name
    assert hasattr(aio, "CreateTopicsRequest_v3") and hasattr(aio, "DeleteTopicsRequest_v3")


# ---------------------------------------------------------------------------- helpers

FAST = {"zookeeper.session.timeout.ms": 3000, "replica.lag.time.max.ms": 2000,
        "replica.fetch.wait.max.ms": 200, "auto.leader.rebalance.enable": "false"}


def describe(cluster, names) -> dict:
    """replog's own view (gRPC AdminClient): name -> [(partition, leader, replicas, isr)]."""
    async def go():
        async with AdminClient(cluster.bootstrap_servers, request_timeout_ms=10000) as admin:
            out = {}
            for n in names:
                try:
                    t = (await admin.describe_topics([n]))[n]
                except UnknownTopicError:
                    out[n] = None
                    continue
                out[n] = [(p.partition, p.leader, tuple(p.replicas), tuple(p.isr))
                          for p in sorted(t.partitions, key=lambda p: p.partition)]
            return out
    return asyncio.run(go())


def replog_admin(cluster, op):
    async def go():
        async with AdminClient(cluster.bootstrap_servers, request_timeout_ms=10000) as admin:
            return await op(admin)
    return asyncio.run(go())


def confluent(cluster) -> ConfluentAdmin:
    return ConfluentAdmin({"bootstrap.servers": cluster.kafka_bootstrap_servers})


def results(futures: dict, timeout: float = 30) -> dict:
    """Each future's error code (0 for success)."""
    out = {}
    for k, fut in futures.items():
        try:
            fut.result(timeout=timeout)
            out[k] = 0
        except KafkaException as e:
            out[k] = e.args[0].code()
    return out


def raw(cluster, api_key: int, version: int, body: dict) -> dict:
    with connect(cluster) as s:
        return call(s, api_key, version, body, 5)


def new_topic(name: str, partitions: int = 1, rf: int = 1, assignments=(), configs=()) -> dict:
    return {"name": name, "num_partitions": partitions, "replication_factor": rf,
            "assignments": [{"partition_index": p, "broker_ids": b} for p, b in assignments],
            "configs": [{"name": k, "value": v} for k, v in configs]}


# ---------------------------------------------------------------------------- real clusters

@pytest.mark.integration
def test_confluent_kafka_creates_describes_and_deletes_topics(cluster_factory):
    cluster = cluster_factory(brokers=3, overrides={"num.partitions": 4,
                                                    "default.replication.factor": 2})
    admin = confluent(cluster)
    futures = admin.create_topics([
        CNewTopic("plain", 3, 3),
        CNewTopic("assigned", 3, replica_assignment=[[1, 2], [2, 3], [3, 1]],
                  config={"retention.ms": "60000", "min.insync.replicas": "2"}),
        CNewTopic("defaults", -1),  # KIP-464: -1/-1, the controller's num.partitions and RF
    ], operation_timeout=20)
    assert results(futures) == {"plain": 0, "assigned": 0, "defaults": 0}
    got = describe(cluster, ["plain", "assigned", "defaults"])
    assert [len(r) for _, _, r, _ in got["plain"]] == [3, 3, 3]
    assert [r for _, _, r, _ in got["assigned"]] == [(1, 2), (2, 3), (3, 1)]
    assert len(got["defaults"]) == 4 and all(len(r) == 2 for _, _, r, _ in got["defaults"])
    configs = replog_admin(cluster, lambda a: a.describe_configs([("topics", "assigned")]))
    entries = next(iter(configs.values()))
    assert {e.name: e.value for e in entries if e.name in ("retention.ms",
                                                           "min.insync.replicas")} == \
        {"retention.ms": "60000", "min.insync.replicas": "2"}

    # Through librdkafka's Metadata path (describe_topics/describe_cluster), the same view.
    md = admin.list_topics(timeout=10)
    assert {p.id: tuple(p.replicas) for p in md.topics["assigned"].partitions.values()} == \
        {0: (1, 2), 1: (2, 3), 2: (3, 1)}

    # validate_only checks everything and creates nothing.
    futures = admin.create_topics([CNewTopic("checked", 2, 2)], validate_only=True)
    assert results(futures) == {"checked": 0}
    assert describe(cluster, ["checked"]) == {"checked": None}

    # Bad input: Kafka's per-topic error; the good topic beside them is created, the bad
    # ones are not.
    futures = admin.create_topics([
        CNewTopic("good", 1, 1),
        CNewTopic("bad name!", 1, 1),
        CNewTopic("plain", 1, 1),
        CNewTopic("too-many-replicas", 1, 5),
        CNewTopic("unknown-broker", 1, replica_assignment=[[1, 9]]),
        CNewTopic("bad-config", 1, 1, config={"no.such.config": "1"}),
        CNewTopic("zero-partitions", 0, 1),
    ], operation_timeout=20)
    assert results(futures) == {
        "good": 0, "bad name!": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "plain": ErrorCode.TOPIC_ALREADY_EXISTS,
        "too-many-replicas": ErrorCode.INVALID_REPLICATION_FACTOR,
        "unknown-broker": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "bad-config": ErrorCode.INVALID_CONFIG,
        "zero-partitions": ErrorCode.INVALID_PARTITIONS}
    after = describe(cluster, ["good", "too-many-replicas", "unknown-broker", "bad-config",
                               "zero-partitions", "plain"])
    assert after["good"] is not None and after["plain"] == got["plain"]
    assert [n for n, v in after.items() if v is None] == [
        "too-many-replicas", "unknown-broker", "bad-config", "zero-partitions"]

    futures = admin.delete_topics(["plain", "no-such-topic"], operation_timeout=20)
    assert results(futures) == {"plain": 0,
                                "no-such-topic": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert describe(cluster, ["plain", "assigned"])["plain"] is None
    assert replog_admin(cluster, lambda a: a.list_topics()) == [
        "assigned", "defaults", "good"]


@pytest.mark.integration
def test_kafka_python_admin_creates_deletes_and_describes_the_cluster(cluster_factory):
    cluster = cluster_factory(brokers=2)
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers,
                             request_timeout_ms=20000)
    try:
        got = admin.create_topics({"kp": {"num_partitions": 2, "replication_factor": 2,
                                          "configs": {"retention.ms": "120000"}},
                                   "kp-assigned": {"assignments": {0: [2, 1]}},
                                   "kp-bad": {"num_partitions": 1, "replication_factor": 3}},
                                  timeout_ms=20000, raise_errors=False)
        by_name = {t["name"]: t for t in got["topics"]}
        assert by_name["kp"]["error_code"] == 0 and by_name["kp"]["num_partitions"] == 2
        assert by_name["kp"]["replication_factor"] == 2
        # v5+: every config of the topic with its source (KIP-525)
        configs = by_name["kp"]["configs"]
        assert configs["retention.ms"]["value"] == "120000"
        assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert configs["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
        assert by_name["kp-bad"]["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
        assert by_name["kp-bad"]["num_partitions"] == -1
        got = describe(cluster, ["kp-assigned", "kp-bad"])
        assert [r for _, _, r, _ in got["kp-assigned"]] == [(2, 1)] and got["kp-bad"] is None
        topic_id = uuid.UUID(bytes=uuid_bytes(str(by_name["kp"]["topic_id"])))
        ids = replog_admin(cluster, lambda a: a.describe_topics(["kp"]))
        assert uuid_bytes(ids["kp"].topic_id) == topic_id.bytes != ZERO_UUID

        # DescribeCluster v2: this listener's endpoints, the cluster id, a broker as controller.
        info = admin.describe_cluster()
        ports = {int(a.rsplit(":", 1)[1]) for a in cluster.kafka_bootstrap_servers.split(",")}
        assert {b["port"] for b in info["brokers"]} == ports
        assert {b["broker_id"] for b in info["brokers"]} == {1, 2}
        assert info["controller_id"] in (1, 2)
        cluster_id = replog_admin(cluster, lambda a: a.describe_cluster()).cluster_id
        assert info["cluster_id"] == cluster_id

        # aiokafka: CreateTopics and DeleteTopics v3 (before flexible versions).
        def aio(op):
            async def go():
                from aiokafka.admin import AIOKafkaAdminClient
                client = AIOKafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers)
                await client.start()
                try:
                    return await op(client)
                finally:
                    await client.close()
            return asyncio.run(go())
        from aiokafka.admin import NewTopic as ANewTopic
        created = aio(lambda c: c.create_topics([ANewTopic("aio", 3, 2)], timeout_ms=20000))
        between = describe(cluster, ["aio"])["aio"]
        deleted = aio(lambda c: c.delete_topics(["aio", "aio-nope"], timeout_ms=20000))
        assert (created.API_VERSION, deleted.API_VERSION) == (3, 3)
        assert [(n, e) for n, e, *_ in created.topic_errors] == [("aio", 0)]
        assert [len(r) for _, _, r, _ in between] == [2, 2, 2]
        assert sorted(deleted.topic_error_codes) == [
            ("aio", 0), ("aio-nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        assert describe(cluster, ["aio"])["aio"] is None

        # DeleteTopics v6 by topic id (KIP-516), and by name.
        wait_until(lambda: describe(cluster, ["kp"])["kp"] is not None, what="kp created")
        out = admin.delete_topics([topic_id], timeout_ms=20000)
        assert [(t["name"], t["error_code"]) for t in out["topics"]] == [("kp", 0)]
        out = admin.delete_topics(["kp-assigned"], timeout_ms=20000)
        assert [(t["name"], t["error_code"]) for t in out["topics"]] == [("kp-assigned", 0)]
        assert describe(cluster, ["kp", "kp-assigned"]) == {"kp": None, "kp-assigned": None}
    finally:
        admin.close()


@pytest.mark.integration
def test_bad_requests_get_kafkas_errors_at_the_byte_level(cluster_factory):
    cluster = cluster_factory(brokers=1, log_dirs_per_broker=1)
    # CreateTopics: a null config value, the same partition assigned twice, a negative broker.
    got = raw(cluster, AdminApiKey.CREATE_TOPICS, 7, {"timeout_ms": 10000, "topics": [
        {**new_topic("null-config"), "configs": [{"name": "retention.ms", "value": None}]},
        new_topic("twice", -1, -1, assignments=[(0, [1]), (0, [1])]),
        new_topic("negative", -1, -1, assignments=[(0, [-1])]),
        new_topic("fine"),
        new_topic("fine"),
    ]})
    assert [(t["name"], t["error_code"]) for t in got["topics"]] == [
        ("null-config", ErrorCode.INVALID_CONFIG),
        ("twice", ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("negative", ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("fine", ErrorCode.INVALID_REQUEST), ("fine", ErrorCode.INVALID_REQUEST)]
    assert got["topics"][0]["error_message"] == \
        "Null value not supported for topic configs: retention.ms"
    assert describe(cluster, ["null-config", "twice", "negative", "fine"]) == dict.fromkeys(
        ["null-config", "twice", "negative", "fine"])
    # v0 (no validate_only, no error message) still creates.
    got = raw(cluster, AdminApiKey.CREATE_TOPICS, 0, {"timeout_ms": 10000,
                                                      "topics": [new_topic("v0")]})
    assert got["topics"] == [{**got["topics"][0], "name": "v0", "error_code": 0}]

    # DeleteTopics v6: both name and id, neither, an unknown id, a name given twice.
    unknown = uuid.uuid4().bytes
    got = raw(cluster, AdminApiKey.DELETE_TOPICS, 6, {"timeout_ms": 10000, "topics": [
        {"name": "v0", "topic_id": unknown}, {"name": None, "topic_id": ZERO_UUID},
        {"name": None, "topic_id": unknown}, {"name": "x", "topic_id": ZERO_UUID},
        {"name": "x", "topic_id": ZERO_UUID}]})
    assert sorted((t["name"] or "", t["error_code"]) for t in got["responses"]) == [
        ("", ErrorCode.INVALID_REQUEST), ("", ErrorCode.UNKNOWN_TOPIC_ID),
        ("v0", ErrorCode.INVALID_REQUEST), ("x", ErrorCode.INVALID_REQUEST)]
    assert describe(cluster, ["v0"])["v0"] is not None

    # ElectLeaders: an unknown election type fails the request (top level and per partition).
    got = raw(cluster, AdminApiKey.ELECT_LEADERS, 2, {"election_type": 7, "timeout_ms": 1000,
                                                      "topic_partitions": [
                                                          {"topic": "v0", "partitions": [0]}]})
    assert got["error_code"] == ErrorCode.INVALID_REQUEST
    assert got["replica_election_results"][0]["partition_result"][0]["error_code"] == \
        ErrorCode.INVALID_REQUEST
    # An empty list elects nothing; null means every partition; a negative partition is
    # nobody's (the controller would refuse the whole request for it).
    got = raw(cluster, AdminApiKey.ELECT_LEADERS, 2, {"election_type": 0, "timeout_ms": 1000,
                                                      "topic_partitions": []})
    assert (got["error_code"], got["replica_election_results"]) == (0, [])
    got = raw(cluster, AdminApiKey.ELECT_LEADERS, 2, {"election_type": 0, "timeout_ms": 1000,
                                                      "topic_partitions": None})
    assert [(t["topic"], [(p["partition_id"], p["error_code"]) for p in t["partition_result"]])
            for t in got["replica_election_results"]] == [
        ("v0", [(0, ErrorCode.ELECTION_NOT_NEEDED)])]
    got = raw(cluster, AdminApiKey.ELECT_LEADERS, 0, {"timeout_ms": 1000, "topic_partitions": [
        {"topic": "v0", "partitions": [-1, 0]}]})
    assert [(p["partition_id"], p["error_code"])
            for p in got["replica_election_results"][0]["partition_result"]] == [
        (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (0, ErrorCode.ELECTION_NOT_NEEDED)]

    # DescribeCluster: only the broker endpoint type is served by a broker (KIP-919).
    got = raw(cluster, AdminApiKey.DESCRIBE_CLUSTER, 1, {"endpoint_type": 2})
    assert got["error_code"] == 114  # MISMATCHED_ENDPOINT_TYPE
    got = raw(cluster, AdminApiKey.DESCRIBE_CLUSTER, 1, {"endpoint_type": 3})
    assert got["error_code"] == 115  # UNSUPPORTED_ENDPOINT_TYPE
    got = raw(cluster, AdminApiKey.DESCRIBE_CLUSTER, 0, {})
    assert (got["error_code"], got["controller_id"], [b["broker_id"] for b in got["brokers"]]) \
        == (0, 1, [1])
    assert got["brokers"][0]["port"] == int(cluster.brokers[1].kafka_address.rsplit(":")[1])

    # ListPartitionReassignments: topics named without partitions ask for nothing.
    got = raw(cluster, AdminApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {
        "timeout_ms": 1000, "topics": [{"name": "v0", "partition_indexes": []}]})
    assert (got["error_code"], got["topics"]) == (0, [])


def _leaders(cluster, topic: str) -> list[tuple[int, int, tuple, tuple]]:
    got = wait_until(lambda: describe(cluster, [topic])[topic], what=f"{topic} described")
    return got


@pytest.mark.integration
def test_confluent_kafka_elects_preferred_and_unclean_leaders(cluster_factory):
    cluster = cluster_factory(brokers=3, overrides=FAST)
    admin = confluent(cluster)
    assert results(admin.create_topics([
        CNewTopic("pref", 1, replica_assignment=[[1, 2, 3]]),
        CNewTopic("uncl", 1, replica_assignment=[[1, 2]])], operation_timeout=20)) == \
        {"pref": 0, "uncl": 0}
    wait_until(lambda: len(_leaders(cluster, "pref")[0][3]) == 3, what="pref's ISR full")
    wait_until(lambda: len(_leaders(cluster, "uncl")[0][3]) == 2, what="uncl's ISR full")

    def elect(kind, tps):
        # (confluent-kafka 2.16.1's elect_leaders refuses every keyword argument:
        # "more argument specifiers than keyword list entries")
        fut = admin.elect_leaders(kind, [CTopicPartition(t, p) for t, p in tps])
        return {(tp.topic, tp.partition): (0 if err is None else err.code())
                for tp, err in fut.result(timeout=40).items()}

    # Nothing to do while the preferred replicas lead.
    assert elect(ElectionType.PREFERRED, [("pref", 0)]) == {
        ("pref", 0): ErrorCode.ELECTION_NOT_NEEDED}
    assert elect(ElectionType.UNCLEAN, [("uncl", 0)]) == {
        ("uncl", 0): ErrorCode.ELECTION_NOT_NEEDED}
    assert elect(ElectionType.PREFERRED, [("nope", 0)]) == {
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

    # PREFERRED: leadership moved away by a bounce of broker 1 comes back.
    cluster.broker(1).stop()
    wait_until(lambda: _leaders(cluster, "pref")[0][1] not in (1, -1), what="pref led by 2/3")
    cluster.broker(1).start()
    wait_until(lambda: len(_leaders(cluster, "pref")[0][3]) == 3, what="broker 1 in pref ISR")
    wait_until(lambda: len(_leaders(cluster, "uncl")[0][3]) == 2, what="broker 1 in uncl ISR")
    assert _leaders(cluster, "pref")[0][1] != 1
    assert elect(ElectionType.PREFERRED, [("pref", 0)]) == {("pref", 0): 0}
    wait_until(lambda: _leaders(cluster, "pref")[0][1] == 1, what="broker 1 leads pref again")

    # UNCLEAN for real: the follower dies and leaves the ISR, then the ISR's only member (the
    # leader) dies; the follower comes back out of sync and the partition has no leader.
    led = _leaders(cluster, "uncl")[0]
    leader, follower = led[1], next(b for b in led[2] if b != led[1])
    cluster.broker(follower).kill()
    wait_until(lambda: _leaders(cluster, "uncl")[0][3] == (leader,),
               what="the dead follower out of the ISR")
    cluster.broker(leader).kill()
    cluster.broker(follower).start()
    wait_until(lambda: _leaders(cluster, "uncl")[0][1] == -1, what="uncl leaderless")
    assert elect(ElectionType.PREFERRED, [("uncl", 0)]) == {
        ("uncl", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
    assert elect(ElectionType.UNCLEAN, [("uncl", 0)]) == {("uncl", 0): 0}
    wait_until(lambda: _leaders(cluster, "uncl")[0][1] == follower,
               what="the out-of-sync follower elected")


@pytest.mark.integration
def test_kafka_python_moves_lists_and_cancels_reassignments(cluster_factory):
    cluster = cluster_factory(brokers=3, overrides=FAST)
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers,
                             request_timeout_ms=30000)
    try:
        admin.create_topics({"r": {"assignments": {0: [1, 2], 1: [2, 1]}}}, timeout_ms=20000)
        wait_until(lambda: all(len(isr) == 2 for *_, isr in _leaders(cluster, "r")),
                   what="r fully replicated")
        # Hold a move onto broker 3 in flight: more records than one fetch, and broker 3's
        # follower throttle at 1 byte/s for r-0 (KIP-73), so its replica never catches up.
        async def fill_and_throttle(a):
            async with Producer(cluster.bootstrap_servers, acks="all", linger_ms=5) as p:
                for f in [await p.send("r", b"x" * 1024, partition=0) for _ in range(3000)]:
                    await f
            await a.incremental_alter_configs({
                ("brokers", "3"): [AlterConfigOp("follower.replication.throttled.rate", "set",
                                                 "1")],
                ("topics", "r"): [AlterConfigOp("follower.replication.throttled.replicas",
                                                "set", "0:3")]})
        replog_admin(cluster, fill_and_throttle)
        r0, r1 = KTopicPartition("r", 0), KTopicPartition("r", 1)
        assert admin.alter_partition_reassignments({r0: [1, 3]}, timeout_ms=5000) == {r0: None}
        ongoing = admin.list_partition_reassignments()
        assert list(ongoing) == [r0]
        assert (ongoing[r0]["adding_replicas"], ongoing[r0]["removing_replicas"]) == ([3], [2])
        theirs = replog_admin(cluster, lambda a: a.list_partition_reassignments())
        assert list(theirs) == [("r", 0)]
        assert (list(theirs["r", 0].replicas), list(theirs["r", 0].adding_replicas),
                list(theirs["r", 0].removing_replicas)) == (
            ongoing[r0]["replicas"], [3], [2])
        assert set(describe(cluster, ["r"])["r"][0][2]) == {1, 2, 3}
        assert admin.list_partition_reassignments([r1]) == {}

        # KIP-860 (v1): a move that changes the replication factor is refused when the
        # request says so; nothing starts.
        got = raw(cluster, AdminApiKey.ALTER_PARTITION_REASSIGNMENTS, 1, {
            "timeout_ms": 2000, "allow_replication_factor_change": False, "topics": [
                {"name": "r", "partitions": [{"partition_index": 1, "replicas": [1, 2, 3]}]}]})
        assert got["responses"][0]["partitions"][0]["error_code"] == \
            ErrorCode.INVALID_REPLICATION_FACTOR
        assert got["allow_replication_factor_change"] is False

        # Each partition stands alone: the cancel beside the bad entries goes through, the
        # bad ones get Kafka's errors and start nothing.
        nope, r5 = KTopicPartition("nope", 0), KTopicPartition("r", 5)
        got = admin.alter_partition_reassignments({r0: None, r1: [1, 9], nope: [1], r5: [1]},
                                                  timeout_ms=2000)
        assert {tp: (None if e is None else e.errno) for tp, e in got.items()} == {
            r0: None, r1: ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            nope: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, r5: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert admin.list_partition_reassignments() == {}
        assert [r for _, _, r, _ in describe(cluster, ["r"])["r"]] == [(1, 2), (2, 1)]
        got = admin.alter_partition_reassignments({r0: None}, timeout_ms=2000)
        assert got[r0].errno == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    finally:
        admin.close()


@pytest.mark.integration
def test_without_a_controller_every_item_is_not_controller_on_an_open_connection(
        cluster_factory):
    cluster = cluster_factory(brokers=1, log_dirs_per_broker=1)
    raw(cluster, AdminApiKey.CREATE_TOPICS, 7, {"timeout_ms": 10000,
                                                "topics": [new_topic("t")]})
    (controller,) = cluster.controllers.values()
    controller.stop()
    wait_until(lambda: raw(cluster, AdminApiKey.DESCRIBE_CLUSTER, 1, {})["controller_id"] == -1,
               what="the broker to see no controller")
    tp = [{"topic": "t", "partitions": [0]}]
    with connect(cluster) as s:
        got = call(s, AdminApiKey.CREATE_TOPICS, 7, {"timeout_ms": 500,
                                                     "topics": [new_topic("new")]}, 1)
        assert [(t["name"], t["error_code"]) for t in got["topics"]] == [
            ("new", ErrorCode.NOT_CONTROLLER)]
        got = call(s, AdminApiKey.DELETE_TOPICS, 4, {"timeout_ms": 500, "topic_names": ["t"]}, 2)
        assert [(t["name"], t["error_code"]) for t in got["responses"]] == [
            ("t", ErrorCode.NOT_CONTROLLER)]
        got = call(s, AdminApiKey.ELECT_LEADERS, 2, {"election_type": 1, "timeout_ms": 500,
                                                     "topic_partitions": tp}, 3)
        assert got["error_code"] == ErrorCode.NOT_CONTROLLER
        assert got["replica_election_results"][0]["partition_result"][0]["error_code"] == \
            ErrorCode.NOT_CONTROLLER
        got = call(s, AdminApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {
            "timeout_ms": 500, "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "replicas": [1]}]}]}, 4)
        assert got["error_code"] == ErrorCode.NOT_CONTROLLER
        assert got["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NOT_CONTROLLER
        got = call(s, AdminApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 500}, 5)
        assert (got["error_code"], got["topics"]) == (ErrorCode.NOT_CONTROLLER, [])
        assert api_versions(s, correlation_id=6)["error_code"] == 0  # still open

        # A request waiting within its timeout follows the controller when it comes back
        # (KIP-590's forwarding retries).
        s.sendall(request(AdminApiKey.CREATE_TOPICS, 7, {"timeout_ms": 40000,
                                                         "topics": [new_topic("later")]}, 7))
        starter = threading.Thread(target=controller.start)
        starter.start()
        frame = recv_frame(s)
        starter.join()
    r = Reader(frame)
    assert read_response_header(r, AdminApiKey.CREATE_TOPICS, 7) == 7
    got = APIS[AdminApiKey.CREATE_TOPICS].response.decode(r, 7).to_dict()
    assert [(t["name"], t["error_code"]) for t in got["topics"]] == [("later", 0)]
    assert describe(cluster, ["later"])["later"] is not None
