"""Issue 42, defect 2: one valid but enormous request can no longer make the codec decode
millions of elements. Every served API's widest array is bounded by its element budget
(common/kafka_protocol/limits.py) and by what can fit in the bytes left, before any element is
read; the listener refuses such a request by closing the connection, as Kafka's RequestContext
does with an InvalidRequestException."""
from __future__ import annotations

import asyncio

import pytest

from broker.kafka_listener import KafkaListener, _Close
from common.kafka_protocol.api import APIS, ApiKey
from common.kafka_protocol.limits import (
    DEFAULT_ELEMENT_BUDGET,
    MAX_STRING_BYTES,
    PARTITION_LIST_ELEMENT_BUDGET,
    element_budget,
)
from common.kafka_protocol.primitives import ProtocolError, Reader, Writer
from harness.hostile_frames import enormous_body, request_frame, served_versions, widest_array

# every served API, at its lowest and highest version
HOSTILE = sorted({(k, v) for k, v in served_versions() if widest_array(k, v) is not None
                  and v in (APIS[k].served.lo, APIS[k].served.hi)})


def _id(kv):
    return f"{APIS[kv[0]].name}-v{kv[1]}"


@pytest.mark.parametrize("api_key,version", HOSTILE, ids=[_id(x) for x in HOSTILE])
def test_every_served_api_refuses_more_elements_than_its_budget(api_key, version):
    m = APIS[api_key].request
    budget = element_budget(api_key)
    r = Reader(enormous_body(api_key, version, 0, elements=budget + 1))
    with pytest.raises(ProtocolError, match="element budget"):
        m.decode(r, version, budget)
    # refused at the array's length: no element was read
    assert r.pos < 64
    # up to the budget, the same request decodes
    ok = m.decode(enormous_body(api_key, version, 0, elements=budget), version, budget)
    assert len(getattr(ok, widest_array(api_key, version).name)) == budget


def test_the_partition_list_apis_get_the_larger_budget():
    assert element_budget(ApiKey.FETCH) == PARTITION_LIST_ELEMENT_BUDGET
    assert element_budget(ApiKey.METADATA) == DEFAULT_ELEMENT_BUDGET
    assert element_budget(15) == DEFAULT_ELEMENT_BUDGET  # DescribeGroups


def test_the_budget_counts_nested_arrays_together():
    # Fetch v12: 60,000 topics of 1 partition each are 120,000 elements
    body = APIS[ApiKey.FETCH].request.encode({
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1, "session_id": 0,
        "session_epoch": -1, "topics": [{"topic": "t", "partitions": [{"partition": 0}]}] * 60_000,
        "forgotten_topics_data": []}, 12)
    with pytest.raises(ProtocolError, match="element budget"):
        APIS[ApiKey.FETCH].request.decode(body, 12, PARTITION_LIST_ELEMENT_BUDGET)


def test_an_array_whose_elements_cannot_fit_is_refused_at_its_length():
    # Metadata v12: a topic takes at least 16 (id) + 1 (name) + 1 (tags) bytes
    w = Writer()
    w.array_length(1000, compact=True)
    w.raw(b"\x00" * 10_000)  # 10 bytes per claimed topic: too few
    r = Reader(w.getvalue())
    with pytest.raises(ProtocolError, match="cannot fit"):
        APIS[ApiKey.METADATA].request.decode(r, 12)
    assert r.pos < 8


def test_a_string_longer_than_int16_allows_is_refused_even_compact():
    w = Writer()
    w.uvarint(MAX_STRING_BYTES + 2)  # compact: length + 1
    w.raw(b"a" * (MAX_STRING_BYTES + 1))
    with pytest.raises(ProtocolError, match="longer than"):
        Reader(w.getvalue()).string(compact=True)
    w = Writer()
    w.uvarint(MAX_STRING_BYTES + 1)
    w.raw(b"a" * MAX_STRING_BYTES)
    assert len(Reader(w.getvalue()).string(compact=True)) == MAX_STRING_BYTES


def test_the_listener_closes_a_connection_that_sends_a_hostile_metadata():
    """The frame of issue 42: Metadata v9 with N empty topic names, 2 bytes each (failed
    before the fix: it was decoded, 250,000 dicts for half a megabyte, then answered)."""
    body = enormous_body(ApiKey.METADATA, 9, 512 * 1024)
    frame = request_frame(ApiKey.METADATA, 9, body)[4:]
    listener = KafkaListener(None, 1, "KAFKA", "127.0.0.1", 0, None)
    with pytest.raises(_Close, match="element budget"):
        asyncio.run(listener.handle(frame))
