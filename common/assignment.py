"""Replica assignment for new topics: Kafka's AdminUtils.assignReplicasToBrokers, rack-unaware
and rack-aware, plus validation of explicit assignments. Pure; randomness is injected.

The algorithm (Kafka's, kept exactly so `topics create` places replicas as Kafka would for the
same start index and shift):

- Brokers sorted by id (rack-aware: alternated across racks sorted by name, brokers of a rack
  sorted by id - getRackAlternatedBrokerList).
- The first replica of partition p is broker[(p + startIndex) % n]: leaders (the preferred
  replicas) go round-robin, so every broker leads the same number of partitions +-1.
- Follower j of a partition sits at firstReplicaIndex + 1 + (shift + j) % (n - 1); the shift
  grows by one every n partitions so followers of one broker's partitions spread over the
  others instead of always landing on its neighbour.
- startIndex and the initial shift are random (Kafka's rand.nextInt(n)), so topics created one
  after another do not all lead on the same broker.
- Rack-aware: a candidate is skipped while some rack has no replica of the partition yet and
  its rack has one, or while some broker has none and it has one; so with RF <= #racks every
  replica lands in a different rack.

Complete for design.md#cluster-core. Adding partitions to an existing topic goes through
`start_partition` (Kafka's startPartitionId) and a fixed start index:
controller/create_partitions.py.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from common.errors import ErrorCode, ReplogError


class AssignmentError(ReplogError):
    def __init__(self, error_code: ErrorCode, message: str):
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class BrokerMetadata:
    """What assignment needs to know about a live broker."""

    broker_id: int
    rack: str | None = None


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int,
                   n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: one broker of each rack (racks sorted) in turn.
    {0:a, 1:a, 2:b, 3:c, 4:c} -> [0, 2, 3, 1, 4]."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    iters = {rack: iter(sorted(brokers)) for rack, brokers in by_rack.items()}
    racks = sorted(iters)
    result: list[int] = []
    rack_index = 0
    while len(result) < len(broker_racks):
        b = next(iters[racks[rack_index]], None)
        if b is not None:
            result.append(b)
        rack_index = (rack_index + 1) % len(racks)
    return result


def assign_replicas(brokers: Iterable[BrokerMetadata], num_partitions: int,
                    replication_factor: int, *, rng: random.Random | None = None,
                    fixed_start_index: int = -1, start_partition: int = 0
                    ) -> dict[int, list[int]]:
    """partition -> replicas (preferred leader first). Raises AssignmentError with Kafka's
    error code and message on invalid input."""
    metas = sorted(brokers, key=lambda b: b.broker_id)
    if num_partitions <= 0:
        raise AssignmentError(ErrorCode.INVALID_PARTITIONS,
                              "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError(ErrorCode.INVALID_REPLICATION_FACTOR,
                              "Replication factor must be larger than 0.")
    if replication_factor > len(metas):
        raise AssignmentError(ErrorCode.INVALID_REPLICATION_FACTOR,
                              f"Replication factor: {replication_factor} larger than available "
                              f"brokers: {len(metas)}.")
    rng = rng or random.Random()
    if all(m.rack is None for m in metas):
        return _rack_unaware([m.broker_id for m in metas], num_partitions, replication_factor,
                             rng, fixed_start_index, start_partition)
    if any(m.rack is None for m in metas):
        raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              "Not all brokers have rack information for replica rack aware "
                              "assignment.")
    return _rack_aware({m.broker_id: m.rack for m in metas}, num_partitions, replication_factor,
                       rng, fixed_start_index, start_partition)


def _starts(n: int, rng: random.Random, fixed_start_index: int,
            start_partition: int) -> tuple[int, int, int]:
    """Kafka's startIndex and nextReplicaShift (random over the n brokers unless fixed, drawn
    in that order) and the first partition to assign."""
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    next_shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    return start_index, next_shift, max(0, start_partition)


def _rack_unaware(broker_list: Sequence[int], n_partitions: int, rf: int, rng: random.Random,
                  fixed_start_index: int, start_partition: int) -> dict[int, list[int]]:
    n = len(broker_list)
    start_index, next_shift, current = _starts(n, rng, fixed_start_index, start_partition)
    out: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if current > 0 and current % n == 0:
            next_shift += 1
        first = (current + start_index) % n
        replicas = [broker_list[first]]
        for j in range(rf - 1):
            replicas.append(broker_list[_replica_index(first, next_shift, j, n)])
        out[current] = replicas
        current += 1
    return out


def _rack_aware(broker_racks: Mapping[int, str], n_partitions: int, rf: int,
                rng: random.Random, fixed_start_index: int,
                start_partition: int) -> dict[int, list[int]]:
    num_racks = len(set(broker_racks.values()))
    arranged = rack_alternated_brokers(broker_racks)
    n = len(arranged)
    start_index, next_shift, current = _starts(n, rng, fixed_start_index, start_partition)
    out: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if current > 0 and current % n == 0:
            next_shift += 1
        first = (current + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with = {broker_racks[leader]}
        brokers_with = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, next_shift * num_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                # Skip a broker whose rack already has a replica while another rack has none,
                # or that already holds one while another broker holds none.
                if ((rack not in racks_with or len(racks_with) == num_racks)
                        and (broker not in brokers_with or len(brokers_with) == n)):
                    replicas.append(broker)
                    racks_with.add(rack)
                    brokers_with.add(broker)
                    break
        out[current] = replicas
        current += 1
    return out


def validate_explicit_assignment(assignment: Mapping[int, Sequence[int]],
                                 live_brokers: Iterable[int]) -> dict[int, list[int]]:
    """Check an explicit replica assignment the way Kafka's CreateTopics does; returns it as
    partition -> list. Errors: INVALID_REPLICA_ASSIGNMENT."""
    def fail(msg: str):
        raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, msg)

    if not assignment:
        fail("Replica assignment is empty.")
    partitions = sorted(assignment)
    if partitions != list(range(len(partitions))):
        fail(f"Partitions should be a consecutive 0-based integer sequence, got "
             f"{partitions}.")
    live = set(live_brokers)
    sizes = set()
    for p in partitions:
        replicas = list(assignment[p])
        if not replicas:
            fail(f"Replica assignment for partition {p} is empty.")
        if len(set(replicas)) != len(replicas):
            fail(f"Duplicate replica assignment found: partition {p} -> {replicas}.")
        unknown = sorted(set(replicas) - live)
        if unknown:
            fail(f"Unknown broker(s) in replica assignment: "
                 f"{', '.join(str(b) for b in unknown)}.")
        sizes.add(len(replicas))
    if len(sizes) > 1:
        fail("All partitions should have the same number of replicas.")
    return {p: list(assignment[p]) for p in partitions}
