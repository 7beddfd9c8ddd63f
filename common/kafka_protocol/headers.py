"""Kafka's request and response headers (RequestHeader.json / ResponseHeader.json).

Request header v1: api_key INT16, api_version INT16, correlation_id INT32, client_id
NULLABLE_STRING; v2 (flexible requests, KIP-482) adds a tagged-field section, while client_id
stays a non-compact string so that a broker can read it before it knows the version's rules.
Response header v0: correlation_id; v1 (flexible responses) adds tagged fields - except for
ApiVersions, whose answer always has header v0 so that a client that sent a version the broker
does not know can still read it (KIP-511).
"""

from __future__ import annotations

from dataclasses import dataclass

from common.kafka_protocol.api import APIS, ApiKey
from common.kafka_protocol.codec import skip_tagged_fields
from common.kafka_protocol.primitives import ProtocolError, Reader, Writer


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def is_flexible(api_key: int, version: int) -> bool:
    api = APIS.get(api_key)
    return api is not None and version in api.request.flexible


def read_request_header(r: Reader) -> RequestHeader:
    """The header of a request (v1, or v2 when the API's version is flexible; an API replog
    does not serve is read as v1, enough to answer or close)."""
    api_key, api_version, correlation_id = r.int16(), r.int16(), r.int32()
    client_id = r.string(compact=False)
    if is_flexible(api_key, api_version):
        _skip_tagged_fields(r)
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def write_request_header(w: Writer, h: RequestHeader) -> None:
    w.int16(h.api_key)
    w.int16(h.api_version)
    w.int32(h.correlation_id)
    w.string(h.client_id, compact=False)
    if is_flexible(h.api_key, h.api_version):
        w.uvarint(0)


def response_header(api_key: int, version: int, correlation_id: int) -> bytes:
    w = Writer()
    w.int32(correlation_id)
    if api_key != ApiKey.API_VERSIONS and is_flexible(api_key, version):
        w.uvarint(0)  # no tagged fields
    return w.getvalue()


def read_response_header(r: Reader, api_key: int, version: int) -> int:
    """The correlation id (used by tests and the codec's cross-checks)."""
    correlation_id = r.int32()
    if api_key != ApiKey.API_VERSIONS and is_flexible(api_key, version):
        _skip_tagged_fields(r)
    return correlation_id


def _skip_tagged_fields(r: Reader) -> None:
    """The header's tagged fields (none that replog reads: KIP-482 skips unknown tags)."""
    try:
        r.pos = skip_tagged_fields(r.buf, r.pos)
    except IndexError:
        raise ProtocolError("varint runs past the end of the frame") from None

