"""Compressed produced batches (issue 41 item 7): the four codecs as Kafka frames them, Kafka's
LogValidator rules on a leader's append (decompress to validate, store as sent under
compression.type=producer, recompress to the topic's codec otherwise), and the compacted-topic
key rule (INVALID_RECORD with per-record errors). Cross-checked with kafka-python's reader."""

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.storage.log import Log, LogConfig
from broker.storage.log_validator import InvalidRecordError, RecordValidationError
from client.recordbatch import build_producer_batch
from common import compression
from common import records as rec
from common.errors import CorruptRecordError
from common.names import TopicPartition
from tests.storage.helpers import Clock, kafka_python_read

TP = TopicPartition("orders", 0)
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def open_log(tmp_path, **cfg):
    return Log.open(str(tmp_path), TP, LogConfig(**cfg), clock=Clock(), needs_recovery=False)


def records(n=20, key=True):
    return [rec.ProducerRecord(f"k{i}".encode() if key or i % 2 else None,
                               f"value-{i}".encode() * 20, [("h", b"x")], timestamp=1000 + i)
            for i in range(n)]


@pytest.mark.parametrize("name", CODECS)
def test_each_codec_is_stored_as_sent_and_reads_back(tmp_path, name):
    log = open_log(tmp_path)
    log.append_as_leader(build_producer_batch(records(3)), leader_epoch=0)
    sent = build_producer_batch(records(), compression=CODECS[name])
    info = log.append_as_leader(sent, leader_epoch=4)
    assert (info.first_offset, info.last_offset) == (3, 22)
    data = bytes(log.read(3, 1 << 20))
    # compression.type=producer: the batch as the producer sent it, offset and epoch stamped
    assert data[16:] == sent[16:] and rec.parse_header(data).compression == CODECS[name]
    want = [(3 + i, r.key, r.value) for i, r in enumerate(records())]
    assert [(r.offset, r.key, r.value) for r in rec.decode_all(data)] == want
    assert kafka_python_read(data) == want


@pytest.mark.parametrize("target", ["gzip", "snappy", "lz4", "zstd", "uncompressed"])
def test_topic_compression_type_recompresses(tmp_path, target):
    log = open_log(tmp_path, compression_type=target)
    log.append_as_leader(build_producer_batch(records(), compression=compression.SNAPPY), 0)
    log.append_as_leader(build_producer_batch(records()), 0)
    data = bytes(log.read(0, 1 << 20))
    want_codec = compression.TOPIC_CODECS[target]
    assert [b.header.compression for b in rec.iter_batches(data)] == [want_codec] * 2
    want = [(i % 20 + 20 * (i // 20), r.key, r.value) for i, r in enumerate(records() * 2)]
    assert kafka_python_read(data) == want


def test_librdkafka_raw_snappy_is_read_as_xerial_is():
    """librdkafka writes one raw snappy block without xerial's header; Java's producer (and
    replog's compress) write xerial framing: both decompress."""
    payload = b"abc" * 50_000
    raw = bytes(cramjam.snappy.compress_raw(payload))
    assert compression.decompress(compression.SNAPPY, raw) == payload
    framed = compression.compress(compression.SNAPPY, payload)
    assert framed.startswith(b"\x82SNAPPY\x00") and len(framed) > 16 + 4
    assert compression.decompress(compression.SNAPPY, framed) == payload


def test_a_compressed_batch_that_does_not_decompress_is_corrupt(tmp_path):
    log = open_log(tmp_path)
    good = build_producer_batch(records(), compression=compression.LZ4)
    h = rec.parse_header(good)
    broken = bytearray(good)
    broken[rec.HEADER_SIZE + 8:rec.HEADER_SIZE + 16] = b"\xff" * 8
    # a right CRC over a payload that does not decompress
    broken[rec.CRC_OFFSET:rec.CRC_OFFSET + 4] = rec.compute_crc(broken).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(broken), 0)
    # records that decompress but do not fit the count
    short = rec.with_codec(build_producer_batch(records(2)), rec.parse_header(
        build_producer_batch(records(2))), compression.GZIP)
    lying = bytearray(short)
    lying[57:61] = (3).to_bytes(4, "big")  # recordsCount
    lying[23:27] = (2).to_bytes(4, "big")  # lastOffsetDelta
    lying[rec.CRC_OFFSET:rec.CRC_OFFSET + 4] = rec.compute_crc(lying).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(lying), 0)
    assert log.log_end_offset == 0 and h.compression == compression.LZ4


def test_a_compressed_batch_must_be_the_only_one(tmp_path):
    log = open_log(tmp_path)
    one = build_producer_batch(records(2), compression=compression.ZSTD)
    with pytest.raises(InvalidRecordError, match="more than one batch") as e:
        log.append_as_leader(one + one, 0)
    assert e.value.error_code == 87
    assert log.log_end_offset == 0


@pytest.mark.parametrize("codec", [0, compression.GZIP])
def test_compacted_topic_refuses_null_keys_with_record_errors(tmp_path, codec):
    log = open_log(tmp_path, cleanup_policy="delete,compact")
    with pytest.raises(RecordValidationError) as e:
        log.append_as_leader(build_producer_batch(records(10, key=False), compression=codec), 0)
    assert e.value.error_code == 87  # INVALID_RECORD
    assert [i for i, _ in e.value.record_errors] == [0, 2, 4, 6, 8]
    assert e.value.record_errors[0][1] == ("Compacted topic cannot accept message without key "
                                           "in topic partition orders-0.")
    assert str(e.value).startswith("One or more records have been rejected due to 5 record "
                                   "errors in total, and only showing the first three errors "
                                   "at most: [RecordError(batchIndex=0, message='Compacted")
    assert log.log_end_offset == 0
    log.append_as_leader(build_producer_batch(records(10), compression=codec), 0)
    assert log.log_end_offset == 10


@settings(max_examples=200, deadline=None)
@given(codec=st.sampled_from(sorted(CODECS.values())), payload=st.binary(max_size=300),
       count=st.integers(1, 5))
def test_any_compressed_payload_is_appended_or_corrupt(tmp_path_factory, codec, payload, count):
    """Whatever bytes a compressed batch carries (under a right CRC), the leader appends them
    only if they decompress to exactly its records, else refuses the batch with
    CorruptRecordError and writes nothing - never another exception."""
    batch = bytearray(build_producer_batch(records(count), compression=codec))
    h = rec.parse_header(batch)
    forged = batch[:rec.HEADER_SIZE] + payload
    forged[8:12] = (len(forged) - rec.LOG_OVERHEAD).to_bytes(4, "big")
    forged[rec.CRC_OFFSET:rec.CRC_OFFSET + 4] = rec.compute_crc(forged).to_bytes(4, "big")
    log = open_log(tmp_path_factory.mktemp("fuzz"))
    try:
        log.append_as_leader(bytes(forged), 0)
    except CorruptRecordError:
        assert log.log_end_offset == 0
    else:
        assert [r.offset for r in rec.decode_all(bytes(log.read(0, 1 << 20)))] == \
            list(range(h.records_count))
    finally:
        log.close()


@pytest.mark.parametrize("name", CODECS)
def test_a_batch_that_decompresses_past_the_bound_is_too_large(tmp_path, name, monkeypatch):
    """A few hundred KB of zstd can stand for gigabytes: the leader decompresses into a
    bounded buffer and answers MESSAGE_TOO_LARGE (which producers do not retry), nothing
    written. The bound is lowered here so that the test stays small."""
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 100_000)
    log = open_log(tmp_path)
    big = [rec.ProducerRecord(b"k", bytes(50_000)) for _ in range(3)]
    with pytest.raises(compression.DecompressedTooLargeError) as e:
        log.append_as_leader(build_producer_batch(big, compression=CODECS[name]), 0)
    assert e.value.error_code == 10  # MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0
    log.append_as_leader(build_producer_batch(big[:1], compression=CODECS[name]), 0)
    assert log.log_end_offset == 1
