"""Partition reassignment: design.md#reassignment (KAFKA-42) with KIP-455's adding/removing
replicas.

Vocabulary (the seed's, and Kafka's ReplicaAssignment):

    ORS  original replicas         what the partition had before the move
    TRS  target replicas (RAR)     what the operator asked for
    RS   replicas during the move  TRS + ORS, in that order, without repeats
    AR   adding replicas           TRS - ORS
    RR   removing replicas         ORS - TRS

The topic znode holds RS, AR and RR while a move runs, so a new controller learns every
move in flight from /brokers/topics alone (KIP-455); /admin/reassign_partitions is only how a
tool asks (design.md#reassignment's admin path), and is cleared partition by partition as moves
finish.

The seven steps, and where each is carried out (core.py `_on_partition_reassignment` and
`_complete_reassignment`; each step that writes is one controller-epoch-fenced write):

    1. write RS, AR, RR to the topic znode              (core: WriteTopicAssignment)
    2. start AR: leader epoch + 1, LeaderAndIsr to RS   (`start_adding_replicas`)
    3. wait until TRS is a subset of the ISR            (`reassignment_complete`, checked
                                                         after every ISR change)
    4. elect a leader from TRS if the leader is not    (`move_leader_into_target`)
       in it or is dead; else leader epoch + 1, so the
       leader learns the replica set is TRS
    5. RR out of the ISR, StopReplica(delete) to RR     (`remove_replicas`)
    6. write AR = TRS to the topic znode                (core: WriteTopicAssignment)
    7. clear the partition from the admin path          (core: WriteAdminReassignments)

Failure cases (design.md#reassignment-failover), and what a new controller does - it only ever
resumes from what ZooKeeper holds (core.py `_activate`):

    1   died between steps 1 and 2: the admin path (or the topic znode's AR/RR) lists the
        partition; the move restarts from step 1, whose write is skipped as already made.
    2a  died between 2 and 3: resumed; if TRS is in the ISR already it completes at once,
        else it waits for the ISR as before.
    2b  a new replica never starts: the move waits; the operator cancels it (which reverts to
        ORS and deletes AR's files).
    3   died between 4 and 5: TRS is in the ISR; a leader in TRS that is alive is kept (only
        its epoch is bumped), otherwise one is elected from the live TRS members.
    4a  died between 5 and 6: steps 4 onwards are repeated; RR is already out of the ISR, so
        step 5 only sends StopReplica(delete) again.
    4b  a broker fails after the leader change: the ordinary offline election handles it.
    5   died between 6 and 7: the topic znode says AR = TRS; the admin entry equals the
        assignment, so it is cleared as complete (seed: "record partition to be reassigned
        only if RAR not equal AR").

Validation (design.md#reassignment "PartitionReassignedListener"): a request naming a partition that
does not exist, asking for the replicas it has, naming a dead broker or repeating a replica is
rejected whole: nothing starts, every partition gets an answer.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import NO_LEADER, TopicAssignment
from controller import selectors
from controller.context import ControllerContext, PartitionReplica
from controller.decisions.base import (
    Builder,
    Decision,
    Outcome,
    P,
    R,
    failed_election_message,
    next_state,
    shrink_isr,
)
from controller.selectors import ElectionReason


@dataclass(frozen=True)
class ReplicaAssignment:
    """One partition's replicas with its move in flight (Kafka's ReplicaAssignment)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """RS = TRS + ORS (the seed's step 1). Reassigning a partition already moving keeps
        its *original* replicas as ORS (KIP-455), so a cancel always returns to them."""
        origin = self.origin
        full = tuple(dict.fromkeys([*target, *origin]))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))


def replica_assignment(ctx: ControllerContext, tp: TopicPartition) -> ReplicaAssignment:
    a = ctx.assignments[tp.topic]
    return ReplicaAssignment(tuple(a.partitions.get(tp.partition, ())),
                             tuple(a.adding_replicas.get(tp.partition, ())),
                             tuple(a.removing_replicas.get(tp.partition, ())))


def with_partition(a: TopicAssignment, partition: int, ra: ReplicaAssignment
                   ) -> TopicAssignment:
    """The topic assignment with one partition's replicas (and AR/RR) replaced."""
    adding = {p: list(r) for p, r in a.adding_replicas.items() if p != partition and r}
    removing = {p: list(r) for p, r in a.removing_replicas.items() if p != partition and r}
    if ra.adding:
        adding[partition] = list(ra.adding)
    if ra.removing:
        removing[partition] = list(ra.removing)
    return replace(a, partitions={**a.partitions, partition: list(ra.replicas)},
                   adding_replicas=adding, removing_replicas=removing)


def reassignment_complete(ctx: ControllerContext, tp: TopicPartition) -> bool:
    """Step 3's condition: TRS is a subset of the ISR (trivially true with no move)."""
    ra = replica_assignment(ctx, tp)
    if not ra.being_reassigned:
        return True
    s = ctx.leadership.get(tp)
    return s is not None and set(ra.target) <= set(s.isr)


def targets_reached(ctx: ControllerContext, d: Decision, failed: Collection[TopicPartition]
                    ) -> list[TopicPartition]:
    """Moving partitions whose applied state write reached step 3's condition (TRS in the
    ISR) or gave a move waiting there a new leader: an election or an ISR the controller set,
    not only the AlterPartition that core.py checks itself. An unclean election's ISR is the
    new leader alone; when that is all of TRS, no AlterPartition will ever come."""
    out = []
    for tp, w in d.writes.items():
        if tp in failed or not ctx.has_partition(tp) or ctx.is_being_deleted(tp.topic):
            continue
        ra = replica_assignment(ctx, tp)
        target = set(ra.target)
        if ra.being_reassigned and target <= set(w.new.isr) and (
                w.old is None or not target <= set(w.old.isr) or w.old.leader != w.new.leader):
            out.append(tp)
    return out


# ============================================================================ validation

NOT_STARTED = ("Not started: the request was rejected as a whole because other partitions "
               "in it are invalid (KIP-455)")


def plan_reassignments(ctx: ControllerContext,
                       requests: Iterable[tuple[TopicPartition, Sequence[int] | None]]
                       ) -> tuple[dict[TopicPartition, ReplicaAssignment],
                                  dict[TopicPartition, Outcome]]:
    """What each requested move becomes (target None = cancel), or - if any partition is
    invalid - nothing: the invalid ones get their error and the rest NOT_STARTED.

    Errors, with Kafka's codes: UNKNOWN_TOPIC_OR_PARTITION (no such partition, or its topic
    is being deleted), INVALID_REPLICA_ASSIGNMENT (empty target, a repeated replica, the
    replicas it already has, the same partition twice), BROKER_NOT_AVAILABLE (a target
    replica on a broker that is not registered), NO_REASSIGNMENT_IN_PROGRESS (cancel of a
    partition that is not moving)."""
    planned: dict[TopicPartition, ReplicaAssignment] = {}
    errors: dict[TopicPartition, Outcome] = {}
    seen: set[TopicPartition] = set()
    for tp, target in requests:
        if tp in seen:
            errors[tp] = Outcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Partition {tp} appears more than once in the request")
            continue
        seen.add(tp)
        err = _invalid(ctx, tp, target)
        if err is not None:
            errors[tp] = err
            continue
        current = replica_assignment(ctx, tp)
        planned[tp] = current.reassign_to(current.origin if target is None else target)
    if errors:
        return {}, {**{tp: Outcome(ErrorCode.INVALID_REQUEST, NOT_STARTED)
                       for tp in planned}, **errors}
    return planned, {}


def _invalid(ctx: ControllerContext, tp: TopicPartition,
             target: Sequence[int] | None) -> Outcome | None:
    if not ctx.has_partition(tp) or ctx.is_being_deleted(tp.topic):
        return Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       f"Partition {tp} does not exist")
    current = replica_assignment(ctx, tp)
    if target is None:
        if not current.being_reassigned:
            return Outcome(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                           f"No reassignment of partition {tp} is in progress")
        return _drops_every_in_sync_replica(ctx, tp, current.reassign_to(current.origin))
    if not target:
        return Outcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"The target replicas of partition {tp} are empty")
    dups = sorted({r for r in target if list(target).count(r) > 1})
    if dups:
        return Outcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"The target replicas {list(target)} of partition {tp} repeat broker "
                       f"{', '.join(map(str, dups))}")
    dead = [r for r in target if r not in ctx.live_brokers]
    if dead:
        return Outcome(ErrorCode.BROKER_NOT_AVAILABLE,
                       f"The target replicas {list(target)} of partition {tp} name broker(s) "
                       f"{', '.join(map(str, dead))} that are not alive")
    if not current.being_reassigned and tuple(target) == current.replicas:
        return Outcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"Partition {tp} already has the replicas {list(target)}")
    return _drops_every_in_sync_replica(ctx, tp, current.reassign_to(target))


def _drops_every_in_sync_replica(ctx: ControllerContext, tp: TopicPartition,
                                 ra: ReplicaAssignment) -> Outcome | None:
    """A new target or a cancel that would leave no ISR member in RS (the ISR is all
    adding replicas of the move being replaced): removing them would lose every copy the
    partition may have acknowledged. Kafka keeps the last member in the ISR then, outside
    the replicas; replog refuses the request instead."""
    s = ctx.leadership.get(tp)
    if s is not None and s.isr and not set(s.isr) & set(ra.replicas):
        return Outcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"Reassigning partition {tp} to {list(ra.target)} would remove every "
                       f"in-sync replica ({', '.join(map(str, s.isr))})")
    return None


def admin_entries_to_start(ctx: ControllerContext,
                           entries: Mapping[TopicPartition, Sequence[int]]
                           ) -> tuple[dict[TopicPartition, ReplicaAssignment],
                                      dict[TopicPartition, Outcome]]:
    """Entries of /admin/reassign_partitions found by a new controller (failover): the moves
    to resume, and the entries to clear without a move, with why - seed case 5 (the
    assignment already is the target: NONE), and entries no controller accepted (written
    while none was active) that break the listener rules (their error)."""
    resume: dict[TopicPartition, ReplicaAssignment] = {}
    clear: dict[TopicPartition, Outcome] = {}
    for tp, target in sorted(entries.items()):
        current = replica_assignment(ctx, tp) if ctx.has_partition(tp) else None
        if current is not None and not current.being_reassigned \
                and tuple(target) == current.replicas:
            clear[tp] = Outcome()
        elif current is not None and current.being_reassigned \
                and tuple(target) == current.target:
            resume[tp] = current
        else:
            err = _invalid(ctx, tp, target)
            if err is None:
                assert current is not None  # _invalid refuses a partition without replicas
                resume[tp] = current.reassign_to(target)
            else:
                clear[tp] = err
    return resume, clear


# ============================================================================ the steps

def new_replicas(ctx: ControllerContext, tp: TopicPartition) -> Decision:
    """After step 1 (RS in ctx and the topic znode): AR -> NewReplica. No write of its
    own, so it holds whether or not step 2's state write goes through."""
    b = Builder(ctx)
    for r in replica_assignment(ctx, tp).adding:
        pr = PartitionReplica(tp, r)
        if b.rstate(pr) is R.NonExistentReplica:
            b.replica(pr, R.NewReplica)
    return b.build()


def start_adding_replicas(ctx: ControllerContext, tp: TopicPartition) -> Decision:
    """Step 2: the leader epoch is bumped so every member of RS applies the LeaderAndIsr
    that carries RS (the leader must know AR to serve their fetches); AR's brokers create
    the logs (is_new)."""
    b = Builder(ctx)
    ra = replica_assignment(ctx, tp)
    s = b.leadership(tp)
    if s is None:
        return b.build()  # never initialized: its creation elects with RS
    b.write(tp, next_state(ctx, s))
    for r in ra.replicas:
        b.lai([r], tp, is_new=r in ra.adding)
    b.um_all([tp])
    return b.build()


def move_leader_into_target(ctx: ControllerContext, tp: TopicPartition,
                            target: Sequence[int]) -> Decision:
    """Step 4, after TRS joined the ISR and the in-memory replicas became TRS: AR ->
    OnlineReplica; a leader outside TRS, or dead, is replaced by the first live in-sync TRS
    member (the reassigned selector); a live leader inside TRS only gets a new leader epoch,
    so it applies the LeaderAndIsr carrying replicas = TRS. Outcome
    ELIGIBLE_LEADERS_NOT_AVAILABLE when no TRS member can lead (the move waits)."""
    b = Builder(ctx)
    for r in target:
        pr = PartitionReplica(tp, r)
        if r in ctx.live_brokers and b.rstate(pr) is not R.OnlineReplica:
            b.replicas.add_if_valid(pr, R.OnlineReplica)
    s = b.leadership(tp)
    if s is None:
        b.outcome(tp, ErrorCode.LEADER_NOT_AVAILABLE, f"Partition {tp} has no state yet")
        return b.build()
    if s.leader in target and s.leader in ctx.eligible_ids:
        b.write(tp, next_state(ctx, s))
        b.lai_replicas(tp)
        b.um_all([tp])
        return b.build()
    e = selectors.reassigned_leader(target, s.isr, ctx.live_ids, ctx.shutting_down)
    if e is None:
        b.outcome(tp, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, failed_election_message(
            tp, "ReassignPartitionLeaderElectionStrategy"))
        return b.build()
    b.elect(tp, s, e.leader, e.isr, ElectionReason.REASSIGNED)
    return b.build()


def remove_replicas(ctx: ControllerContext, tp: TopicPartition, removed: Collection[int],
                    *, isr: bool = True, stop: bool = True) -> Decision:
    """Replicas leaving a partition: step 5's RR, or the replicas a changed target or a
    cancel no longer needs.

    isr:  they leave the ISR - with a leader elected from the other replicas if the leader
          is among them - in one state write. A changed target does this *before* its step
          1 write, so the ISR is never outside the replicas ZooKeeper lists.
    stop: Offline -> DeletionStarted -> DeletionSuccessful -> NonExistent with
          StopReplica(delete=true), so their files go (Kafka's
          stopRemovedReplicasOfReassignedPartition does not wait for the answers either; a
          broker that is down then deletes the stray log when its startup metadata shows it
          holds no replica)."""
    b = Builder(ctx)
    removed = list(dict.fromkeys(removed))
    s = b.leadership(tp)
    if isr and s is not None and removed:
        b.leaving[tp] = set(removed)
        remaining = [r for r in ctx.replicas(tp) if r not in removed]
        if s.leader in removed:
            e = selectors.reassigned_leader(remaining, s.isr, ctx.live_ids, ctx.shutting_down)
            if e is not None:
                b.elect(tp, s, e.leader, shrink_isr(e.isr, removed, e.leader),
                        ElectionReason.REASSIGNED)
            else:  # nobody in sync may lead: offline until a remaining replica can
                new = next_state(ctx, s, leader=NO_LEADER, isr=shrink_isr(s.isr, removed, -1))
                b.write(tp, new)
                if b.pstate(tp) is not P.OfflinePartition:
                    b.partition(tp, P.OfflinePartition)
                b.lai_replicas(tp)
                b.um_all([tp])
        else:
            new_isr = shrink_isr(s.isr, removed, s.leader)
            # The ELR and LastKnownELR lose them too (KIP-966): a removed replica left there,
            # of a leaderless partition whose ISR does not change, would never be rewritten
            # nor taken out when it came back after an unclean shutdown
            # (tests/controller/test_elr_sim_findings.py::
            # test_a_cancel_of_a_leaderless_move_takes_the_removed_replicas_out_of_the_elr).
            # Only the ISR needs a new leader epoch.
            in_elr = set(removed) & {*s.elr, *s.last_known_elr}
            if new_isr != tuple(s.isr) or in_elr:
                b.write(tp, next_state(ctx, s, isr=new_isr,
                                       bump_leader_epoch=new_isr != tuple(s.isr)))
                b.lai_replicas(tp)
                b.um_all([tp])
    if not stop:
        return b.build()
    for r in removed:
        pr = PartitionReplica(tp, r)
        if b.rstate(pr) is R.NonExistentReplica:
            b.stop(r, tp, delete=True)  # loaded as gone, files maybe not: ask again
            continue
        if b.rstate(pr) is not R.OfflineReplica:
            b.replica(pr, R.OfflineReplica)
        b.replica(pr, R.ReplicaDeletionStarted)
        b.stop(r, tp, delete=True)
        b.replica(pr, R.ReplicaDeletionSuccessful)
        b.replica(pr, R.NonExistentReplica)
    return b.build()


def metadata_for(ctx: ControllerContext, tps: Iterable[TopicPartition]) -> Decision:
    """UpdateMetadata for these partitions to every live broker (after step 6, so clients
    and `topics describe` see the final replicas)."""
    b = Builder(ctx)
    b.um_all(tps)
    return b.build()
