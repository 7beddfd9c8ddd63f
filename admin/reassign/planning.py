"""What a reassignment plan means against the cluster as it is (pure): Kafka's
``--generate`` assignment, the moves a plan makes, the state of each move for ``--verify``.
The moves (``PartitionMove``, ``proposed_moves``) are the client's (client/reassignment.py),
shared with the lab.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from admin.reassign.parsing import TP
from client.admin_client import PartitionReassignment
from client.reassignment import PartitionMove as PartitionMove
from client.reassignment import proposed_moves as proposed_moves
from client.reassignment import reassigning_brokers as reassigning_brokers
from common.assignment import AssignmentError, BrokerMetadata, assign_replicas
from common.errors import ReplogError


def propose_assignment(current: Mapping[TP, Sequence[int]], brokers: Iterable[BrokerMetadata],
                       rng: random.Random | None = None) -> dict[TP, list[int]]:
    """Kafka's calculateAssignment: each topic's partitions laid out afresh over ``brokers``
    by AdminUtils.assignReplicasToBrokers, keeping the topic's replication factor."""
    brokers = list(brokers)
    by_topic: dict[str, list[int]] = {}
    for t, p in current:
        by_topic.setdefault(t, []).append(p)
    out: dict[TP, list[int]] = {}
    for topic, parts in sorted(by_topic.items()):
        rf = len(current[(topic, min(parts))])
        try:
            assigned = assign_replicas(brokers, len(parts), rf, rng=rng)
        except AssignmentError as e:
            hint = (" Add --disable-rack-aware in command line to make replica assignment "
                    "without rack information." if "rack information" in e.message else "")
            raise ReplogError(f"{e.message}{hint}") from None
        for p, replicas in assigned.items():
            out[(topic, p)] = replicas
    return out


@dataclass(frozen=True)
class ReassignmentState:
    """Kafka's PartitionReassignmentState."""

    current_replicas: tuple[int, ...]
    target_replicas: tuple[int, ...]
    done: bool


def reassignment_states(targets: Mapping[TP, Sequence[int]],
                        ongoing: Mapping[TP, PartitionReassignment],
                        current: Mapping[TP, Sequence[int]]) -> dict[TP, ReassignmentState]:
    """Kafka's findPartitionReassignmentStates."""
    return {tp: ReassignmentState(tuple(ongoing[tp].replicas) if tp in ongoing
                                  else tuple(current[tp]), tuple(target), tp not in ongoing)
            for tp, target in targets.items()}


@dataclass(frozen=True)
class LogDirMove:
    """Kafka's LogDirMoveState of one replica named in the file with a log dir (KIP-113):
    ``kind`` is "completed", "active" (a future replica in ``future``), "cancelled" (no move
    under way, the replica is in ``current``), "missing" (no such replica on the broker) or
    "missing_dir" (not found, and a log dir of the broker is offline)."""

    kind: str
    target: str
    current: str | None = None
    future: str | None = None

    @property
    def done(self) -> bool:
        return self.kind != "active"


def log_dir_move(target: str, current: str | None, future: str | None,
                 some_dir_offline: bool) -> LogDirMove:
    """Kafka's findLogDirMoveStates for one replica, from DescribeLogDirs' answer."""
    if current is None:
        return LogDirMove("missing_dir" if some_dir_offline else "missing", target)
    if future is not None:
        return LogDirMove("active", target, current, future)
    if current == target:
        return LogDirMove("completed", target, current)
    return LogDirMove("cancelled", target, current)
