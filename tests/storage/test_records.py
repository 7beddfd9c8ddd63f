"""Kafka v2 record batches: round trips, and agreement with an independent parser."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from common import records as rec
from common.errors import CorruptRecordError

header_st = st.tuples(st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=50)))
record_st = st.builds(rec.ProducerRecord,
                      key=st.one_of(st.none(), st.binary(max_size=200)),
                      value=st.one_of(st.none(), st.binary(max_size=2000)),
                      headers=st.lists(header_st, max_size=4).map(tuple),
                      timestamp=st.integers(min_value=0, max_value=2**41))


@settings(max_examples=200, deadline=None)
@given(records=st.lists(record_st, min_size=1, max_size=40),
       base_offset=st.integers(min_value=0, max_value=2**40))
def test_batch_round_trip(records, base_offset):
    data = rec.build_batch(records, base_offset=base_offset)
    [b] = list(rec.iter_batches(data))
    assert b.header.records_count == len(records)
    assert b.header.last_offset == base_offset + len(records) - 1
    assert b.header.max_timestamp == max(r.timestamp for r in records)
    decoded = rec.decode_records(b.data, b.header)
    assert [(d.offset, d.key, d.value, d.timestamp, d.headers) for d in decoded] == [
        (base_offset + i, r.key, r.value, r.timestamp, tuple(r.headers))
        for i, r in enumerate(records)]


@settings(max_examples=100, deadline=None)
@given(records=st.lists(record_st, min_size=1, max_size=20))
def test_kafka_python_reads_our_batches(records):
    data = rec.build_batch(records, base_offset=7, partition_leader_epoch=3)
    batch = DefaultRecordBatch(bytearray(data))
    assert batch.validate_crc()
    assert batch.base_offset == 7
    theirs = list(batch)
    assert [(r.offset, r.key, r.value, r.timestamp, [(k, v) for k, v in r.headers])
            for r in theirs] == [(7 + i, r.key, r.value, r.timestamp, list(r.headers))
                                 for i, r in enumerate(records)]


@settings(max_examples=50, deadline=None)
@given(records=st.lists(record_st, min_size=1, max_size=10),
       flip=st.integers(min_value=rec.ATTRIBUTES_OFFSET), bit=st.integers(0, 7))
def test_any_flipped_bit_under_the_crc_is_detected(records, flip, bit):
    data = bytearray(rec.build_batch(records))
    flip %= len(data)
    if flip < rec.ATTRIBUTES_OFFSET:
        flip += rec.ATTRIBUTES_OFFSET
    data[flip] ^= 1 << bit
    with pytest.raises(CorruptRecordError):
        list(rec.iter_batches(data))


def test_offset_and_epoch_are_outside_the_crc():
    data = rec.build_batch([rec.ProducerRecord(b"k", b"v")])
    stamped = rec.stamp_prefix(1000, struct.unpack_from(">i", data, 8)[0], 9) + data[16:]
    [b] = list(rec.iter_batches(stamped))
    assert (b.header.base_offset, b.header.partition_leader_epoch) == (1000, 9)
    assert DefaultRecordBatch(bytearray(stamped)).validate_crc()


def test_partial_tail_is_ignored_only_when_allowed():
    a = rec.build_batch([rec.ProducerRecord(b"a", b"1")])
    b = rec.build_batch([rec.ProducerRecord(b"b", b"2" * 100)], base_offset=1)
    buf = a + b[:-10]
    assert rec.complete_batches_length(buf) == len(a)
    assert [x.header.base_offset for x in rec.iter_batches(buf, allow_partial_tail=True)] == [0]
    with pytest.raises(CorruptRecordError):
        list(rec.iter_batches(buf))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.__setitem__(16, 1), "magic"),
    (lambda d: d.__setitem__(slice(8, 12), struct.pack(">i", 10)), "length"),
    (lambda d: d.__setitem__(slice(8, 12), struct.pack(">i", 10_000)), "truncated"),
])
def test_structural_errors_name_the_problem(mutate, message):
    data = bytearray(rec.build_batch([rec.ProducerRecord(b"k", b"v")]))
    mutate(data)
    with pytest.raises(CorruptRecordError, match=message):
        list(rec.iter_batches(data))


def test_varint_matches_kafka_zigzag():
    out = bytearray()
    for n in (0, -1, 1, -64, 63, 64, 300, -2**31, 2**31 - 1, 2**62):
        out.clear()
        rec.encode_varint(n, out)
        assert rec.decode_varint(out, 0) == (n, len(out))
    out.clear()
    rec.encode_varint(-1, out)
    assert bytes(out) == b"\x01"  # zigzag: -1 -> 1
    with pytest.raises(CorruptRecordError):
        rec.decode_varint(b"\xff" * 11, 0)
