"""The Kafka listener's connection rules against a real broker process, at the byte level:
bad input closes that connection (or gets Kafka's answer) and never stops the broker or holds up
another connection; acks=0 gets no answer; unknown ApiVersions versions get KIP-511's answer."""
from __future__ import annotations

import socket
import struct

import pytest
from kafka.protocol.metadata import ApiVersionsResponse

from common.kafka_protocol.api import APIS, ApiKey
from common.kafka_protocol.headers import (
    RequestHeader,
    read_response_header,
    write_request_header,
)
from common.kafka_protocol.primitives import Reader, Writer
from common.records import ProducerRecord, build_batch
from tests.kafka.test_clients import TOPIC, create_topic

pytestmark = pytest.mark.integration
UNSUPPORTED_VERSION = 35


def request(api_key: int, version: int, body: dict | bytes, correlation_id: int = 1) -> bytes:
    w = Writer()
    write_request_header(w, RequestHeader(api_key, version, correlation_id, "test"))
    data = w.getvalue() + (body if isinstance(body, bytes)
                           else APIS[api_key].request.encode(body, version))
    return struct.pack(">i", len(data)) + data


def connect(cluster) -> socket.socket:
    host, port = cluster.brokers[1].kafka_address.split(":")
    s = socket.create_connection((host, int(port)), timeout=30)
    return s


def recv_frame(s: socket.socket) -> bytes | None:
    """One answer, or None when the broker closed the connection."""
    def exactly(n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = s.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf
    head = exactly(4)
    return None if head is None else exactly(struct.unpack(">i", head)[0])


def api_versions(s: socket.socket, version: int = 3, correlation_id: int = 7) -> dict:
    s.sendall(request(ApiKey.API_VERSIONS, version, {"client_software_name": "t",
                                                     "client_software_version": "1"},
                      correlation_id))
    r = Reader(recv_frame(s))
    assert read_response_header(r, ApiKey.API_VERSIONS, version) == correlation_id
    return APIS[ApiKey.API_VERSIONS].response.decode(r, version).to_dict()


def assert_serving(cluster) -> None:
    with connect(cluster) as s:
        got = api_versions(s)
    assert got["error_code"] == 0
    assert {a["api_key"] for a in got["api_keys"]} == set(APIS)
    assert cluster.brokers[1].is_running()


BAD_INPUT = {
    "truncated frame": struct.pack(">i", 100) + b"\x00\x12\x00\x03",
    "2 GiB length prefix": struct.pack(">i", 2 ** 31 - 1) + b"\x00" * 16,
    "negative length prefix": struct.pack(">i", -5),
    "unknown api key": request(999, 0, b""),
    # CreateDelegationToken: not in ApiVersions (no SASL), so a request for it is refused
    "an api replog does not serve (CreateDelegationToken)": request(38, 0, b"\x00" * 12),
    "Metadata version out of range": request(ApiKey.METADATA, 99, b""),
    "garbage": b"\x00\x00\x00\x10" + bytes(range(250, 256)) * 3,
    "a header without its body": request(ApiKey.PRODUCE, 9, b""),
}


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory):
    from harness.local_cluster import LocalCluster
    cluster = LocalCluster(tmp_path_factory.mktemp("kafka-wire"), brokers=1,
                           log_dirs_per_broker=1)
    cluster.start()
    create_topic(cluster, partitions=1, rf=1)
    yield cluster
    cluster.stop(graceful=False)


@pytest.mark.parametrize("name", list(BAD_INPUT))
def test_bad_input_closes_only_that_connection(module_cluster, name):
    with connect(module_cluster) as bad:
        bad.sendall(BAD_INPUT[name])
        if name == "truncated frame":
            bad.shutdown(socket.SHUT_WR)  # the rest never comes
        assert recv_frame(bad) is None
    assert_serving(module_cluster)


def test_a_half_sent_request_does_not_hold_up_other_connections(module_cluster):
    with connect(module_cluster) as stuck:
        stuck.sendall(struct.pack(">i", 1000) + b"\x00\x03")  # and nothing more
        assert_serving(module_cluster)


def test_unknown_api_versions_version_gets_kip_511_answer(module_cluster):
    with connect(module_cluster) as s:
        s.sendall(request(ApiKey.API_VERSIONS, 99, b"\x00\x00", correlation_id=5))
        frame = recv_frame(s)
        # header v0 and a v0 body: what any client can read (kafka-python steps down)
        assert frame[:4] == struct.pack(">i", 5)
        theirs = ApiVersionsResponse.decode(frame[4:], version=0)
        assert theirs.error_code == UNSUPPORTED_VERSION
        served = APIS[ApiKey.API_VERSIONS].served
        assert [(a.api_key, a.min_version, a.max_version) for a in theirs.api_keys] == \
            [(ApiKey.API_VERSIONS, served.lo, served.hi)]
        assert api_versions(s, version=0)["error_code"] == 0  # the connection stays open


def _produce(acks: int, records: bytes | None) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}]}


def test_acks_0_gets_no_answer_and_a_failed_one_closes(module_cluster):
    batch = build_batch([ProducerRecord(None, b"fire-and-forget")])
    with connect(module_cluster) as s:
        s.sendall(request(ApiKey.PRODUCE, 9, _produce(0, batch), correlation_id=1))
        # the next answer on this connection is the ApiVersions one: Produce got none
        assert api_versions(s, correlation_id=2)["error_code"] == 0
    with connect(module_cluster) as s:
        s.sendall(request(ApiKey.PRODUCE, 9, _produce(0, b"not a batch"), correlation_id=1))
        assert recv_frame(s) is None  # Kafka closes so the producer refreshes its metadata
    assert_serving(module_cluster)


def test_acks_1_of_a_corrupt_batch_is_answered_per_partition(module_cluster):
    with connect(module_cluster) as s:
        s.sendall(request(ApiKey.PRODUCE, 9, _produce(1, b"x" * 70), correlation_id=3))
        r = Reader(recv_frame(s))
        assert read_response_header(r, ApiKey.PRODUCE, 9) == 3
        (t,) = APIS[ApiKey.PRODUCE].response.decode(r, 9).to_dict()["responses"]
        (p,) = t["partition_responses"]
        assert p["error_code"] != 0 and p["base_offset"] == -1


def call(s: socket.socket, api_key: int, version: int, body: dict, correlation_id: int) -> dict:
    s.sendall(request(api_key, version, body, correlation_id))
    r = Reader(recv_frame(s))
    assert read_response_header(r, api_key, version) == correlation_id
    return APIS[api_key].response.decode(r, version).to_dict()


def _fetch(offset: int, current_leader_epoch: int = -1) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": TOPIC, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": current_leader_epoch}]}]}


def test_fetch_list_offsets_and_epochs_through_the_replica_manager(module_cluster):
    """Offsets, the HW and KIP-320 leader-epoch checks as the replica manager answers them."""
    with connect(module_cluster) as s:
        batch = build_batch([ProducerRecord(None, b"a"), ProducerRecord(None, b"b")])
        (t,) = call(s, ApiKey.PRODUCE, 9, _produce(-1, batch), 1)["responses"]
        assert t["partition_responses"][0]["error_code"] == 0
        base = t["partition_responses"][0]["base_offset"]

        lo = call(s, ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": ts}
                                           for ts in (-2, -1)]}]}, 2)
        earliest, latest = lo["topics"][0]["partitions"]
        assert (earliest["error_code"], earliest["offset"]) == (0, 0)
        assert (latest["error_code"], latest["offset"]) == (0, base + 2)  # the HW
        epoch = latest["leader_epoch"]
        assert epoch >= 0

        (p,) = call(s, ApiKey.FETCH, 12, _fetch(base, epoch), 3)["responses"][0]["partitions"]
        assert p["error_code"] == 0 and p["high_watermark"] == base + 2
        assert p["records"][:8] == struct.pack(">q", base)  # the batch, at its offset

        codes = {}
        for name, offset, cle in [("negative offset", -5, -1), ("past the HW", base + 100, -1),
                                  ("newer epoch", base, epoch + 1)]:
            (p,) = call(s, ApiKey.FETCH, 12, _fetch(offset, cle), 4)["responses"][0][
                "partitions"]
            codes[name] = p["error_code"]
        assert codes == {"negative offset": 1, "past the HW": 1,  # OFFSET_OUT_OF_RANGE
                         "newer epoch": 75}  # UNKNOWN_LEADER_EPOCH

        ofle = call(s, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
            {"topic": TOPIC, "partitions": [{"partition": 0, "leader_epoch": epoch,
                                             "current_leader_epoch": epoch}]}]}, 5)
        (p,) = ofle["topics"][0]["partitions"]
        assert (p["error_code"], p["leader_epoch"], p["end_offset"]) == (0, epoch, base + 2)


def test_a_batch_above_the_topics_max_message_bytes_is_message_too_large(module_cluster):
    """Kafka's LogValidator: a batch larger than the topic's max.message.bytes (broker
    default message.max.bytes) is refused with MESSAGE_TOO_LARGE and nothing is appended."""
    import asyncio

    from client.admin_client import AdminClient

    async def create():
        async with AdminClient(module_cluster.bootstrap_servers) as admin:
            await admin.create_topic("small-batches", 1, 1,
                                     configs={"max.message.bytes": "2000"})
    asyncio.run(create())
    big = build_batch([ProducerRecord(None, b"x" * 3000)])
    small = build_batch([ProducerRecord(None, b"x" * 100)])
    with connect(module_cluster) as s:
        answers = []
        for i, records in enumerate([big, small]):
            body = _produce(-1, records)
            body["topic_data"][0]["name"] = "small-batches"
            (t,) = call(s, ApiKey.PRODUCE, 9, body, 10 + i)["responses"]
            (p,) = t["partition_responses"]
            answers.append((p["error_code"], p["base_offset"]))
    assert answers[0][0] == 10  # MESSAGE_TOO_LARGE
    assert answers[1] == (0, 0)  # the refused batch took no offset


def test_list_offsets_by_time_finds_the_first_record_at_or_after_it(module_cluster):
    """Kafka's fetchOffsetForTimestamp through ListOffsets v7: a time gives the first record
    at or after it (with its own timestamp), -3 (KIP-734) the largest timestamp, a time past
    every record (-1, -1) with no error."""
    import asyncio

    from client.admin_client import AdminClient

    async def create():
        async with AdminClient(module_cluster.bootstrap_servers) as admin:
            await admin.create_topic("timed", 1, 1)
    asyncio.run(create())
    with connect(module_cluster) as s:
        for i, stamps in enumerate([(1000, 1005), (1010, 1003)]):
            body = _produce(-1, build_batch([ProducerRecord(None, b"v", timestamp=t)
                                             for t in stamps]))
            body["topic_data"][0]["name"] = "timed"
            call(s, ApiKey.PRODUCE, 9, body, 20 + i)
        lo = call(s, ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "topics": [
            {"name": "timed", "partitions": [{"partition_index": 0, "timestamp": ts}
                                             for ts in (1004, 1006, -3, 2000)]}]}, 30)
    got = [(p["error_code"], p["timestamp"], p["offset"])
           for p in lo["topics"][0]["partitions"]]
    assert got == [(0, 1005, 1), (0, 1010, 2), (0, 1010, 2), (0, -1, -1)]
