"""A broker's view of one partition replica: its role, epochs, ISR and follower states.

The replica manager owns the I/O (log appends on the log dir's executor, AlterPartition to the
controller); this class holds the state and applies the pure rules of ``broker.isr`` to it.
It never awaits, so every state change happens atomically on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from broker import fencing, partition_state
from broker import isr as isr_rules
from broker.isr import FollowerState
from broker.storage.log import Log
from common.dynamic_config import effective_min_isr
from common.names import TopicPartition

EPOCH_START_PENDING = 1 << 62  # the new leader epoch's start offset is not written yet


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


class Partition:
    def __init__(self, tp: TopicPartition, local_id: int):
        self.tp = tp
        self.local_id = local_id
        self.topic_id = ""
        self.log: Log | None = None
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.controller_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        self.adding_replicas: tuple[int, ...] = ()
        self.removing_replicas: tuple[int, ...] = ()
        self.followers: dict[int, FollowerState] = {}
        self.leader_epoch_start_offset = 0
        # An AlterPartition in flight (Kafka's PendingShrinkIsr / PendingExpandIsr): until the
        # controller answers, the HW is computed over the larger "maximal" ISR.
        self.pending_isr: tuple[int, ...] | None = None
        # min.insync.replicas as configured (topic override, dynamic broker default, static:
        # common.dynamic_config.configured_min_isr): acks=all admission and DelayedProduce
        # use it as is; the HW freeze uses ``effective_min_isr``.
        self.min_isr = 1
        # KIP-966: the ELR of the last state the controller sent (LeaderAndIsr, AlterPartition
        # answers). Not empty = the controller holds the ISR below min ISR: the HW stays frozen.
        self.elr: tuple[int, ...] = ()
        # KIP-704: after an unclean election the controller marks the leader RECOVERING; the
        # leader reports RECOVERED through AlterPartition (nothing to rebuild in replog).
        self.leader_recovery_state = 0
        self.relinquished_epoch = -1  # seed 002: leadership given up in this epoch
        # KIP-841: followers the controller refused into the ISR (INELIGIBLE_REPLICA: in
        # controlled shutdown, or not registered with that broker epoch) -> the broker epoch
        # refused. Not proposed again while they fetch with it (isr.expansion_refused).
        self.refused_expansions: dict[int, int] = {}
        self.stopped = False  # StopReplica without deletion: neither leader nor follower
        self.data = Notifier()  # LEO grew (follower fetches wait on it)
        self.hw_moved = Notifier()  # HW grew, or leadership/ISR changed (produce/consume wait)

    # ------------------------------------------------------------------ role

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id and not self.stopped

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark if self.log else 0

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset if self.log else 0

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys(self.isr + self.pending_isr))

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

    def become_leader(self, now_ms: int, new_epoch: bool) -> None:
        """Set up follower tracking for a leadership (new epoch) or an ISR-only update."""
        assert self.log is not None
        if new_epoch:
            # Set by the replica manager once the epoch's start offset is written on the log
            # dir's executor (after any queued truncation or append); until then no follower
            # can pass the "has the current epoch's start" check of can_join_isr.
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
        self.hw_moved.notify()

    def become_follower(self) -> None:
        self.followers = {}
        self.pending_isr = None
        self.hw_moved.notify()
        self.data.notify()

    # ------------------------------------------------------------------ events

    def apply_leader_and_isr(self, s, now_ms: int) -> partition_state.Transition:
        """One LeaderAndIsr partition state (``common.controller_requests.LeaderAndIsrPartitionState``,
        already admitted by ``partition_state.admit_partition_state``) applied to this replica:
        Kafka's makeLeader / makeFollower for one partition. The replica manager performs what
        the returned transition says (fetchers, the epoch start's write, the RECOVERED report,
        the event log); the simulation (tests/sim/cluster) calls this same method."""
        t = partition_state.transition(self.local_id, s.leader, s.leader_epoch,
                                       s.leader_recovery_state, self.leader_epoch,
                                       self.is_leader)
        self.apply_state(leader=s.leader, leader_epoch=s.leader_epoch,
                         partition_epoch=s.partition_epoch, controller_epoch=s.controller_epoch,
                         isr=s.isr, replicas=s.replicas, adding=s.adding_replicas,
                         removing=s.removing_replicas,
                         leader_recovery_state=s.leader_recovery_state, elr=s.elr)
        if t.lead:
            self.become_leader(now_ms, t.reset_followers)
            self.maybe_advance_hw()
        elif t.follow:
            self.become_follower()
        return t

    def on_follower_fetch(self, replica_id: int, broker_epoch: int, fetch_offset: int,
                          follower_log_start: int, now_ms: int, pending_id: int | None = None,
                          propose_expansion: Callable[[Partition, int], None] | None = None
                          ) -> FollowerState | None:
        """A follower's fetch reached this leader (after the divergence check): its fetch
        state, its ISR expansion, then the HW. Returns the follower state whose ``pending_id``
        fetch was recorded as pending (seed 002: only when ``pending_id`` is given and the fetch
        is eligible), else None.

        ``propose_expansion(partition, follower)`` (AlterPartition; None: never expand) is
        called *before* the HW moves, as Kafka's updateFollowerFetchState runs maybeExpandIsr
        before maybeIncrementLeaderHW: it sets the pending ISR, so the maximal ISR names the
        follower and the HW cannot pass its LEO. With the HW moved first, a follower admitted
        against the old HW joined the ISR without records below the new one (found
        by the cluster simulation: seeds 77 and 78 of its truncation profile).

        A fetch from an older incarnation of the follower (KIP-903) is served, but its offsets
        say nothing about the replica as it is now: they neither move the HW nor let it back
        into the ISR; nor does one beyond the leader's LEO."""
        f = self.followers.get(replica_id)
        stale = f is not None and fencing.follower_fetch_is_stale(broker_epoch, f.broker_epoch)
        if not isr_rules.fetch_updates_follower(replica_id in self.replicas, stale,
                                                fetch_offset, self.log_end_offset):
            return None
        pending = None
        if pending_id is not None and f is not None and \
                isr_rules.pending_fetch_eligible(f, fetch_offset):
            # Seed 002: recorded before the read, so a slow read keeps it in sync.
            f.pending_fetches[pending_id] = fetch_offset
            pending = f
        self.record_follower_fetch(replica_id, fetch_offset, follower_log_start, now_ms,
                                   broker_epoch)
        if propose_expansion is not None and self.isr_expansion_candidate(replica_id):
            propose_expansion(self, replica_id)
        self.maybe_advance_hw()
        return pending

    # ------------------------------------------------------------------ leader rules

    def record_follower_fetch(self, follower_id: int, fetch_offset: int, log_start: int,
                              now_ms: int, broker_epoch: int) -> None:
        f = self.followers.get(follower_id)
        if f is None:
            f = self.followers[follower_id] = FollowerState(follower_id)
        isr_rules.update_fetch_state(f, fetch_offset, log_start, now_ms, self.log_end_offset,
                                     broker_epoch)

    def maybe_advance_hw(self) -> bool:
        """Recompute the HW; True (and waiters woken) if it moved.

        Frozen too while the controller's last state lists an ELR (KIP-966: it holds the ISR
        below min ISR and vouches for its ELR members having every committed record). The
        controller and this broker learn a min.insync.replicas change through separate
        notifications; without this rule a leader that heard of a decrease first committed on
        the smaller ISR while the controller still kept an ELR without those records, and one
        that heard of an increase last committed after the shrink that filled the ELR (issue
        26; a ZooKeeper-era prototype has no ordered metadata log to make both one change)."""
        if not self.is_leader or self.log is None or self.elr:
            return False
        new = isr_rules.new_high_watermark(self.log.high_watermark, self.log.log_end_offset,
                                           self.isr, self.local_id, self.followers,
                                           self.effective_min_isr, self.maximal_isr)
        if new > self.log.high_watermark:
            self.log.high_watermark = new
            self.hw_moved.notify()
            return True
        return False

    def isr_expansion_candidate(self, follower_id: int) -> bool:
        if (not self.is_leader or self.pending_isr is not None or follower_id in self.isr
                or follower_id not in self.replicas):
            return False
        f = self.followers.get(follower_id)
        return (f is not None
                and not isr_rules.expansion_refused(self.refused_expansions.get(follower_id), f)
                and isr_rules.can_join_isr(f, self.high_watermark,
                                           self.leader_epoch_start_offset))

    def out_of_sync(self, now_ms: int, lag_max_ms: int, pending_reads_in_sync: bool = False
                    ) -> set[int]:
        if not self.is_leader or self.pending_isr is not None:
            return set()
        return isr_rules.out_of_sync_replicas(self.isr, self.local_id, self.followers,
                                              self.log_end_offset, now_ms, lag_max_ms,
                                              pending_reads_in_sync)

    @property
    def under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.replicas)

    @property
    def effective_min_isr(self) -> int:
        """min(min.insync.replicas, RF) (Kafka's Partition.effectiveMinIsr, KIP-966): what the
        HW freeze and the controller's ELR rules read. Without the cap a topic whose RF is below
        min.insync.replicas never moved its HW, so consumers never saw its acks=1 records."""
        return effective_min_isr(self.min_isr, len(self.replicas))

    @property
    def under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.effective_min_isr

    def __repr__(self) -> str:
        return (f"Partition({self.tp}, leader={self.leader_id}, epoch={self.leader_epoch}, "
                f"isr={list(self.isr)}, leo={self.log_end_offset}, hw={self.high_watermark})")
