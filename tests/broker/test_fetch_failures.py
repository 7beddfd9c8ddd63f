"""design.md#kip-461 failed-partition rules (pure): each trigger, each way out, shutdown."""

import pytest

from broker.fetch_failures import FailedPartitions, Outcome, Problem, classify, fetcher_should_stop
from common.errors import ErrorCode as E
from common.names import TopicPartition as TP


@pytest.mark.parametrize("problem, code, fetch_epoch, current, outcome", [
    (Problem.STORAGE, E.NONE, 3, 3, Outcome.FAIL_PARTITION),             # storage error
    (Problem.UNEXPECTED, E.NONE, 3, 3, Outcome.FAIL_PARTITION),          # any other error
    (Problem.NONE, E.FENCED_LEADER_EPOCH, 3, 3, Outcome.FAIL_PARTITION),  # fenced at our epoch
    (Problem.NONE, E.FENCED_LEADER_EPOCH, 3, 4, Outcome.DELAY_PARTITION),  # newer epoch coming
    (Problem.CORRUPT_RECORDS, E.NONE, 3, 3, Outcome.DELAY_PARTITION),    # retried, not failed
    (Problem.TRANSPORT, E.NONE, 3, 3, Outcome.BACKOFF_FETCHER),          # whole fetcher waits
    (Problem.NONE, E.NOT_LEADER_OR_FOLLOWER, 3, 3, Outcome.DELAY_PARTITION),
    (Problem.NONE, E.UNKNOWN_LEADER_EPOCH, 3, 3, Outcome.DELAY_PARTITION),
    (Problem.NONE, E.KAFKA_STORAGE_ERROR, 3, 3, Outcome.DELAY_PARTITION),  # the leader's disk
    (Problem.NONE, E.NONE, 3, 3, Outcome.OK),
    (Problem.NONE, E.OFFSET_OUT_OF_RANGE, 3, 3, Outcome.OK),
])
def test_classify(problem, code, fetch_epoch, current, outcome):
    assert classify(problem, code, fetch_epoch, current) is outcome


def test_a_higher_leader_epoch_clears_a_failed_partition():
    f = FailedPartitions()
    f.fail(TP("t", 0), 5)
    assert not f.on_leader_and_isr(TP("t", 0), 5)  # same epoch: still failed
    assert not f.on_leader_and_isr(TP("t", 1), 9)  # not failed: nothing to clear
    assert TP("t", 0) in f and len(f) == 1
    assert f.on_leader_and_isr(TP("t", 0), 6)
    assert len(f) == 0


def test_stop_replica_and_offline_log_dir_clear_failed_partitions():
    f = FailedPartitions()
    for p in range(4):
        f.fail(TP("t", p), 1)
    assert f.on_stop_replica(TP("t", 0))
    assert not f.on_stop_replica(TP("t", 0))
    assert f.on_log_dir_offline([TP("t", 1), TP("t", 2), TP("u", 0)]) == [TP("t", 1), TP("t", 2)]
    assert list(f) == [TP("t", 3)]


def test_a_fetcher_with_nothing_left_to_track_stops():
    assert fetcher_should_stop(0)
    assert not fetcher_should_stop(1)
