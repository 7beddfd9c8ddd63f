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

    from common import records as R
    from common.errors import CorruptRecordError


def _with_crcs_fixed(data: bytes) -> bytes:
    """Every length-framed batch in ``data`` with its CRC recomputed."""
    b = bytearray(data)
    pos = 0
    while len(b) - pos >= R.HEADER_SIZE:
        length = struct.unpack_from(">i", b, pos + 8)[0]
        size = length + R.LOG_OVERHEAD
        if length < R.MIN_BATCH_LENGTH or pos + size > len(b):
            break
        struct.pack_into(">I", b, pos + R.CRC_OFFSET,
                         crc32c(bytes(b[pos + R.ATTRIBUTES_OFFSET:pos + size])))
        pos += size
    return bytes(b)


def test_one_input(data: bytes) -> None:
    for buf in (data, _with_crcs_fixed(data)):
        for partial in (False, True):
            try:
                batches = list(R.iter_batches(buf, allow_partial_tail=partial))
            except CorruptRecordError:
                continue
            for b in batches:
                try:
                    R.check_records(b.data, b.header)
                    accepted = True
                except CorruptRecordError:
                    accepted = False
                try:
                    R.decode_records(b.data, b.header)
                except CorruptRecordError:
                    # what produce accepts, every consumer must be able to decode
                    assert not accepted or b.header.compression, "accepted but undecodable"


def seeds() -> list[bytes]:
    """Valid batches for the corpus: the fuzzer mutates from inside the format."""
    recs = [R.ProducerRecord(b"k", b"value", [("h", b"v")]), R.ProducerRecord(None, None)]
    return [R.build_batch(recs[:1], now_ms=1), R.build_batch(recs, now_ms=2),
            R.build_batch(recs, now_ms=3) + R.build_batch(recs[:1], base_offset=2, now_ms=4)]


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
