"""design.md#jbod's ExceptionHandler: every storage I/O error reaches the LogDirFailureChannel and
one consumer, ``log_dir_failure_loop``, which probes the dir and takes offline the whole dir (step
2) or the one log (step 3); lost replicas leave ``partitions`` for ``offline_replicas`` and the
controller is asked to restart them (/restart_partitions, fenced by the partition epoch held).

A part of ``broker.replica_manager.ReplicaManager`` (split by family); it
runs on the ReplicaManager's own state (``partitions``, ``log_manager``, ``events``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.storage.errors import KafkaStorageError
from broker.storage.failure_scope import Scope, failure_scope
from common.names import TopicPartition

if TYPE_CHECKING:
    from broker.storage.log_dir_failure_channel import LogDirFailure



class LogDirFailureHandling:
    def _refuse_lost_replicas(self, refused: dict[TopicPartition, str],
                              epochs: dict[TopicPartition, int]) -> None:
        """partition_state.missing_log said REFUSE: the replica counts as lost (clients get
        KAFKA_STORAGE_ERROR) and the controller is asked to restart it, per log dir. The
        entry is fenced by the refused state's partition epoch."""
        by_dir: dict[str, list[TopicPartition]] = {}
        for tp, log_dir in refused.items():
            self.offline_replicas.setdefault(tp, log_dir)
            by_dir.setdefault(log_dir, []).append(tp)
        for log_dir, tps in by_dir.items():
            self.events.warning("lost_replica_refused", log_dir=log_dir,
                                partitions=[str(tp) for tp in tps])
            if self.restart_notifier is not None:
                self.restart_notifier.request(log_dir, tps, epochs)

    async def handle_storage_failure(self, failure: LogDirFailure) -> Scope | None:
        """design.md#jbod's ExceptionHandler for one reported I/O error: probe the dir (open
        question 1, storage/failure_scope.py), decide whole dir or one log, and take it
        offline. Returns what went offline (None: already handled)."""
        lm = self.log_manager
        d = lm.dir_by_path(failure.log_dir)
        if d is None or not d.online:
            return None
        probe = await lm.probe(d, self.probe_timeout_s)
        err = getattr(failure.error, "errno", None)
        scope = failure_scope(err, failure.partition, probe)
        self.events.info("log_dir_failure_scope", log_dir=d.path, partition=failure.partition,
                         errno=err, probe_ok=probe.ok, probe=probe.detail, scope=scope.value)
        if scope is Scope.PARTITION:
            try:
                tp = TopicPartition.parse(failure.partition)
            except ValueError:
                tp = None
            if tp is None or lm.log_dir_of(tp) is not d:
                return None  # gone already (deleted, or lost with an earlier failure)
            self.handle_log_failure(tp, failure.message)
            return scope
        reason = failure.message if probe.ok else f"{failure.message}; disk check: {probe.detail}"
        self.handle_log_dir_failure(d.path, reason)
        return scope

    def _lose(self, tps: list[TopicPartition], log_dir: str) -> dict[TopicPartition, int]:
        """design.md#jbod-step-2-3: out of the partitions pool and the fetchers; clients get
        KAFKA_STORAGE_ERROR; waiting produces and fetches are woken to see it. Returns the
        partition epoch held for each (the restart entry's fence): the
        newest of LeaderAndIsr's and UpdateMetadata's - a follower hears of ISR changes it
        is not the subject of, such as its own re-admission, only through UpdateMetadata."""
        held = {}
        if self.fetcher_manager is not None:
            self.fetcher_manager.remove_partitions(tps)
            self.fetcher_manager.on_log_dir_offline(tps)
        for tp in tps:
            self.alter_log_dirs.cancel(tp, f"the current replica was lost with {log_dir}")
            p = self.partitions.pop(tp, None)
            info = self.metadata.partitions.get(tp)
            held[tp] = max(p.partition_epoch if p is not None else -1,
                           info.partition_epoch if info is not None else -1)
            if p is not None:
                p.log = None
                p.become_follower()
            self.offline_replicas[tp] = log_dir
        notify = getattr(self, "on_leadership_change", None)
        if notify is not None:  # onLeadershipChange: a lost replica leads nothing any more
            notify({}, {tp: None for tp in tps})
        return held

    def handle_log_failure(self, tp: TopicPartition, reason: str) -> None:
        """design.md#jbod-step-3: only ``tp``'s log failed; its dir keeps serving the others."""
        log_dir = self.log_manager.take_log_offline(tp, reason)
        if log_dir is None:
            return
        held = self._lose([tp], log_dir)
        self.events.error("log_offline", partition=str(tp), log_dir=log_dir, reason=reason)
        if self.restart_notifier is not None:
            self.restart_notifier.request(log_dir, [tp], held)

    def handle_log_dir_failure(self, log_dir: str, reason: str) -> list[TopicPartition]:
        """design.md#jbod-step-2: take a log dir offline for good (this process's life) with every
        partition in it, ask the controller to restart them, and halt if no dir is left.
        Returns the partitions lost."""
        lm = self.log_manager
        d = lm.dir_by_path(log_dir)
        if d is None or not d.online:
            return []
        lost = lm.mark_offline(d.path, reason)
        self.alter_log_dirs.log_dir_offline(d.path)  # KIP-113: no move into a dead dir
        held = self._lose(lost, d.path)
        self.events.error("log_dir_offline", log_dir=d.path, reason=reason,
                          partitions=[str(tp) for tp in lost])
        if self.restart_notifier is not None:
            self.restart_notifier.request(d.path, lost, held)
        if self.on_log_dir_offline is not None:
            self.on_log_dir_offline(d.path)
        if not lm.online_dirs:
            message = (f"broker {self.broker_id} halting: every log dir is offline "
                       f"({', '.join(x.path for x in lm.dirs)}); last error: {reason}")
            self.events.critical("broker_halting", reason=message)
            if self.halt is not None:
                self.halt(message)
        return lost

    def _report(self, error: KafkaStorageError) -> None:
        """An I/O error met outside a log dir's executor (reads, the leader-epoch writes
        whose errors come back as values) goes to the failure channel too."""
        self.log_manager.failure_channel.maybe_add_offline_log_dir(error.log_dir, str(error),
                                                                   error)

    async def log_dir_failure_loop(self) -> None:
        """Kafka's LogDirFailureHandler, design.md#jbod's ExceptionHandler: the one consumer of the
        LogManager's failure channel. Each reported I/O error is logged, counted and handled
        (``handle_storage_failure``), one at a time."""
        channel = self.log_manager.failure_channel
        while True:
            failure = await channel.take()
            self.metrics.log_dir_failures.labels(logDirectory=failure.log_dir).inc()
            self.events.error("log_dir_failure", log_dir=failure.log_dir,
                              partition=failure.partition, error=failure.message[:300])
            if self._halt_on_any_failure(failure):
                return
            await self.handle_storage_failure(failure)

    def _halt_on_any_failure(self, failure: LogDirFailure) -> bool:
        """log.dir.failure.policy=halt, the pre-design behaviour kept for comparison: Kafka
        before KIP-112 (its LogManager before JBOD support) called Exit.halt on any IOException
        in a log dir, however many healthy dirs were left."""
        if self.config.get("log.dir.failure.policy", "offline") != "halt":
            return False
        message = (f"broker {self.broker_id} halting: log.dir.failure.policy=halt and log dir "
                   f"{failure.log_dir} failed: {failure.message}")
        self.events.critical("broker_halting", reason=message, log_dir=failure.log_dir)
        if self.halt is not None:
            self.halt(message)
        return True
