"""The Kafka protocol codec (common/kafka_protocol): round trips at every served version, the
same bytes as kafka-python's own encoders (kafka.protocol, generated from the same JSON files),
and malformed input always a ProtocolError, never another exception."""
from __future__ import annotations

import itertools
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from common.kafka_protocol.api import APIS, ApiKey
from common.kafka_protocol.codec import Codec
from common.kafka_protocol.headers import (
    RequestHeader,
    read_request_header,
    read_response_header,
    response_header,
    write_request_header,
)
from common.kafka_protocol.primitives import ProtocolError, Reader, Writer, uuid_bytes
from common.kafka_protocol.schema import Array, Struct, defaults

KAFKA_PYTHON = {
    ApiKey.API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse),
    ApiKey.METADATA: (MetadataRequest, MetadataResponse),
    ApiKey.PRODUCE: (ProduceRequest, ProduceResponse),
    ApiKey.FETCH: (FetchRequest, FetchResponse),
    ApiKey.LIST_OFFSETS: (ListOffsetsRequest, ListOffsetsResponse),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
}


def _kafka_python_class(api_key: int, kind: str):
    """kafka-python's class for an API replog serves beyond the table above, found by Kafka's
    message name (kafka-python 3 generates them from the same JSON files), or None."""
    import importlib
    import pkgutil

    import kafka.protocol
    from kafka.protocol.api_message import ApiMessage
    for m in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        try:
            importlib.import_module(m.name)
        except Exception:  # noqa: BLE001, S112 - stub generators and optional modules
            continue
    want = APIS[api_key].name + ("Response" if kind == "response" else "Request")
    stack = list(ApiMessage.__subclasses__())
    while stack:
        c = stack.pop()
        if c.__name__ == want:
            return c
        stack.extend(c.__subclasses__())
    return None


# A v2 record batch's bytes are opaque to the codec; any bytes will do.
RECORDS = bytes(range(70))
_VALUES = {"int8": 7, "int16": 300, "uint16": 65000, "int32": 70000, "uint32": 4_000_000_000,
           "int64": 2 ** 40 + 3, "float64": 1.5, "bool": True, "string": "héllo",
           "bytes": b"\x00\x01", "records": RECORDS, "uuid": bytes(range(1, 17))}


def sample(s: Struct, version: int, flexible: bool, seed: int = 0) -> dict:
    """A value of every field the version has, none equal to its default (so tagged fields
    are written); the fields it lacks at their defaults, as decoding leaves them."""
    out = defaults(s)
    for i, fd in enumerate(s.fields):
        if fd.tag is not None and not (flexible and version in fd.tagged):
            continue
        if fd.tag is None and version not in fd.versions:
            continue
        t = fd.type
        if isinstance(t, Struct):
            out[fd.name] = sample(t, version, flexible, seed + i)
        elif isinstance(t, Array):
            el = t.element
            out[fd.name] = [sample(el, version, flexible, seed + i + n) for n in range(2)] \
                if isinstance(el, Struct) else [_value(el, seed + i), _value(el, seed + i + 1)]
        else:
            out[fd.name] = _value(t, seed + i)
    return out


def _value(t: str, n: int):
    """Distinct per field, so that two fields of one type swapped would show."""
    v = _VALUES[t]
    if t == "bool":
        return v
    if t in ("string", "bytes", "records", "uuid"):
        return v[:-1] + (chr(65 + n % 26) if t == "string" else bytes([n % 256]))
    return v + n


def cases():
    for api in APIS.values():
        for version in range(api.served.lo, api.served.hi + 1):
            for kind in ("request", "response"):
                yield pytest.param(api.key, version, kind,
                                   id=f"{api.name}{kind.title()}-v{version}")


def _message(api_key: int, kind: str) -> Codec:
    return getattr(APIS[api_key], kind)


@pytest.mark.parametrize(("api_key", "version", "kind"), list(cases()))
def test_round_trip(api_key, version, kind):
    m = _message(api_key, kind)
    value = sample(m.body, version, version in m.flexible)
    data = m.encode(value, version)
    assert m.decode(data, version).to_dict() == value
    assert m.encode(m.decode(data, version), version) == data  # the typed class, too


@pytest.mark.parametrize(("api_key", "version", "kind"), list(cases()))
def test_same_bytes_as_kafka_python(api_key, version, kind):
    """kafka-python reads what replog writes, and writes it back byte for byte."""
    m = _message(api_key, kind)
    value = sample(m.body, version, version in m.flexible)
    if m is APIS[ApiKey.API_VERSIONS].response:
        value["error_code"] = 0  # with an error, kafka-python reads any version's body as v0
    data = m.encode(value, version)
    theirs = KAFKA_PYTHON[api_key][kind == "response"] if api_key in KAFKA_PYTHON \
        else _kafka_python_class(api_key, kind)
    if theirs is None or version > getattr(theirs, "max_version", version):
        pytest.skip(f"kafka-python has no {m.name} v{version}")
    decoded = theirs.decode(data, version=version)
    assert decoded.version == version
    assert _plain(decoded.to_dict(json=False)) == _in_version(value, m.body, version)
    if theirs.__name__ == "DeleteTopicsRequest":
        return  # kafka-python's own encode override reads a request header it does not have
    assert bytes(decoded.encode()) == data  # at the version it was decoded at


# kafka-python reads Metadata's authorized operations as a set of names, under another name;
# the bytes comparison covers them.
_NOT_COMPARED = {"authorized_operations", "topic_authorized_operations",
                 "cluster_authorized_operations"}


def _plain(v):
    """kafka-python's decoded values as replog's: UUIDs as 16 bytes, bytes not bytearrays."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if k not in _NOT_COMPARED}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, uuid.UUID):
        return v.bytes
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return v


def _in_version(value: dict, s: Struct, version: int) -> dict:
    """The fields a version has (tagged ones included), as kafka-python's to_dict lists them."""
    out = {}
    for fd in s.fields:
        if version not in fd.versions or fd.name in _NOT_COMPARED:
            continue
        v = value[fd.name]
        if isinstance(fd.type, Struct) and v is not None:
            v = _in_version(v, fd.type, version)
        elif isinstance(fd.type, Array) and isinstance(fd.type.element, Struct) and v:
            v = [_in_version(x, fd.type.element, version) for x in v]
        out[fd.name] = v
    return out


@pytest.mark.parametrize(("api_key", "version", "kind"), list(cases()))
def test_every_truncation_is_a_protocol_error(api_key, version, kind):
    m = _message(api_key, kind)
    data = m.encode(sample(m.body, version, version in m.flexible), version)
    for end in range(len(data)):
        with pytest.raises(ProtocolError):
            m.decode(data[:end], version)


def test_kafka_python_requests_decode():
    """What kafka-python's producer and consumer send, read by replog."""
    req = ProduceRequest[9](transactional_id=None, acks=-1, timeout_ms=1500, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=2, records=RECORDS)])])
    got = APIS[ApiKey.PRODUCE].request.decode(bytes(req.encode()), 9)
    assert got.acks == -1 and got.timeout_ms == 1500
    assert got.to_dict()["topic_data"] == [{"name": "t", "partition_data": [
        {"index": 2, "records": RECORDS}]}]
    assert got.topic_data[0].partition_data[0].records == RECORDS
    assert MetadataRequest[1](topics=None).encode() == b"\xff\xff\xff\xff"
    assert APIS[ApiKey.METADATA].request.decode(b"\xff\xff\xff\xff", 1).topics is None


def test_null_where_the_version_allows_none_is_refused():
    w = Writer()
    w.array_length(None, compact=False)  # Metadata v0 topics: not nullable before v1
    with pytest.raises(ProtocolError, match="null"):
        APIS[ApiKey.METADATA].request.decode(w.getvalue(), 0)


def test_unknown_tagged_fields_are_skipped():
    m = APIS[ApiKey.API_VERSIONS].request
    w = Writer()
    w.string("kcat", compact=True)
    w.string("1.7", compact=True)
    w.uvarint(1)   # one tagged field
    w.uvarint(9)   # a tag this version does not know
    w.uvarint(3)
    w.raw(b"abc")
    assert m.decode(w.getvalue(), 3).to_dict() == {"client_software_name": "kcat",
                                                   "client_software_version": "1.7"}


@pytest.mark.parametrize("flexible_version", [False, True])
def test_request_header_round_trip(flexible_version):
    version = 9 if flexible_version else 8
    h = RequestHeader(ApiKey.METADATA, version, 42, "client-1")
    w = Writer()
    write_request_header(w, h)
    data = w.getvalue() + b"rest"
    r = Reader(data)
    assert read_request_header(r) == h
    assert bytes(r.buf[r.pos:]) == b"rest"
    # header v2 adds one (empty) tagged-field section
    assert len(data) == 2 + 2 + 4 + 2 + len("client-1") + flexible_version + 4


def test_api_versions_answers_always_have_header_v0():
    """KIP-511: so that a client whose ApiVersions version the broker does not know can read
    the answer; every other flexible answer has header v1."""
    assert response_header(ApiKey.API_VERSIONS, 3, 7) == b"\x00\x00\x00\x07"
    assert response_header(ApiKey.METADATA, 9, 7) == b"\x00\x00\x00\x07\x00"
    assert read_response_header(Reader(b"\x00\x00\x00\x07\x00"), ApiKey.METADATA, 9) == 7


def test_topic_ids_as_replog_stores_them():
    import base64
    u = uuid.uuid4()
    assert uuid_bytes(base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()) == u.bytes
    assert uuid_bytes(str(u)) == u.bytes
    assert uuid_bytes("") == bytes(16) == uuid_bytes("not-an-id")


def test_varint_limits():
    with pytest.raises(ProtocolError, match="too long"):
        Reader(b"\xff" * 6).uvarint()
    assert Reader(b"\xff\xff\xff\xff\x0f").uvarint() == 2 ** 32 - 1
    for v in itertools.chain(range(-300, 300), [2 ** 31 - 1, -(2 ** 31)]):
        w = Writer()
        w.varint(v)
        assert Reader(w.getvalue()).varint() == v


@settings(max_examples=300, deadline=None)
@given(api_key=st.sampled_from(sorted(APIS)), version=st.integers(0, 12),
       data=st.binary(max_size=200))
def test_garbage_decodes_or_is_a_protocol_error(api_key, version, data):
    m = APIS[api_key].request
    try:
        m.decode(data, version)
    except ProtocolError:
        pass
