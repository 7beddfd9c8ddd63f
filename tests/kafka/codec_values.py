"""Values for the codec's tests (test_codec_golden.py), over whichever codec serves: a sample
value of every field a version has, none at its default; the all-defaults value; the fields a
version has; the fixtures' JSON form (bytes as {"hex": ...})."""
from __future__ import annotations

from common.kafka_protocol.api import APIS
from common.kafka_protocol.schema import Array, Struct, defaults

# A v2 record batch's bytes are opaque to the codec; any bytes will do.
RECORDS = bytes(range(70))
_VALUES = {"int8": 7, "int16": 300, "uint16": 65000, "int32": 70000, "uint32": 4_000_000_000,
           "int64": 2 ** 40 + 3, "float64": 1.5, "bool": True, "string": "héllo",
           "bytes": b"\x00\x01", "records": RECORDS, "uuid": bytes(range(1, 17))}


def served_cases():
    for api in sorted(APIS.values(), key=lambda a: a.key):
        for version in range(api.served.lo, api.served.hi + 1):
            for kind in ("request", "response"):
                yield api.key, kind, version


def name(api_key: int, kind: str) -> str:
    return APIS[api_key].name + kind.title()


def _message(api_key: int, kind: str):
    return getattr(APIS[api_key], kind)


def encode(api_key: int, kind: str, value: dict, version: int) -> bytes:
    return _message(api_key, kind).encode(value, version)


def decode_in_version(api_key: int, kind: str, data: bytes, version: int) -> dict:
    m = _message(api_key, kind)
    return in_version(m.decode(data, version).to_dict(), m.body, version)


def value(api_key: int, kind: str, version: int, which: str) -> dict:
    m = _message(api_key, kind)
    flexible = version in m.flexible
    v = sample(m.body, version, flexible) if which == "sample" else defaults(m.body)
    return in_version(v, m.body, version)


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


def in_version(value: dict, s: Struct, version: int) -> dict:
    """The fields a version has, tagged ones included."""
    out = {}
    for fd in s.fields:
        if version not in fd.versions:
            continue
        v = value[fd.name]
        if isinstance(fd.type, Struct) and v is not None:
            v = in_version(v, fd.type, version)
        elif isinstance(fd.type, Array) and isinstance(fd.type.element, Struct) and v:
            v = [in_version(x, fd.type.element, version) for x in v]
        out[fd.name] = v
    return out


def to_json(v):
    if isinstance(v, dict):
        return {k: to_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [to_json(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return {"hex": bytes(v).hex()}
    return v


def from_json(v):
    if isinstance(v, dict):
        if set(v) == {"hex"}:
            return bytes.fromhex(v["hex"])
        return {k: from_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [from_json(x) for x in v]
    return v
