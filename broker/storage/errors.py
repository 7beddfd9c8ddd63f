"""The storage-error hierarchy (design.md#jbod; Kafka's KafkaStorageException family).

Every I/O error in the storage engine is caught at the lowest level and wrapped in one of these,
carrying the log dir and (when there is one) the partition, so that the component that handles
it — the broker's log-dir failure handler (design.md#jbod) — knows which dir to take offline and
which partitions are lost, instead of the broker halting as Kafka did before KIP-112.
"""

from __future__ import annotations

import errno as _errno

from common.errors import ErrorCode, ReplogError


class KafkaStorageError(ReplogError):
    """An I/O failure in one log dir. Clients see KAFKA_STORAGE_ERROR."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR
    operation = "storage operation"

    def __init__(self, log_dir: str, partition: str | None = None, cause: BaseException | None = None,  # noqa: E501
                 detail: str | None = None):
        self.log_dir = log_dir
        self.partition = partition
        self.cause = cause
        self.errno = getattr(cause, "errno", None)
        where = f"log dir {log_dir}" + (f", partition {partition}" if partition else "")
        why = detail or (f"{_errno.errorcode.get(self.errno, self.errno)}: {cause.strerror}"
                         if isinstance(cause, OSError) and cause.strerror else str(cause))
        super().__init__(f"{self.operation} failed in {where}: {why}")


class LogAppendError(KafkaStorageError):
    operation = "append"


class LogReadError(KafkaStorageError):
    operation = "read"


class LogFlushError(KafkaStorageError):
    operation = "flush"


class LogTruncationError(KafkaStorageError):
    operation = "truncation"


class LogLoadError(KafkaStorageError):
    """Opening or recovering a partition's log failed."""

    operation = "log load"


class LogDeletionError(KafkaStorageError):
    operation = "segment deletion"


class LogCleaningError(KafkaStorageError):
    """Rewriting or swapping in a compacted segment (design.md#compaction)."""

    operation = "log cleaning"


class CheckpointIOError(KafkaStorageError):
    """Reading or writing a checkpoint file (recovery point, HW, log start, leader epoch)."""

    operation = "checkpoint I/O"


class LogDirError(KafkaStorageError):
    """The log dir itself is unusable (creation, meta.properties, listing)."""

    operation = "log dir access"


class LogDirOfflineError(KafkaStorageError):
    """An operation was attempted on a log dir already marked offline."""

    operation = "access to offline log dir"


class LogClosedError(ReplogError):
    """A read met a log closed under it: deleted (StopReplica), reloaded after a failure, or
    in a log dir taken offline (issue 42, defect 3). Not an I/O error - nothing is reported to
    the log-dir failure handler - and never bytes of another file: the reader answers with
    ``error_code`` (NOT_LEADER_OR_FOLLOWER, or KAFKA_STORAGE_ERROR for a failed log) and the
    client retries where the replica now is."""

    def __init__(self, log_dir: str, partition: str, error_code: ErrorCode, why: str):
        super().__init__(f"the log of {partition} in {log_dir} was closed: {why}")
        self.log_dir = log_dir
        self.partition = partition
        self.error_code = error_code
