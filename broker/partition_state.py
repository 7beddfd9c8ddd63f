"""How one LeaderAndIsr partition state applies to this broker's replica, as pure functions.

Kafka's ReplicaManager.becomeLeaderOrFollower and Partition.makeLeader / makeFollower, in the
order the replica manager asks:

1. ``admit_partition_state``: a state for a partition this broker is no replica of is
   UNKNOWN_TOPIC_OR_PARTITION; a state older than the one held (leader epoch, partition
   epoch - see ``fencing.partition_state_change``) is refused, and one at the same epochs is
   answered without being applied unless it names other replicas. A replica that is stopped
   or whose log is gone (offline dir) holds no state: anything applies.
2. ``missing_log``: a replica without a log is created, or - when it may live in an offline
   log dir - refused with KAFKA_STORAGE_ERROR and restarted (design.md#jbod, KIP-112).
   ``retry_failed_log``: a log that failed a write is rebuilt from its files before a *new*
   leader epoch is applied to it (KIP-461: a new epoch gives a failed partition another try).
3. ``transition``: what applying the state does to the replica's role.

No awaits, no I/O, no protobuf; the replica manager performs what these return.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple, Protocol

from broker import fencing
from common.errors import ErrorCode
from common.zk_layout import LEADER_RECOVERED, LEADER_RECOVERING

# KIP-704's LeaderRecoveryState (proto LeaderRecoveryState): the controller marks a leader
# elected uncleanly RECOVERING; the leader reports RECOVERED through AlterPartition. One
# definition, shared with the partition-state znode's leader_recovery_state.
RECOVERED = LEADER_RECOVERED
RECOVERING = LEADER_RECOVERING


class HeldReplica(Protocol):
    """What ``held_epochs`` reads of the replica held (broker.partition.Partition)."""

    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    stopped: bool
    log: object | None


class HeldState(NamedTuple):
    """What ``admit_partition_state`` compares a LeaderAndIsr state with."""

    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]


def held_epochs(p: HeldReplica | None) -> HeldState | None:
    """The (leader epoch, partition epoch, replicas) a live replica holds; None when there is
    nothing to compare with: no replica, a stopped one (StopReplica without deletion), or one
    whose log went away with its dir."""
    if p is None or p.log is None or p.stopped:
        return None
    return HeldState(p.leader_epoch, p.partition_epoch, tuple(p.replicas))


def admit_partition_state(broker_id: int, replicas, leader_epoch: int, partition_epoch: int,
                          held: HeldState | None) -> ErrorCode | None:
    """None: apply the state. Otherwise the partition's answer, nothing applied: NONE for the
    state already held (a new controller resending it), STALE_CONTROLLER_EPOCH for an older
    one, UNKNOWN_TOPIC_OR_PARTITION when this broker is not among its replicas.

    A state at the held epochs that names other replicas is applied: the epochs version the
    partition-state znode, not the topic znode that holds the replicas. A controller that
    died cancelling a move - the topic znode back to ORS, the new leader epoch not yet
    written - leaves its successor resending RS's old epochs with ORS, and a broker that
    acknowledged it kept RS: leader and controller disagreed on the RF (cluster simulation
    design.md#sim-finding-b). Kafka's Partition.makeLeader / makeFollower apply any state whose
    partition epoch is not older; an identical one stays a no-op here, as re-applying it
    would only drop an AlterPartition in flight."""
    if broker_id not in replicas:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if held is None:
        return None
    change = fencing.partition_state_change(leader_epoch, partition_epoch,
                                            held.leader_epoch, held.partition_epoch)
    if change is fencing.StateChange.NEWER:
        return None
    if change is fencing.StateChange.OLDER:
        return ErrorCode.STALE_CONTROLLER_EPOCH
    return None if tuple(replicas) != held.replicas else ErrorCode.NONE


class MissingLog(Enum):
    CREATE = "create"    # create the log (in the online dir with the fewest partitions)
    REFUSE = "refuse"    # KAFKA_STORAGE_ERROR, and ask the controller to restart it


def missing_log(is_new: bool, lost_here: bool, some_dir_offline: bool) -> MissingLog:
    """What a LeaderAndIsr state does for a replica this broker has no log of.

    - ``is_new`` (a new partition, a replica being added, or - design.md#jbod "Partitions Restart" -
      a replica the controller restarted after this broker reported it lost): create it. A
      re-created replica starts empty and fetches from the leader's log start.
    - otherwise, when the replica was lost here (its dir or log failed) or when any log dir is
      offline (it may live there: a broker restarted with a broken dir cannot tell) - Kafka's
      LogManager.getOrCreateLog rule (KIP-112): refuse with KAFKA_STORAGE_ERROR rather than
      create an empty log that the controller believes holds data (it may be in the ISR). The
      broker then writes a /restart_partitions entry, so the controller takes it out of the
      ISR and re-sends the state with ``is_new``.
    - otherwise: create it (a controller's first LeaderAndIsr after a new topic, as before).
    """
    if is_new:
        return MissingLog.CREATE
    if lost_here or some_dir_offline:
        return MissingLog.REFUSE
    return MissingLog.CREATE


def retry_failed_log(log_failed: bool, leader_epoch: int, held_leader_epoch: int | None) -> bool:
    """KIP-461: rebuild a failed log from its files when a new leader epoch arrives for it."""
    return log_failed and fencing.is_new_leader_epoch(leader_epoch, held_leader_epoch)


@dataclass(frozen=True)
class Transition:
    """What applying one partition state does to the replica."""

    new_epoch: bool        # a leader epoch this replica was not in
    lead: bool             # this broker is the leader
    reset_followers: bool  # leader: track the followers afresh (new epoch, or newly leading)
    write_epoch_start: bool  # leader: record the new epoch's start offset in the epoch cache
    follow: bool           # follower: (re)start following (fetcher state reset)
    fetch: bool            # follower with a leader to fetch from (-1: none elected)
    report_recovered: bool  # leader: report RECOVERED (KIP-704) through AlterPartition


def transition(broker_id: int, leader: int, leader_epoch: int, leader_recovery_state: int,
               held_leader_epoch: int, was_leader: bool) -> Transition:
    """Kafka's makeLeader / makeFollower: a leader whose epoch and role are unchanged only
    takes the new ISR (an ISR-only update keeps its followers' states); a follower restarts
    fetching only when its leader or epoch changed."""
    new_epoch = fencing.is_new_leader_epoch(leader_epoch, held_leader_epoch)
    lead = leader == broker_id
    return Transition(new_epoch=new_epoch, lead=lead,
                      reset_followers=lead and (new_epoch or not was_leader),
                      write_epoch_start=lead and new_epoch,
                      follow=not lead and (was_leader or new_epoch),
                      fetch=not lead and (was_leader or new_epoch) and leader >= 0,
                      report_recovered=lead and leader_recovery_state == RECOVERING)


def epoch_start_applies(is_leader: bool, leader_epoch: int, written_epoch: int) -> bool:
    """A new epoch's start offset, written on the log dir's executor, is the leader's once
    written - unless another LeaderAndIsr moved the partition on meanwhile (then that one's
    own write sets it, or it no longer leads)."""
    return is_leader and leader_epoch == written_epoch


def is_stray_replica(broker_id: int, replicas, leader_epoch: int, has_log: bool,
                     held: HeldReplica | None, isr=()) -> bool:
    """A log this broker keeps for a partition whose replicas (RS, adding ones included) no
    longer name it - a replica removed by a reassignment or a cancel whose StopReplica(delete)
    never arrived: this broker was down, or the controller that removed it died before its
    request went out (design.md#reassignment-failover, killed after step 5). The controller's
    UpdateMetadata says so, and the log is deleted then (KRaft's stray-replica cleanup, KAFKA-14616,
    applied to the ZooKeeper-era metadata). A replica still served counts only once the metadata
    carries a newer leader epoch than it holds: the controller has moved the partition on without
    it, so it must neither lead (acks=1 writes to it would be lost) nor linger. One served at the
    current epoch is left to the controller's own StopReplica.

    A replica the ISR still names is never a stray, whatever the replicas say: reassignment's
    step 4 sends replicas = TRS at a new epoch while the removed replicas stay in the ISR until
    step 5, and a controller killed between the two (design.md#reassignment-case-3) left ISR members
    without data, one of which a later election could pick cleanly. As in Kafka,
    only StopReplica(delete) - step 5, after the ISR shrank - removes such a log."""
    if not has_log or broker_id in replicas or broker_id in isr:
        return False
    return held is None or held.stopped or leader_epoch > held.leader_epoch
