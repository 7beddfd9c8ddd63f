"""Unclean recovery's choice (KIP-966, seed 001, C7): which replica of a leaderless partition
leads after the Unclean Recovery Manager has asked the replicas for their logs
(GetReplicaLogInfo).

Seed 001: "The one with the highest leader epoch and the longest log end offset will be the new
leader." replog reads that as an order, not two independent maxima:

1. the highest last written leader epoch - a replica that saw a later leader holds the later
   history, and a longer log from an older epoch may be a divergent suffix that the later
   leader truncated away;
2. then the largest log end offset;
3. ties go to assignment order (the preferred replica first), so the choice is deterministic
   and keeps leadership balanced, like every selector in controller/selectors.py.

Replies with an error, and replies from brokers that are not assigned replicas, never count.
Which replies the manager waits for (Balanced: every LastKnownELR member plus those within
unclean.recovery.timeout.ms; Proactive: those within 5 s, or the first one after) is the
manager's business; `ready_to_choose` states that rule as a pure predicate for it.

Partial: the Unclean Recovery Manager itself - one task per partition in
`Decision.recoveries`, the batched BrokerRequestSender, its timers, failover - is not wired
into the core yet; until it is, decisions/elections.py carries out only the recoveries the
topic or the operator allows, without the log query.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from common.errors import ErrorCode
from controller.selectors import UncleanRecoveryStrategy

# Seed 001: Proactive takes the replies received within a fixed 5 s (no config for it), or the
# first one after that.
PROACTIVE_WAIT_MS = 5_000


@dataclass(frozen=True)
class ReplicaLogInfo:
    """One replica's GetReplicaLogInfo answer for one partition."""

    last_written_leader_epoch: int
    log_end_offset: int
    error: ErrorCode = ErrorCode.NONE


def choose_recovery_leader(assignment: Sequence[int],
                           replies: Mapping[int, ReplicaLogInfo]) -> int | None:
    """The replica to elect, or None when no assigned replica answered without an error."""
    best: int | None = None
    best_key: tuple[int, int] | None = None
    for r in assignment:  # assignment order: the first of equals is kept
        info = replies.get(r)
        if info is None or info.error != ErrorCode.NONE:
            continue
        key = (info.last_written_leader_epoch, info.log_end_offset)
        if best_key is None or key > best_key:
            best, best_key = r, key
    return best


def offsets_discarded(assignment: Sequence[int], replies: Mapping[int, ReplicaLogInfo],
                      chosen: int) -> int:
    """The metric of issue 11: the best log end offset among the answers minus the chosen
    replica's (0 is the goal; more means acknowledged records may be gone)."""
    leos = [i.log_end_offset for r, i in replies.items()
            if r in assignment and i.error == ErrorCode.NONE]
    return max(leos) - replies[chosen].log_end_offset if leos else 0


def ready_to_choose(strategy: UncleanRecoveryStrategy, asked: Collection[int],
                    last_known_elr: Collection[int], replies: Mapping[int, ReplicaLogInfo],
                    elapsed_ms: float, timeout_ms: int) -> bool:
    """Whether the manager may choose now (seed 001). `replies` are the answers so far (an
    error is an answer that never counts), `asked` the replicas queried.

    - Balanced: every LastKnownELR member has answered, plus those that answer within
      `timeout_ms` (unclean.recovery.timeout.ms) - so once the timeout has passed, or once
      every replica asked has answered;
    - Proactive (and Manual, once the operator asked): the answers within 5 s, or the first
      one after that - or earlier, when every replica asked has answered.
    Never without at least one usable answer."""
    usable = any(i.error == ErrorCode.NONE for i in replies.values())
    everyone = set(asked) <= set(replies)
    if not usable:
        return False
    if strategy is UncleanRecoveryStrategy.BALANCED:
        return set(last_known_elr) <= set(replies) and (everyone or elapsed_ms >= timeout_ms)
    return everyone or elapsed_ms >= PROACTIVE_WAIT_MS
