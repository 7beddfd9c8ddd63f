"""Adding partitions to an existing topic (Kafka's CreatePartitions). Pure.

`plan_partitions` checks one topic of a CreatePartitions request and chooses the replicas of
its new partitions, or raises TopicError with the Kafka error code and message a client
prints. The rules and messages are those of Kafka's ZooKeeper mode, where the broker that was
controller checked the request (KafkaApis.handleCreatePartitionsRequest) and
AdminZkClient.createNewPartitionsAssignment chose the assignment:

- a topic queued for deletion: INVALID_TOPIC_EXCEPTION ("The topic is queued for deletion.");
- an unknown topic: UNKNOWN_TOPIC_OR_PARTITION;
- a topic with a partition being reassigned: REASSIGNMENT_IN_PROGRESS (ZkAdminManager refuses
  it so that the new assignment cannot race the reassignment's own topic-znode writes);
- a count that does not grow the topic: INVALID_PARTITIONS;
- an explicit assignment (one replica list per *new* partition, partition count - existing
  count of them) naming a broker that is not registered, with an empty or duplicated replica
  list, or whose replication factor differs from partition 0's: INVALID_REPLICA_ASSIGNMENT;
- without one, Kafka's AdminUtils.assignReplicasToBrokers (common/assignment.py) places
  the new partitions with partition 0's replication factor, continuing the topic's pattern:
  the start index is the position of partition 0's preferred leader among the live brokers
  sorted by id (the first broker with an id at or above it), the shift the same, and the
  partition ids go on from the existing count - so partitions N, N+1, ... get the replicas
  the topic would have had, had it been created with more partitions on these brokers.
  Rack-aware when every broker has a rack, as at creation.

Only registered (live) brokers count, as Kafka's getBrokerMetadatas reads /brokers/ids.
"""

from __future__ import annotations

from collections.abc import Sequence

from common.assignment import AssignmentError, BrokerMetadata, assign_replicas
from common.errors import ErrorCode
from common.zk_layout import TopicAssignment
from controller.create_topics import TopicError


def _ids(xs) -> str:
    return ", ".join(str(x) for x in xs)


def reassignment_in_progress(a: TopicAssignment) -> bool:
    """Kafka's ReplicaAssignment.isBeingReassigned for any partition of the topic."""
    return any(a.adding_replicas.values()) or any(a.removing_replicas.values())


def plan_partitions(name: str, count: int, explicit: Sequence[Sequence[int]] | None, *,
                    current: TopicAssignment | None, being_deleted: bool,
                    live_brokers: Sequence[BrokerMetadata]) -> dict[int, list[int]]:
    """The replicas of the partitions to add (partition id -> replicas, preferred leader
    first), for raising the partition count of topic `name` to `count`. `explicit` is one
    replica list per new partition, or None to let the controller place them."""
    if being_deleted:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion.")
    if current is None or not current.partitions:
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"The topic '{name}' does not exist.")
    if reassignment_in_progress(current):
        raise TopicError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                         f"A partition reassignment is in progress for the topic '{name}'.")
    existing = len(current.partitions)
    increment = count - existing
    if increment < 0:
        raise TopicError(ErrorCode.INVALID_PARTITIONS,
                         f"Topic currently has {existing} partitions, which is higher than the "
                         f"requested {count}.")
    if increment == 0:
        raise TopicError(ErrorCode.INVALID_PARTITIONS,
                         f"Topic already has {existing} partitions.")
    partition0 = current.partitions.get(0)
    if not partition0:
        # AdminZkClient's AdminOperationException: a topic znode replog never writes.
        raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR,
                         f"Unexpected existing replica assignment for topic '{name}', "
                         f"partition id 0 is missing.")
    live = sorted(live_brokers, key=lambda b: b.broker_id)
    if explicit is not None:
        return _explicit(explicit, existing, increment, len(partition0),
                         {b.broker_id for b in live})
    # AdminZkClient: startIndex = max(0, allBrokers.indexWhere(_.id >= partition 0's leader))
    start = next((i for i, b in enumerate(live) if b.broker_id >= partition0[0]), 0)
    try:
        return assign_replicas(live, increment, len(partition0), fixed_start_index=start,
                               start_partition=existing)
    except AssignmentError as e:
        raise TopicError(e.error_code, e.message) from None


def _explicit(explicit: Sequence[Sequence[int]], existing: int, increment: int, rf: int,
              live: set[int]) -> dict[int, list[int]]:
    def fail(message: str):
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)

    unknown = sorted({b for replicas in explicit for b in replicas} - live)
    if unknown:
        fail(f"Unknown broker(s) in replica assignment: {_ids(unknown)}.")
    if len(explicit) != increment:
        fail(f"Increasing the number of partitions by {increment} but {len(explicit)} "
             f"assignments provided.")
    out = {existing + i: list(replicas) for i, replicas in enumerate(explicit)}
    for p, replicas in out.items():  # AdminZkClient.validateReplicaAssignment
        if not replicas:
            fail(f"Cannot have replication factor of 0 for partition id {p}.")
        if len(set(replicas)) != len(replicas):
            fail(f"Duplicate brokers not allowed in replica assignment: {_ids(replicas)} "
                 f"for partition id {p}.")
    bad = [(p, len(r)) for p, r in out.items() if len(r) != rf]
    if bad:
        fail(f"Inconsistent replication factor between partitions, partition 0 has {rf} while "
             f"partitions [{_ids(p for p, _ in bad)}] have replication factors "
             f"[{_ids(n for _, n in bad)}], respectively.")
    return out
