"""Fencing rules of the broker, as pure functions (no awaits, no I/O, no protobuf).

Every request that can come from someone with an out-of-date view carries an epoch, and these
functions decide whether it is stale. They were written inline, three times over, in the replica
manager; here each rule is written once, with the Kafka rule it follows.

- Controller requests (LeaderAndIsr, StopReplica, UpdateMetadata) carry the controller epoch and
  the broker epoch the controller knows for this broker. An older controller epoch is a deposed
  controller (STALE_CONTROLLER_EPOCH). Only an *older* broker epoch is stale (Kafka's
  isBrokerEpochStale): a newer one is this broker's new registration, which the controller can
  see before the broker's own create has returned.
- A partition state in LeaderAndIsr is applied when its (leader epoch, partition epoch) is newer
  than the one held, acknowledged without change when equal (a new controller resending it),
  and refused when older.
- Client and replica requests naming a partition carry the leader epoch they believe in
  (KIP-320): older is FENCED_LEADER_EPOCH, newer is UNKNOWN_LEADER_EPOCH (this broker has not
  heard of it yet), absent (None or negative) is not checked. Before that: no local replica is
  NOT_LEADER_OR_FOLLOWER when the metadata knows the partition, else UNKNOWN_TOPIC_OR_PARTITION
  (Kafka's ReplicaManager.getPartitionOrError); a follower is NOT_LEADER_OR_FOLLOWER.
- A follower fetch from an older incarnation of the follower (KIP-903: its broker epoch is
  older than the one the leader recorded) is served but says nothing about the replica now.
- GetReplicaLogInfo (KIP-966) names this broker and, when it carries one, its exact epoch.
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol

from common.errors import ErrorCode


class ReplicaView(Protocol):
    """What these rules read of an online replica (broker.partition.Partition)."""

    is_leader: bool
    leader_epoch: int
    isr: tuple[int, ...]
    min_isr: int


def controller_request_error(controller_epoch: int, broker_epoch: int,
                             known_controller_epoch: int, own_broker_epoch: int
                             ) -> tuple[ErrorCode, str] | None:
    """Why a controller request must be refused as a whole, or None to accept it."""
    if controller_epoch < known_controller_epoch:
        return (ErrorCode.STALE_CONTROLLER_EPOCH,
                f"controller epoch {controller_epoch} is older than {known_controller_epoch}")
    if 0 <= broker_epoch < own_broker_epoch:
        return (ErrorCode.STALE_BROKER_EPOCH,
                (f"broker epoch {broker_epoch} is older than this broker's epoch "
                 f"{own_broker_epoch}"))
    return None


class StateChange(Enum):
    NEWER = "newer"   # apply it
    SAME = "same"     # acknowledge, change nothing
    OLDER = "older"   # refuse: STALE_CONTROLLER_EPOCH for that partition


def partition_state_change(leader_epoch: int, partition_epoch: int, held_leader_epoch: int,
                           held_partition_epoch: int) -> StateChange:
    """How a LeaderAndIsr partition state compares with the one this broker holds."""
    new, held = (leader_epoch, partition_epoch), (held_leader_epoch, held_partition_epoch)
    if new < held:
        return StateChange.OLDER
    if new == held:
        return StateChange.SAME
    return StateChange.NEWER


def is_new_leader_epoch(leader_epoch: int, held_leader_epoch: int | None) -> bool:
    """Whether a LeaderAndIsr state starts a leader epoch this replica has not been in (None:
    no replica held). A new epoch retries a failed log and clears a KIP-461 failed partition,
    resets the leader's follower states and (re)starts a follower's fetcher."""
    return held_leader_epoch is None or leader_epoch != held_leader_epoch


def no_replica_error(known_partition: bool) -> ErrorCode:
    """The answer for a partition this broker holds no (online) replica of: the client's
    metadata is stale (NOT_LEADER_OR_FOLLOWER) when the broker's metadata knows it, else the
    partition does not exist (Kafka's ReplicaManager.getPartitionOrError)."""
    return ErrorCode.NOT_LEADER_OR_FOLLOWER if known_partition \
        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def leader_request_error(replica: ReplicaView | None, known_partition: bool,
                         requested_epoch: int | None) -> ErrorCode | None:
    """Whether a request only the leader serves (Fetch, ListOffsets, OffsetForLeaderEpoch) is
    refused: no online replica, not the leader, then KIP-320's epoch check (Kafka's
    Partition.localLogWithEpochOrThrow, with the leader check first as replog always did)."""
    if replica is None:
        return no_replica_error(known_partition)
    if not replica.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return leader_epoch_error(requested_epoch, replica.leader_epoch)


def follower_fetch_error(replica_id: int, assigned: tuple[int, ...], leader_id: int,
                         requested_epoch: int | None) -> ErrorCode | None:
    """A follower fetch (replica_id >= 0) from a broker that is not one of the partition's
    remote replicas is refused before anything is read or recorded (Kafka's
    Partition.followerReplicaOrThrow): UNKNOWN_LEADER_EPOCH when the request carries a leader
    epoch (it matched, so the (replica, epoch) pair is not yet known here: the follower
    retries), NOT_LEADER_OR_FOLLOWER when it carries none."""
    if replica_id in assigned and replica_id != leader_id:
        return None
    if requested_epoch is not None and requested_epoch >= 0:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NOT_LEADER_OR_FOLLOWER


def follower_fetch_is_stale(broker_epoch: int, recorded_broker_epoch: int) -> bool:
    """KIP-903: a follower fetch carrying a broker epoch older than the one the leader holds
    for that follower comes from a previous incarnation (-1: not known, not checked)."""
    return 0 <= broker_epoch < recorded_broker_epoch


def replica_log_info_error(broker_id: int, broker_epoch: int, own_id: int, own_epoch: int
                           ) -> tuple[ErrorCode, str] | None:
    """KIP-966 GetReplicaLogInfo is meant for one broker incarnation: another broker id is an
    invalid request, another epoch (when the request carries one) a stale one."""
    if broker_id != own_id:
        return (ErrorCode.INVALID_REQUEST,
                f"request for broker {broker_id} sent to broker {own_id}")
    if broker_epoch >= 0 and broker_epoch != own_epoch:
        return (ErrorCode.STALE_BROKER_EPOCH,
                f"broker epoch {broker_epoch} is not {own_epoch}")
    return None


def leader_epoch_error(requested: int | None, current: int) -> ErrorCode | None:
    """KIP-320's check of the leader epoch a Fetch, ListOffsets or OffsetForLeaderEpoch
    believes in against the partition's current one."""
    if requested is None or requested < 0:
        return None
    if requested < current:
        return ErrorCode.FENCED_LEADER_EPOCH
    if requested > current:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return None


def stop_replica_is_stale(requested_leader_epoch: int | None, held_leader_epoch: int) -> bool:
    """A StopReplica whose leader epoch is older than the one held is fenced (KIP-570); absent
    or negative (Kafka's EpochDuringDelete = -2 for topic deletion) always applies."""
    return requested_leader_epoch is not None and 0 <= requested_leader_epoch < held_leader_epoch


def acks_error(acks: int) -> ErrorCode | None:
    """Kafka's produce request check: acks is -1 (all), 0 or 1."""
    return None if acks in (-1, 0, 1) else ErrorCode.INVALID_REQUIRED_ACKS


def produce_error(replica: ReplicaView | None, known_partition: bool, acks: int
                  ) -> ErrorCode | None:
    """Whether this broker appends a produce for a partition: it holds an online replica
    (``no_replica_error``) and admits it (``produce_admission_error``)."""
    if replica is None:
        return no_replica_error(known_partition)
    return produce_admission_error(acks, replica.is_leader, len(replica.isr), replica.min_isr)


def produce_admission_error(acks: int, is_leader: bool, isr_size: int, min_isr: int
                            ) -> ErrorCode | None:
    """Whether a leader takes a produce for a partition at all: only the leader appends, and
    acks=all is refused up front when the ISR is already below min.insync.replicas (Kafka's
    Partition.appendRecordsToLeader; nothing is appended then)."""
    if not is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if acks == -1 and isr_size < min_isr:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return None
