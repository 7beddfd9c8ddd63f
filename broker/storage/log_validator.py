"""What a leader checks and rewrites in a producer's batches before it assigns their offsets:
Kafka's LogValidator (validateMessagesAndAssignOffsets), for v2 batches.

- A compressed batch (gzip, snappy, lz4, zstd: common/compression.py) is decompressed and
  every record is walked, as an uncompressed one is (records.check_records): a batch whose CRC
  is right but whose records do not parse is refused.
- A produce that carries a compressed batch carries one batch for the partition (Kafka:
  "Compressed outer record has more than one batch", INVALID_RECORD).
- The topic's ``compression.type``: ``producer`` (Kafka's default) stores each batch as sent,
  compressed or not (Kafka's in-place assignment: only the base offset and leader epoch
  change, which the CRC does not cover); any other value recompresses a batch whose codec
  differs to that codec (``uncompressed`` decompresses it), a new CRC over the new payload.
- A topic whose ``cleanup.policy`` contains ``compact`` refuses records without a key: the
  batch fails with INVALID_RECORD, the index of each such record in ``record_errors`` and
  Kafka's message, so the producer fails those records (librdkafka the rest of the batch as
  _INVALID_DIFFERENT_RECORD).

Pure functions over bytes; the Log calls them from its append, on the log dir's thread.
"""

from __future__ import annotations

from common import compression
from common import records as rec
from common.errors import CorruptRecordError, ErrorCode
from common.names import TopicPartition


class InvalidRecordError(CorruptRecordError):
    """Kafka's InvalidRecordException: the batch is readable but not acceptable."""

    error_code = ErrorCode.INVALID_RECORD


class RecordValidationError(InvalidRecordError):
    """Kafka's RecordValidationException: some records were refused, each with its index in
    the batch and why (the Produce answer's record_errors, v8+)."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]):
        super().__init__(message)
        self.record_errors = tuple(record_errors)


def target_codec(compression_type: str) -> int | None:
    """The codec a topic's compression.type stores batches in; None: as the producer sent."""
    return compression.TOPIC_CODECS.get(compression_type)


def is_compacted(cleanup_policy: str) -> bool:
    return "compact" in (p.strip() for p in cleanup_policy.split(","))


def to_topic_codec(records, codec: int | None):
    """The producer's batches, each whose codec is not the topic's rewritten in it; the same
    object when nothing changes (``codec`` None: compression.type=producer)."""
    if codec is None:
        return records
    out, changed = [], False
    for b in rec.iter_batches(records):
        if b.header.compression == codec:
            out.append(b.data)
        else:
            out.append(rec.with_codec(b.data, b.header, codec))
            changed = True
    return b"".join(out) if changed else records


def check_batch(batch, h: rec.BatchHeader, *, only_batch: bool, compacted: bool,
                tp: TopicPartition) -> None:
    """Every record of one produced batch (whose header and CRC were checked): parsed whole,
    and keyed when the topic is compacted. CorruptRecordError / InvalidRecordError."""
    if h.compression and not only_batch:
        raise InvalidRecordError("Compressed outer record has more than one batch")
    buf, pos, end = rec.record_section(batch, h)
    rec.check_record_section(buf, pos, end, h)
    if compacted:
        missing = rec.null_key_indices(buf, pos, end, h)
        if missing:
            raise _no_key_errors(missing, tp)


def _no_key_errors(indexes: list[int], tp: TopicPartition) -> RecordValidationError:
    why = f"Compacted topic cannot accept message without key in topic partition {tp}."
    errors = [(i, why) for i in indexes]
    # Kafka's LogValidator.processRecordErrors, with RecordError's toString
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return RecordValidationError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]", errors)
