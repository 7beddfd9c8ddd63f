"""DeleteRecords (KIP-107) on the partition leader, behind both front-ends (the Kafka listener's
API 21 and the gRPC DeleteRecords): Kafka's Partition.deleteRecordsOnLeader and
DelayedDeleteRecords.

- Only the leader moves a log start offset: a replica that does not lead is
  NOT_LEADER_OR_FOLLOWER, a partition this broker does not know UNKNOWN_TOPIC_OR_PARTITION.
- A topic whose cleanup.policy lacks ``delete`` is POLICY_VIOLATION ("can not be deleted due to
  the configured policy").
- Offset -1 means the high watermark; any other negative offset, or one above the high
  watermark, is OFFSET_OUT_OF_RANGE. An offset at or below the log start is no change.
- The answer waits, up to the request's timeout, for the partition's low watermark - the
  smallest log start offset of the leader and its live followers, which follow the leader's
  log start through their fetches - to reach the offset; then REQUEST_TIMED_OUT (the deletion
  itself stands, as in Kafka). The wait re-checks every 50 ms, since a follower's new log start
  arrives with its next fetch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping

from common.errors import ErrorCode, OffsetOutOfRangeError
from common.names import TopicPartition

HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK
_RECHECK_S = 0.05


def target_offset(requested: int, high_watermark: int) -> int | None:
    """The new log start asked for, or None when the offset is not valid (negative)."""
    offset = high_watermark if requested == HIGH_WATERMARK else requested
    return offset if offset >= 0 else None


def low_watermark(leader_log_start: int, follower_log_starts: Iterable[int]) -> int:
    """Kafka's Partition.lowWatermarkIfLeader: the smallest log start among the replicas."""
    return min([leader_log_start, *follower_log_starts])


def _policy_allows_deletion(cleanup_policy: str) -> bool:
    return "delete" in (p.strip() for p in cleanup_policy.split(","))  # LogConfig.delete


async def delete_records(rm, offsets: Mapping[TopicPartition, int], timeout_ms: int
                         ) -> dict[TopicPartition, tuple[ErrorCode, int, str]]:
    """Each partition -> (error, low watermark or -1, message)."""
    moved: dict[TopicPartition, int] = {}
    out: dict[TopicPartition, tuple[ErrorCode, int, str]] = {}
    for tp, requested in offsets.items():
        p = rm.partitions.get(tp)
        if p is None or p.log is None or tp in rm.offline_replicas:
            known = tp in rm.metadata.partitions
            out[tp] = (ErrorCode.NOT_LEADER_OR_FOLLOWER if known
                       else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1,
                       f"this broker has no replica of {tp}" if known
                       else f"unknown topic or partition {tp}")
            continue
        if not p.is_leader:
            out[tp] = (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1,
                       f"broker {rm.broker_id} is not the leader of {tp}")
            continue
        if not _policy_allows_deletion(p.log.config.cleanup_policy):
            out[tp] = (ErrorCode.POLICY_VIOLATION, -1, (f"Records of partition {tp} can not "
                                                        f"be deleted due to the configured "
                                                        f"policy"))
            continue
        offset = target_offset(requested, p.high_watermark)
        if offset is None:
            out[tp] = (ErrorCode.OFFSET_OUT_OF_RANGE, -1,
                       f"The offset {requested} for partition {tp} is not valid")
            continue
        try:
            await rm.log_manager.run(tp, p.log.increment_log_start_offset, offset)
        except OffsetOutOfRangeError as e:
            out[tp] = (ErrorCode.OFFSET_OUT_OF_RANGE, -1, str(e))
            continue
        rm.events.info("log_start_offset_moved", partition=str(tp), offset=offset,
                       by="DeleteRecords")
        moved[tp] = offset
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000
    while True:
        pending = {}
        for tp, offset in moved.items():
            p = rm.partitions.get(tp)
            if p is None or not p.is_leader or p.log is None:
                out[tp] = (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1,
                           f"leadership of {tp} moved before its followers deleted the records")
                continue
            live = set(rm.metadata.brokers)
            low = low_watermark(p.log.log_start_offset, [
                f.log_start_offset for b, f in p.followers.items() if b in live])
            if low >= offset:
                out[tp] = (ErrorCode.NONE, low, "")
            else:
                pending[tp] = offset
                out[tp] = (ErrorCode.REQUEST_TIMED_OUT, low,
                           f"the replicas of {tp} did not reach log start {offset} in time")
        moved = pending
        if not moved or time.monotonic() >= deadline:
            return out
        await asyncio.sleep(_RECHECK_S)
