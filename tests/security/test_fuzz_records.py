"""Record batches fuzzed (common/records.py) on the paths they arrive by: the decoder, the
leader's produce validation (Log.append_as_leader) and the follower's append
(Log.append_as_follower).

Properties:
- the parsers raise CorruptRecordError (or, for size, RecordTooLargeError) and nothing else;
- a batch the decoder accepts decodes to what was written (a flipped bit in the CRC-covered
  part is caught; only baseOffset and partitionLeaderEpoch are outside it, by design);
- a hostile producer that computes a correct CRC over garbage records is refused at produce
  (Kafka's LogValidator decodes every record), so no batch that a consumer cannot decode is
  ever stored;
- a refused append changes nothing: the log end offset and every record already stored stay,
  also after the log is closed and recovered.
"""
from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from broker.storage.log import Log, LogConfig, RecordTooLargeError
from common import records as R
from common.errors import CorruptRecordError
from common.names import TopicPartition
from tests.security.fuzzing import FUZZ, byte_mutations

TP = TopicPartition("t", 0)

_RECORDS = st.lists(st.builds(
    R.ProducerRecord, st.none() | st.binary(max_size=8), st.none() | st.binary(max_size=24),
    st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=4)), max_size=2),
    st.none() | st.integers(0, 2**41)), min_size=1, max_size=5)


def _content(records) -> list[tuple]:
    """What a record carries (a producer's timestamp None is the batch's now_ms, 5)."""
    return [(r.key, r.value, tuple(r.headers), 5 if r.timestamp is None else r.timestamp)
            for r in records]


def _batches(draw_records: list[list[R.ProducerRecord]]) -> bytes:
    return b"".join(R.build_batch(rs, now_ms=5) for rs in draw_records)


def with_crc_fixed(batch: bytes) -> bytes:
    """What a hostile producer sends: any bytes after the header's CRC, with a correct CRC."""
    b = bytearray(batch)
    if len(b) >= R.HEADER_SIZE:
        struct.pack_into(">i", b, 8, len(b) - R.LOG_OVERHEAD)
        struct.pack_into(">I", b, R.CRC_OFFSET, crc32c(bytes(b[R.ATTRIBUTES_OFFSET:])))
    return bytes(b)


@FUZZ
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_decode_or_raise_corrupt(data):
    for partial in (False, True):
        try:
            R.decode_all(data, allow_partial_tail=partial)
        except CorruptRecordError:
            pass


@FUZZ
@given(batches=st.lists(_RECORDS, min_size=1, max_size=3), data=st.data())
def test_a_damaged_stream_decodes_to_a_prefix_of_what_was_written_or_raises(batches, data):
    buf = _batches(batches)
    damaged = data.draw(byte_mutations(buf))
    written = _content(r for rs in batches for r in rs)
    try:
        got = R.decode_all(damaged)
    except CorruptRecordError:
        return
    # only a cut (a partial tail) or a change outside the CRC passes
    assert _content(got) == written[:len(got)]


@FUZZ
@given(records=_RECORDS, data=st.data())
def test_garbage_records_under_a_correct_crc_raise_corrupt(records, data):
    batch = with_crc_fixed(data.draw(byte_mutations(R.build_batch(records, now_ms=5))))
    try:
        for b in R.iter_batches(batch):
            R.decode_records(b.data, b.header)
    except CorruptRecordError:
        pass


def _log(tmp_path, **cfg) -> Log:
    return Log.open(str(tmp_path), TP, LogConfig(**cfg), needs_recovery=False)


def _stored(log: Log) -> list[tuple]:
    return _content(R.decode_all(log.read(0, 1 << 30)))


def _reopened_with_recovery(log: Log, tmp_path) -> Log:
    log.close()
    return Log.open(str(tmp_path), TP, LogConfig(), needs_recovery=True)


@FUZZ
@given(records=_RECORDS, data=st.data())
def test_produce_refuses_what_a_consumer_could_not_decode_and_loses_nothing(
        tmp_path_factory, records, data):
    tmp_path = tmp_path_factory.mktemp("log")
    log = _log(tmp_path)
    good = R.build_batch(records, now_ms=5)
    log.append_as_leader(good, leader_epoch=1)
    before = _stored(log)
    hostile = data.draw(byte_mutations(good))
    if data.draw(st.booleans()):
        hostile = with_crc_fixed(hostile)
    try:
        info = log.append_as_leader(hostile, leader_epoch=1)
    except (CorruptRecordError, RecordTooLargeError):
        assert _stored(log) == before and log.log_end_offset == len(records)
    else:
        stored = R.decode_all(log.read(len(records), 1 << 30))  # decodes: the point
        assert len(stored) == info.num_records
    log = _reopened_with_recovery(log, tmp_path)
    assert _stored(log)[:len(before)] == before
    log.close()


@FUZZ
@given(records=_RECORDS, more=_RECORDS, data=st.data())
def test_follower_append_takes_a_valid_prefix_or_refuses_and_loses_nothing(
        tmp_path_factory, records, more, data):
    tmp_path = tmp_path_factory.mktemp("log")
    log = _log(tmp_path)
    log.append_as_follower(R.build_batch(records, now_ms=5))
    before = _stored(log)
    fetched = data.draw(byte_mutations(R.build_batch(more, base_offset=len(records), now_ms=5)))
    try:
        log.append_as_follower(fetched)
    except CorruptRecordError:
        assert _stored(log) == before
    assert _stored(log)[:len(before)] == before
    log = _reopened_with_recovery(log, tmp_path)
    assert _stored(log)[:len(before)] == before
    log.close()


# ------------------------------------------------------------------ bounds

def test_a_batch_beyond_message_max_bytes_is_refused_as_message_too_large(tmp_path):
    log = _log(tmp_path, max_message_bytes=200)
    with pytest.raises(RecordTooLargeError) as e:
        log.append_as_leader(R.build_batch([R.ProducerRecord(None, b"x" * 300)]), 1)
    assert e.value.error_code.name == "MESSAGE_TOO_LARGE" and log.log_end_offset == 0


def _hostile(records_part: bytes, count: int = 1) -> bytes:
    """One batch of ``count`` records whose record bytes are ``records_part``, CRC correct."""
    head = R.build_batch([R.ProducerRecord(None, b"v")], now_ms=5)[:R.HEADER_SIZE]
    b = bytearray(head + records_part)
    struct.pack_into(">i", b, R.HEADER_SIZE - 4, count)
    return with_crc_fixed(bytes(b))


@pytest.mark.parametrize("records_part", [
    b"\x0c\x00\x00\x00\x01\x02v\x01",       # header count -1
    b"\x0e\x00\x00\x00\x01\x02v\x02\x02\xff\x00",  # a header key that is not UTF-8
    b"\x0a\x00\x00\x00\x01\x02v",           # a record 1 byte shorter than its length
    b"\x0c\x00\x00\x04\x01\x02v\x00",       # offset delta 2 in a one-record batch
    b"\x7f",                                # a length past the batch
], ids=["negative-header-count", "header-key-not-utf8", "short-record", "offset-delta",
        "length-past-batch"])
def test_what_the_fuzzing_found_a_correct_crc_over_bad_records_is_refused_at_produce(
        tmp_path, records_part):
    """Found by test_produce_refuses_what_a_consumer_could_not_decode_and_loses_nothing: the
    leader checked the header and the CRC only, so such a batch was stored and every
    consumer's decode failed at it."""
    batch = _hostile(records_part)
    with pytest.raises(CorruptRecordError):
        R.decode_records(batch)
    log = _log(tmp_path)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(batch, 1)
    assert log.log_end_offset == 0


@FUZZ
@given(sizes=st.lists(st.sampled_from([0, 1, 63, 64, 127, 128, 8191, 8192, 20000]),
                      min_size=1, max_size=4),
       keyed=st.booleans(), headers=st.booleans())
def test_produce_accepts_every_well_formed_batch(sizes, keyed, headers):
    """check_records reads one-, two- and three-byte varints alike (record, key and value
    lengths around 64 and 8192 bytes switch between them)."""
    recs = [R.ProducerRecord(b"k" * n if keyed else None, b"v" * n,
                             [("h", b"x" * n)] if headers else []) for n in sizes]
    batch = R.build_batch(recs, now_ms=5)
    R.check_records(batch, R.parse_header(batch))
    assert len(R.decode_records(batch)) == len(sizes)
