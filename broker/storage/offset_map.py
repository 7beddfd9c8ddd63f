"""The cleaner's key -> last offset map (Kafka's OffsetMap / SkimpyOffsetMap): pure, no I/O.

Keys are stored as their MD5 digests, as Kafka's map stores them (a collision is as unlikely
as Kafka accepts), and its capacity is Kafka's: ``log.cleaner.dedupe.buffer.size`` /
``log.cleaner.threads`` bytes per cleaner at 24 bytes a slot (a 16-byte digest and an 8-byte
offset). A Python dict entry costs more than 24 bytes, so the memory used is a few times the
configured buffer; the number of keys one round takes is Kafka's.
"""

from __future__ import annotations

import hashlib

HASH_SIZE = 16  # MD5
SLOT_SIZE = HASH_SIZE + 8


class SkimpyOffsetMap:
    def __init__(self, memory: int, hash_algorithm: str = "MD5"):
        if hash_algorithm.upper() != "MD5":
            raise ValueError(f"unsupported offset map hash {hash_algorithm!r}")
        self.slots = max(0, memory // SLOT_SIZE)
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        d = _digest(key)
        if len(self._map) >= self.slots and d not in self._map:
            raise OverflowError("the offset map is full")
        self._map[d] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The key's offset, -1 when absent (Kafka's OffsetMap.get)."""
        return self._map.get(_digest(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def utilization(self) -> float:
        return len(self._map) / self.slots if self.slots else 0.0


def _digest(key: bytes) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()
