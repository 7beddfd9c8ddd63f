"""Planted bugs: each re-creates a fixed defect (docs/simulation.md) on top of the code, as a
test-only monkeypatch (nothing here is imported by production modules). The simulation is
not done unless it finds each of them within a fixed, small number of seeds
(tests/sim/test_cluster_simulation.py), which proves its checker is not vacuous.

    hw_freeze_reads_maximal_isr       defect 1: the leader's min-ISR freeze of the HW reads
                                      the maximal ISR (ISR + an AlterPartition in flight)
    controller_min_isr_ignores_default defect 2: the controller's ELR rules read the topic
                                      override, else its static config, never
                                      /config/brokers/<default> as the brokers do
    stray_deletes_isr_member          defect 4: UpdateMetadata's stray rule deletes a replica
                                      the ISR still names (reassignment step 4)
    truncation_not_checkpointed       defect 5: a truncation lowers only the in-memory
                                      recovery point; a leader epoch deferred below the
                                      checkpointed one is lost in a crash
    lost_replica_recreated            JBOD (KIP-112): a LeaderAndIsr without is_new creates
                                      an empty log for a replica lost with its log dir (or
                                      one that may be in an offline dir), instead of refusing
                                      it with KAFKA_STORAGE_ERROR and asking for a restart
    restart_entries_ignored           JBOD (design.md#jbod): the controller consumes
                                      /restart_partitions entries without restarting anything;
                                      a lost replica stays leader or ISR member

Planted in the broker's shell paths, where only the broker model reached before (the
simulation must reach the code that ships):

    follower_ignores_diverging_epoch  the fetcher's truncation keeps its log on a diverging
                                      epoch (broker.truncation.follower_truncation as called
                                      by the fetcher's _truncate)
    produce_acked_before_hw           an acks=all produce completes once appended, before the
                                      HW passes its offset (delayed_produce.produce_wait)
    lost_replica_not_recorded         JBOD: a log-dir failure takes the replica out of the
                                      partitions without recording it offline
                                      (LogDirFailures.lose_replicas)
    stop_replica_deletes_isr_member   StopReplica is never fenced by its leader epoch
                                      (fencing.stop_replica_is_stale, KIP-570): an old
                                      deletion removes a log the ISR names again (profile
                                      stale_requests, World._move_away_and_back)

Each patches the attribute its callers look up at each call - the module's function
(production calls it through the module) or the class's method - so it reaches the broker
model and production alike (tests/sim/test_planted.py checks that). The controller
simulation's planted selector is in tests/sim/planted_selectors.py.
"""

from __future__ import annotations

from collections.abc import Callable

from broker import delayed_produce, fencing, partition_state, truncation
from broker import isr as isr_rules
from broker.log_dir_failures import LogDirFailures
from broker.replica_core import ReplicaCore
from broker.storage.log import Log
from common import dynamic_config
from controller import decisions as controller_decisions
from controller.context import ControllerContext
from controller.decisions.base import Builder
from tests.sim.planted_selectors import plant_from


def _hw_over_maximal_isr(self: ReplicaCore, leo: int, hw: int) -> int | None:
    """ReplicaCore.new_high_watermark before the fix: the freeze counted the maximal ISR."""
    if not self.is_leader:
        return None
    new = isr_rules.new_high_watermark(hw, leo, self.maximal_isr, self.local_id,
                                       self.followers, self.effective_min_isr)
    return new if new > hw else None


def _controller_min_isr_without_default(self: ControllerContext, tp) -> int:
    """ControllerContext.min_isr before the fix: the topic override, else the controller's
    own static min.insync.replicas."""
    rf = len(self.replicas(tp))
    return dynamic_config.effective_min_isr(dynamic_config.configured_min_isr(
        self.topic_configs.get(tp.topic, {}), {}, self.elr.min_insync_replicas, rf), rf)


_is_stray = partition_state.is_stray_replica


def _stray_ignores_isr(broker_id, replicas, leader_epoch, has_log, held, isr=()) -> bool:
    """is_stray_replica before the fix: the ISR is not asked."""
    return _is_stray(broker_id, replicas, leader_epoch, has_log, held)


def _no_checkpoint_after_truncation(self: Log) -> None:
    """Log before the fix: the lowered recovery point waits for the periodic checkpoint."""


def _missing_log_always_created(is_new: bool, lost_here: bool, some_dir_offline: bool
                                ) -> partition_state.MissingLog:
    """missing_log without KIP-112's rule: a missing log is always created."""
    return partition_state.MissingLog.CREATE


def _restart_nothing(ctx: ControllerContext, broker, partitions, stale=()):
    """decisions.restart_partitions doing nothing: the entry is deleted unapplied."""
    return Builder(ctx).build()


def _no_truncation(divergence, follower_end_for_epoch, follower_leo: int, follower_hw: int
                   ) -> truncation.TruncationDecision:
    """follower_truncation ignoring the divergence: nothing is truncated."""
    return truncation.TruncationDecision(follower_leo, True)


def _acked_on_append(p, written_epoch, end_offset, epoch_at, remaining_s):
    """produce_wait without the HW: a batch still in the leader's log is acknowledged."""
    if p is None or not p.is_leader:
        return delayed_produce.ProduceWait.NOT_LEADER
    if p.leader_epoch != written_epoch and not delayed_produce.batch_intact(
            p.log_end_offset, end_offset, epoch_at, written_epoch):
        return delayed_produce.ProduceWait.TRUNCATED
    return delayed_produce.ProduceWait.ACKNOWLEDGED


_lose = LogDirFailures.lose_replicas


def _lose_unrecorded(self, tps, log_dir):
    """LogDirFailures.lose_replicas forgetting the record of the lost replicas."""
    held = _lose(self, tps, log_dir)
    for tp in tps:
        self.offline_replicas.pop(tp, None)
    return held


def _stop_never_stale(requested_leader_epoch, held_leader_epoch) -> bool:
    """stop_replica_is_stale without KIP-570's fence."""
    return False


PLANTED: dict[str, tuple[object, str, Callable]] = {
    "hw_freeze_reads_maximal_isr": (ReplicaCore, "new_high_watermark", _hw_over_maximal_isr),
    "controller_min_isr_ignores_default": (ControllerContext, "min_isr",
                                           _controller_min_isr_without_default),
    "stray_deletes_isr_member": (partition_state, "is_stray_replica", _stray_ignores_isr),
    "truncation_not_checkpointed": (Log, "_after_truncation",
                                    _no_checkpoint_after_truncation),
    "lost_replica_recreated": (partition_state, "missing_log", _missing_log_always_created),
    "restart_entries_ignored": (controller_decisions, "restart_partitions", _restart_nothing),
    "follower_ignores_diverging_epoch": (truncation, "follower_truncation", _no_truncation),
    "produce_acked_before_hw": (delayed_produce, "produce_wait", _acked_on_append),
    "lost_replica_not_recorded": (LogDirFailures, "lose_replicas", _lose_unrecorded),
    "stop_replica_deletes_isr_member": (fencing, "stop_replica_is_stale", _stop_never_stale),
}


def planted(name: str | None):
    """Re-create defect ``name`` (None: nothing) for the duration of the block."""
    return plant_from(PLANTED, name)
