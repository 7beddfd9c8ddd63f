"""Valid but enormous Kafka requests (issue 42): for the tests, the fuzzers and
bench/bench_hostile_frames.py.

``enormous_body(api_key, version, size)`` is a request body of about ``size`` bytes that is well
formed in every byte: each field at its default, except the top-level array whose elements
encode smallest, which is filled with as many minimal elements (empty strings, empty arrays,
zeros) as fit. A Metadata v9 body is then N empty topic names of 2 bytes each, the frame of
issue 42's defect 2. A codec that decodes it element by element does millions of steps.
"""

from __future__ import annotations

import struct

from common.kafka_protocol.api import APIS
from common.kafka_protocol.codec import encode_array_length, encode_compact_array_length
from common.kafka_protocol.headers import RequestHeader, write_request_header
from common.kafka_protocol.primitives import Writer
from common.kafka_protocol.schema import _TYPE_DEFAULTS, Array, Field, Struct, min_size


def widest_array(api_key: int, version: int) -> Field | None:
    """The top-level array field of the request whose elements take fewest bytes."""
    m = APIS[api_key].request
    flexible = version in m.flexible
    arrays = [fd for fd in m.body.fields if fd.tag is None and version in fd.versions
              and isinstance(fd.type, Array)]
    if not arrays:
        return None
    return min(arrays, key=lambda fd: min_size(fd.type.element, version, flexible))


def _default_element(el: str | Struct):
    return el.cls() if isinstance(el, Struct) else _TYPE_DEFAULTS[el]


def enormous_body(api_key: int, version: int, size: int, elements: int | None = None) -> bytes:
    """A well-formed request body of about ``size`` bytes (or of exactly ``elements`` elements
    in its widest array); the body of its defaults when the request has no array."""
    m = APIS[api_key].request
    flexible = version in m.flexible
    target = widest_array(api_key, version)
    if target is None:
        return m.encode(m.cls(), version)
    # The codec's parts with the array empty and with one default element: the same but for
    # the array's length (its own part) and the element's parts after it.
    empty = m._parts(m.cls(**{target.name: []}), version)
    one = m._parts(m.cls(**{target.name: [_default_element(target.type.element)]}), version)
    k = next(i for i, (x, y) in enumerate(zip(empty, one)) if x != y)
    prefix, suffix = empty[:k], empty[k + 1:]
    el = b"".join(one[k + 1:len(one) - len(suffix)])
    base = sum(map(len, empty))
    n = elements if elements is not None else max(0, (size - base) // len(el))
    length = encode_compact_array_length(n) if flexible else encode_array_length(n)
    return b"".join(prefix) + length + el * n + b"".join(suffix)


def request_frame(api_key: int, version: int, body: bytes, correlation_id: int = 1,
                  client_id: str = "hostile") -> bytes:
    """The frame on the wire: size, request header, body."""
    w = Writer()
    write_request_header(w, RequestHeader(api_key, version, correlation_id, client_id))
    data = w.getvalue() + body
    return struct.pack(">i", len(data)) + data


def served_versions() -> list[tuple[int, int]]:
    """Every (api key, version) the listener serves."""
    return [(k, v) for k, api in sorted(APIS.items())
            for v in range(api.served.lo, api.served.hi + 1)]
