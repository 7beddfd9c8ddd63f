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

from common.errors import CorruptRecordError, ErrorCode

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


class DecompressedTooLargeError(CorruptRecordError):
    """A batch whose records decompress to more than MAX_DECOMPRESSED_BYTES: refused as too
    large (MESSAGE_TOO_LARGE, which producers do not retry) instead of filling the broker's
    memory - a few hundred KB of zstd can stand for gigabytes of zeros."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


# The most one batch's records may decompress to. Kafka streams a compressed batch's records
# and sets no bound; replog holds them in memory to validate them, so it bounds them, far
# above what a producer's batch.size (the uncompressed bytes it gathers) makes.
MAX_DECOMPRESSED_BYTES = 128 << 20
_FIRST_GUESS = 8  # times the compressed size: one pass for text, JSON and the like


def decompress(codec: int, data, limit: int | None = None) -> bytes:
    """The bytes a compressed batch's records section holds; CorruptRecordError when they
    do not decompress (Kafka: the batch is corrupt), DecompressedTooLargeError above
    ``limit`` (MAX_DECOMPRESSED_BYTES by default)."""
    limit = MAX_DECOMPRESSED_BYTES if limit is None else limit
    if codec == GZIP:
        return _bounded(codec, cramjam.gzip.decompress_into, data, limit)
    if codec == SNAPPY:
        view = memoryview(data)
        if len(view) >= len(_XERIAL_HEADER) and view[:len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
            return _xerial_decompress(view, limit)
        return _bounded(codec, cramjam.snappy.decompress_raw_into, data, limit)
    if codec == LZ4:
        return _bounded(codec, cramjam.lz4.decompress_into, data, limit)
    if codec == ZSTD:
        return _bounded(codec, cramjam.zstd.decompress_into, data, limit)
    if codec == NONE:
        return bytes(data)
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _bounded(codec: int, decompress_into, data, limit: int) -> bytes:
    """``decompress_into`` a buffer that grows (8x each time) until the output fits, up to
    ``limit``: the output is never larger than the buffer, so no input can allocate more."""
    size = min(limit, max(64 << 10, _FIRST_GUESS * len(data)))
    while True:
        out = bytearray(size)
        try:
            n = decompress_into(data, out)
        except cramjam.DecompressionError as e:
            # cramjam says "failed to write whole buffer" (gzip, lz4, zstd) or "output buffer
            # ... is smaller than required" (snappy) when the output does not fit
            if "buffer" not in str(e):
                raise CorruptRecordError(f"{NAMES[codec]} records do not decompress: "
                                         f"{e}") from None
            if size >= limit:
                raise DecompressedTooLargeError(
                    f"{NAMES[codec]} records decompress to more than {limit} bytes") from None
            size = min(limit, size * 8)
            continue
        del out[n:]
        return bytes(out)


def _xerial_compress(view: memoryview) -> bytes:
    out = [_XERIAL_HEADER]
    for i in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[i:i + _XERIAL_BLOCK]))
        out.append(_BLOCK_LENGTH.pack(len(block)))
        out.append(block)
    return b"".join(out)


def _xerial_decompress(view: memoryview, limit: int) -> bytes:
    out = []
    total = 0
    pos, end = len(_XERIAL_HEADER), len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("xerial snappy block length is truncated")
        (n,) = _BLOCK_LENGTH.unpack_from(view, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"xerial snappy block of {n} bytes overruns the records")
        try:
            out.append(_bounded(SNAPPY, cramjam.snappy.decompress_raw_into,
                                view[pos:pos + n], limit - total))
        except DecompressedTooLargeError:
            raise DecompressedTooLargeError(
                f"snappy records decompress to more than {limit} bytes") from None
        total += len(out[-1])
        pos += n
    return b"".join(out)
