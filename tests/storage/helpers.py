"""Small builders shared by the storage tests."""

from kafka.record.default_records import DefaultRecordBatch

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


def crash(lm) -> None:
    """A process crash of a LogManager's broker: nothing is closed, flushed or checkpointed and
    no clean-shutdown marker is written; only the fds go, as with the process. What the files
    hold stays (a killed process keeps the page cache: FileOps has no model of unflushed data
    to drop). Reopen with a fresh LogManager over the same dirs."""
    for log in list(lm.logs.values()) + [f for f, _ in lm.future_logs.values()]:
        log._close_fds()
        log.closed = True
    for d in lm.dirs:
        d.executor.shutdown(wait=True)


def kafka_python_read(data: bytes) -> list[tuple]:
    """Every (offset, key, value) of a buffer of whole batches, read by kafka-python (an
    independent parser, with its own codecs), each batch's CRC checked."""
    out, pos = [], 0
    while pos < len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        kb = DefaultRecordBatch(bytearray(data[pos:pos + 12 + length]))
        assert kb.validate_crc()
        out += [(r.offset, r.key, r.value) for r in kb]
        pos += 12 + length
    return out
