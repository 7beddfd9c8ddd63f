"""``replog dump-log``: print a segment's batches and records the way kafka-dump-log does.

Reads ``.log``, ``.index`` and ``.timeindex`` files directly (no broker needed), validates every
batch's CRC and reports a torn or corrupt tail instead of failing on it.
"""

from __future__ import annotations

import os
import struct
from typing import TextIO

from admin import offsets_decoder as offsets
from common import compression
from common import records as rec
from common.errors import CorruptRecordError, ReplogError

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def _base_offset(path: str) -> int:
    stem = os.path.basename(path).split(".", 1)[0]
    if not stem.isdigit():
        raise ReplogError(f"{path} is not named by a 20-digit base offset")
    return int(stem)


def _show(b: bytes | None) -> str:
    return "null" if b is None else b.decode("utf-8", errors="replace")


def dump_log_file(path: str, out: TextIO, print_data: bool, offsets_decoder: bool = False
                  ) -> None:
    with open(path, "rb") as f:
        data = f.read()
    out.write(f"Log starting offset: {_base_offset(path)}\n")
    pos = 0
    while pos < len(data):
        if len(data) - pos < rec.HEADER_SIZE:
            out.write(f"Found {len(data) - pos} invalid bytes at the end of "
                      f"{os.path.basename(path)}\n")
            return
        h = rec.parse_header(data, pos)
        try:
            rec.check_header(h, len(data) - pos)
        except CorruptRecordError as e:
            out.write(f"Found {len(data) - pos} invalid bytes at the end of "
                      f"{os.path.basename(path)}: {e}\n")
            return
        view = memoryview(data)[pos:pos + h.size]
        valid = rec.compute_crc(view) == h.crc
        last_seq = (h.base_sequence + h.last_offset_delta) if h.base_sequence >= 0 else -1
        out.write(
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {last_seq} "
            f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {str(h.is_transactional).lower()} "
            f"isControl: {str(h.is_control).lower()} deleteHorizonMs: OptionalLong.empty "
            f"position: {pos} {h.timestamp_type}: {h.max_timestamp} size: {h.size} "
            f"magic: {h.magic} compresscodec: {compression.NAMES.get(h.compression, h.compression)} "  # noqa: E501
            f"crc: {h.crc} isvalid: {str(valid).lower()}\n")
        if print_data:
            try:
                for r in rec.decode_records(view, h):
                    line = (f"| offset: {r.offset} {h.timestamp_type}: {r.timestamp} "
                            f"keySize: {-1 if r.key is None else len(r.key)} "
                            f"valueSize: {-1 if r.value is None else len(r.value)} "
                            f"sequence: {r.sequence} "
                            f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
                    if offsets_decoder:  # __consumer_offsets records (admin/offsets_decoder.py)
                        key, payload = offsets.decode(r.key, r.value)
                        line += f" key: {key} payload: {payload}"
                    else:
                        if r.key is not None:
                            line += f" key: {_show(r.key)}"
                        line += f" payload: {_show(r.value)}"
                    out.write(line + "\n")
            except CorruptRecordError as e:
                out.write(f"| records not readable: {e}\n")
        pos += h.size


def dump_offset_index(path: str, out: TextIO) -> None:
    base = _base_offset(path)
    with open(path, "rb") as f:
        data = f.read()
    usable = len(data) - len(data) % _OFFSET_ENTRY.size
    out.writelines(f"offset: {base + rel} position: {position}\n" for rel, position in _OFFSET_ENTRY.iter_unpack(data[:usable]))  # noqa: E501


def dump_time_index(path: str, out: TextIO) -> None:
    base = _base_offset(path)
    with open(path, "rb") as f:
        data = f.read()
    usable = len(data) - len(data) % _TIME_ENTRY.size
    out.writelines(f"timestamp: {ts} offset: {base + rel}\n" for ts, rel in _TIME_ENTRY.iter_unpack(data[:usable]))  # noqa: E501


def dump(files: list[str], out: TextIO, print_data: bool = False,
         offsets_decoder: bool = False) -> None:
    """``offsets_decoder`` (kafka-dump-log's --offsets-decoder, which implies
    --print-data-log): decode __consumer_offsets keys and values."""
    for path in files:
        if not os.path.isfile(path):
            raise ReplogError(f"{path} does not exist or is not a file")
        out.write(f"Dumping {path}\n")
        if path.endswith(".log"):
            dump_log_file(path, out, print_data or offsets_decoder, offsets_decoder)
        elif path.endswith(".index"):
            dump_offset_index(path, out)
        elif path.endswith(".timeindex"):
            dump_time_index(path, out)
        else:
            raise ReplogError(f"{path}: only .log, .index and .timeindex files can be dumped")
