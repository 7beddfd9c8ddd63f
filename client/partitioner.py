"""Kafka's default partitioner: murmur2 for keyed records, sticky partitions for null keys.

Keyed records go to ``toPositive(murmur2(key)) % numPartitions`` with Kafka's exact murmur2
(``org.apache.kafka.common.utils.Utils.murmur2``: seed 0x9747b28c, 32-bit Java int arithmetic,
little-endian 4-byte blocks), so a key lands on the same partition number as with a Java
producer, and moving a workload between Kafka and replog keeps per-key order per partition.

Records without a key follow Kafka 3.3+'s BuiltInPartitioner (KIP-794, "uniform sticky"): all
go to one partition until ``batch.size`` bytes have been produced to it, then a new partition is
picked at random among those with a leader (all partitions if none has one). Kafka also weighs
the pick by per-broker queue sizes (adaptive partitioning); replog picks uniformly.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit int, exactly as Java computes it."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    # Java's switch falls through: case 3 -> case 2 -> case 1.
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not abs(), which overflows)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


class DefaultPartitioner:
    """Kafka's built-in partitioning; one instance per producer (sticky state per topic)."""

    def __init__(self, sticky_batch_size: int = 16384, rng: random.Random | None = None):
        self.sticky_batch_size = max(1, sticky_batch_size)
        self._rng = rng or random.Random()
        # topic -> [current sticky partition, bytes produced to it since it was picked]
        self._sticky: dict[str, list[int]] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available: Sequence[int] = ()) -> int:
        """The partition for a record. ``available`` lists the partitions that have a leader."""
        if key is not None:
            return partition_for_key(key, num_partitions)
        state = self._sticky.get(topic)
        if state is None or state[0] >= num_partitions:
            state = self._sticky[topic] = [self._pick(num_partitions, available, None), 0]
        return state[0]

    def on_append(self, topic: str, partition: int, size: int, num_partitions: int,
                  available: Sequence[int] = ()) -> None:
        """Account ``size`` bytes appended to ``partition``; switch once a batch.size is full."""
        state = self._sticky.get(topic)
        if state is None or state[0] != partition:
            return
        state[1] += size
        if state[1] >= self.sticky_batch_size:
            state[0] = self._pick(num_partitions, available, partition)
            state[1] = 0

    def _pick(self, num_partitions: int, available: Sequence[int], previous: int | None) -> int:
        candidates = [p for p in available if p < num_partitions] or list(range(num_partitions))
        if len(candidates) > 1 and previous is not None:
            # Kafka moves on to another partition when the sticky batch is full.
            candidates = [p for p in candidates if p != previous] or candidates
        return self._rng.choice(candidates)
