"""One partition replica's replication state and rules, driven by ``step(event) -> effects``
(as ``controller/core.py`` is): the leader and the follower side of one partition.

It holds what Kafka's Partition holds - leader, leader epoch and the epoch's start offset,
partition and controller epochs, ISR with its pending and maximal forms (Kafka's
PendingExpandIsr / PendingShrinkIsr), follower states, the KIP-966 ELR of the controller's last
state and the effective min ISR it applies, KIP-841's refused expansions, the KIP-501
relinquished epoch - and decides the HW. It never reads the log: events carry the log's LEO and
HW, and an :class:`AdvanceHighWatermark` effect says what the shell writes back. It imports no
asyncio and no grpc; ``broker.partition.Partition`` is the shell that owns the log and the
waiters, ``broker.alter_partition.AlterPartitionManager`` the shell that sends proposals.

Ordering rules (the shell carries effects out in list order, before it takes the next event):

1. FollowerFetch: a pending read is recorded (KIP-501) before the follower state moves; the
   ISR expansion (:class:`ProposeIsr`) comes *before* :class:`AdvanceHighWatermark`, as Kafka's
   updateFollowerFetchState runs maybeExpandIsr before maybeIncrementLeaderHW: the pending ISR
   names the follower, so the HW cannot pass its LEO (tests/broker/test_replica_core.py::
   test_expansion_comes_before_the_hw_in_one_fetch; design.md#sim-finding-h).
2. Only a leader proposes, one AlterPartition in flight: a proposal while one is pending (or
   on a replica that does not lead) yields nothing; relinquish
   (design.md#kip-501) replaces a pending change. While pending, the HW is computed over the
   maximal ISR (old ISR plus proposed), and no shrink is considered.
3. A proposal carries the epochs it was made under; a LeaderAndIsr that moves them clears the
   pending ISR, and an answer to a stale proposal changes nothing.
4. Every change of HW, leadership or ISR ends with :class:`WakeProduce` (produce and consume
   waiters re-check); a step to follower also ends with :class:`WakeFetch`.
5. The HW never moves while the controller's last state lists an ELR (KIP-966), nor below the
   effective min ISR, min(min.insync.replicas, RF).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker import fencing, partition_state
from broker import isr as isr_rules
from broker.isr import FollowerState
from common.errors import ErrorCode
from common.min_isr import effective_min_isr

EPOCH_START_PENDING = 1 << 62  # the new leader epoch's start offset is not written yet


# ---------------------------------------------------------------------- events

@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """One admitted LeaderAndIsr partition state (common.controller_requests)."""

    state: Any
    now_ms: int
    leo: int
    hw: int


@dataclass(frozen=True, slots=True)
class FollowerFetch:
    replica_id: int
    broker_epoch: int
    fetch_offset: int
    log_start: int
    now_ms: int
    leo: int
    hw: int
    pending_id: int | None = None
    may_expand: bool = False


@dataclass(frozen=True, slots=True)
class Appended:
    """The leader's LEO moved (an append), or anything else the HW may follow."""

    leo: int
    hw: int


@dataclass(frozen=True, slots=True)
class EpochStartWritten:
    offset: int


@dataclass(frozen=True, slots=True)
class IsrChangeWanted:
    """The shell wants an ISR change proposed: expand, shrink, recovered (KIP-704) or
    relinquish (KIP-501)."""

    new_isr: tuple[int, ...]
    kind: str


@dataclass(frozen=True, slots=True)
class ProposalDropped:
    """A queued proposal found stale before it was sent."""

    new_isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionAnswer:
    proposed: tuple[int, ...]
    kind: str
    stale: bool
    broker_epochs: tuple[int, ...]
    error_code: int
    leader_id: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int
    elr: tuple[int, ...]
    leo: int
    hw: int


@dataclass(frozen=True, slots=True)
class StopReplica:
    """StopReplica without deletion: neither leader nor follower."""


@dataclass(frozen=True, slots=True)
class BecomeFollower:
    """The replica stops leading (StopReplica, a lost log dir)."""


Event = (LeaderAndIsr | FollowerFetch | Appended | EpochStartWritten | IsrChangeWanted
         | ProposalDropped | AlterPartitionAnswer | StopReplica | BecomeFollower)


# ---------------------------------------------------------------------- effects

@dataclass(frozen=True, slots=True)
class AdvanceHighWatermark:
    hw: int


@dataclass(frozen=True, slots=True)
class WakeProduce:
    """HW, leadership or ISR changed: produce (CompleteProduce) and consume waiters re-check."""


@dataclass(frozen=True, slots=True)
class WakeFetch:
    """Follower fetches waiting on this replica's data wake."""


@dataclass(frozen=True, slots=True)
class ProposeIsr:
    new_isr: tuple[int, ...]
    kind: str
    leader_epoch: int
    partition_epoch: int
    broker_epochs: tuple[int, ...]  # of new_isr's members, -1 where unknown


@dataclass(frozen=True, slots=True)
class LogEvent:
    """A line for the event log (and the metric the shell counts for it)."""

    name: str
    fields: dict = field(default_factory=dict)
    warning: bool = False


@dataclass(frozen=True, slots=True)
class Transitioned:
    """What a LeaderAndIsr did (partition_state.Transition): the shell starts or stops
    fetching, writes the epoch start, reports RECOVERED."""

    transition: partition_state.Transition


Effect = AdvanceHighWatermark | WakeProduce | WakeFetch | ProposeIsr | LogEvent | Transitioned


# ---------------------------------------------------------------------- the core

@dataclass
class ReplicaCore:
    local_id: int
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    controller_epoch: int = -1
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    followers: dict[int, FollowerState] = field(default_factory=dict)
    leader_epoch_start_offset: int = 0
    # An AlterPartition in flight: until the controller answers, the HW is computed over the
    # larger "maximal" ISR.
    pending_isr: tuple[int, ...] | None = None
    # min.insync.replicas as configured (common.dynamic_config.configured_min_isr): acks=all
    # admission uses it as is; the HW freeze uses ``effective_min_isr``.
    min_isr: int = 1
    # KIP-966: the ELR of the controller's last state. Not empty: the HW stays frozen.
    elr: tuple[int, ...] = ()
    leader_recovery_state: int = 0  # KIP-704
    relinquished_epoch: int = -1  # design.md#kip-501: leadership given up in this epoch
    # KIP-841: followers the controller refused into the ISR -> the broker epoch refused
    refused_expansions: dict[int, int] = field(default_factory=dict)
    stopped: bool = False

    # ------------------------------------------------------------------ views

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id and not self.stopped

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys(self.isr + self.pending_isr))

    @property
    def effective_min_isr(self) -> int:
        """min(min.insync.replicas, RF) (Kafka's Partition.effectiveMinIsr, KIP-966). Without
        the cap a topic whose RF is below min.insync.replicas never moved its HW."""
        return effective_min_isr(self.min_isr, len(self.replicas))

    @property
    def under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.replicas)

    @property
    def under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.effective_min_isr

    def new_high_watermark(self, leo: int, hw: int) -> int | None:
        """The HW the rules allow now; None when it stays."""
        if not self.is_leader or self.elr:
            return None
        new = isr_rules.new_high_watermark(hw, leo, self.isr, self.local_id, self.followers,
                                           self.effective_min_isr, self.maximal_isr)
        return new if new > hw else None

    def isr_expansion_candidate(self, follower_id: int, hw: int) -> bool:
        if (not self.is_leader or self.pending_isr is not None or follower_id in self.isr
                or follower_id not in self.replicas):
            return False
        f = self.followers.get(follower_id)
        return (f is not None
                and not isr_rules.expansion_refused(self.refused_expansions.get(follower_id), f)
                and isr_rules.can_join_isr(f, hw, self.leader_epoch_start_offset))

    def out_of_sync(self, leo: int, now_ms: int, lag_max_ms: int,
                    pending_reads_in_sync: bool = False) -> set[int]:
        if not self.is_leader or self.pending_isr is not None:
            return set()
        return isr_rules.out_of_sync_replicas(self.isr, self.local_id, self.followers, leo,
                                              now_ms, lag_max_ms, pending_reads_in_sync)

    # ------------------------------------------------------------------ step

    def step(self, event: Event) -> list[Effect]:
        match event:
            case LeaderAndIsr():
                return self._leader_and_isr(event)
            case FollowerFetch():
                return self._follower_fetch(event)
            case Appended(leo=leo, hw=hw):
                return self._advance(leo, hw)
            case EpochStartWritten(offset=offset):
                self.leader_epoch_start_offset = offset
                return []
            case IsrChangeWanted(new_isr=new_isr, kind=kind):
                return self._propose(new_isr, kind)
            case ProposalDropped(new_isr=new_isr):
                if self.pending_isr == new_isr:
                    self.pending_isr = None
                return []
            case AlterPartitionAnswer():
                return self._answer(event)
            case StopReplica():
                self.stopped = True
                return self._follow()
            case BecomeFollower():
                return self._follow()
        raise TypeError(f"not a replica event: {event!r}")

    def apply_state(self, *, leader: int, leader_epoch: int, partition_epoch: int,
                    controller_epoch: int, isr, replicas, adding=(), removing=(),
                    leader_recovery_state: int = 0, elr=()) -> None:
        self.leader_id = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.controller_epoch = controller_epoch
        self.isr = tuple(isr)
        self.replicas = tuple(replicas)
        self.adding_replicas = tuple(adding)
        self.removing_replicas = tuple(removing)
        self.leader_recovery_state = leader_recovery_state
        self.elr = tuple(elr)
        self.pending_isr = None
        self.stopped = False
        self.refused_expansions.clear()  # a new state: the controller may answer otherwise

    def become_leader(self, now_ms: int, new_epoch: bool) -> list[Effect]:
        """Follower tracking for a leadership (new epoch) or an ISR-only update."""
        if new_epoch:
            # Set once the epoch's start offset is written (EpochStartWritten, after any
            # queued truncation or append); until then no follower passes can_join_isr.
            self.leader_epoch_start_offset = EPOCH_START_PENDING
        fresh = {}
        for b in self.replicas:
            if b == self.local_id:
                continue
            f = self.followers.get(b) if not new_epoch else None
            if f is None:
                f = FollowerState(b)
                isr_rules.reset_for_new_leadership(f, now_ms, b in self.isr)
            fresh[b] = f
        self.followers = fresh
        return [WakeProduce()]

    def _follow(self) -> list[Effect]:
        self.followers = {}
        self.pending_isr = None
        return [WakeProduce(), WakeFetch()]

    def _leader_and_isr(self, e: LeaderAndIsr) -> list[Effect]:
        s = e.state
        t = partition_state.transition(self.local_id, s.leader, s.leader_epoch,
                                       s.leader_recovery_state, self.leader_epoch,
                                       self.is_leader)
        self.apply_state(leader=s.leader, leader_epoch=s.leader_epoch,
                         partition_epoch=s.partition_epoch, controller_epoch=s.controller_epoch,
                         isr=s.isr, replicas=s.replicas, adding=s.adding_replicas,
                         removing=s.removing_replicas,
                         leader_recovery_state=s.leader_recovery_state, elr=s.elr)
        out: list[Effect] = []
        if t.lead:
            out += self.become_leader(e.now_ms, t.reset_followers)
            out += self._advance(e.leo, e.hw)
        elif t.follow:
            out += self._follow()
        out.append(Transitioned(t))
        return out

    def _follower_fetch(self, e: FollowerFetch) -> list[Effect]:
        f = self.followers.get(e.replica_id)
        stale = f is not None and fencing.follower_fetch_is_stale(e.broker_epoch, f.broker_epoch)
        if not isr_rules.fetch_updates_follower(e.replica_id in self.replicas, stale,
                                                e.fetch_offset, e.leo):
            return []
        if e.pending_id is not None and f is not None and \
                isr_rules.pending_fetch_eligible(f, e.fetch_offset):
            # design.md#kip-501: recorded before the read, so a slow read keeps it in sync.
            f.pending_fetches[e.pending_id] = e.fetch_offset
        self.record_follower_fetch(e.replica_id, e.fetch_offset, e.log_start, e.now_ms, e.leo,
                                   e.broker_epoch)
        out: list[Effect] = []
        if e.may_expand and self.isr_expansion_candidate(e.replica_id, e.hw):
            out += self._propose(self.isr + (e.replica_id,), "expand")  # rule 1: before the HW
        return out + self._advance(e.leo, e.hw)

    def record_follower_fetch(self, follower_id: int, fetch_offset: int, log_start: int,
                              now_ms: int, leo: int, broker_epoch: int) -> None:
        f = self.followers.get(follower_id)
        if f is None:
            f = self.followers[follower_id] = FollowerState(follower_id)
        isr_rules.update_fetch_state(f, fetch_offset, log_start, now_ms, leo, broker_epoch)

    def _advance(self, leo: int, hw: int) -> list[Effect]:
        new = self.new_high_watermark(leo, hw)
        return [] if new is None else [AdvanceHighWatermark(new), WakeProduce()]

    def _propose(self, new_isr: tuple[int, ...], kind: str) -> list[Effect]:
        if not self.is_leader:
            return []  # only a leader proposes (rule 2)
        if kind == "relinquish":
            self.pending_isr = None  # replaces a change in flight (the shell unqueues it)
        if self.pending_isr is not None:
            return []
        self.pending_isr = new_isr
        return [ProposeIsr(new_isr, kind, self.leader_epoch, self.partition_epoch,
                           tuple(self.followers[b].broker_epoch if b in self.followers else -1
                                 for b in new_isr))]

    def _answer(self, a: AlterPartitionAnswer) -> list[Effect]:
        if a.kind == "relinquish" and a.error_code in (ErrorCode.NONE,
                                                        ErrorCode.NEW_LEADER_ELECTED):
            # The controller elected another ISR member. Its LeaderAndIsr may arrive before
            # this answer, so this is counted whatever the partition's state is by now.
            if self.pending_isr == a.proposed:
                self.pending_isr = None
            return [LogEvent("leadership_relinquished", {
                "leader_epoch": self.leader_epoch, "new_leader": a.leader_id,
                "new_leader_epoch": a.leader_epoch, "isr": list(a.isr)}, warning=True)]
        if self.pending_isr != a.proposed or a.stale:
            return []  # the partition changed (new LeaderAndIsr) while it was in flight
        self.pending_isr = None
        if a.error_code != ErrorCode.NONE:
            if a.error_code == ErrorCode.INELIGIBLE_REPLICA and a.kind == "expand":
                for b, epoch in zip(a.proposed, a.broker_epochs):
                    if b not in self.isr:  # the follower being added
                        self.refused_expansions[b] = epoch
            return [LogEvent("isr_update_failed", {
                "error": ErrorCode(a.error_code).name
                if a.error_code in ErrorCode._value2member_map_ else a.error_code,
                "leader_epoch": self.leader_epoch, "partition_epoch": self.partition_epoch},
                warning=True)]
        if a.leader_epoch != self.leader_epoch or a.leader_id != self.local_id:
            return []
        old = self.isr
        self.isr = tuple(a.isr)
        self.partition_epoch = a.partition_epoch
        self.leader_recovery_state = a.leader_recovery_state
        self.elr = tuple(a.elr)
        if a.kind == "recovered":
            return [LogEvent("leader_recovered", {"leader_epoch": self.leader_epoch})]
        grew = len(self.isr) > len(old)
        out: list[Effect] = [LogEvent("isr_expand" if grew else "isr_shrink", {
            "leader_epoch": self.leader_epoch, "old_isr": list(old), "isr": list(self.isr),
            "partition_epoch": self.partition_epoch})]
        new = self.new_high_watermark(a.leo, a.hw)
        if new is not None:
            out.append(AdvanceHighWatermark(new))
        out.append(WakeProduce())  # produce waiters re-check min ISR
        return out
