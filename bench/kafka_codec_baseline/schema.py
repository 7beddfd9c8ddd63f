"""A schema-driven codec for Kafka's request and response bodies.

Kafka describes every message in a JSON file (clients/src/main/resources/common/message/*.json)
and generates Java classes from it. replog keeps the same description as Python data
(``messages.py``: each field's name, type, versions, nullable versions, tag) and encodes and
decodes every message with the two functions here, so a new version is a line of data, not code.

Rules from the message definitions (KIP-482 for flexible versions):
- a field absent from a version is neither read nor written; a decoded message still has it,
  set to its default, so the code using it need not know the version;
- in a flexible version strings, bytes, records and arrays use the compact forms, and every
  struct ends with a tagged-field section: ``count``, then per field ``tag``, ``size``, value,
  in tag order; a tagged field equal to its default is left out, an unknown tag is skipped;
- a null where the version does not allow one is a malformed request (ProtocolError).

Decoded messages are plain dicts keyed by the field names in snake_case.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench.kafka_codec_baseline.primitives import ZERO_UUID, ProtocolError, Reader, Writer


@dataclass(frozen=True)
class Versions:
    """A version range as the JSON files write it: "3+", "0-9", "5" or "none"."""
    lo: int
    hi: int  # inclusive; 0x7FFF for "N+"

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi


NONE = Versions(1, 0)


def versions(text: str | None) -> Versions:
    if text is None or text == "none":
        return NONE
    if text.endswith("+"):
        return Versions(int(text[:-1]), 0x7FFF)
    lo, _, hi = text.partition("-")
    return Versions(int(lo), int(hi or lo))


@dataclass(frozen=True)
class Struct:
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Array:
    element: str | Struct  # a primitive type name or a struct


_UNSET = object()


@dataclass(frozen=True)
class Field:
    name: str
    type: str | Struct | Array
    versions: Versions
    nullable: Versions = NONE
    tag: int | None = None
    tagged: Versions = NONE
    default: Any = _UNSET

    def default_value(self) -> Any:
        if self.default is not _UNSET:
            return self.default
        t = self.type
        if isinstance(t, Array):
            return []
        if isinstance(t, Struct):
            # A tagged struct that is absent is None; an untagged one has its fields' defaults.
            return None if self.tag is not None else defaults(t)
        return _TYPE_DEFAULTS[t]


_TYPE_DEFAULTS: dict[str, Any] = {
    "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0, "float64": 0.0,
    "bool": False, "string": "", "bytes": b"", "records": None, "uuid": ZERO_UUID,
}


def f(name: str, type_: str | Struct | Array, vers: str = "0+", *, nullable: str | None = None,
      tag: int | None = None, tagged: str | None = None, default: Any = _UNSET) -> Field:
    """One field, written as in the JSON: ``f("leader_epoch", "int32", "7+", default=-1)``.
    A ``tag`` without ``tagged`` is tagged in all its versions."""
    v = versions(vers)
    return Field(name, type_, v, versions(nullable), tag,
                 versions(tagged) if tagged else (v if tag is not None else NONE), default)


def struct(*fields: Field) -> Struct:
    return Struct(tuple(fields))


def array(element: str | Struct) -> Array:
    return Array(element)


@dataclass(frozen=True)
class Message:
    """One request or response: its API key, the versions replog serves, and from which
    version on it is flexible."""
    name: str
    api_key: int
    valid: Versions
    flexible: Versions
    body: Struct

    def decode(self, buf: bytes | memoryview | Reader, version: int,
               budget: int | None = None) -> dict:
        """``budget``: at most that many array elements in all (limits.py), else
        ProtocolError; a Reader given keeps its own budget unless one is given here."""
        r = buf if isinstance(buf, Reader) else Reader(buf)
        if budget is not None:
            r.budget = budget
        return read_struct(r, self.body, version, version in self.flexible)

    def encode(self, value: Mapping[str, Any], version: int) -> bytes:
        w = Writer()
        write_struct(w, self.body, value, version, version in self.flexible)
        return w.getvalue()

    def encode_chunks(self, value: Mapping[str, Any], version: int) -> list:
        """``encode`` with file regions left in place of their bytes (Writer.chunks)."""
        w = Writer()
        write_struct(w, self.body, value, version, version in self.flexible)
        return w.chunks()


def defaults(s: Struct) -> dict:
    return {fd.name: fd.default_value() for fd in s.fields}


# ---------------------------------------------------------------------------- decoding

_FIXED_SIZES = {"int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
                "float64": 8, "bool": 1, "uuid": 16}
_MIN_SIZES: dict[tuple[int, int, bool], int] = {}


def min_size(t: str | Struct | Array, version: int, flexible: bool) -> int:
    """The fewest bytes a value of type ``t`` takes in ``version``: an empty or null string,
    bytes or array, a struct of such fields and an empty tagged-field section. An array of N
    elements needs N times its element's, or it cannot be honest (Kafka's generated readers
    check the same before allocating)."""
    if isinstance(t, str):
        if t in _FIXED_SIZES:
            return _FIXED_SIZES[t]
        if t == "string":
            return 1 if flexible else 2
        return 1 if flexible else 4  # bytes, records
    if isinstance(t, Array):
        return 1 if flexible else 4
    key = (id(t), version, flexible)
    n = _MIN_SIZES.get(key)
    if n is None:
        n = sum(min_size(fd.type, version, flexible) for fd in t.fields
                if fd.tag is None and version in fd.versions) + (1 if flexible else 0)
        _MIN_SIZES[key] = n
    return n


def _read_primitive(r: Reader, t: str, flexible: bool, nullable: bool, name: str) -> Any:
    if t == "string":
        v = r.string(flexible)
    elif t in ("bytes", "records"):
        v = r.bytes(flexible)
    else:
        return getattr(r, t)()
    if v is None and not nullable:
        raise ProtocolError(f"field {name} is null, which its version does not allow")
    return v


def _read_value(r: Reader, fd: Field, version: int, flexible: bool) -> Any:
    t = fd.type
    nullable = version in fd.nullable
    if isinstance(t, Struct):
        return read_struct(r, t, version, flexible)
    if isinstance(t, Array):
        el = t.element
        n = r.array_length(flexible, min_size(el, version, flexible))
        if n is None:
            if not nullable:
                raise ProtocolError(f"array {fd.name} is null, which its version does not allow")
            return None
        if isinstance(el, Struct):
            return [read_struct(r, el, version, flexible) for _ in range(n)]
        return [_read_primitive(r, el, flexible, False, fd.name) for _ in range(n)]
    return _read_primitive(r, t, flexible, nullable, fd.name)


def read_struct(r: Reader, s: Struct, version: int, flexible: bool) -> dict:
    out: dict[str, Any] = {}
    for fd in s.fields:
        if fd.tag is None and version in fd.versions:
            out[fd.name] = _read_value(r, fd, version, flexible)
        else:
            out[fd.name] = fd.default_value()
    if flexible:
        read_tagged_fields(r, s, version, out)
    return out


def read_tagged_fields(r: Reader, s: Struct | None, version: int, out: dict) -> None:
    count = r.uvarint()
    last = -1
    for _ in range(count):
        tag = r.uvarint()
        size = r.uvarint()
        if tag <= last:
            raise ProtocolError(f"tagged fields out of order: {tag} after {last}")
        last = tag
        end = r.pos + size
        if end > len(r.buf):
            raise ProtocolError(f"tagged field {tag} of {size} bytes runs past the frame")
        fd = None if s is None else next(
            (x for x in s.fields if x.tag == tag and version in x.tagged), None)
        if fd is None:
            r.pos = end  # unknown tags are skipped (KIP-482)
            continue
        sub = Reader(r.buf[:end], r.pos, r.budget)
        out[fd.name] = _read_value(sub, fd, version, True)
        r.budget = sub.budget
        if sub.pos != end:
            raise ProtocolError(f"tagged field {fd.name} is {size} bytes but "
                                f"{sub.pos - r.pos} were read")
        r.pos = end


# ---------------------------------------------------------------------------- encoding

def _write_primitive(w: Writer, t: str, v: Any, flexible: bool) -> None:
    if t == "string":
        w.string(v, flexible)
    elif t in ("bytes", "records"):
        w.bytes(v, flexible)
    else:
        getattr(w, t)(v)


def _write_value(w: Writer, fd: Field, v: Any, version: int, flexible: bool) -> None:
    t = fd.type
    if isinstance(t, Struct):
        write_struct(w, t, v if v is not None else defaults(t), version, flexible)
    elif isinstance(t, Array):
        if v is None:
            w.array_length(None, flexible)
            return
        w.array_length(len(v), flexible)
        el = t.element
        if isinstance(el, Struct):
            for item in v:
                write_struct(w, el, item, version, flexible)
        else:
            for item in v:
                _write_primitive(w, el, item, flexible)
    else:
        _write_primitive(w, t, v, flexible)


def write_struct(w: Writer, s: Struct, value: Mapping[str, Any], version: int,
                 flexible: bool) -> None:
    tagged = []
    for fd in s.fields:
        if fd.tag is not None:
            if flexible and version in fd.tagged:
                v = value.get(fd.name)
                if v is not None and v != fd.default_value():
                    tagged.append((fd, v))
            continue
        if version not in fd.versions:
            continue
        v = value.get(fd.name, _UNSET)
        _write_value(w, fd, fd.default_value() if v is _UNSET else v, version, flexible)
    if flexible:
        w.uvarint(len(tagged))
        for fd, v in sorted(tagged, key=lambda x: x[0].tag):
            sub = Writer()
            _write_value(sub, fd, v, version, True)
            data = sub.getvalue()
            w.uvarint(fd.tag)
            w.uvarint(len(data))
            w.raw(data)
