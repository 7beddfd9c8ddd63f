"""What the replica manager's parts share: request/answer types and constants (the
replica manager is split by family)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.partition import Partition
from common.errors import ErrorCode, ReplogError
from common.names import TopicPartition

if TYPE_CHECKING:
    from broker.storage.file_region import FileRegion

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
# ListOffsets and OffsetForLeaderEpoch answer UNKNOWN_TOPIC_OR_PARTITION for a partition without
# a local replica, as replog always has, without asking the metadata (Kafka would answer
# NOT_LEADER_OR_FOLLOWER for one the metadata knows; Fetch and Produce do).
_NO_METADATA_LOOKUP = False
# leader-epoch-checkpoint files written per log-dir job after a LeaderAndIsr (~0.3 ms each here):
# an append queued behind them waits for one chunk, ~0.1 s, not for a 10k-partition takeover.
EPOCH_CHECKPOINT_CHUNK = 256


@dataclass
class ProduceResult:
    error: ErrorCode = ErrorCode.NONE
    message: str = ""
    base_offset: int = -1
    log_start_offset: int = -1
    # (index in the batch, why) of each record refused (Kafka's RecordError, Produce v8+)
    record_errors: tuple[tuple[int, str], ...] = ()


@dataclass
class FetchResult:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | FileRegion = b""  # a FileRegion only for a zero-copy fetch
    diverging: tuple[int, int] | None = None
    leader_id: int = -1
    leader_epoch: int = -1
    message: str = ""
    throttled: bool = False  # held back by the leader's replication quota (KIP-73)


@dataclass
class FetchPartitionRequest:
    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int | None = None
    last_fetched_epoch: int | None = None
    log_start_offset: int = -1


class _LogRead:
    """One partition's read of a Fetch, planned on the event loop (checks, follower state)
    and done with the request's other reads in one executor hand-off (``_read_logs``)."""
    __slots__ = ("data", "done_at", "error", "fetch_offset", "index", "log", "max_bytes", "p",
                 "upper")

    def __init__(self, index: int, p: Partition, fetch_offset: int, max_bytes: int,
                 upper: int) -> None:
        self.index, self.p, self.log = index, p, p.log
        self.fetch_offset, self.max_bytes, self.upper = fetch_offset, max_bytes, upper
        self.data = b""
        self.error: ReplogError | None = None
        self.done_at: float | None = None


