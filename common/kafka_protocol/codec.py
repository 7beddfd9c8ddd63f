"""What the generated codec (common/kafka_protocol/generated/, tools/gen_kafka_messages.py)
runs on: the base of its message classes, ``Codec`` (one message's decode and encode at every
version), and the primitive readers and writers its straight-line code calls.

Readers take the frame (a memoryview) and an offset and return ``(value, offset)``; writers
append to a list of parts that is joined once. Rules, as Kafka's generated classes and the
protocol guide have them (KIP-482 for flexible versions):
- a length that cannot fit in the bytes left is refused before anything is allocated, an
  array's at its elements' minimal size (computed by the generator), and every array's length
  counts against the request's element budget (limits.py; issue 42 defect 2);
- a null where the version does not allow one, a string longer than INT16 allows, bytes that
  are not UTF-8, tagged fields out of order or running past their size, and anything short:
  ProtocolError, so the listener closes the connection instead of crashing;
- unknown tagged fields are skipped; a tagged field at its default is not written;
- ``records`` may be a file region (anything with a length that is not bytes-like,
  broker/storage/file_region.py): it is kept in place, and ``encode_chunks`` hands it to the
  sender, which puts it on the socket with sendfile (Fetch stays zero-copy).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Mapping
from typing import Any

from common.kafka_protocol.limits import MAX_STRING_BYTES
from common.kafka_protocol.primitives import ProtocolError, Reader, encode_uvarint
from common.kafka_protocol.schema import Array, Struct, Versions

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
NULL_ARRAY = b"\xff\xff\xff\xff"
_NULL_STRING = b"\xff\xff"
_UVARINTS = [bytes([i]) for i in range(128)]

# __init__ defaults that stand for "a new empty list" / "a new struct at its defaults"
_LIST: Any = object()
_STRUCT: Any = object()


class Data:
    """A generated message or struct: its fields are its ``__slots__``, its metadata
    ``SCHEMA`` (common/kafka_protocol/schema.py)."""

    __slots__ = ()
    SCHEMA: Struct

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable, as Kafka's generated classes

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(
            f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"

    def to_dict(self) -> dict:
        """Every field by name, nested structs as dicts (Kafka's generated JsonConverter)."""
        out = {}
        for n in self.__slots__:
            v = getattr(self, n)
            if isinstance(v, Data):
                v = v.to_dict()
            elif isinstance(v, list) and v and isinstance(v[0], Data):
                v = [x.to_dict() for x in v]
            out[n] = v
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):
        """The message a dict describes (``to_dict``'s form); a field left out is at its
        default, a key that names no field is an error."""
        unknown = set(d) - set(cls.__slots__)
        if unknown:
            raise ValueError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
        kwargs = {}
        for fd in cls.SCHEMA.fields:
            if fd.name not in d:
                continue
            v = d[fd.name]
            t = fd.type
            if isinstance(t, Struct) and isinstance(v, Mapping):
                v = t.cls.from_dict(v)
            elif isinstance(t, Array) and isinstance(t.element, Struct) and v is not None:
                v = [t.element.cls.from_dict(x) if isinstance(x, Mapping) else x for x in v]
            kwargs[fd.name] = v
        return cls(**kwargs)


class Budget:
    """How many array elements the request may still hold (limits.py)."""
    __slots__ = ("left",)

    def __init__(self, left: int | None):
        self.left = sys.maxsize if left is None else left


class Codec:
    """One message (a request or a response) at every version of its JSON's validVersions.

    ``decode(buf, version, budget)`` reads from bytes, a memoryview or a ``Reader`` (advanced
    past the message) and returns the message's class; ``encode(value, version)`` and
    ``encode_chunks`` take the class or, for tests and fixtures, its ``to_dict`` form."""

    def __init__(self, name: str, api_key: int, valid: Versions, flexible: Versions,
                 cls: type[Data], readers: dict, writers: dict):
        self.name = name
        self.api_key = api_key
        self.valid = valid
        self.flexible = flexible
        self.cls = cls
        self.body = cls.SCHEMA
        self._readers = readers
        self._writers = writers

    def __repr__(self) -> str:
        return f"Codec({self.name})"

    def decode(self, buf: bytes | bytearray | memoryview | Reader, version: int,
               budget: int | None = None) -> Any:
        if isinstance(buf, Reader):
            mv, pos = buf.buf, buf.pos
            if budget is None:
                budget = buf.budget
        else:
            mv, pos = memoryview(buf), 0
        read = self._readers.get(version)
        if read is None:
            raise ProtocolError(f"{self.name} has no version {version}")
        ctx = Budget(budget)
        try:
            out, pos = read(mv, pos, ctx)
        except ProtocolError:
            raise
        except (struct.error, IndexError) as e:
            raise ProtocolError(f"{self.name} v{version} runs past the end of the frame "
                                f"({e})") from None
        if isinstance(buf, Reader):
            buf.pos = pos
            if buf.budget is not None or budget is not None:
                buf.budget = ctx.left
        return out

    def _parts(self, value: Any, version: int) -> list:
        if isinstance(value, Mapping):
            value = self.cls.from_dict(value)
        write = self._writers.get(version)
        if write is None:
            raise ValueError(f"{self.name} has no version {version}")
        parts: list = []
        write(value, parts)
        return parts

    def encode(self, value: Any, version: int) -> bytes:
        return b"".join(self._parts(value, version))

    def encode_chunks(self, value: Any, version: int) -> list:
        """``encode`` as bytes chunks and the file regions of ``records`` fields, in order
        (adjacent bytes joined), for a sender that puts the regions on the socket with
        sendfile."""
        out: list = []
        run: list[bytes] = []
        for p in self._parts(value, version):
            if isinstance(p, bytes):
                run.append(p)
                continue
            if run:
                out.append(b"".join(run))
                run = []
            out.append(p)
        if run:
            out.append(b"".join(run))
        return out


# ---------------------------------------------------------------------------- reading

def null_error(name: str) -> ProtocolError:
    return ProtocolError(f"field {name} is null, which its version does not allow")


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value, shift = b & 0x7F, 7
    pos += 1
    for _ in range(4):
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    raise ProtocolError("varint is too long")


def _check_length(buf, pos: int, n: int) -> int:
    end = pos + n
    if end > len(buf):
        raise ProtocolError(f"length {n} at offset {pos} exceeds the {len(buf) - pos} bytes "
                            f"left")
    return end


def _text(buf, pos: int, end: int) -> str:
    try:
        return str(buf[pos:end], "utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolError(f"string is not UTF-8: {e}") from None


def read_string(buf, pos: int) -> tuple[str | None, int]:
    n, = _I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    end = _check_length(buf, pos, n)
    return _text(buf, pos, end), end


def read_compact_string(buf, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0:
        return None, pos
    end = _check_length(buf, pos, n)
    if n > MAX_STRING_BYTES:  # Kafka's generated readers: "had invalid length"
        raise ProtocolError(f"string of {n} bytes at offset {pos} is longer than "
                            f"{MAX_STRING_BYTES}")
    return _text(buf, pos, end), end


def read_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    n, = _I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = _check_length(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0:
        return None, pos
    end = _check_length(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_uuid(buf, pos: int) -> tuple[bytes, int]:
    end = _check_length(buf, pos, 16)
    return bytes(buf[pos:end]), end


def _check_array(buf, pos: int, n: int, min_size: int, ctx: Budget) -> None:
    """Kafka's generated readers refuse a collection whose elements, at their minimal size,
    cannot fit in the bytes left; the element budget bounds the request's total (issue 42)."""
    if n * min_size > len(buf) - pos:
        raise ProtocolError(f"array of {n} elements of at least {min_size} bytes at offset "
                            f"{pos} cannot fit in {len(buf) - pos} bytes")
    if n > ctx.left:
        raise ProtocolError(f"array of {n} elements at offset {pos} exceeds the request's "
                            f"element budget ({ctx.left} left)")
    ctx.left -= n


def read_array_length(buf, pos: int, min_size: int, ctx: Budget) -> tuple[int | None, int]:
    n, = _I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    _check_array(buf, pos, n, min_size, ctx)
    return n, pos


def read_compact_array_length(buf, pos: int, min_size: int, ctx: Budget
                              ) -> tuple[int | None, int]:
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0:
        return None, pos
    _check_array(buf, pos, n, min_size, ctx)
    return n, pos


def unpack_array(fmt: str, size: int, buf, pos: int, n: int) -> tuple:
    """``n`` fixed-size values at once (their length was checked against the frame)."""
    return struct.unpack_from(f">{n}{fmt}", buf, pos)


def check_tag(buf, pos: int, tag: int, size: int, last: int) -> tuple[int, int]:
    if tag <= last:
        raise ProtocolError(f"tagged fields out of order: {tag} after {last}")
    end = pos + size
    if end > len(buf):
        raise ProtocolError(f"tagged field {tag} of {size} bytes runs past the frame")
    return tag, end


def check_tag_end(pos: int, end: int, name: str) -> None:
    if pos != end:
        raise ProtocolError(f"tagged field {name} does not end where its size says "
                            f"({pos} != {end})")


def skip_tagged_fields(buf, pos: int) -> int:
    """A tagged-field section none of whose tags this version knows (KIP-482: skipped)."""
    n, pos = read_uvarint(buf, pos)
    last = -1
    for _ in range(n):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        last, pos = check_tag(buf, pos, tag, size, last)
    return pos


# ---------------------------------------------------------------------------- writing

def uvarint(v: int) -> bytes:
    return _UVARINTS[v] if 0 <= v < 128 else encode_uvarint(v)


def encode_array_length(n: int) -> bytes:
    return _I32.pack(n)


def encode_compact_array_length(n: int) -> bytes:
    return uvarint(n + 1)


def pack_array(fmt: str, values: list) -> bytes:
    return struct.pack(f">{len(values)}{fmt}", *values)


def write_string(out, v: str | None) -> None:
    if v is None:
        out(_NULL_STRING)
        return
    b = v.encode("utf-8")
    if len(b) > 0x7FFF:
        raise ValueError(f"string of {len(b)} bytes is longer than INT16 allows")
    out(_I16.pack(len(b)))
    out(b)


def write_compact_string(out, v: str | None) -> None:
    if v is None:
        out(b"\x00")
        return
    b = v.encode("utf-8")
    out(uvarint(len(b) + 1))
    out(b)


def _bytes_part(v):
    return v if isinstance(v, bytes) else \
        bytes(v) if isinstance(v, (bytearray, memoryview)) else v  # a file region: kept


def write_bytes(out, v) -> None:
    if v is None:
        out(NULL_ARRAY)
        return
    out(_I32.pack(len(v)))
    out(_bytes_part(v))


def write_compact_bytes(out, v) -> None:
    if v is None:
        out(b"\x00")
        return
    out(uvarint(len(v) + 1))
    out(_bytes_part(v))


def uuid_value(v: bytes) -> bytes:
    if len(v) != 16:
        raise ValueError(f"a UUID is 16 bytes, got {len(v)}")
    return bytes(v)


def write_tagged_fields(parts: list, tagged: list[tuple[int, list]]) -> None:
    """The section of tagged fields: count, then per field tag, size, value, in tag order."""
    parts.append(uvarint(len(tagged)))
    for tag, sub in tagged:
        data = b"".join(sub)
        parts.append(uvarint(tag))
        parts.append(uvarint(len(data)))
        parts.append(data)
