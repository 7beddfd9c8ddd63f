"""The partition and replica state machines: every (from, to) pair of both tables."""

from __future__ import annotations

import itertools

import pytest

from common.names import TopicPartition
from controller.state_machine import (
    PARTITION_TRANSITIONS,
    REPLICA_TRANSITIONS,
    InvalidStateTransition,
    PartitionState,
    ReplicaState,
    TransitionPlan,
    check_partition_transition,
    check_replica_transition,
    partition_state_machine,
    replica_state_machine,
)

P, R = PartitionState, ReplicaState

# Kafka's validPreviousStates, written out independently of the module's table.
PARTITION_VALID = {
    (P.NonExistentPartition, P.NewPartition),
    (P.NewPartition, P.OnlinePartition), (P.OnlinePartition, P.OnlinePartition),
    (P.OfflinePartition, P.OnlinePartition),
    (P.NewPartition, P.OfflinePartition), (P.OnlinePartition, P.OfflinePartition),
    (P.OfflinePartition, P.OfflinePartition),
    (P.OfflinePartition, P.NonExistentPartition),
}
REPLICA_VALID = {
    (R.NonExistentReplica, R.NewReplica),
    (R.NewReplica, R.OnlineReplica), (R.OnlineReplica, R.OnlineReplica),
    (R.OfflineReplica, R.OnlineReplica), (R.ReplicaDeletionIneligible, R.OnlineReplica),
    (R.NewReplica, R.OfflineReplica), (R.OnlineReplica, R.OfflineReplica),
    (R.OfflineReplica, R.OfflineReplica), (R.ReplicaDeletionIneligible, R.OfflineReplica),
    (R.OfflineReplica, R.ReplicaDeletionStarted),
    (R.ReplicaDeletionStarted, R.ReplicaDeletionSuccessful),
    (R.OfflineReplica, R.ReplicaDeletionIneligible),
    (R.ReplicaDeletionStarted, R.ReplicaDeletionIneligible),
    (R.ReplicaDeletionSuccessful, R.NonExistentReplica),
}
TP = TopicPartition("t", 0)


def test_tables_cover_every_state() -> None:
    assert set(PARTITION_TRANSITIONS) == set(P)
    assert set(REPLICA_TRANSITIONS) == set(R)


@pytest.mark.parametrize("current,target", list(itertools.product(P, P)),
                         ids=lambda s: str(s))
def test_every_partition_pair(current: P, target: P) -> None:
    sm = partition_state_machine()
    sm.reset(TP, current)
    if (current, target) in PARTITION_VALID:
        sm.transition(TP, target)
        assert sm.state(TP) is target
        check_partition_transition(TP, current, target)
    else:
        with pytest.raises(InvalidStateTransition) as e:
            sm.transition(TP, target)
        assert str(current) in str(e.value) and str(target) in str(e.value)
        assert e.value.current is current and e.value.target is target
        assert sm.state(TP) is current  # unchanged


@pytest.mark.parametrize("current,target", list(itertools.product(R, R)),
                         ids=lambda s: str(s))
def test_every_replica_pair(current: R, target: R) -> None:
    sm = replica_state_machine()
    key = (TP, 1)
    sm.reset(key, current)
    if (current, target) in REPLICA_VALID:
        sm.transition(key, target)
        assert sm.state(key) is target
        check_replica_transition(key, current, target)
    else:
        with pytest.raises(InvalidStateTransition, match=f"Instead it is in {current} state"):
            sm.transition(key, target)
        with pytest.raises(InvalidStateTransition, match=f"moving to {target} state"):
            check_replica_transition(key, current, target)


def test_message_names_both_states_and_the_valid_ones() -> None:
    sm = partition_state_machine()
    with pytest.raises(InvalidStateTransition) as e:
        sm.transition(TP, P.OnlinePartition)
    assert str(e.value) == (
        "Partition t-0 should be in one of [NewPartition, OfflinePartition, OnlinePartition] "
        "states before moving to OnlinePartition state. Instead it is in NonExistentPartition "
        "state")


def test_initial_state_is_implicit_and_forgotten() -> None:
    sm = partition_state_machine()
    assert sm.state(TP) is P.NonExistentPartition and len(sm) == 0
    sm.transition(TP, P.NewPartition)
    sm.transition(TP, P.OfflinePartition)
    assert sm.in_state(P.OfflinePartition) == [TP]
    sm.transition(TP, P.NonExistentPartition)
    assert len(sm) == 0


def test_plan_checks_against_its_own_earlier_steps() -> None:
    sm = replica_state_machine()
    key = (TP, 1)
    sm.reset(key, R.OnlineReplica)
    plan = TransitionPlan(sm)
    plan.add(key, R.OfflineReplica)
    plan.add(key, R.ReplicaDeletionStarted)  # valid only after the first step
    with pytest.raises(InvalidStateTransition):
        plan.add(key, R.NewReplica)
    assert plan.add_if_valid(key, R.NewReplica) is False
    assert plan.steps == [(key, R.OfflineReplica), (key, R.ReplicaDeletionStarted)]
    assert sm.state(key) is R.OnlineReplica  # a plan never touches the machine
