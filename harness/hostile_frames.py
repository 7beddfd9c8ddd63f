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

from common.kafka_protocol.headers import RequestHeader, write_request_header
from common.kafka_protocol.messages import APIS
from common.kafka_protocol.primitives import Writer
from common.kafka_protocol.schema import (
    Array,
    Field,
    Struct,
    _write_value,
    defaults,
    f,
    min_size,
    write_struct,
)


def _element_bytes(el: str | Struct, version: int, flexible: bool) -> bytes:
    """One element at its defaults, as the codec writes it."""
    w = Writer()
    if isinstance(el, Struct):
        write_struct(w, el, defaults(el), version, flexible)
    else:
        fd = f("element", el)
        _write_value(w, fd, fd.default_value(), version, flexible)
    return w.getvalue()


def widest_array(api_key: int, version: int) -> Field | None:
    """The top-level array field of the request whose elements take fewest bytes."""
    m = APIS[api_key].request
    flexible = version in m.flexible
    arrays = [fd for fd in m.body.fields if fd.tag is None and version in fd.versions
              and isinstance(fd.type, Array)]
    if not arrays:
        return None
    return min(arrays, key=lambda fd: min_size(fd.type.element, version, flexible))


def enormous_body(api_key: int, version: int, size: int, elements: int | None = None) -> bytes:
    """A well-formed request body of about ``size`` bytes (or of exactly ``elements`` elements
    in its widest array); the body of its defaults when the request has no array."""
    m = APIS[api_key].request
    flexible = version in m.flexible
    target = widest_array(api_key, version)
    if target is None:
        return m.encode(defaults(m.body), version)
    el = _element_bytes(target.type.element, version, flexible)
    rest = dict(defaults(m.body))
    rest[target.name] = []
    base = len(m.encode(rest, version))
    n = elements if elements is not None else max(0, (size - base) // len(el))
    # the body with an empty array, then the array's length and elements spliced in
    w = Writer()
    for fd in m.body.fields:
        if fd.tag is not None or version not in fd.versions:
            continue
        if fd is target:
            w.array_length(n, flexible)
            w.raw(el * n)
        else:
            _write_value(w, fd, rest[fd.name], version, flexible)
    if flexible:
        w.uvarint(0)
    return w.getvalue()


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
