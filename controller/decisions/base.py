"""Decision types, the builder every decision family uses, and `apply`.

A decision is data: the partition-state znode writes, the state-machine steps taken after
them, the requests to send, and per-partition answers for the RPC that asked. `next_state` is
the one place a partition's leader, leader epoch and ISR change, and `Builder.write` - through
which every new state goes - the one place its ELR and LastKnownELR change (design.md#kip-966:
the rules are controller/elr.py's `next_elr`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import LeaderAndIsr
from controller.context import ControllerContext, PartitionReplica
from controller.elr import next_elr
from controller.selectors import ElectionReason, UncleanRecoveryStrategy
from controller.state_machine import (
    InvalidStateTransition,
    PartitionState,
    ReplicaState,
    TransitionPlan,
)
from controller.store import PartitionWrite as PartitionWrite  # what a decision writes

P = PartitionState
R = ReplicaState


class ElectionType(IntEnum):
    """ElectLeaders' election type (the proto's ElectionType, Kafka's KIP-460)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class ElectionRecord:
    """One leader election (event log `leader_election`, metrics)."""

    tp: TopicPartition
    old_leader: int
    new_leader: int
    leader_epoch: int
    unclean: bool
    reason: ElectionReason


@dataclass(frozen=True)
class Outcome:
    error: ErrorCode = ErrorCode.NONE
    message: str = ""


@dataclass
class Decision:
    writes: dict[TopicPartition, PartitionWrite] = field(default_factory=dict)
    elections: list[ElectionRecord] = field(default_factory=list)
    partition_steps: list[tuple[TopicPartition, PartitionState]] = field(default_factory=list)
    replica_steps: list[tuple[PartitionReplica, ReplicaState]] = field(default_factory=list)
    # broker -> partition -> is_new (LeaderAndIsr carries the state the context has after
    # apply, so a partition elected in the same decision is sent with its new leader)
    leader_and_isr: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)
    # broker -> partitions; an empty set still sends the live brokers and controller
    update_metadata: dict[int, set[TopicPartition]] = field(default_factory=dict)
    # broker -> partition -> delete_partition
    stop_replica: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)
    # per-partition answers for RPCs (AlterPartition, ElectLeaders)
    outcomes: dict[TopicPartition, Outcome] = field(default_factory=dict)
    relinquished: dict[TopicPartition, tuple[int, float]] = field(default_factory=dict)
    # topics whose replicas are all deleted: the shell removes their znodes next
    deletable_topics: set[str] = field(default_factory=set)
    # transitions the tables refused (design.md#reassignment): never applied; the core logs each as
    # an `invalid_state_transition` event and the shell counts them in a metric
    refused: list[InvalidStateTransition] = field(default_factory=list)
    # design.md#kip-966: leaderless partitions whose strategy asks for an unclean recovery (the
    # topic's strategy); the Unclean Recovery Manager starts one task per partition from
    # these. `forced_recoveries`: those the operator asked for (ElectLeaders UNCLEAN).
    recoveries: dict[TopicPartition, UncleanRecoveryStrategy] = field(default_factory=dict)
    forced_recoveries: set[TopicPartition] = field(default_factory=set)

    @property
    def empty(self) -> bool:
        return not (self.writes or self.partition_steps or self.replica_steps
                    or self.leader_and_isr or self.update_metadata or self.stop_replica)

    def isr_changes(self) -> list[PartitionWrite]:
        """Writes that changed the ISR (event log `isr_change`)."""
        return [w for w in self.writes.values()
                if w.old is not None and tuple(w.old.isr) != tuple(w.new.isr)]


class RequestRejected(Exception):
    """A whole request refused (not one partition of it): the answer names the Kafka code."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class StaleBrokerEpoch(RequestRejected):
    """The sender is not registered or is at another broker epoch (KIP-380)."""

    error_code = ErrorCode.STALE_BROKER_EPOCH


class BrokerNotAvailable(RequestRejected):
    """The broker a request is about is not registered."""

    error_code = ErrorCode.BROKER_NOT_AVAILABLE


# ============================================================================ builder

class Builder:
    """Accumulates one Decision; reads through its own pending writes and transitions, so the
    steps of a compound decision (failover: metadata, then elections) see each other."""

    def __init__(self, ctx: ControllerContext):
        self.ctx = ctx
        self.d = Decision()
        self.partitions: TransitionPlan[TopicPartition, PartitionState] = TransitionPlan(
            ctx.partition_sm)
        self.replicas: TransitionPlan[PartitionReplica, ReplicaState] = TransitionPlan(
            ctx.replica_sm)
        # KIP-966: brokers that registered after an unclean shutdown in this decision; no
        # write of it keeps them in an ELR (Kafka's uncleanShutdownReplicas)
        self.unclean_shutdown: set[int] = set()
        # design.md#jbod + KIP-966: brokers whose replica was lost with a log dir (a restart entry):
        # their log comes back empty, so no write keeps them in the ELR or the LastKnownELR either
        # (a Balanced recovery waits for every LastKnownELR member, to hear the longest log)
        self.lost_logs: set[int] = set()
        # replicas a move takes out of a partition in this decision (a cancel or a changed
        # target writes the state before the topic znode stops listing them): no write keeps
        # them in its ELR or LastKnownELR, as KIP-966's PartitionChangeBuilder filters both
        # by the target replicas (tests/controller/test_elr_sim_findings.py::
        # test_a_cancel_of_a_leaderless_move_takes_the_removed_replicas_out_of_the_elr)
        self.leaving: dict[TopicPartition, set[int]] = {}

    def leadership(self, tp: TopicPartition) -> LeaderAndIsr | None:
        w = self.d.writes.get(tp)
        return w.new if w is not None else self.ctx.leadership.get(tp)

    def pstate(self, tp: TopicPartition) -> PartitionState:
        return self.partitions.state(tp)

    def rstate(self, pr: PartitionReplica) -> ReplicaState:
        return self.replicas.state(pr)

    def write(self, tp: TopicPartition, new: LeaderAndIsr,
              election: ElectionRecord | None = None,
              unclean_shutdown: Collection[int] = ()) -> None:
        """Write `new`, derived from `self.leadership(tp)`, with its ELR and LastKnownELR kept
        by the KIP-966 rules. `unclean_shutdown`: replicas that lost their claim to the ELR in
        this change besides `self.unclean_shutdown` (Kafka's uncleanShutdownReplicas)."""
        new = self._with_elr(tp, new,
                             set(unclean_shutdown) | self.unclean_shutdown | self.lost_logs,
                             election is not None and election.unclean)
        prior = self.d.writes.get(tp)
        if prior is not None:
            # A second change in one decision: one znode write from the original version.
            new = replace(new, partition_epoch=prior.new.partition_epoch)
            self.d.writes[tp] = PartitionWrite(tp, prior.old, new)
        else:
            self.d.writes[tp] = PartitionWrite(tp, self.ctx.leadership.get(tp), new)
        if election is not None:
            self.d.elections.append(election)

    def _with_elr(self, tp: TopicPartition, new: LeaderAndIsr, unclean_shutdown: set[int],
                  unclean_election: bool) -> LeaderAndIsr:
        ctx = self.ctx
        base = self.leadership(tp)
        if base is None:
            return new  # a new partition: its ISR is every live replica
        if not ctx.elr.enabled and not (base.elr or base.last_known_elr or new.elr
                                        or new.last_known_elr):
            return new  # ELR off and nothing to clear: the failover hot path stays as it was
        isr = tuple(new.isr)
        if not ctx.elr.enabled and not isr and base.elr:
            # ELR switched off while the ISR was empty: the ELR members were the last in sync
            # (elr.py), so they become the ISR the old election elects from.
            isr = tuple(base.elr)
        leaving = self.leaving.get(tp, ())
        elr, lke = next_elr(base, isr, enabled=ctx.elr.enabled, min_isr=ctx.min_isr(tp),
                            replicas=[r for r in ctx.replicas(tp) if r not in leaving],
                            unclean_shutdown=unclean_shutdown,
                            unclean_election=unclean_election)
        lke = tuple(r for r in lke if r not in self.lost_logs)
        return replace(new, isr=isr, elr=elr, last_known_elr=lke)

    def partition(self, tp: TopicPartition, target: PartitionState) -> bool:
        """Plan a partition transition; one the table refuses is recorded, not applied."""
        return self._plan(self.partitions, tp, target)

    def replica(self, pr: PartitionReplica, target: ReplicaState) -> bool:
        return self._plan(self.replicas, pr, target)

    def _plan(self, plan: TransitionPlan[Any, Any], key: Any, target: Any) -> bool:
        try:
            plan.add(key, target)
            return True
        except InvalidStateTransition as e:
            self.d.refused.append(e)
            return False

    def lai(self, brokers: Iterable[int], tp: TopicPartition, is_new: bool = False) -> None:
        for b in brokers:
            if b in self.ctx.live_brokers:
                per = self.d.leader_and_isr.setdefault(b, {})
                per[tp] = per.get(tp, False) or is_new

    def lai_replicas(self, tp: TopicPartition, is_new: bool = False,
                     exclude: Collection[int] = ()) -> None:
        self.lai((r for r in self.ctx.replicas(tp) if r not in exclude), tp, is_new)

    def um_all(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        for b in self.ctx.live_brokers:
            self.d.update_metadata.setdefault(b, set()).update(tps)

    def um_brokers(self, brokers: Iterable[int], tps: Iterable[TopicPartition] = ()) -> None:
        tps = set(tps)
        for b in brokers:
            if b in self.ctx.live_brokers:
                self.d.update_metadata.setdefault(b, set()).update(tps)

    def stop(self, broker: int, tp: TopicPartition, delete: bool) -> None:
        if broker in self.ctx.live_brokers:
            per = self.d.stop_replica.setdefault(broker, {})
            per[tp] = per.get(tp, False) or delete

    def outcome(self, tp: TopicPartition, error: ErrorCode, message: str = "") -> None:
        self.d.outcomes[tp] = Outcome(error, message)

    def elect(self, tp: TopicPartition, s: LeaderAndIsr, leader: int, isr: Sequence[int],
              reason: ElectionReason, *, unclean: bool = False,
              recovery: int | None = None) -> LeaderAndIsr:
        """A selector's answer for a partition that has a state: the new state (leader epoch
        + 1), Online, LeaderAndIsr to its replicas and UpdateMetadata to everyone."""
        new = next_state(self.ctx, s, leader=leader, isr=isr, recovery=recovery)
        self.write(tp, new, ElectionRecord(tp, s.leader, leader, new.leader_epoch, unclean,
                                           reason))
        self.partition(tp, P.OnlinePartition)
        self.lai_replicas(tp)
        self.um_all([tp])
        return new

    def build(self) -> Decision:
        self.d.partition_steps = list(self.partitions.steps)
        self.d.replica_steps = list(self.replicas.steps)
        return self.d


def next_state(ctx: ControllerContext, s: LeaderAndIsr, *, leader: int | None = None,
               isr: Sequence[int] | None = None, bump_leader_epoch: bool = True,
               recovery: int | None = None) -> LeaderAndIsr:
    """The only place a partition's leader, leader epoch or ISR changes (see the package
    docstring for the epoch rules)."""
    return replace(s,
                   leader=s.leader if leader is None else leader,
                   leader_epoch=s.leader_epoch + (1 if bump_leader_epoch else 0),
                   isr=tuple(s.isr if isr is None else isr),
                   controller_epoch=ctx.epoch,
                   partition_epoch=s.partition_epoch + 1,
                   leader_recovery_state=(s.leader_recovery_state if recovery is None
                                          else recovery))


def shrink_isr(isr: Sequence[int], gone: Collection[int], leader: int,
               allow_empty: bool = False) -> tuple[int, ...]:
    """ISR without `gone`, but never empty (see the package docstring) - unless
    `allow_empty`: with ELR (KIP-966) the last members move to the ELR instead, and an ISR
    that names a dead broker is no longer needed to elect it cleanly when it returns."""
    kept = tuple(r for r in isr if r not in gone)
    if kept or not isr or allow_empty:
        return kept
    return (leader,) if leader in isr else (isr[0],)


def failed_election_message(tp: TopicPartition, strategy: str) -> str:
    return f"Failed to elect leader for partition {tp} under strategy {strategy}"


# ============================================================================ applying

def apply(ctx: ControllerContext, decision: Decision,
          failed: Collection[TopicPartition] = ()) -> None:
    """Make a decision true in memory after its ZooKeeper writes; partitions in `failed` (whose
    write was refused) keep their old state and take none of their steps."""
    failed = set(failed)
    for tp, w in decision.writes.items():
        if tp not in failed:
            ctx.leadership[tp] = w.new
    for tp, target in decision.partition_steps:
        if tp not in failed:
            ctx.partition_sm.transition(tp, target)
    for pr, replica_target in decision.replica_steps:
        if pr.tp not in failed:
            ctx.replica_sm.transition(pr, replica_target)
    for tp, entry in decision.relinquished.items():
        if tp not in failed:
            ctx.relinquished[tp] = entry
