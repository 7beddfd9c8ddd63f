"""The record-batch compression codecs, as Kafka frames each (attributes bits 0-2 of a v2 batch).

One library, cramjam, for all four: it ships one compiled wheel with gzip, snappy, LZ4 and
zstd (Rust implementations, no system libraries), and it is what aiokafka's codecs use; the
per-codec packages (python-snappy, lz4, zstandard) would be three wheels for the same work.

Kafka's framing of each codec, which is not always the library's default:
- gzip (1): an RFC 1952 gzip stream (Java's GZIPOutputStream).
- snappy (2): Kafka's Java producer writes xerial's SnappyOutputStream framing: a 16-byte
  header (``\\x82SNAPPY\\x00``, version 1, compatible version 1), then blocks of a 4-byte
  big-endian length and a raw snappy block of up to 32 KiB of input. librdkafka writes raw
  snappy (one block, no header), and xerial's reader takes both; so does ``decompress``,
  which tells them apart by the header. ``compress`` writes xerial framing, as a Kafka
  broker recompressing to snappy does, so every client can read what replog writes.
- lz4 (3): the LZ4 frame format (KIP-57), independent blocks and no content checksum, as
  Kafka's KafkaLZ4BlockOutputStream writes it (librdkafka and aiokafka write the same).
- zstd (4): a zstd frame (KIP-110), level 3 as Kafka's default.
"""

from __future__ import annotations

import struct

import cramjam

from common.errors import CorruptRecordError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
# Kafka's producer compression.type values, and the topic's (where "uncompressed" is none's
# name and "producer" keeps what the producer sent: None here).
CODECS = {name: codec for codec, name in NAMES.items()}
TOPIC_CODECS: dict[str, int | None] = {**CODECS, "uncompressed": NONE, "producer": None}
del TOPIC_CODECS["none"]

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible with 1
_XERIAL_BLOCK = 32 * 1024  # xerial SnappyOutputStream's default block size
_BLOCK_LENGTH = struct.Struct(">i")


def codec_of(name: str) -> int:
    """A producer's compression.type -> its codec id; ValueError for an unknown name."""
    try:
        return CODECS[name.strip().lower()]
    except KeyError:
        raise ValueError(f"Invalid compression.type {name!r} (one of: "
                         f"{', '.join(CODECS)})") from None


def compress(codec: int, data) -> bytes:
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _xerial_compress(memoryview(data))
    if codec == LZ4:
        c = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        c.compress(bytes(data))
        return bytes(c.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3))
    if codec == NONE:
        return bytes(data)
    raise CorruptRecordError(f"unknown compression codec {codec}")


def decompress(codec: int, data) -> bytes:
    """The bytes a compressed batch's records section holds; CorruptRecordError when they
    do not decompress (Kafka: the batch is corrupt)."""
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            view = memoryview(data)
            if len(view) >= len(_XERIAL_HEADER) and view[:len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
                return _xerial_decompress(view)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"{NAMES[codec]} records do not decompress: {e}") from None
    if codec == NONE:
        return bytes(data)
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _xerial_compress(view: memoryview) -> bytes:
    out = [_XERIAL_HEADER]
    for i in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[i:i + _XERIAL_BLOCK]))
        out.append(_BLOCK_LENGTH.pack(len(block)))
        out.append(block)
    return b"".join(out)


def _xerial_decompress(view: memoryview) -> bytes:
    out = []
    pos, end = len(_XERIAL_HEADER), len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("xerial snappy block length is truncated")
        (n,) = _BLOCK_LENGTH.unpack_from(view, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"xerial snappy block of {n} bytes overruns the records")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos:pos + n])))
        pos += n
    return b"".join(out)
