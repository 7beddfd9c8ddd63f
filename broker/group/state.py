"""The classic group states and their legal transitions (Kafka's GroupState in
GroupMetadata.scala, ClassicGroupState.java), as a table: target -> the states it may be
entered from (`validPreviousStates`). `check_transition` raises InvalidGroupTransition naming
both states; the core never catches it (a refused transition is a bug in the core, which the
property test hunts for).

    Empty                no members; lingers until its offsets expire (a group used for offset
                         storage only stays Empty for good)
    PreparingRebalance   a rebalance started: JoinGroups are parked until every member rejoined
                         or the rebalance timeout ends
    CompletingRebalance  the join phase ended (new generation): waiting for the leader's
                         SyncGroup with the assignment
    Stable               the assignment is stored and handed out
    Dead                 no members and its metadata is being removed (deleted, expired, or its
                         __consumer_offsets partition moved away)
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum


class GroupState(Enum):
    Empty = "Empty"
    PreparingRebalance = "PreparingRebalance"
    CompletingRebalance = "CompletingRebalance"
    Stable = "Stable"
    Dead = "Dead"

    def __str__(self) -> str:
        return self.value


_S = GroupState

VALID_PREVIOUS_STATES: Mapping[GroupState, frozenset[GroupState]] = {
    _S.Empty: frozenset({_S.PreparingRebalance}),
    _S.PreparingRebalance: frozenset({_S.Stable, _S.CompletingRebalance, _S.Empty}),
    _S.CompletingRebalance: frozenset({_S.PreparingRebalance}),
    _S.Stable: frozenset({_S.CompletingRebalance}),
    _S.Dead: frozenset({_S.Stable, _S.PreparingRebalance, _S.CompletingRebalance, _S.Empty,
                        _S.Dead}),
}


class InvalidGroupTransition(Exception):
    def __init__(self, group_id: str, current: GroupState, target: GroupState) -> None:
        allowed = ", ".join(sorted(str(s) for s in VALID_PREVIOUS_STATES[target]))
        super().__init__(f"group {group_id!r} cannot move from {current} to {target} "
                         f"(only from {allowed})")
        self.current, self.target = current, target


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    if current not in VALID_PREVIOUS_STATES[target]:
        raise InvalidGroupTransition(group_id, current, target)


def can_rebalance(state: GroupState) -> bool:
    """GroupMetadata.canRebalance: PreparingRebalance may be entered from here."""
    return state in VALID_PREVIOUS_STATES[_S.PreparingRebalance]
