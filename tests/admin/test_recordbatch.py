"""The producer's fast batch encoder is byte-identical to the storage engine's reference one,
and an independent Kafka parser (kafka-python) reads what it writes."""

import random

from client.recordbatch import build_producer_batch, estimate_record_size
from common.records import ProducerRecord, build_batch, decode_all


def _records(rng: random.Random, n: int) -> list[ProducerRecord]:
    out = []
    ts = 1_700_000_000_000
    for _ in range(n):
        key = None if rng.random() < 0.3 else bytes(rng.randrange(256)
                                                     for _ in range(rng.randrange(0, 40)))
        value = None if rng.random() < 0.1 else b"v" * rng.choice([0, 1, 63, 64, 200, 70000])
        headers = [("h%d" % j, None if j == 1 else b"x" * j) for j in range(rng.randrange(3))]
        ts += rng.choice([0, 1, 5000, 100000])
        out.append(ProducerRecord(key, value, headers, ts))
    return out


def test_fast_encoder_is_byte_identical_to_reference():
    rng = random.Random(11)
    for n in (1, 2, 10, 200):
        recs = _records(rng, n)
        assert build_producer_batch(recs) == build_batch(recs)


def test_round_trip_and_estimate_is_an_upper_bound():
    rng = random.Random(12)
    recs = _records(rng, 50)
    batch = build_producer_batch(recs)
    decoded = decode_all(batch)
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in decoded] == \
        [(r.key, r.value, list(r.headers), r.timestamp) for r in recs]
    assert len(batch) <= 61 + sum(estimate_record_size(r.key, r.value, r.headers) for r in recs)


def test_kafka_python_reads_producer_batches():
    from kafka.record.default_records import DefaultRecordBatch
    recs = [ProducerRecord(b"k%d" % i, b"value-%d" % i, (), 1_700_000_000_000 + i)
            for i in range(20)]
    batch = DefaultRecordBatch(build_producer_batch(recs))
    assert batch.validate_crc()
    got = [(r.offset, r.key, r.value, r.timestamp) for r in batch]
    assert got == [(i, b"k%d" % i, b"value-%d" % i, 1_700_000_000_000 + i) for i in range(20)]
