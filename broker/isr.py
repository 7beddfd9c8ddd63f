"""The leader's ISR and high-watermark rules, as pure functions (no awaits, no I/O).

Everything here is Kafka's (Partition.scala / Replica.scala), with two rules replog states
explicitly:

- lastCaughtUpTime (Replica.updateFetchState): a follower fetch at offset o, made at time t
  while the leader's LEO is L and was L' at that follower's previous fetch, sets
  lastCaughtUpTime = t if o >= L, else the previous fetch time if o >= L'. A follower is out of
  sync once ``now - lastCaughtUpTime > replica.lag.time.max.ms`` and its LEO is not the
  leader's.
- The high watermark is the minimum LEO over the ISR (leader included), never moves backwards,
  and does not advance while the ISR is smaller than ``min.insync.replicas`` (KIP-966's rule,
  which the cluster issue asks for: an acknowledged-by-HW record is on min ISR replicas).
- A follower may rejoin the ISR once its LEO >= HW and >= the start offset of the leader's
  current epoch (Kafka's isFollowerInSync + leaderEpochStartOffset check).

design.md#kip-501 (KIP-501, never merged in Kafka; replog implements its final version): with
``follower.fetch.pending.reads.insync.enable`` the leader records a follower fetch as *pending*
before reading the log when its fetch offset >= the leader's LEO at that follower's previous
fetch (the follower had everything then; only the leader's read is slow). While such a fetch is
pending the follower is not out of sync, and when the read completes lastCaughtUpTime is set
from the completion time. Off (the default) is Kafka's behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field

UNKNOWN_OFFSET = -1


@dataclass
class FollowerState:
    """What a leader knows about one follower replica (Kafka's Replica)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    broker_epoch: int = -1
    # design.md#kip-501: fetch id -> offset
    pending_fetches: dict[int, int] = field(default_factory=dict)


def update_fetch_state(f: FollowerState, fetch_offset: int, follower_log_start: int,
                       fetch_time_ms: int, leader_leo: int, broker_epoch: int = -1) -> None:
    """Record a follower fetch (Kafka's Replica.updateFetchStateOrThrow)."""
    if fetch_offset >= leader_leo:
        f.last_caught_up_time_ms = max(f.last_caught_up_time_ms, fetch_time_ms)
    elif fetch_offset >= f.last_fetch_leader_leo:
        f.last_caught_up_time_ms = max(f.last_caught_up_time_ms, f.last_fetch_time_ms)
    f.log_end_offset = fetch_offset
    f.log_start_offset = follower_log_start
    f.last_fetch_leader_leo = leader_leo
    f.last_fetch_time_ms = fetch_time_ms
    if broker_epoch >= 0:
        f.broker_epoch = broker_epoch


def reset_for_new_leadership(f: FollowerState, now_ms: int, in_isr: bool) -> None:
    """A new leader treats ISR members as caught up now, others as never (Kafka's
    Replica.resetReplicaState), so it does not shrink the ISR before followers fetch."""
    f.log_end_offset = UNKNOWN_OFFSET
    f.last_fetch_leader_leo = UNKNOWN_OFFSET
    f.last_fetch_time_ms = now_ms if in_isr else 0
    f.last_caught_up_time_ms = now_ms if in_isr else 0
    f.pending_fetches.clear()


def pending_fetch_eligible(f: FollowerState, fetch_offset: int) -> bool:
    """design.md#kip-501: a fetch at or beyond the leader's LEO of the follower's previous fetch may
    be tracked as pending (call before recording the fetch: it reads the previous LEO)."""
    return fetch_offset >= f.last_fetch_leader_leo


def is_caught_up(f: FollowerState, leader_leo: int, now_ms: int, lag_max_ms: int,
                 pending_reads_in_sync: bool = False) -> bool:
    """Kafka's Replica.isCaughtUp: at the leader's LEO, or caught up within the lag limit; with
    design.md#kip-501's flag, also while one of its eligible fetches is still being read."""
    if pending_reads_in_sync and f.pending_fetches:
        return True
    return f.log_end_offset == leader_leo or now_ms - f.last_caught_up_time_ms <= lag_max_ms


def complete_pending_fetch(f: FollowerState, fetch_id: int, completion_ms: int) -> None:
    """design.md#kip-501: a pending fetch finished (or failed); its follower was caught up as of the
    completion, not the request."""
    if f.pending_fetches.pop(fetch_id, None) is not None:
        f.last_caught_up_time_ms = max(f.last_caught_up_time_ms, completion_ms)


def out_of_sync_replicas(isr: tuple[int, ...], leader_id: int,
                         followers: dict[int, FollowerState], leader_leo: int, now_ms: int,
                         lag_max_ms: int, pending_reads_in_sync: bool = False) -> set[int]:
    """ISR members the leader should remove (the isr-expiration check); never the leader."""
    out = set()
    for b in isr:
        if b == leader_id:
            continue
        f = followers.get(b)
        if f is None or not is_caught_up(f, leader_leo, now_ms, lag_max_ms,
                                         pending_reads_in_sync):
            out.add(b)
    return out


def should_relinquish(serve_ms: float, process_time_max_ms: int, enabled: bool) -> bool:
    """design.md#kip-501: a leader that took longer than follower.fetch.process.time.max.ms to serve
    a follower fetch gives up leadership (only with the flag on)."""
    return enabled and serve_ms > process_time_max_ms


def may_relinquish(is_leader: bool, relinquished_epoch: int, leader_epoch: int,
                   isr_size: int) -> bool:
    """design.md#kip-501: a slow leader gives up leadership once per leader epoch, and only when
    another ISR member can take over."""
    return is_leader and relinquished_epoch != leader_epoch and isr_size >= 2


def fetch_updates_follower(is_replica: bool, stale_incarnation: bool, fetch_offset: int,
                           leader_leo: int) -> bool:
    """Whether a follower fetch moves that follower's state (and so the HW and the ISR): it
    must come from an assigned replica's current incarnation (KIP-903) and not ask beyond the
    leader's LEO (such an offset says nothing true about the follower's log)."""
    return is_replica and not stale_incarnation and fetch_offset <= leader_leo


def relinquish_isr(isr: tuple[int, ...], leader_id: int) -> tuple[int, ...]:
    """The ISR a relinquishing leader proposes: itself moved to the end (design.md#kip-501), so the
    controller elects the first other member."""
    return tuple(b for b in isr if b != leader_id) + ((leader_id,) if leader_id in isr else ())


def can_join_isr(f: FollowerState, high_watermark: int, leader_epoch_start_offset: int) -> bool:
    """A follower outside the ISR may rejoin once it has everything below the HW and below the
    start of the current leader epoch."""
    return (f.log_end_offset >= 0 and f.log_end_offset >= high_watermark
            and f.log_end_offset >= leader_epoch_start_offset)


def expansion_refused(refused_epoch: int | None, f: FollowerState) -> bool:
    """The controller answered INELIGIBLE_REPLICA to adding this follower (KIP-841: it is in
    controlled shutdown, or its broker epoch is not the registered one) and the follower still
    fetches with the broker epoch that was refused. Proposing it again on each of its fetches
    answers nothing new: a broker shutting down with 10k caught-up followers drew ~6,000
    refused AlterPartition items a second from the new leaders, when clients needed them.
    A restart brings a new broker epoch; a new partition state and each
    isr-expiration round clear the refusals, so nothing waits on them forever."""
    return refused_epoch is not None and refused_epoch == f.broker_epoch


def new_high_watermark(current_hw: int, leader_leo: int, isr: tuple[int, ...], leader_id: int,
                       followers: dict[int, FollowerState], min_isr: int,
                       maximal_isr: tuple[int, ...] | None = None) -> int:
    """The HW after a change of LEOs or ISR: min LEO over the maximal ISR, monotonic, and
    frozen while the *committed* ``isr`` is below ``min_isr`` (the effective one,
    min(min.insync.replicas, RF)).

    Kafka's Partition.maybeIncrementLeaderHW: the maximal ISR (``isr`` plus an AlterPartition
    in flight) bounds the minimum LEO, so a replica being added already has what the HW
    exposes; but the freeze (isUnderMinIsr) reads only the committed ISR. Reading the maximal
    one there let the HW move on an expansion the controller might refuse while the ELR
    vouched for a replica without those records."""
    if len(isr) < min_isr:
        return current_hw
    low = leader_leo
    for b in (isr if maximal_isr is None else maximal_isr):
        if b == leader_id:
            continue
        f = followers.get(b)
        leo = f.log_end_offset if f is not None else UNKNOWN_OFFSET
        if leo < 0:
            return current_hw  # an ISR member that has not fetched yet holds the HW
        low = min(low, leo)
    return max(current_hw, low)
