"""design.md#kip-461 as pure rules: which fetch outcomes fail a partition, and what clears it.

A replica fetcher handles many partitions; one bad partition must not take the others down.
``classify`` decides, for one partition's outcome of a fetch round, whether the fetcher carries
on, delays the partition (retry later), backs off entirely, or marks the partition failed.
``FailedPartitions`` is the manager's failed set with the three ways out the seed names (a
higher leader epoch, StopReplica, the log dir going offline). No I/O, no awaits.
"""

from __future__ import annotations

from enum import Enum

from common.errors import ErrorCode
from common.names import TopicPartition


class Outcome(Enum):
    OK = "ok"
    DELAY_PARTITION = "delay_partition"  # retry this partition after replica.fetch.backoff.ms
    BACKOFF_FETCHER = "backoff_fetcher"  # transport error: the whole fetcher waits
    FAIL_PARTITION = "fail_partition"    # KIP-461: stop tracking it, keep the others


class Problem(Enum):
    NONE = "none"
    TRANSPORT = "transport"            # the Fetch RPC itself failed
    CORRUPT_RECORDS = "corrupt"        # invalid batches from the leader
    STORAGE = "storage"                # local storage error (append, truncate, reset)
    UNEXPECTED = "unexpected"          # any other exception while processing the partition


def classify(problem: Problem, error_code: int = ErrorCode.NONE, fetch_epoch: int = -1,
             current_epoch: int = -1) -> Outcome:
    """The seed's rules, and where replog keeps Kafka's behaviour:

    - storage and unexpected errors while processing a partition fail it (design.md#kip-461);
    - FENCED_LEADER_EPOCH fails it only when the fetcher already holds the partition's current
      epoch — otherwise a newer LeaderAndIsr is on its way and the partition just waits;
    - corrupt/invalid records are delayed and retried, not failed (a leader may serve them
      after a transient problem; failing would need a new epoch to recover);
    - a transport error delays the whole fetcher and fails nothing;
    - other leader answers (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, ...) delay it.
    """
    if problem is Problem.TRANSPORT:
        return Outcome.BACKOFF_FETCHER
    if problem in (Problem.STORAGE, Problem.UNEXPECTED):
        return Outcome.FAIL_PARTITION
    if problem is Problem.CORRUPT_RECORDS:
        return Outcome.DELAY_PARTITION
    if error_code == ErrorCode.NONE:
        return Outcome.OK
    if error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
        return Outcome.OK  # handled by an offset reset (whose own failure is STORAGE/...)
    if error_code == ErrorCode.FENCED_LEADER_EPOCH and fetch_epoch == current_epoch:
        return Outcome.FAIL_PARTITION
    return Outcome.DELAY_PARTITION


class FailedPartitions:
    """The fetcher manager's failed set (``FailedPartitionsCount``) and the epochs they failed
    at, so that only a *higher* leader epoch clears one."""

    def __init__(self) -> None:
        self._failed: dict[TopicPartition, int] = {}

    def __len__(self) -> int:
        return len(self._failed)

    def __contains__(self, tp: TopicPartition) -> bool:
        return tp in self._failed

    def __iter__(self):
        return iter(list(self._failed))

    def fail(self, tp: TopicPartition, leader_epoch: int) -> None:
        self._failed[tp] = leader_epoch

    def on_leader_and_isr(self, tp: TopicPartition, leader_epoch: int) -> bool:
        """True if ``tp`` was failed and this epoch clears it (it fetches again)."""
        if tp in self._failed and leader_epoch > self._failed[tp]:
            del self._failed[tp]
            return True
        return False

    def on_stop_replica(self, tp: TopicPartition) -> bool:
        return self._failed.pop(tp, None) is not None

    def on_log_dir_offline(self, tps) -> list[TopicPartition]:
        cleared = [tp for tp in tps if tp in self._failed]
        for tp in cleared:
            del self._failed[tp]
        return cleared


def fetcher_should_stop(tracked: int) -> bool:
    """design.md#kip-461: a fetcher whose partitions have all failed (none left to track) shuts
    down."""
    return tracked == 0
