"""The broker's fencing rules (pure): tables of epochs and the expected answer."""

import pytest

from broker.fencing import (
    StateChange,
    controller_request_error,
    leader_epoch_error,
    partition_state_change,
    produce_admission_error,
    stop_replica_is_stale,
)
from common.errors import ErrorCode as E


@pytest.mark.parametrize("ctl, broker, known_ctl, own, expected", [
    (5, 100, 5, 100, None),
    (6, 100, 5, 100, None),                       # a newer controller: accepted
    (4, 100, 5, 100, E.STALE_CONTROLLER_EPOCH),   # a deposed controller
    (5, 99, 5, 100, E.STALE_BROKER_EPOCH),        # meant for an older incarnation
    (5, 101, 5, 100, None),                       # the new registration, not yet recorded
    (5, -1, 5, 100, None),                        # no broker epoch: not checked
    (5, 50, 5, -1, None),                         # this broker has no epoch yet
])
def test_controller_request_error(ctl, broker, known_ctl, own, expected):
    got = controller_request_error(ctl, broker, known_ctl, own)
    assert (got[0] if got else None) == expected


@pytest.mark.parametrize("new, held, expected", [
    ((3, 7), (3, 7), StateChange.SAME),
    ((3, 8), (3, 7), StateChange.NEWER),   # ISR change in the same leader epoch
    ((4, 0), (3, 7), StateChange.NEWER),   # new leader epoch, partition epoch restarts
    ((3, 6), (3, 7), StateChange.OLDER),
    ((2, 9), (3, 7), StateChange.OLDER),
])
def test_partition_state_change(new, held, expected):
    assert partition_state_change(*new, *held) is expected


@pytest.mark.parametrize("requested, current, expected", [
    (None, 5, None), (-1, 5, None), (5, 5, None),
    (4, 5, E.FENCED_LEADER_EPOCH), (6, 5, E.UNKNOWN_LEADER_EPOCH),
])
def test_leader_epoch_error(requested, current, expected):
    assert leader_epoch_error(requested, current) == expected


@pytest.mark.parametrize("requested, held, stale", [
    (None, 5, False), (-2, 5, False), (5, 5, False), (6, 5, False), (4, 5, True),
])
def test_stop_replica_is_stale(requested, held, stale):
    assert stop_replica_is_stale(requested, held) is stale


@pytest.mark.parametrize("acks, leader, isr, min_isr, expected", [
    (-1, True, 2, 2, None),
    (-1, True, 1, 2, E.NOT_ENOUGH_REPLICAS),
    (1, True, 1, 2, None),                    # min ISR binds acks=all only
    (0, False, 3, 2, E.NOT_LEADER_OR_FOLLOWER),
])
def test_produce_admission_error(acks, leader, isr, min_isr, expected):
    assert produce_admission_error(acks, leader, isr, min_isr) == expected
