"""Kafka's default partitioner: murmur2 must match Kafka's Java implementation exactly."""

import random

import pytest

from client.partitioner import DefaultPartitioner, murmur2, partition_for_key, to_positive

# org.apache.kafka.common.utils.UtilsTest#testMurmur2 (same values in librdkafka's rdmurmur2.c
# and kafkajs' murmur2 spec).
KAFKA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"kafka": -798503068,
}

# Values the Akka/Pekko Kafka-sharding tests take from Kafka's Java murmur2.
JAVA_MURMUR2 = {b"1": -1993445489, b"12": 126087238, b"123": -267702483, b"1234": -1614185708,
                b"12345": -1188365604}


@pytest.mark.parametrize("data,expected", sorted({**KAFKA_MURMUR2, **JAVA_MURMUR2}.items()))
def test_murmur2_matches_kafka(data, expected):
    assert murmur2(data) == expected


def test_murmur2_matches_kafka_python_on_random_keys():
    from kafka.partitioner.default import murmur2 as kp_murmur2
    rng = random.Random(7)
    for _ in range(500):
        key = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
        # kafka-python returns the hash masked to 31 bits; ours is Java's signed int.
        assert to_positive(murmur2(key)) == to_positive(kp_murmur2(key))


def test_to_positive_is_not_abs():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2 ** 31)) == 0


def test_keyed_partition_is_kafkas():
    # DefaultPartitioner: toPositive(murmur2(key)) % numPartitions.
    for key, h in KAFKA_MURMUR2.items():
        for n in (1, 3, 7, 100):
            assert partition_for_key(key, n) == (h & 0x7FFFFFFF) % n
    assert partition_for_key(b"foobar", 3) == 0  # (-790332482 & 0x7fffffff) % 3 = 1357151166 % 3


def test_keyed_records_ignore_stickiness():
    p = DefaultPartitioner(sticky_batch_size=10, rng=random.Random(1))
    assert {p.partition("t", b"k", 8) for _ in range(20)} == {partition_for_key(b"k", 8)}


def test_null_keys_stick_until_a_batch_is_full_then_switch():
    p = DefaultPartitioner(sticky_batch_size=100, rng=random.Random(3))
    first = p.partition("t", None, 4)
    for _ in range(9):
        assert p.partition("t", None, 4) == first
        p.on_append("t", first, 10, 4)
    p.on_append("t", first, 10, 4)  # 100 bytes: the sticky batch is full
    assert p.partition("t", None, 4) != first


def test_null_keys_prefer_partitions_with_a_leader():
    p = DefaultPartitioner(sticky_batch_size=1, rng=random.Random(5))
    seen = set()
    for _ in range(50):
        part = p.partition("t", None, 6, available=[1, 4])
        seen.add(part)
        p.on_append("t", part, 1, 6, available=[1, 4])
    assert seen == {1, 4}
