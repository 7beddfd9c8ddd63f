"""A broker's view of one partition replica: the shell over its replication core.

``broker.replica_core.ReplicaCore`` holds the replica's role, epochs, ISR and follower states
and decides (``step(event) -> effects``); this shell owns the log and the waiters and carries
the effects out: it writes the HW the core decides into the log and wakes produce, consume and
fetch waiters. The replica manager owns the I/O (log appends on the log dir's executor,
AlterPartition to the controller). Nothing here awaits, so every state change happens
atomically on the event loop.
"""

from __future__ import annotations

import asyncio

from broker import partition_state
from broker import replica_core as core
from broker.replica_core import EPOCH_START_PENDING, ReplicaCore
from broker.storage.log import Log
from common.names import TopicPartition

__all__ = ["EPOCH_START_PENDING", "Notifier", "Partition"]


class Notifier:
    """Wakes every waiter on ``notify()``; waiters take ``future()`` *before* checking their
    condition, so a notification between the check and the wait is never lost."""

    def __init__(self) -> None:
        self._fut: asyncio.Future | None = None

    def future(self) -> asyncio.Future:
        if self._fut is None or self._fut.done():
            self._fut = asyncio.get_running_loop().create_future()
        return self._fut

    def notify(self) -> None:
        if self._fut is not None and not self._fut.done():
            self._fut.set_result(None)
        self._fut = None


def _core_field(name: str) -> property:
    """A replication-state field, held by the core (the shell keeps no copy)."""
    return property(lambda self: getattr(self.core, name),
                    lambda self, v: setattr(self.core, name, v), doc=f"ReplicaCore.{name}")


class Partition:
    def __init__(self, tp: TopicPartition, local_id: int):
        self.tp = tp
        self.local_id = local_id
        self.topic_id = ""
        self.log: Log | None = None
        self.core = ReplicaCore(local_id)
        self.data = Notifier()  # LEO grew (follower fetches wait on it)
        self.hw_moved = Notifier()  # HW grew, or leadership/ISR changed (produce/consume wait)

    leader_id = _core_field("leader_id")
    leader_epoch = _core_field("leader_epoch")
    partition_epoch = _core_field("partition_epoch")
    controller_epoch = _core_field("controller_epoch")
    isr = _core_field("isr")
    replicas = _core_field("replicas")
    adding_replicas = _core_field("adding_replicas")
    removing_replicas = _core_field("removing_replicas")
    followers = _core_field("followers")
    leader_epoch_start_offset = _core_field("leader_epoch_start_offset")
    pending_isr = _core_field("pending_isr")
    min_isr = _core_field("min_isr")
    elr = _core_field("elr")
    leader_recovery_state = _core_field("leader_recovery_state")
    relinquished_epoch = _core_field("relinquished_epoch")
    refused_expansions = _core_field("refused_expansions")
    stopped = _core_field("stopped")

    # ------------------------------------------------------------------ effects

    def run(self, effects: list[core.Effect], propose=None) -> bool:
        """Carry out the core's effects in order; True if the HW moved. ``propose(partition,
        ProposeIsr)`` takes the proposals (AlterPartitionManager.enqueue)."""
        moved = False
        for e in effects:
            match e:
                case core.AdvanceHighWatermark(hw=hw):
                    if self.log is not None:
                        self.log.high_watermark = hw
                        moved = True
                case core.WakeProduce():
                    self.hw_moved.notify()
                case core.WakeFetch():
                    self.data.notify()
                case core.ProposeIsr():
                    if propose is not None:
                        propose(self, e)
        return moved

    # ------------------------------------------------------------------ role

    @property
    def is_leader(self) -> bool:
        return self.core.is_leader

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark if self.log else 0

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset if self.log else 0

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.core.maximal_isr

    def apply_state(self, **state) -> None:
        self.core.apply_state(**state)

    def become_leader(self, now_ms: int, new_epoch: bool) -> None:
        """Set up follower tracking for a leadership (new epoch) or an ISR-only update."""
        assert self.log is not None
        self.run(self.core.become_leader(now_ms, new_epoch))

    def become_follower(self) -> None:
        self.run(self.core.step(core.BecomeFollower()))

    # ------------------------------------------------------------------ events

    def apply_leader_and_isr(self, s, now_ms: int) -> partition_state.Transition:
        """One LeaderAndIsr partition state
        (``common.controller_requests.LeaderAndIsrPartitionState``, already admitted by
        ``partition_state.admit_partition_state``) applied to this replica: Kafka's
        makeLeader / makeFollower for one partition. The replica manager performs what the
        returned transition says (fetchers, the epoch start's write, the RECOVERED report, the
        event log); the simulation (tests/sim/cluster) calls this same method."""
        effects = self.core.step(core.LeaderAndIsr(s, now_ms, self.log_end_offset,
                                                   self.high_watermark))
        if self.log is None:  # nothing to write an HW into (asserted by become_leader before)
            assert not any(isinstance(e, core.AdvanceHighWatermark) for e in effects)
        self.run(effects)
        return next(e.transition for e in effects if isinstance(e, core.Transitioned))

    def on_follower_fetch(self, replica_id: int, broker_epoch: int, fetch_offset: int,
                          follower_log_start: int, now_ms: int, pending_id: int | None = None,
                          propose_expansion=None):
        """A follower's fetch reached this leader (after the divergence check): its fetch
        state, its ISR expansion, then the HW (the core's ordering rule 1). Returns the
        follower state whose ``pending_id`` fetch was recorded as pending (design.md#kip-501:
        only when ``pending_id`` is given and the fetch is eligible), else None.

        ``propose_expansion(partition, ProposeIsr)`` (AlterPartitionManager.enqueue; None:
        never expand) takes the expansion the core proposed, with the pending ISR already set.

        A fetch from an older incarnation of the follower (KIP-903) is served, but its offsets
        say nothing about the replica as it is now: they neither move the HW nor let it back
        into the ISR; nor does one beyond the leader's LEO."""
        f = self.followers.get(replica_id)
        before = None if f is None else dict(f.pending_fetches)
        self.run(self.core.step(core.FollowerFetch(
            replica_id, broker_epoch, fetch_offset, follower_log_start, now_ms,
            self.log_end_offset, self.high_watermark, pending_id,
            propose_expansion is not None)), propose_expansion)
        if pending_id is not None and f is not None and before is not None \
                and pending_id in f.pending_fetches and pending_id not in before:
            return f
        return None

    # ------------------------------------------------------------------ leader rules

    def record_follower_fetch(self, follower_id: int, fetch_offset: int, log_start: int,
                              now_ms: int, broker_epoch: int) -> None:
        self.core.record_follower_fetch(follower_id, fetch_offset, log_start, now_ms,
                                        self.log_end_offset, broker_epoch)

    def maybe_advance_hw(self) -> bool:
        """Recompute the HW; True (and waiters woken) if it moved (the core's rule 5: frozen
        while the controller's last state lists an ELR, KIP-966, and below the effective min
        ISR)."""
        if self.log is None:
            return False
        return self.run(self.core.step(core.Appended(self.log_end_offset, self.high_watermark)))

    def isr_expansion_candidate(self, follower_id: int) -> bool:
        return self.core.isr_expansion_candidate(follower_id, self.high_watermark)

    def out_of_sync(self, now_ms: int, lag_max_ms: int, pending_reads_in_sync: bool = False
                    ) -> set[int]:
        return self.core.out_of_sync(self.log_end_offset, now_ms, lag_max_ms,
                                     pending_reads_in_sync)

    @property
    def under_replicated(self) -> bool:
        return self.core.under_replicated

    @property
    def effective_min_isr(self) -> int:
        """min(min.insync.replicas, RF) (Kafka's Partition.effectiveMinIsr, KIP-966)."""
        return self.core.effective_min_isr

    @property
    def under_min_isr(self) -> bool:
        return self.core.under_min_isr

    def __repr__(self) -> str:
        return (f"Partition({self.tp}, leader={self.leader_id}, epoch={self.leader_epoch}, "
                f"isr={list(self.isr)}, leo={self.log_end_offset}, hw={self.high_watermark})")
