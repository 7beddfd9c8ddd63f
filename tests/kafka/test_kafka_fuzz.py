"""Fuzzing the Kafka port of a real broker process (its KafkaListener on its ReplicaManager):
truncated frames, size prefixes from negative to 2 GiB, unknown API keys, versions out of range,
random bytes after valid headers, random mutations of valid requests of every served API, and
valid but enormous requests (``enormous_requests``: an API's widest array filled with minimal
elements, around and far beyond its element budget; issue 42).

After every input the broker must still answer ApiVersions and Metadata on a fresh connection,
a well-formed connection opened before the fuzzing must keep working, and the broker must not
have logged ``kafka_request_failed`` (an exception other than a protocol error or a closed
connection: a handler or encoder bug, where Kafka would have answered or closed cleanly).

REPLOG_FUZZ_EXAMPLES sets the examples per test (default 200: a few milliseconds each); ``make soak``
runs it with many more.
"""
from __future__ import annotations

import json
import os
import socket
import struct
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.kafka_protocol.api import APIS, ApiKey
from common.kafka_protocol.headers import RequestHeader, write_request_header
from common.kafka_protocol.limits import element_budget
from common.kafka_protocol.primitives import Writer
from common.records import ProducerRecord, build_batch
from harness.hostile_frames import enormous_body, widest_array
from tests.kafka import test_wire
from tests.kafka.test_clients import TOPIC
from tests.kafka.test_codec import sample
from tests.kafka.test_wire import api_versions, call, connect, recv_frame

module_cluster = test_wire.module_cluster  # the one-broker cluster fixture, shared

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("REPLOG_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_ANSWER_WAIT_S = 5.0  # how long to read a fuzzed connection's answers before moving on
_SERVED = sorted((a.key, v) for a in APIS.values() for v in range(a.served.lo, a.served.hi + 1))


def _valid_body(api_key: int, version: int) -> dict:
    """A valid request of every field; the data-path APIs name the test topic, so mutations
    reach the replica manager rather than stopping at an unknown topic."""
    m = APIS[api_key].request
    body = sample(m.body, version, version in m.flexible)
    if api_key == ApiKey.PRODUCE:
        body.update(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            {"name": TOPIC, "partition_data": [
                {"index": 0, "records": build_batch([ProducerRecord(b"k", b"fuzz")])}]}])
    elif api_key == ApiKey.FETCH:
        body.update(max_wait_ms=0, min_bytes=0, session_id=0, session_epoch=-1)
        for t in body["topics"]:
            t["topic"] = TOPIC
            for p in t["partitions"]:
                p.update(partition=0, fetch_offset=0, current_leader_epoch=-1,
                         last_fetched_epoch=-1)
    elif api_key in (ApiKey.LIST_OFFSETS, ApiKey.OFFSET_FOR_LEADER_EPOCH):
        for t in body["topics"]:
            t["name" if api_key == ApiKey.LIST_OFFSETS else "topic"] = TOPIC
    return body


def frame(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    w = Writer()
    write_request_header(w, RequestHeader(api_key, version, correlation_id, "fuzz"))
    data = w.getvalue() + body
    return struct.pack(">i", len(data)) + data


def valid_frame(api_key: int, version: int) -> bytes:
    return frame(api_key, version,
                 APIS[api_key].request.encode(_valid_body(api_key, version), version))


# ---------------------------------------------------------------------------- the checks

class _Broker:
    """The module's broker: a connection kept open across the whole fuzz run, and its event
    log read from where the last check stopped."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.steady = connect(cluster)
        self.correlation_id = 1000
        self.events = cluster.brokers[1].event_log_file
        self.events_read = self.events.stat().st_size if self.events.exists() else 0
        self.seen: Counter[str] = Counter()  # every event name read, for the final check

    def send(self, data: bytes) -> None:
        """Send ``data`` on a new connection and read what comes back until the broker closes
        it or ``_ANSWER_WAIT_S`` passes (a Fetch may legitimately wait)."""
        with connect(self.cluster) as s:
            try:
                s.sendall(data)
                # the rest of a truncated frame never comes; the broker answers what it
                # read and closes at the end of the stream
                s.shutdown(socket.SHUT_WR)
                s.settimeout(_ANSWER_WAIT_S)
                while s.recv(65536):
                    pass
            except (TimeoutError, ConnectionError, OSError):
                pass

    def assert_serving(self, what: str) -> None:
        with connect(self.cluster) as s:
            assert api_versions(s)["error_code"] == 0, what
            md = call(s, ApiKey.METADATA, 12, {"topics": None}, 2)
            assert TOPIC in {t["name"] for t in md["topics"]}, what
        self.correlation_id += 1
        assert api_versions(self.steady, correlation_id=self.correlation_id)["error_code"] == 0
        failed = self._new_events("kafka_request_failed")
        assert not failed, f"{what}: the broker logged {failed}"
        assert self.cluster.brokers[1].is_running(), what

    def _new_events(self, name: str) -> list[dict]:
        if not self.events.exists():
            return []
        with self.events.open("rb") as fh:
            fh.seek(self.events_read)
            data = fh.read()
        complete = data[:data.rfind(b"\n") + 1]
        self.events_read += len(complete)
        out = []
        for line in complete.splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            self.seen[e.get("event")] += 1
            if e.get("event") == name:
                out.append(e)
        return out


@pytest.fixture(scope="module")
def broker(module_cluster):
    b = _Broker(module_cluster)
    b.assert_serving("before fuzzing")
    yield b
    b.steady.close()


# ---------------------------------------------------------------------------- inputs

served_api = st.sampled_from(_SERVED)


@FUZZ
@given(api=served_api, data=st.data())
def test_truncated_frames(broker, api, data):
    full = valid_frame(*api)
    cut = data.draw(st.integers(0, len(full) - 1), label="bytes sent")
    broker.send(full[:cut])
    broker.assert_serving(f"{api} cut at {cut} of {len(full)}")


@FUZZ
@given(api=served_api, data=st.data())
def test_a_body_cut_short_in_a_consistent_frame(broker, api, data):
    """The size prefix matches what is sent; the body inside ends early."""
    body = valid_frame(*api)[4:]
    cut = data.draw(st.integers(0, len(body) - 1), label="body bytes")
    broker.send(struct.pack(">i", cut) + body[:cut])
    broker.assert_serving(f"{api} body cut at {cut}")


@FUZZ
@given(size=st.one_of(st.integers(-2 ** 31, 2 ** 31 - 1),
                      st.sampled_from([-1, 0, 1, 2 ** 31 - 1, 100 * 1024 * 1024,
                                       100 * 1024 * 1024 + 1, -2 ** 31])),
       rest=st.binary(max_size=64))
def test_size_prefixes(broker, size, rest):
    broker.send(struct.pack(">i", size) + rest)
    broker.assert_serving(f"size prefix {size}")


@FUZZ
@given(api_key=st.integers(-2 ** 15, 2 ** 15 - 1).filter(lambda k: k not in APIS),
       version=st.integers(-2 ** 15, 2 ** 15 - 1), body=st.binary(max_size=64))
def test_unknown_api_keys(broker, api_key, version, body):
    broker.send(frame(api_key, version, body))
    broker.assert_serving(f"api key {api_key} v{version}")


@FUZZ
@given(api_key=st.sampled_from(sorted(APIS)), version=st.integers(-2 ** 15, 2 ** 15 - 1),
       body=st.binary(max_size=64))
def test_versions_out_of_range(broker, api_key, version, body):
    served = APIS[api_key].served
    if version in served:
        version = served.hi + 1 + (version % 100)
    broker.send(frame(api_key, version, body))
    broker.assert_serving(f"api key {api_key} v{version}")


@FUZZ
@given(api=served_api, body=st.binary(max_size=256))
def test_random_bytes_after_a_valid_header(broker, api, body):
    broker.send(frame(*api, body))
    broker.assert_serving(f"{api} with random body {body!r}")


_MUTATION = st.tuples(st.sampled_from(["flip", "set", "insert", "delete", "int32"]),
                      st.integers(0, 2 ** 16), st.integers(0, 255))


def mutate(body: bytes, mutations: list[tuple[str, int, int]]) -> bytes:
    b = bytearray(body)
    for kind, at, value in mutations:
        if not b:
            b.append(value)
            continue
        i = at % len(b)
        if kind == "flip":
            b[i] ^= 1 << (value % 8)
        elif kind == "set":
            b[i] = value
        elif kind == "insert":
            b.insert(i, value)
        elif kind == "delete":
            del b[i]
        else:  # a length or count field turned extreme
            b[i:i + 4] = struct.pack(">i", [-1, 0, 2 ** 31 - 1, -2 ** 31, value][value % 5])
    return bytes(b)


@FUZZ
@given(api=served_api, mutations=st.lists(_MUTATION, min_size=1, max_size=6))
def test_mutated_valid_requests(broker, api, mutations):
    """Mutations after the request header: the header stays readable, so each one reaches the
    API's decoder (and, when it still decodes, its handler)."""
    whole = valid_frame(*api)[4:]
    header_len = len(frame(*api, b"")) - 4
    data = whole[:header_len] + mutate(whole[header_len:], mutations)
    broker.send(struct.pack(">i", len(data)) + data)
    broker.assert_serving(f"{api} mutated by {mutations}")


_WITH_ARRAYS = [api for api in _SERVED if widest_array(*api) is not None]
_ENORMOUS_MAX_BYTES = 8 * 1024 * 1024


@st.composite
def enormous_requests(draw) -> tuple[int, int, int, bytes]:
    """(api key, version, elements, frame): a well-formed request whose widest array holds
    up to, just at, or past the API's element budget, up to 8 MiB of 2-byte elements."""
    api_key, version = draw(st.sampled_from(_WITH_ARRAYS), label="api")
    budget = element_budget(api_key)
    n = draw(st.one_of(st.sampled_from([0, 1, budget - 1, budget, budget + 1]),
                       st.integers(0, budget),
                       st.integers(budget + 1, _ENORMOUS_MAX_BYTES // 2)), label="elements")
    return api_key, version, n, frame(api_key, version, enormous_body(api_key, version, 0, n))


@settings(FUZZ, max_examples=max(10, EXAMPLES // 4))
@given(req=enormous_requests())
def test_enormous_valid_requests(broker, req):
    """Past its budget a request is refused at its array's length, with no answer (Kafka's
    RequestContext: InvalidRequestException closes the channel); within it, it is served.
    Either way the broker keeps serving everyone else."""
    api_key, version, n, data = req
    with connect(broker.cluster) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(_ANSWER_WAIT_S * 6)
            got = b""
            while chunk := s.recv(65536):
                got += chunk
        except (ConnectionError, OSError):
            got = b""
    what = f"{APIS[api_key].name} v{version} with {n} elements"
    if n > element_budget(api_key):
        assert got == b"", f"{what}: answered past its budget"
    broker.assert_serving(what)


@pytest.mark.parametrize("api", _SERVED, ids=[f"{APIS[k].name}-v{v}" for k, v in _SERVED])
def test_every_served_api_version_is_answered_as_sent(broker, api):
    """The valid base of the mutations is itself accepted (otherwise every mutation would only
    test the decoder's refusal): the connection stays open for a following ApiVersions."""
    with connect(broker.cluster) as s:
        s.sendall(valid_frame(*api))
        answer = recv_frame(s)
        assert answer is not None and answer[:4] == struct.pack(">i", 1)
        assert api_versions(s, correlation_id=99)["error_code"] == 0
    broker.assert_serving(f"valid {api}")


def test_the_checks_read_the_brokers_event_log(broker):
    """Not vacuous: the event log the checks read holds the closes the fuzzing caused."""
    broker.assert_serving("at the end")
    assert broker.seen["kafka_connection_closed"] > 0, dict(broker.seen)
