"""Kafka's protocol primitive types (the "Protocol Primitive Types" of the Kafka protocol guide).

All integers are big-endian. Flexible versions (KIP-482) use the compact forms: lengths as
unsigned varints holding length + 1 (0 = null), and a tagged-field section after each struct.

``Reader`` reads from one frame and raises ``ProtocolError`` on anything short or malformed, so a
listener can close the connection instead of crashing (Kafka closes the channel on an
InvalidRequestException). ``Writer`` collects parts and joins them once.
"""

from __future__ import annotations

import base64
import binascii
import struct
import uuid

from common.kafka_protocol.limits import MAX_STRING_BYTES
from common.records import encode_varint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

# A collection or string longer than the bytes left cannot be honest; checked before allocating.
_MAX_VARINT_BYTES = 5
_MAX_VARLONG_BYTES = 10


class ProtocolError(ValueError):
    """A frame that cannot be parsed (Kafka's InvalidRequestException / SchemaException)."""


class Reader:
    """``budget``: how many array elements may still be read (None: no bound), the request's
    element budget (common/kafka_protocol/limits.py); the listener sets it per API."""
    __slots__ = ("budget", "buf", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0,
                 budget: int | None = None):
        self.buf = memoryview(buf)
        self.pos = pos
        self.budget = budget

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ProtocolError(f"need {n} bytes at offset {self.pos}, "
                                f"{len(self.buf) - self.pos} left")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def _unpack(self, s: struct.Struct):
        if self.pos + s.size > len(self.buf):
            raise ProtocolError(f"need {s.size} bytes at offset {self.pos}, "
                                f"{len(self.buf) - self.pos} left")
        v = s.unpack_from(self.buf, self.pos)[0]
        self.pos += s.size
        return v

    def int8(self) -> int:
        return self._unpack(_I8)

    def int16(self) -> int:
        return self._unpack(_I16)

    def uint16(self) -> int:
        return self._unpack(_U16)

    def int32(self) -> int:
        return self._unpack(_I32)

    def uint32(self) -> int:
        return self._unpack(_U32)

    def int64(self) -> int:
        return self._unpack(_I64)

    def float64(self) -> float:
        return self._unpack(_F64)

    def bool(self) -> bool:
        return self._unpack(_I8) != 0

    def uvarint(self, max_bytes: int = _MAX_VARINT_BYTES) -> int:
        value = shift = 0
        for _ in range(max_bytes):
            if self.pos >= len(self.buf):
                raise ProtocolError("varint runs past the end of the frame")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise ProtocolError("varint is too long")

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def varlong(self) -> int:
        v = self.uvarint(_MAX_VARLONG_BYTES)
        return (v >> 1) ^ -(v & 1)

    def uuid(self) -> bytes:
        return bytes(self._take(16))

    # -- lengths: None means null
    def _length(self, compact: bool, wide: bool = False) -> int | None:
        if compact:
            n = self.uvarint() - 1
        else:
            n = self.int32() if wide else self.int16()
        if n < 0:
            return None
        if n > self.remaining():
            raise ProtocolError(f"length {n} at offset {self.pos} exceeds the "
                                f"{self.remaining()} bytes left")
        return n

    def string(self, compact: bool) -> str | None:
        n = self._length(compact)
        if n is None:
            return None
        if n > MAX_STRING_BYTES:  # Kafka's generated readers: "had invalid length"
            raise ProtocolError(f"string of {n} bytes at offset {self.pos} is longer than "
                                f"{MAX_STRING_BYTES}")
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"string is not UTF-8: {e}") from None

    def bytes(self, compact: bool) -> bytes | None:
        n = self._length(compact, wide=True)
        return None if n is None else bytes(self._take(n))

    def array_length(self, compact: bool, min_element_size: int = 1) -> int | None:
        """An array's length, refused before any element is read when its elements, at
        ``min_element_size`` bytes each, cannot fit in the bytes left (Kafka's generated
        readers), or when they exceed what is left of the element budget (limits.py)."""
        if compact:
            n = self.uvarint() - 1
        else:
            n = self.int32()
        if n < 0:
            return None
        if n * max(1, min_element_size) > self.remaining():
            raise ProtocolError(f"array of {n} elements of at least {min_element_size} bytes "
                                f"at offset {self.pos} cannot fit in {self.remaining()} bytes")
        if self.budget is not None:
            if n > self.budget:
                raise ProtocolError(f"array of {n} elements at offset {self.pos} exceeds the "
                                    f"request's element budget ({self.budget} left)")
            self.budget -= n
        return n


class Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def getvalue(self) -> bytes:
        return b"".join(self.parts)

    def chunks(self) -> list:
        """The encoding as bytes chunks and the file regions written by ``bytes`` (adjacent
        bytes joined), for a sender that puts the regions on the socket with sendfile."""
        out: list = []
        run: list[bytes] = []
        for p in self.parts:
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

    def raw(self, b: bytes) -> None:
        self.parts.append(b)

    def int8(self, v: int) -> None:
        self.parts.append(_I8.pack(v))

    def int16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def uint16(self, v: int) -> None:
        self.parts.append(_U16.pack(v))

    def int32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def uint32(self, v: int) -> None:
        self.parts.append(_U32.pack(v))

    def int64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def float64(self, v: float) -> None:
        self.parts.append(_F64.pack(v))

    def bool(self, v: bool) -> None:
        self.parts.append(b"\x01" if v else b"\x00")

    def uvarint(self, v: int) -> None:
        self.parts.append(encode_uvarint(v))

    def varint(self, v: int) -> None:
        # zigzag over 64 bits is zigzag over 32 for every INT32 (Kafka's VARINT)
        self.varlong(v)

    def varlong(self, v: int) -> None:
        out = bytearray()
        encode_varint(v, out)
        self.parts.append(bytes(out))

    def uuid(self, v: bytes) -> None:
        if len(v) != 16:
            raise ValueError(f"a UUID is 16 bytes, got {len(v)}")
        self.parts.append(bytes(v))

    def _length(self, n: int | None, compact: bool, wide: bool = False) -> None:
        if compact:
            self.uvarint(0 if n is None else n + 1)
        elif wide:
            self.int32(-1 if n is None else n)
        else:
            self.int16(-1 if n is None else n)

    def string(self, v: str | None, compact: bool) -> None:
        if v is None:
            self._length(None, compact)
            return
        b = v.encode("utf-8")
        if not compact and len(b) > 0x7FFF:
            raise ValueError(f"string of {len(b)} bytes is longer than INT16 allows")
        self._length(len(b), compact)
        self.parts.append(b)

    def bytes(self, v: bytes | None, compact: bool) -> None:
        """``v`` may also be a file region (anything with a length that is not bytes-like,
        e.g. broker/storage/file_region.py): it is kept as is, for ``chunks``."""
        if v is None:
            self._length(None, compact, wide=True)
            return
        self._length(len(v), compact, wide=True)
        self.parts.append(bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else v)

    def array_length(self, n: int | None, compact: bool) -> None:
        if compact:
            self.uvarint(0 if n is None else n + 1)
        else:
            self.int32(-1 if n is None else n)


def encode_uvarint(v: int) -> bytes:
    """An unsigned varint: the record format's zigzag varint (common/records.py) of the value
    whose zigzag form is ``v``, so the 7-bit loop lives in one place."""
    if v < 0:
        raise ValueError(f"unsigned varint of a negative value {v}")
    out = bytearray()
    encode_varint((v >> 1) ^ -(v & 1), out)
    return bytes(out)


ZERO_UUID = bytes(16)


def uuid_bytes(text: str) -> bytes:
    """A topic id as replog stores it (a UUID string, or Kafka's URL-safe base64 form) as
    Kafka's 16 wire bytes; anything else is the zero UUID (Kafka's Uuid.ZERO_UUID: no id)."""
    if not text:
        return ZERO_UUID
    try:
        return uuid.UUID(text).bytes
    except ValueError:
        pass
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, binascii.Error):
        return ZERO_UUID
    return raw if len(raw) == 16 else ZERO_UUID
