"""Replica assignment: Kafka's own expected vectors, validation messages, and invariants
(hypothesis) of balance and rack spread."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.assignment import (
    AssignmentError,
    BrokerMetadata,
    assign_replicas,
    rack_alternated_brokers,
    validate_explicit_assignment,
)
from common.errors import ErrorCode


def metas(n: int, racks: dict[int, str] | None = None) -> list[BrokerMetadata]:
    return [BrokerMetadata(i, (racks or {}).get(i)) for i in range(n)]


def test_kafka_rack_unaware_vector():
    # AdminZkClientTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, start index 0.
    assert assign_replicas(metas(5), 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_kafka_rack_aware_vector():
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({k: v for k, v in racks.items() if k != 5}) == \
        [0, 3, 1, 4, 2]
    assert assign_replicas(metas(6, racks), 7, 3, fixed_start_index=0) == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
        6: [0, 4, 2]}


def test_brokers_are_sorted_by_id_whatever_their_order():
    shuffled = list(reversed(metas(5)))
    assert assign_replicas(shuffled, 10, 3, fixed_start_index=0) == \
        assign_replicas(metas(5), 10, 3, fixed_start_index=0)


def test_randomness_is_injected():
    a = assign_replicas(metas(5), 20, 3, rng=random.Random(7))
    b = assign_replicas(metas(5), 20, 3, rng=random.Random(7))
    assert a == b
    starts = {assign_replicas(metas(5), 1, 1, rng=random.Random(s))[0][0] for s in range(50)}
    assert len(starts) > 1  # the first leader is not always the same broker


@pytest.mark.parametrize("n,rf,brokers,code,message", [
    (0, 1, 3, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
    (-1, 1, 3, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
    (1, 0, 3, ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor must be larger than 0."),
    (1, 4, 3, ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor: 4 larger than available brokers: 3."),
    (1, 1, 0, ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor: 1 larger than available brokers: 0."),
])
def test_invalid_requests(n, rf, brokers, code, message):
    with pytest.raises(AssignmentError) as e:
        assign_replicas(metas(brokers), n, rf)
    assert e.value.error_code == code and e.value.message == message


def test_mixed_rack_information_is_refused():
    with pytest.raises(AssignmentError, match="Not all brokers have rack information"):
        assign_replicas(metas(3, {0: "a", 1: "b"}), 3, 2)


@pytest.mark.parametrize("assignment,live,message", [
    ({}, [1], "Replica assignment is empty."),
    ({0: [1], 2: [1]}, [1], "consecutive 0-based"),
    ({0: []}, [1], "Replica assignment for partition 0 is empty."),
    ({0: [1, 1]}, [1], "Duplicate replica assignment found: partition 0 -> [1, 1]."),
    ({0: [1, 5, 6]}, [1], "Unknown broker(s) in replica assignment: 5, 6."),
    ({0: [1, 2], 1: [1]}, [1, 2], "All partitions should have the same number of replicas."),
])
def test_explicit_assignment_errors(assignment, live, message):
    with pytest.raises(AssignmentError) as e:
        validate_explicit_assignment(assignment, live)
    assert e.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert message in e.value.message


def test_explicit_assignment_ok():
    assert validate_explicit_assignment({1: (2, 1), 0: (1, 2)}, [1, 2]) == {0: [1, 2], 1: [2, 1]}


@settings(max_examples=300, deadline=None)
@given(n_brokers=st.integers(1, 12), n_partitions=st.integers(1, 60), data=st.data(),
       seed=st.integers(0, 2**32))
def test_rack_unaware_balance(n_brokers, n_partitions, data, seed):
    rf = data.draw(st.integers(1, n_brokers))
    ids = data.draw(st.lists(st.integers(0, 1000), min_size=n_brokers, max_size=n_brokers,
                             unique=True))
    out = assign_replicas([BrokerMetadata(i) for i in ids], n_partitions, rf,
                          rng=random.Random(seed))
    assert sorted(out) == list(range(n_partitions))
    for replicas in out.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(ids)
    leaders = Counter(r[0] for r in out.values())
    counts = [leaders.get(i, 0) for i in ids]
    assert max(counts) - min(counts) <= 1  # leaders round-robin
    replicas = Counter(b for r in out.values() for b in r)
    counts = [replicas.get(i, 0) for i in ids]
    assert max(counts) - min(counts) <= rf


@settings(max_examples=300, deadline=None)
@given(n_racks=st.integers(1, 5), per_rack=st.integers(1, 4), n_partitions=st.integers(1, 40),
       data=st.data(), seed=st.integers(0, 2**32))
def test_rack_aware_spread(n_racks, per_rack, n_partitions, data, seed):
    racks = {r * per_rack + i: f"rack{r}" for r in range(n_racks) for i in range(per_rack)}
    n_brokers = len(racks)
    rf = data.draw(st.integers(1, n_brokers))
    out = assign_replicas([BrokerMetadata(b, rk) for b, rk in racks.items()], n_partitions, rf,
                          rng=random.Random(seed))
    for replicas in out.values():
        assert len(set(replicas)) == rf
        used = {racks[b] for b in replicas}
        # every replica in its own rack while racks last; beyond that every rack is used
        assert len(used) == min(rf, n_racks)
    leaders = Counter(r[0] for r in out.values())
    counts = [leaders.get(b, 0) for b in racks]
    assert max(counts) - min(counts) <= 1
    rack_leaders = Counter(racks[r[0]] for r in out.values())
    counts = [rack_leaders.get(f"rack{r}", 0) for r in range(n_racks)]
    assert max(counts) - min(counts) <= 1
