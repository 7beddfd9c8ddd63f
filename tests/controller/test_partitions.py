"""CreatePartitions checks and placement (controller/create_partitions.py): every error a client
can get, with Kafka's ZooKeeper-mode messages, and the placement of the new partitions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.assignment import BrokerMetadata, assign_replicas
from common.errors import ErrorCode
from common.zk_layout import TopicAssignment
from controller.create_partitions import plan_partitions
from controller.create_topics import TopicError

LIVE = [BrokerMetadata(1), BrokerMetadata(2), BrokerMetadata(3)]
T = TopicAssignment("t", "id", {0: [2, 1, 3], 1: [3, 2, 1]})


def plan(count, explicit=None, current=T, deleting=False, live=LIVE):
    return plan_partitions("t", count, explicit, current=current, being_deleted=deleting,
                           live_brokers=live)


MOVING = TopicAssignment("t", "id", {0: [4, 1, 2, 3], 1: [3, 2, 1]},
                         adding_replicas={0: [4]}, removing_replicas={0: [3]})


@pytest.mark.parametrize("kwargs,code,message", [
    ({"deleting": True}, ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion."),
    ({"current": None}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 't' does not exist."),
    ({"current": MOVING}, ErrorCode.REASSIGNMENT_IN_PROGRESS,
     "A partition reassignment is in progress for the topic 't'."),
    ({"count": 1}, ErrorCode.INVALID_PARTITIONS,
     "Topic currently has 2 partitions, which is higher than the requested 1."),
    ({"count": -1}, ErrorCode.INVALID_PARTITIONS,
     "Topic currently has 2 partitions, which is higher than the requested -1."),
    ({"count": 2}, ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partitions."),
    ({"explicit": [[1, 2, 7], [1, 9, 3]]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Unknown broker(s) in replica assignment: 7, 9."),
    ({"explicit": []}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,  # Kafka's non-null empty list
     "Increasing the number of partitions by 2 but 0 assignments provided."),
    ({"explicit": [[1, 2, 3]]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Increasing the number of partitions by 2 but 1 assignments provided."),
    ({"explicit": [[1, 2, 3], [1, 2, 3], [1, 2, 3]]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Increasing the number of partitions by 2 but 3 assignments provided."),
    ({"explicit": [[1, 2, 3], []]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Cannot have replication factor of 0 for partition id 3."),
    ({"explicit": [[1, 2, 1], [1, 2, 3]]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Duplicate brokers not allowed in replica assignment: 1, 2, 1 for partition id 2."),
    ({"explicit": [[1, 2], [1]]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     ("Inconsistent replication factor between partitions, partition 0 has 3 while partitions "
      "[2, 3] have replication factors [2, 1], respectively.")),
    ({"live": LIVE[:2]}, ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor: 3 larger than available brokers: 2."),
    ({"live": []}, ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor: 3 larger than available brokers: 0."),
    ({"live": [BrokerMetadata(1, "a"), BrokerMetadata(2), BrokerMetadata(3, "b")]},
     ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Not all brokers have rack information"),
    ({"current": TopicAssignment("t", "id", {1: [1]})}, ErrorCode.UNKNOWN_SERVER_ERROR,
     "partition id 0 is missing"),
])
def test_errors(kwargs, code, message):
    kwargs.setdefault("count", 4)
    with pytest.raises(TopicError) as e:
        plan(**kwargs)
    assert e.value.error_code == code
    assert message in e.value.message


def test_the_checks_come_in_kafkas_order():
    # KafkaApis refuses a topic queued for deletion before ZkAdminManager looks at it; the
    # count is checked before the assignment, unknown brokers before the assignment's size.
    with pytest.raises(TopicError) as e:
        plan(1, [[9]], current=MOVING, deleting=True)
    assert e.value.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    with pytest.raises(TopicError) as e:
        plan(1, [[9]], current=MOVING)
    assert e.value.error_code == ErrorCode.REASSIGNMENT_IN_PROGRESS
    with pytest.raises(TopicError) as e:
        plan(1, [[9]])
    assert e.value.error_code == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(TopicError) as e:
        plan(5, [[9]])
    assert "Unknown broker(s)" in e.value.message


def test_an_explicit_assignment_names_the_new_partitions_only():
    assert plan(4, [[3, 1, 2], [1, 3, 2]]) == {2: [3, 1, 2], 3: [1, 3, 2]}
    # a broker of the topic's existing partitions need not be in the new ones
    four = LIVE + [BrokerMetadata(4)]
    assert plan(3, [[4, 1, 2]], live=four) == {2: [4, 1, 2]}


def test_automatic_placement_continues_the_topics_pattern():
    # Partition 0 is led by broker 2 (index 1 of [1, 2, 3]): start index and shift 1, and
    # partition ids from 2 on: worked by hand from AdminUtils.assignReplicasToBrokers.
    assert plan(5) == {2: [1, 3, 2], 3: [2, 3, 1], 4: [3, 1, 2]}


def test_a_start_broker_that_left_starts_at_the_next_id():
    # Partition 0's leader, 2, is no longer registered: the first broker with id >= 2.
    live = [BrokerMetadata(1), BrokerMetadata(3), BrokerMetadata(4)]
    t = TopicAssignment("t", "id", {0: [2, 1]})
    # start index and shift 1 (broker 3): partition 1 is led by the broker at (1 + 1) % 3, 4,
    # and its follower at index (2 + 1 + (1 + 0) % 2) % 3 = 1: broker 3
    assert plan_partitions("t", 2, None, current=t, being_deleted=False,
                           live_brokers=live) == {1: [4, 3]}
    # ... and when none has an id that high, index 0 (Kafka's max(0, indexWhere(...)))
    t = TopicAssignment("t", "id", {0: [9, 1]})
    assert plan_partitions("t", 3, None, current=t, being_deleted=False,
                           live_brokers=live) == assign_replicas(
        live, 2, 2, fixed_start_index=0, start_partition=1)


@settings(max_examples=300, deadline=None)
@given(brokers=st.integers(1, 7), rf=st.integers(1, 7), created=st.integers(1, 12),
       added=st.integers(1, 12), start=st.integers(0, 6), racks=st.integers(0, 3))
def test_growing_a_topic_continues_its_pattern(brokers, rf, created, added, start, racks):
    """A topic created with Kafka's fixed start index s (partition 0 led by the broker at s,
    shift s) and grown to N partitions: the new leaders continue the round robin exactly, and
    while the topic had at most one partition per broker the whole assignment is the one the
    topic would have had if created with N partitions. Beyond that the followers differ, as
    in Kafka: assignReplicasToBrokers restarts the shift from the start index at
    startPartitionId instead of counting the rounds already made."""
    rf = min(rf, brokers)
    start %= brokers
    live = [BrokerMetadata(b, f"r{b % racks}" if racks else None) for b in range(brokers)]
    whole = assign_replicas(live, created + added, rf, fixed_start_index=start)
    # Rack-aware, the start index is a position in the rack-alternated list, while
    # AdminZkClient finds it in the id-sorted one (as Kafka does): the continuation is exact
    # only when partition 0's leader sits at the same position in both.
    if racks and whole[0][0] != start:
        return
    first = {p: r for p, r in whole.items() if p < created}
    t = TopicAssignment("t", "id", first)
    new = plan_partitions("t", created + added, None, current=t, being_deleted=False,
                          live_brokers=live)
    assert sorted(new) == list(range(created, created + added))
    assert all(len(r) == rf == len(set(r)) for r in new.values())
    assert [r[0] for r in new.values()] == [whole[p][0] for p in sorted(new)]
    if created <= brokers:
        assert {**first, **new} == whole
