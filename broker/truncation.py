"""Where a follower truncates before fetching from a (new) leader — a pure decision.

Kafka (KIP-101, KIP-279, and since 2.7 KIP-595's diverging-epoch field in Fetch): the follower
sends its last fetched epoch E with its fetch offset; a leader whose log diverges answers with
``diverging_epoch = (E', end')``: the largest epoch <= E it has and where that epoch ends in its
log. The follower truncates to the smaller of end' and its own end offset for E'. If the follower
does not have E' itself, one more round is needed (its new last epoch is older), which the next
fetch settles. Two replicas therefore never hold different records at one offset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from broker.storage.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET


class Divergence(NamedTuple):
    epoch: int
    end_offset: int


class _OutOfRange:
    def __repr__(self) -> str:
        return "OUT_OF_RANGE"


# The leader's answer "OFFSET_OUT_OF_RANGE": the follower resets its fetch offset from the
# leader's log start/end (ListOffsets), as Kafka's handleOutOfRangeError does.
OUT_OF_RANGE = _OutOfRange()


def leader_divergence(last_fetched_epoch: int | None, fetch_offset: int,
                      leader_end_for_epoch: tuple[int, int], log_start_offset: int = 0
                      ) -> Divergence | _OutOfRange | None:
    """The leader's check of a follower fetch: ``leader_end_for_epoch`` is the leader's
    (epoch, end offset) for ``last_fetched_epoch``. Returns the divergence to report, the
    OUT_OF_RANGE sentinel, or None (read the log).

    Kafka's Partition.fetchRecords order: an epoch the leader cannot place, and a fetch
    offset below the log start, are OFFSET_OUT_OF_RANGE *before* any divergence is reported
    (a divergence answer there made the follower truncate nothing and ask again forever)."""
    if last_fetched_epoch is None or last_fetched_epoch < 0:
        return None
    epoch, end = leader_end_for_epoch
    if epoch == UNDEFINED_EPOCH or end == UNDEFINED_OFFSET:
        return OUT_OF_RANGE
    if fetch_offset < log_start_offset:
        return OUT_OF_RANGE
    if epoch < last_fetched_epoch or end < fetch_offset:
        return Divergence(epoch, end)
    return None


class TruncationDecision(NamedTuple):
    offset: int
    complete: bool  # False: truncate, then fetch again to compare older epochs


def follower_truncation(divergence: Divergence, follower_end_for_epoch: tuple[int, int],
                        follower_leo: int, follower_hw: int) -> TruncationDecision:
    """Where to truncate after a diverging-epoch answer. ``follower_end_for_epoch`` is the
    follower's own (epoch, end offset) for ``divergence.epoch``."""
    if divergence.epoch == UNDEFINED_EPOCH:
        # Kafka's fallback without epoch information: keep only what was committed.
        return TruncationDecision(min(follower_hw, follower_leo), True)
    f_epoch, f_end = follower_end_for_epoch
    if f_epoch == UNDEFINED_EPOCH:
        return TruncationDecision(min(follower_hw, follower_leo, divergence.end_offset), True)
    target = min(divergence.end_offset, f_end, follower_leo)
    return TruncationDecision(target, f_epoch == divergence.epoch)


def leader_end_for_epoch(last_fetched_epoch: int | None,
                         end_offset_for_epoch: Callable[[int], tuple[int, int]]
                         ) -> tuple[int, int]:
    """The leader's (epoch, end offset) for the follower's last fetched epoch, looked up only
    when the follower sent one (absent or negative: nothing fetched yet, nothing to place)."""
    if last_fetched_epoch is None or last_fetched_epoch < 0:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    return end_offset_for_epoch(last_fetched_epoch)
