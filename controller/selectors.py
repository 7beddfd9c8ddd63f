"""Leader selectors: pure functions of (assignment, ISR, live brokers, shutting-down brokers,
policy) returning the new leader and ISR, or None when no replica may lead.

Kafka's PartitionLeaderElectionAlgorithms plus the two selectors the seeds add. "Live" is the set
of registered brokers (/brokers/ids); a broker in controlled shutdown is still live but may not be
elected (Kafka's isReplicaOnline(includeShuttingDownBrokers = false)). Every selector walks the
*assignment* order, so the first replica of the assignment - the preferred leader - wins whenever
it is eligible, which is what keeps leadership balanced (assignment.py spreads first replicas).

    offline_leader              a partition without a live leader (broker failure, new broker,
                                unclean ElectLeaders)
    controlled_shutdown_leader  move leadership off brokers shutting down
    preferred_leader            ElectLeaders(PREFERRED) and the automatic imbalance check
    relinquished_leader         design.md#kip-501 (KIP-501 Solution 2): a slow leader gives up
                                leadership
    reassigned_leader           (design.md#reassignment-step-4; decisions/reassignment.py)
    restarted_leader            design.md#jbod (RestartedPartitionsLeaderSelector;
                                decisions/restarts.py)

    elr_leader                  design.md#kip-966: with eligible.leader.replicas.enable,
                                the offline election - ISR, then unfenced ELR, then by the
                                unclean.recovery.strategy wait or ask for unclean recovery
                                (decisions/recovery.py: the Unclean Recovery Manager)

`elr_leader` answers with a type, not a leader picked blindly: a leader (`LeaderChosen`), no
leader yet (`Wait`), or `NeedsRecovery` - the partition has no eligible leader and its strategy
says to recover it by asking the replicas for their logs (KIP-966's Unclean Recovery Manager).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import Enum


class ElectionReason(Enum):
    """Which selector elected a leader (event log field `reason`; Kafka's strategy names)."""

    NEW_PARTITION = "new_partition"
    OFFLINE = "offline"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    PREFERRED = "preferred"
    RELINQUISHED = "relinquished"   # design.md#kip-501
    REASSIGNED = "reassigned"       # design.md#reassignment
    RESTARTED = "restarted"         # design.md#jbod
    UNCLEAN_RECOVERY = "unclean_recovery"  # design.md#kip-966's Unclean Recovery Manager

    def __str__(self) -> str:
        return self.value


class UncleanRecoveryStrategy(Enum):
    """KIP-966's unclean.recovery.strategy (design.md#kip-966): what the controller does for a
    partition with no ISR member and no unfenced ELR member to elect."""

    PROACTIVE = "Proactive"  # recover at once, even while fenced ELR members may come back
    BALANCED = "Balanced"    # wait for the ELR; with none, recover once LastKnownELR is back
    MANUAL = "Manual"        # wait for the operator (ElectLeaders UNCLEAN)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Election:
    """A selector's answer: the new leader and the ISR to write with it."""

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False  # the leader was not in the ISR (data may be lost)


def _eligible(broker: int, live: Collection[int], shutting_down: Collection[int]) -> bool:
    return broker in live and broker not in shutting_down


def initial_leader(assignment: Sequence[int], live: Collection[int],
                   shutting_down: Collection[int] = ()) -> Election | None:
    """A new partition (Kafka's initializeLeaderAndIsrForPartitions): the first live replica
    leads, the ISR is every live replica."""
    live_replicas = tuple(r for r in assignment if _eligible(r, live, shutting_down))
    if not live_replicas:
        return None
    return Election(live_replicas[0], live_replicas)


def offline_leader(assignment: Sequence[int], isr: Sequence[int], live: Collection[int],
                   shutting_down: Collection[int], unclean_allowed: bool) -> Election | None:
    """The first live ISR member in assignment order; the ISR keeps its live members. With
    unclean election allowed and no live ISR member: the first live assigned replica, alone in
    the ISR, flagged unclean (Kafka's offlinePartitionLeaderElection)."""
    live_replicas = [r for r in assignment if _eligible(r, live, shutting_down)]
    isr_set = set(isr)
    for r in live_replicas:
        if r in isr_set:
            return Election(r, tuple(b for b in isr if _eligible(b, live, shutting_down)))
    if unclean_allowed and live_replicas:
        return Election(live_replicas[0], (live_replicas[0],), unclean=True)
    return None


def controlled_shutdown_leader(assignment: Sequence[int], isr: Sequence[int],
                               live: Collection[int],
                               shutting_down: Collection[int]) -> Election | None:
    """The first live ISR member that is not shutting down; the new ISR drops every broker that
    is shutting down (Kafka's controlledShutdownPartitionLeaderElection). None keeps the current
    leader: the broker reports the partition as remaining and retries."""
    isr_set = set(isr)
    for r in assignment:
        if r in isr_set and _eligible(r, live, shutting_down):
            return Election(r, tuple(b for b in isr if b not in shutting_down))
    return None


def preferred_leader(assignment: Sequence[int], isr: Sequence[int], live: Collection[int],
                     shutting_down: Collection[int],
                     excluded: Collection[int] = ()) -> Election | None:
    """The first assigned replica if it is live and in the ISR; the ISR is unchanged.
    `excluded` holds brokers that relinquished leadership of this partition within the cool-down
    (design.md#kip-501): re-electing a slow leader at once would undo its relinquishment."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred in excluded or not _eligible(preferred, live, shutting_down):
        return None
    if preferred not in isr:
        return None
    return Election(preferred, tuple(isr))


def relinquished_leader(new_isr: Sequence[int], sender: int, live: Collection[int],
                        shutting_down: Collection[int]) -> Election | None:
    """design.md#kip-501: the leader put itself last in `new_isr`; elect the first other eligible
    member in that order. The sender stays in the ISR as a follower."""
    for r in new_isr:
        if r != sender and _eligible(r, live, shutting_down):
            return Election(r, tuple(new_isr))
    return None


def reassigned_leader(target_replicas: Sequence[int], isr: Sequence[int], live: Collection[int],
                      shutting_down: Collection[int]) -> Election | None:
    """design.md#reassignment-step-4: the first target replica that is live and in the ISR (Kafka's
    reassignPartitionLeaderElection)."""
    isr_set = set(isr)
    for r in target_replicas:
        if r in isr_set and _eligible(r, live, shutting_down):
            return Election(r, tuple(isr))
    return None


def restarted_leader(assignment: Sequence[int], isr: Sequence[int], leader: int,
                     restarted: int, live: Collection[int], shutting_down: Collection[int],
                     unclean_allowed: bool) -> Election | None:
    """design.md#jbod RestartedPartitionsLeaderSelector: broker `restarted` lost its replica
    (offline log dir). The assignment is unchanged; new ISR = ISR - restarted. If it led, the
    new leader is the first assigned replica in the new ISR; otherwise the leader stays. An
    empty new ISR is handled like an offline election (decisions/restarts.py)."""
    new_isr = tuple(b for b in isr if b != restarted)
    if leader != restarted and leader in new_isr and _eligible(leader, live, shutting_down):
        return Election(leader, new_isr)
    others_live = {b for b in live if b != restarted}
    return offline_leader([r for r in assignment if r != restarted], new_isr, others_live,
                          shutting_down, unclean_allowed)


# ============================================================================ design.md#kip-966

@dataclass(frozen=True)
class LeaderChosen:
    """An ISR or unfenced ELR member leads: a clean election."""

    election: Election


@dataclass(frozen=True)
class Wait:
    """No leader now; a broker registering (or the operator) decides again."""

    reason: str


@dataclass(frozen=True)
class NeedsRecovery:
    """No eligible leader, and the strategy says to recover: the Unclean Recovery Manager asks
    the replicas for their logs (GetReplicaLogInfo) and elects the best one."""

    strategy: UncleanRecoveryStrategy


ElrElection = LeaderChosen | Wait | NeedsRecovery


def elr_leader(assignment: Sequence[int], isr: Sequence[int], elr: Sequence[int],
               last_known_elr: Sequence[int], live: Collection[int],
               shutting_down: Collection[int],
               strategy: UncleanRecoveryStrategy) -> ElrElection:
    """design.md#kip-966's election order, exactly:

    1. an ISR member (live, not shutting down; the first in assignment order) - the ISR keeps
       its eligible members;
    2. else an unfenced ELR member, alone in the new ISR (Kafka's PartitionChangeBuilder.
       tryElection moves it from the ELR into the ISR);
    3. else, if there are fenced ELR members: Proactive -> recover; otherwise wait for them;
    4. else (no ELR): Proactive -> recover at once; Balanced -> recover once every LastKnownELR
       member is unfenced (the recovery must hear from all of them), else wait; Manual -> wait
       for the operator.

    "Fenced" is replog's ZooKeeper-era reading of KRaft's fencing: not registered, or in
    controlled shutdown. ISR members that are not eligible count as fenced ELR members: the
    write that takes them out of the ISR puts them in the ELR (Kafka runs
    maybePopulateTargetElr before tryElection for the same reason), so a leader that just died
    is waited for, not recovered around."""
    def eligible(b: int) -> bool:
        return _eligible(b, live, shutting_down)

    isr_set, elr_set = set(isr), set(elr)
    for r in assignment:
        if r in isr_set and eligible(r):
            return LeaderChosen(Election(r, tuple(b for b in isr if eligible(b))))
    for r in assignment:
        if r in elr_set and eligible(r):
            return LeaderChosen(Election(r, (r,)))
    if isr_set | elr_set:
        if strategy is UncleanRecoveryStrategy.PROACTIVE:
            return NeedsRecovery(strategy)
        fenced = ",".join(map(str, sorted(isr_set | elr_set)))
        return Wait(f"waiting for fenced ELR members {fenced} ({strategy})")
    if strategy is UncleanRecoveryStrategy.PROACTIVE:
        return NeedsRecovery(strategy)
    if strategy is UncleanRecoveryStrategy.BALANCED:
        missing = [b for b in last_known_elr if not eligible(b)]
        if not missing:
            return NeedsRecovery(strategy)
        return Wait(f"waiting for LastKnownELR members {','.join(map(str, missing))} "
                    f"({strategy})")
    return Wait(f"no ISR or ELR member; waiting for the operator ({strategy})")
