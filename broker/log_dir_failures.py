"""design.md#jbod's ExceptionHandler: every storage I/O error reaches the LogDirFailureChannel and
one consumer, ``log_dir_failure_loop``, which probes the dir and takes offline the whole dir (step
2) or the one log (step 3); lost replicas leave ``partitions`` for ``offline_replicas`` and the
controller is asked to restart them (/restart_partitions, fenced by the partition epoch held).

``LogDirFailures`` is one of ``broker.replica_manager.ReplicaManager``'s composed parts (not a
mixin sharing undeclared state): it is handed what it reads and changes - the log manager, the
replica maps it moves lost replicas between (``partitions`` -> ``offline_replicas``), the
metadata cache (partition epochs), the fetcher manager, the KIP-113 mover, the restart
notifier, the halt and the registration hook - not the manager. The cluster simulation builds
one over its own maps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from broker.storage.errors import KafkaStorageError
from broker.storage.failure_scope import PROBE_TIMEOUT_S, Scope, failure_scope
from common.names import TopicPartition

if TYPE_CHECKING:
    from broker.partition import Partition
    from broker.restart_notifier import RestartNotifier
    from broker.storage.log_dir_failure_channel import LogDirFailure
    from broker.storage.log_manager import LogManager


class PartitionEpochs(Protocol):
    """The metadata cache, as read here: each partition's last UpdateMetadata state."""

    partitions: dict[TopicPartition, Any]


class FetcherControl(Protocol):
    def remove_partitions(self, tps) -> None: ...

    def on_log_dir_offline(self, tps) -> None: ...


class MoveControl(Protocol):
    def cancel(self, tp: TopicPartition, reason: str) -> None: ...

    def log_dir_offline(self, path: str) -> None: ...



class LogDirFailures:
    def __init__(self, broker_id: int, log_manager: LogManager,
                 partitions: dict[TopicPartition, Partition],
                 offline_replicas: dict[TopicPartition, str], metadata: PartitionEpochs,
                 alter_log_dirs: MoveControl, events, metrics, *,
                 fetcher_manager: FetcherControl | None = None,
                 restart_notifier: RestartNotifier | None = None,
                 halt: Callable[[str], None] | None = None,
                 on_log_dir_offline: Callable[[str], None] | None = None,
                 on_leadership_change: Callable[[dict, dict], None] | None = None,
                 failure_policy: str = "offline"):
        """``failure_policy``: log.dir.failure.policy (``halt``: the pre-design behaviour)."""
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.partitions = partitions
        self.offline_replicas = offline_replicas
        self.metadata = metadata
        self.alter_log_dirs = alter_log_dirs
        self.events = events
        self.metrics = metrics
        self.fetcher_manager = fetcher_manager
        self.restart_notifier = restart_notifier
        self.halt = halt
        self.on_log_dir_offline = on_log_dir_offline
        # Kafka's onLeadershipChange (the group coordinator): a lost replica leads nothing.
        self.on_leadership_change = on_leadership_change
        self.failure_policy = failure_policy
        self.probe_timeout_s = PROBE_TIMEOUT_S

    def refuse_lost_replicas(self, refused: dict[TopicPartition, str],
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

    def lose_replicas(self, tps: list[TopicPartition], log_dir: str) -> dict[TopicPartition, int]:
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
        if self.on_leadership_change is not None:  # a lost replica leads nothing any more
            self.on_leadership_change({}, {tp: None for tp in tps})
        return held

    def handle_log_failure(self, tp: TopicPartition, reason: str) -> None:
        """design.md#jbod-step-3: only ``tp``'s log failed; its dir keeps serving the others."""
        log_dir = self.log_manager.take_log_offline(tp, reason)
        if log_dir is None:
            return
        held = self.lose_replicas([tp], log_dir)
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
        held = self.lose_replicas(lost, d.path)
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

    def report(self, error: KafkaStorageError) -> None:
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
        if self.failure_policy != "halt":
            return False
        message = (f"broker {self.broker_id} halting: log.dir.failure.policy=halt and log dir "
                   f"{failure.log_dir} failed: {failure.message}")
        self.events.critical("broker_halting", reason=message, log_dir=failure.log_dir)
        if self.halt is not None:
            self.halt(message)
        return True
