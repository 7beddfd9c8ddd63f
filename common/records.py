"""Kafka's v2 record batch ("magic 2"), the unit that producers send, brokers store and fetchers copy.

Layout (KIP-98; Kafka's DefaultRecordBatch), all integers big-endian::

    baseOffset            int64    0
    batchLength           int32    8    bytes after this field
    partitionLeaderEpoch  int32   12    set by the leader on append
    magic                 int8    16    = 2
    crc                   uint32  17    CRC-32C over attributes..end
    attributes            int16   21    bits 0-2 compression, 3 timestamp type,
                                        4 transactional, 5 control, 6 delete horizon
    lastOffsetDelta       int32   23
    baseTimestamp         int64   27
    maxTimestamp          int64   35
    producerId            int64   43
    producerEpoch         int16   51
    baseSequence          int32   53
    recordsCount          int32   57
    records               ...     61

Each record: length (varint), attributes (int8), timestampDelta (varlong), offsetDelta (varint),
key length (varint, -1 = null), key, value length (varint), value, header count (varint),
headers (key length, key (UTF-8), value length, value). Varints are zigzag-encoded.

The CRC deliberately excludes baseOffset and partitionLeaderEpoch, so a broker assigns offsets
and stamps the leader epoch by rewriting the first 16 bytes without recomputing the checksum.
"""  # noqa: E501

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from crc32c import crc32c

from common import compression
from common.clock import wall_ms
from common.errors import CorruptRecordError

MAGIC_V2 = 2
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
# Smallest legal batchLength: the header after the length field, with no records.
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_STRUCT = _HEADER
_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_OFFSET_LENGTH = struct.Struct(">qi")


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies in a log."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.attributes & TIMESTAMP_TYPE_MASK else "CreateTime"


@dataclass(frozen=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    sequence: int = NO_SEQUENCE


@dataclass
class ProducerRecord:
    """What a producer hands to :func:`build_batch`."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = field(default_factory=tuple)
    timestamp: int | None = None


def parse_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``; the caller ensures 61 bytes are there."""
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def check_header(h: BatchHeader, available: int | None = None) -> None:
    """Structural checks every stored batch must pass (before its CRC is checked)."""
    if h.magic != MAGIC_V2:
        raise CorruptRecordError(f"unsupported record batch magic {h.magic} (only v2 is supported)")
    if h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"record batch length {h.batch_length} is smaller than the "
                                 f"minimum {MIN_BATCH_LENGTH}")
    if available is not None and h.size > available:
        raise CorruptRecordError(f"record batch of {h.size} bytes is truncated to {available}")
    if h.last_offset_delta < 0:
        raise CorruptRecordError(f"negative lastOffsetDelta {h.last_offset_delta}")
    if h.records_count < 0:
        # An empty batch is legal in a log: compaction keeps a producer's last batch and a
        # cleaned segment's last as a header alone (Kafka's DefaultRecordBatch.writeEmptyHeader,
        # no delete horizon). Producers never send one: the leader's append refuses it.
        raise CorruptRecordError(f"record batch with {h.records_count} records")


def compute_crc(batch) -> int:
    """CRC-32C over attributes..end of one batch (a bytes-like object holding exactly it)."""
    return crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])


def verify_crc(batch, h: BatchHeader) -> None:
    actual = crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:h.size])
    if actual != h.crc:
        raise CorruptRecordError(f"record batch at offset {h.base_offset} is corrupt: "
                                 f"stored crc = {h.crc}, computed crc = {actual}")


class BatchView(NamedTuple):
    position: int
    header: BatchHeader
    data: memoryview


def iter_batches(buf, *, validate: bool = True, allow_partial_tail: bool = False
                 ) -> Iterator[BatchView]:
    """Yield every batch in a buffer of concatenated batches.

    With ``validate`` each batch's structure and CRC is checked (CorruptRecordError otherwise).
    ``allow_partial_tail`` ignores an incomplete last batch, as Kafka's consumers do with the
    tail of a fetch response that was cut by max_bytes.
    """
    view = memoryview(buf)
    end = len(view)
    pos = 0
    while pos < end:
        remaining = end - pos
        if remaining < HEADER_SIZE:
            if allow_partial_tail:
                return
            raise CorruptRecordError(f"{remaining} trailing bytes are not a whole record batch")
        h = parse_header(view, pos)
        if allow_partial_tail and h.batch_length >= MIN_BATCH_LENGTH and h.size > remaining:
            return
        if validate:
            check_header(h, remaining)
        elif h.size > remaining or h.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch at position {pos} overruns the buffer")
        data = view[pos:pos + h.size]
        if validate:
            verify_crc(data, h)
        yield BatchView(pos, h, data)
        pos += h.size


def complete_batches_length(buf) -> int:
    """Length of the prefix of ``buf`` made of whole batches (headers only; no CRC check)."""
    end = len(buf)
    pos = 0
    while end - pos >= LOG_OVERHEAD:
        _, length = _OFFSET_LENGTH.unpack_from(buf, pos)
        if length < MIN_BATCH_LENGTH or pos + LOG_OVERHEAD + length > end:
            break
        pos += LOG_OVERHEAD + length
    return pos


def stamp_prefix(base_offset: int, batch_length: int, partition_leader_epoch: int) -> bytes:
    """The first 16 bytes of a batch with a newly assigned offset and leader epoch.

    Neither field is covered by the CRC (see module docstring), so the rest of the batch is
    written unchanged after this prefix.
    """
    return _PREFIX.pack(base_offset, batch_length, partition_leader_epoch)


# ---------------------------------------------------------------------------- varints

def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def encode_varint(n: int, out: bytearray) -> None:
    v = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def decode_varint(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    """Return (value, new position); raise CorruptRecordError on a malformed varint or one
    that runs past ``end`` (default: the buffer's end)."""
    result = 0
    shift = 0
    end = len(buf) if end is None else end
    while True:
        if pos >= end:
            raise CorruptRecordError("varint runs past the end of the record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint is longer than 10 bytes")
    return (result >> 1) ^ -(result & 1), pos


def check_records(batch, h: BatchHeader) -> None:
    """Walk the records of one batch (decompressed first if it is compressed) without building
    them: each record's length,
    attributes, timestamp delta, offset delta (= its index, as every producer writes it), key,
    value and headers (keys UTF-8) must fit the record exactly, and the records the batch.
    CorruptRecordError otherwise. Kafka's LogValidator reads every record of a produced batch
    before it is appended (InvalidRecordException / CorruptRecordException), so a batch that
    a consumer cannot decode is refused at produce instead of stopping every consumer at it.

    On produce's hot path (about 1 us a record here): one-byte varints, the usual case for
    everything but key and value lengths, are read inline, and nothing is built."""
    buf, pos, end = record_section(batch, h)
    check_record_section(buf, pos, end, h)


def record_section(batch, h: BatchHeader) -> tuple[bytes, int, int]:
    """(buffer, start, end) of one batch's records: the batch itself past its header, or
    for a compressed batch the records its payload decompresses to (CorruptRecordError when
    it does not)."""
    if h.compression:
        out = compression.decompress(h.compression, memoryview(batch)[HEADER_SIZE:h.size])
        return out, 0, len(out)
    buf = batch if isinstance(batch, bytes) else bytes(memoryview(batch)[:h.size])
    return buf, HEADER_SIZE, h.size


def check_record_section(buf: bytes, pos: int, end: int, h: BatchHeader) -> None:
    """check_records over ``buf[pos:end]``, the records of the batch ``h`` heads."""
    for i in range(h.records_count):
        b = buf[pos] if pos < end else 0x80
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        elif pos + 1 < end and buf[pos + 1] < 0x80:  # two bytes: records of 64..8191 bytes
            raw = (b & 0x7F) | (buf[pos + 1] << 7)
            length, pos = (raw >> 1) ^ -(raw & 1), pos + 2
        else:
            length, pos = decode_varint(buf, pos, end)
        rec_end = pos + length
        if length < 3 or rec_end > end:  # attributes, timestamp delta, offset delta at least
            raise CorruptRecordError(f"record {i} of batch at offset {h.base_offset} has "
                                     f"invalid length {length}")
        pos += 1  # attributes
        if buf[pos] < 0x80:  # timestamp delta
            pos += 1
        else:
            _, pos = decode_varint(buf, pos, rec_end)
        b = buf[pos] if pos < rec_end else 0x80
        if b < 0x80:
            off_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            off_delta, pos = decode_varint(buf, pos, rec_end)
        if off_delta != i:
            raise CorruptRecordError(f"record {i} of batch at offset {h.base_offset} has "
                                     f"offset delta {off_delta}")
        for _ in (0, 1):  # key, value
            b = buf[pos] if pos < rec_end else 0x80
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif pos + 1 < rec_end and buf[pos + 1] < 0x80:
                raw = (b & 0x7F) | (buf[pos + 1] << 7)
                n, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                n, pos = decode_varint(buf, pos, rec_end)
            if n > 0:
                pos += n
        if pos < rec_end and buf[pos] == 0:  # no headers
            pos += 1
        else:
            pos = _check_headers(buf, pos, rec_end, i)
        if pos != rec_end:
            raise CorruptRecordError(f"record {i} of batch at offset {h.base_offset} does not "
                                     f"fill its {length} bytes")
    if pos != end:
        raise CorruptRecordError(f"batch at offset {h.base_offset} has {end - pos} bytes after "
                                 f"its {h.records_count} records")


def null_key_indices(buf: bytes, pos: int, end: int, h: BatchHeader) -> list[int]:
    """The indexes of the records in ``buf[pos:end]`` (a section check_record_section has
    passed) whose key is null: a compacted topic refuses them (Kafka's LogValidator)."""
    out = []
    for i in range(h.records_count):
        length, pos = decode_varint(buf, pos, end)
        rec_end = pos + length
        _, p = decode_varint(buf, pos + 1, rec_end)  # past attributes: timestamp delta
        _, p = decode_varint(buf, p, rec_end)  # offset delta
        key_length, _ = decode_varint(buf, p, rec_end)
        if key_length < 0:
            out.append(i)
        pos = rec_end
    return out


def with_codec(batch, h: BatchHeader, codec: int) -> bytes:
    """The batch ``h`` heads with its records compressed by ``codec`` (compression's ids; 0
    stores them uncompressed), every other header field kept and the CRC recomputed: what a
    broker writes when the topic's compression.type differs from the producer's (Kafka's
    LogValidator.buildRecordsAndAssignOffsets)."""
    buf, pos, end = record_section(batch, h)
    section = memoryview(buf)[pos:end]
    payload = compression.compress(codec, section) if codec else bytes(section)
    tail = struct.pack(">hiqqqhii", (h.attributes & ~COMPRESSION_MASK) | codec,
                       h.last_offset_delta, h.base_timestamp, h.max_timestamp, h.producer_id,
                       h.producer_epoch, h.base_sequence, h.records_count) + payload
    return struct.pack(">qiibI", h.base_offset, len(tail) + 9, h.partition_leader_epoch,
                       MAGIC_V2, crc32c(tail)) + tail


def rebuild_batch(h: BatchHeader, kept: Sequence[Record], delete_horizon_ms: int | None
                  ) -> bytes:
    """The batch ``h`` heads holding only ``kept`` (some of its records, in order), as the log
    cleaner rewrites it (Kafka's MemoryRecords.buildRetainedRecordsInto): base offset, last
    offset delta, leader epoch, producer id, epoch and base sequence and the codec kept, every
    record at its own offset and timestamp. With ``delete_horizon_ms`` the base timestamp is
    the delete horizon and the attributes say so (KIP-534); record timestamps stay."""
    base_ts = delete_horizon_ms if delete_horizon_ms is not None else kept[0].timestamp
    body = bytearray()
    one = bytearray()
    for r in kept:
        one.clear()
        one.append(0)
        encode_varint(r.timestamp - base_ts, one)
        encode_varint(r.offset - h.base_offset, one)
        _encode_bytes(r.key, one)
        _encode_bytes(r.value, one)
        encode_varint(len(r.headers), one)
        for hk, hv in r.headers:
            _encode_bytes(hk.encode("utf-8"), one)
            _encode_bytes(hv, one)
        encode_varint(len(one), body)
        body += one
    payload = compression.compress(h.compression, body) if h.compression else bytes(body)
    attributes = h.attributes | DELETE_HORIZON_MASK if delete_horizon_ms is not None \
        else h.attributes & ~DELETE_HORIZON_MASK
    max_ts = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else \
        max(r.timestamp for r in kept)
    tail = struct.pack(">hiqqqhii", attributes, h.last_offset_delta, base_ts, max_ts,
                       h.producer_id, h.producer_epoch, h.base_sequence, len(kept)) + payload
    return struct.pack(">qiibI", h.base_offset, len(tail) + 9, h.partition_leader_epoch,
                       MAGIC_V2, crc32c(tail)) + tail


def empty_batch(h: BatchHeader) -> bytes:
    """The header of ``h`` with no records (Kafka's DefaultRecordBatch.writeEmptyHeader): its
    offsets, max timestamp and producer fields kept, no base timestamp, no codec."""
    attributes = h.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    tail = struct.pack(">hiqqqhii", attributes, h.last_offset_delta, -1, h.max_timestamp,
                       h.producer_id, h.producer_epoch, h.base_sequence, 0)
    return struct.pack(">qiibI", h.base_offset, len(tail) + 9, h.partition_leader_epoch,
                       MAGIC_V2, crc32c(tail)) + tail


def _check_headers(buf: bytes, pos: int, end: int, i: int) -> int:
    count, pos = decode_varint(buf, pos, end)
    if count < 0:
        raise CorruptRecordError(f"record {i} has a negative header count")
    for _ in range(count):
        n, pos = decode_varint(buf, pos, end)
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"record {i} has a header key of invalid length {n}")
        try:
            buf[pos:pos + n].decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptRecordError(f"record {i} has a header key that is not UTF-8") from e
        n, pos = decode_varint(buf, pos + n, end)
        if n > 0:
            pos += n
    return pos


def _encode_bytes(b: bytes | None, out: bytearray) -> None:
    if b is None:
        encode_varint(-1, out)
    else:
        encode_varint(len(b), out)
        out += b


def _decode_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = decode_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise CorruptRecordError(f"field of {n} bytes runs past the end of the record")
    return bytes(buf[pos:pos + n]), pos + n


# ---------------------------------------------------------------------------- build / decode

def build_batch(records: Sequence[ProducerRecord], *, base_offset: int = 0,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE, now_ms: int | None = None) -> bytes:
    """Encode records as one uncompressed v2 batch (what a producer sends)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    if now_ms is None:
        now_ms = wall_ms()
    stamps = [now_ms if r.timestamp is None else r.timestamp for r in records]
    base_ts = stamps[0]
    body = bytearray()
    rec = bytearray()
    for delta, (r, ts) in enumerate(zip(records, stamps)):
        rec.clear()
        rec.append(0)  # record attributes: unused in v2
        encode_varint(ts - base_ts, rec)
        encode_varint(delta, rec)
        _encode_bytes(r.key, rec)
        _encode_bytes(r.value, rec)
        encode_varint(len(r.headers), rec)
        for hk, hv in r.headers:
            _encode_bytes(hk.encode("utf-8"), rec)
            _encode_bytes(hv, rec)
        encode_varint(len(rec), body)
        body += rec
    attributes = 0
    tail = struct.pack(">hiqqqhii", attributes, len(records) - 1, base_ts, max(stamps),
                       producer_id, producer_epoch, base_sequence, len(records)) + body
    crc = crc32c(tail)
    batch_length = len(tail) + 4 + 1 + 4  # partitionLeaderEpoch + magic + crc
    return (struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, MAGIC_V2, crc)
            + tail)


def decode_records(batch, header: BatchHeader | None = None) -> list[Record]:
    """Decode the records of one batch, decompressing them first if it is compressed."""
    h = header or parse_header(batch)
    buf, pos, end = record_section(batch, h)
    view = memoryview(buf)
    out: list[Record] = []
    for i in range(h.records_count):
        length, pos = decode_varint(view, pos)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise CorruptRecordError(f"record {i} of batch at offset {h.base_offset} has "
                                     f"invalid length {length}")
        rec = view[:rec_end]
        pos += 1  # attributes
        ts_delta, pos = decode_varint(rec, pos)
        off_delta, pos = decode_varint(rec, pos)
        key, pos = _decode_bytes(rec, pos)
        value, pos = _decode_bytes(rec, pos)
        n_headers, pos = decode_varint(rec, pos)
        if n_headers < 0:
            raise CorruptRecordError(f"record {i} has a negative header count")
        headers = []
        for _ in range(n_headers):
            hk, pos = _decode_bytes(rec, pos)
            hv, pos = _decode_bytes(rec, pos)
            if hk is None:
                raise CorruptRecordError(f"record {i} has a null header key")
            try:
                headers.append((hk.decode("utf-8"), hv))
            except UnicodeDecodeError as e:
                raise CorruptRecordError(f"record {i} has a header key that is not UTF-8") from e
        if pos != rec_end:
            raise CorruptRecordError(f"record {i} of batch at offset {h.base_offset}: "
                                     f"{rec_end - pos} bytes left over")
        seq = h.base_sequence + off_delta if h.base_sequence >= 0 else NO_SEQUENCE
        out.append(Record(h.base_offset + off_delta, h.base_timestamp + ts_delta, key, value,
                          tuple(headers), seq))
    if pos != end:
        raise CorruptRecordError(f"batch at offset {h.base_offset} has {end - pos} bytes after "
                                 f"its {h.records_count} records")
    return out


def decode_all(buf, *, allow_partial_tail: bool = True) -> list[Record]:
    """Every record in a buffer of batches (e.g. a fetch response), CRCs checked."""
    out: list[Record] = []
    for b in iter_batches(buf, allow_partial_tail=allow_partial_tail):
        out.extend(decode_records(b.data, b.header))
    return out
