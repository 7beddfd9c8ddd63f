"""atheris target: the record batch decoder (common/records.py) on arbitrary bytes.

Each input is read as a buffer of batches (iter_batches, CRCs checked, with and without a
partial tail) and each batch's records decoded and walked (decode_records, check_records);
then again with its CRCs made correct, so the fuzzer reaches the record parser behind the
checksum as a hostile producer would. Anything but CorruptRecordError is a crash.

    python tools/fuzz/fuzz_records.py [libFuzzer flags, e.g. -max_total_time=60 CORPUS_DIR]
"""
from __future__ import annotations

import struct
import sys

import atheris

with atheris.instrument_imports():
    from crc32c import crc32c

    from common import records
    from common.errors import CorruptRecordError


def _with_crcs_fixed(data: bytes) -> bytes:
    """Every length-framed batch in ``data`` with its CRC recomputed."""
    b = bytearray(data)
    pos = 0
    while len(b) - pos >= records.HEADER_SIZE:
        length = struct.unpack_from(">i", b, pos + 8)[0]
        size = length + records.LOG_OVERHEAD
        if length < records.MIN_BATCH_LENGTH or pos + size > len(b):
            break
        struct.pack_into(">I", b, pos + records.CRC_OFFSET,
                         crc32c(bytes(b[pos + records.ATTRIBUTES_OFFSET:pos + size])))
        pos += size
    return bytes(b)


def test_one_input(data: bytes) -> None:
    for buf in (data, _with_crcs_fixed(data)):
        for partial in (False, True):
            try:
                batches = list(records.iter_batches(buf, allow_partial_tail=partial))
            except CorruptRecordError:
                continue
            for b in batches:
                try:
                    records.check_records(b.data, b.header)
                    accepted = True
                except CorruptRecordError:
                    accepted = False
                try:
                    records.decode_records(b.data, b.header)
                except CorruptRecordError:
                    # what produce accepts, every consumer must be able to decode
                    assert not accepted or b.header.compression, "accepted but undecodable"


def seeds() -> list[bytes]:
    """Valid batches for the corpus: the fuzzer mutates from inside the format."""
    recs = [records.ProducerRecord(b"k", b"value", [("h", b"v")]),
            records.ProducerRecord(None, None)]
    return [records.build_batch(recs[:1], now_ms=1), records.build_batch(recs, now_ms=2),
            records.build_batch(recs, now_ms=3)
            + records.build_batch(recs[:1], base_offset=2, now_ms=4)]


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
