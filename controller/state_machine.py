"""Partition and replica state machines (Kafka's PartitionStateMachine / ReplicaStateMachine).

Everything that decides whether a partition or a replica may move from one state to another lives
here, as two data tables; nothing here knows why a transition happens (that is decisions/) or
how it is made durable (zk_store.py). `StateMachine.transition` and `TransitionPlan.add` raise
InvalidStateTransition naming both states; the decision builder (decisions/base.py) catches it
and records the transition as *refused* - never applied - and the core logs each refusal as an
`invalid_state_transition` event that the controller counts in
`replog_controller_invalid_state_transitions_total` (design.md#reassignment: Kafka's ZK controller
logged them too). The simulation treats any refusal as a failed run, so a table violation still
fails the test that reaches it.

Partition states (Kafka's, design.md#reassignment "PartitionLeaderSelector"):

    NonExistentPartition  never created, or deleted
    NewPartition          assignment written, no leader/ISR yet
    OnlinePartition       a live leader was elected; the self-transition Online -> Online is an
                          election for a partition that already has a leader (controlled
                          shutdown, preferred, reassigned and - design.md#jbod - restarted
                          selectors)
    OfflinePartition      its leader died and no new one could be elected (yet)

Replica states (Kafka's, design.md#reassignment "Replica state machine changes" plus the deletion
states Kafka added later for topic deletion and that design.md#reassignment reuses for the "stop and
delete removing replicas" step):

    NewReplica                  created by topic creation or a reassignment; may only be told
                                to become a follower
    OnlineReplica               part of the assignment and its broker is up
    OfflineReplica              its broker died (or is shutting down and stopped the replica)
    ReplicaDeletionStarted      StopReplica(delete_partition=true) sent
    ReplicaDeletionSuccessful   the broker acknowledged the deletion
    ReplicaDeletionIneligible   deletion failed or the broker is down; retried later
    NonExistentReplica          deleted

Reassignment (design.md#reassignment, decisions/reassignment.py) uses NewReplica for adding replicas
and the deletion states for removing ones; JBOD (design.md#jbod) and ELR (design.md#kip-966) add
callers, not states.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from enum import Enum
from typing import Generic, TypeVar


class PartitionState(Enum):
    NonExistentPartition = "NonExistentPartition"
    NewPartition = "NewPartition"
    OnlinePartition = "OnlinePartition"
    OfflinePartition = "OfflinePartition"

    def __str__(self) -> str:
        return self.value


class ReplicaState(Enum):
    NewReplica = "NewReplica"
    OnlineReplica = "OnlineReplica"
    OfflineReplica = "OfflineReplica"
    ReplicaDeletionStarted = "ReplicaDeletionStarted"
    ReplicaDeletionSuccessful = "ReplicaDeletionSuccessful"
    ReplicaDeletionIneligible = "ReplicaDeletionIneligible"
    NonExistentReplica = "NonExistentReplica"

    def __str__(self) -> str:
        return self.value


_P = PartitionState
_R = ReplicaState

# target state -> the states it may be entered from (Kafka's `validPreviousStates`).
PARTITION_TRANSITIONS: Mapping[PartitionState, frozenset[PartitionState]] = {
    _P.NewPartition: frozenset({_P.NonExistentPartition}),
    _P.OnlinePartition: frozenset({_P.NewPartition, _P.OnlinePartition, _P.OfflinePartition}),
    _P.OfflinePartition: frozenset({_P.NewPartition, _P.OnlinePartition, _P.OfflinePartition}),
    _P.NonExistentPartition: frozenset({_P.OfflinePartition}),
}

REPLICA_TRANSITIONS: Mapping[ReplicaState, frozenset[ReplicaState]] = {
    _R.NewReplica: frozenset({_R.NonExistentReplica}),
    _R.OnlineReplica: frozenset({_R.NewReplica, _R.OnlineReplica, _R.OfflineReplica,
                                 _R.ReplicaDeletionIneligible}),
    _R.OfflineReplica: frozenset({_R.NewReplica, _R.OnlineReplica, _R.OfflineReplica,
                                  _R.ReplicaDeletionIneligible}),
    _R.ReplicaDeletionStarted: frozenset({_R.OfflineReplica}),
    _R.ReplicaDeletionSuccessful: frozenset({_R.ReplicaDeletionStarted}),
    _R.ReplicaDeletionIneligible: frozenset({_R.OfflineReplica, _R.ReplicaDeletionStarted}),
    _R.NonExistentReplica: frozenset({_R.ReplicaDeletionSuccessful}),
}


class InvalidStateTransition(Exception):
    """A transition not in the table. Carries both states so the message and tests name them."""

    def __init__(self, kind: str, what: object, current: Enum, target: Enum):
        self.kind, self.what, self.current, self.target = kind, what, current, target
        valid = sorted(str(s) for s in _table(kind)[target])
        super().__init__(f"{kind} {what} should be in one of [{', '.join(valid)}] states before "
                         f"moving to {target} state. Instead it is in {current} state")


def _table(kind: str):
    return PARTITION_TRANSITIONS if kind == "Partition" else REPLICA_TRANSITIONS


def is_valid_partition_transition(current: PartitionState, target: PartitionState) -> bool:
    return current in PARTITION_TRANSITIONS[target]


def is_valid_replica_transition(current: ReplicaState, target: ReplicaState) -> bool:
    return current in REPLICA_TRANSITIONS[target]


def check_partition_transition(what: object, current: PartitionState,
                               target: PartitionState) -> None:
    if not is_valid_partition_transition(current, target):
        raise InvalidStateTransition("Partition", what, current, target)


def check_replica_transition(what: object, current: ReplicaState, target: ReplicaState) -> None:
    if not is_valid_replica_transition(current, target):
        raise InvalidStateTransition("Replica", what, current, target)


K = TypeVar("K", bound=Hashable)
S = TypeVar("S", PartitionState, ReplicaState)


class StateMachine(Generic[K, S]):
    """A map key -> state whose only mutator checks the table. Absent keys are in the initial
    state (NonExistentPartition / NonExistentReplica)."""

    def __init__(self, kind: str, initial: S):
        self.kind = kind
        self.initial = initial
        self._states: dict[K, S] = {}

    def state(self, key: K) -> S:
        return self._states.get(key, self.initial)

    def check(self, key: K, target: S) -> None:
        current = self.state(key)
        if current not in _table(self.kind)[target]:
            raise InvalidStateTransition(self.kind, key, current, target)

    def transition(self, key: K, target: S) -> None:
        self.check(key, target)
        if target is self.initial:
            self._states.pop(key, None)
        else:
            self._states[key] = target

    def reset(self, key: K, state: S) -> None:
        """Set a state without a transition: only for loading state after a controller
        failover (Kafka's initializePartitionState / initializeReplicaState)."""
        if state is self.initial:
            self._states.pop(key, None)
        else:
            self._states[key] = state

    def forget(self, keys: Iterable[K]) -> None:
        for k in keys:
            self._states.pop(k, None)

    def in_state(self, *states: S) -> list[K]:
        wanted = set(states)
        return [k for k, s in self._states.items() if s in wanted]

    def items(self):
        return self._states.items()

    def __len__(self) -> int:
        return len(self._states)

    def clear(self) -> None:
        self._states.clear()


def partition_state_machine() -> StateMachine:
    return StateMachine("Partition", PartitionState.NonExistentPartition)


def replica_state_machine() -> StateMachine:
    return StateMachine("Replica", ReplicaState.NonExistentReplica)


class TransitionPlan(Generic[K, S]):
    """Transitions a decision function wants, checked against the live state machine *plus* the
    plan's own earlier steps (a replica may go Offline -> DeletionStarted in one decision).
    The shell applies the steps in order after the ZooKeeper writes they depend on succeed."""

    def __init__(self, sm: StateMachine):
        self._sm = sm
        self._overlay: dict[K, S] = {}
        self.steps: list[tuple[K, S]] = []

    def state(self, key: K) -> S:
        s = self._overlay.get(key)
        return self._sm.state(key) if s is None else s

    def add(self, key: K, target: S) -> None:
        current = self.state(key)
        if current not in _table(self._sm.kind)[target]:
            raise InvalidStateTransition(self._sm.kind, key, current, target)
        self._overlay[key] = target
        self.steps.append((key, target))

    def add_if_valid(self, key: K, target: S) -> bool:
        if self.state(key) in _table(self._sm.kind)[target]:
            self.add(key, target)
            return True
        return False
