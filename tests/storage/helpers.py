"""Small builders shared by the storage tests."""

from common.records import ProducerRecord, build_batch


def batch(n: int = 1, size: int = 10, tag: str = "r", ts: int = 1_000) -> bytes:
    return build_batch([ProducerRecord(f"{tag}{i}".encode(), bytes([i % 251]) * size,
                                       timestamp=ts) for i in range(n)])


class Clock:
    """A settable millisecond clock, injected into Log/LogManager."""

    def __init__(self, now: int = 1_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now
