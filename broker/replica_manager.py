"""The replica manager: the broker's partitions and the replication protocol around them.

Kafka's ReplicaManager for ZooKeeper mode: LeaderAndIsr makes this broker leader or follower of
partitions (fenced by controller epoch, broker epoch and leader epoch), StopReplica stops and
maybe deletes them, Produce appends as leader (acks 0/1/all, min.insync.replicas, completion when
the HW passes the batch), Fetch serves followers up to the LEO and consumers up to the HW with
long polling, and the isr-expiration task shrinks the ISR while follower fetches expand it —
both through AlterPartition to the controller.

Ordering rules that bind (write them where they bind, as etcd's raft does):
- The leader updates a follower's fetch state before reading for it, and advances the HW only
  from fetch offsets, i.e. from what followers have already appended (they fetch again only
  after appending), so the HW never exceeds a replica's log.
- A follower truncates (diverging epoch) before it appends anything fetched from a new leader.
- All log mutations for a partition run on its log dir's single executor thread, in order.

Every decision is a call into a pure, unit-tested module beside this one: ``fencing``
(controller/broker epochs, KIP-320 leader epochs, KIP-903 stale follower fetches, StopReplica
epochs, produce admission), ``partition_state`` (what a LeaderAndIsr state does to a replica),
``delayed_produce`` (when an acks=all produce is answered), ``isr`` (ISR and HW rules) and
``log_dirs`` (DescribeLogDirs), ``storage.failure_scope`` (which I/O error takes what offline).
This module performs what they decide.

Log-dir failure (design.md#jbod): every storage I/O error reaches the LogDirFailureChannel and
one consumer, ``log_dir_failure_loop`` - the seed's ExceptionHandler. It probes the dir and
takes offline either the dir with all its partitions (``handle_log_dir_failure``, step 2) or
the one log (``handle_log_failure``, step 3). A lost replica leaves ``partitions`` (step
2.3.1) for ``offline_replicas``: every request for it is answered KAFKA_STORAGE_ERROR until the
controller restarts it (a /restart_partitions entry, step 2.4, ``restart_notifier``) and a
LeaderAndIsr with ``is_new`` re-creates it in a healthy dir. When no dir is left, ``halt``.

It takes plain requests (``common.controller_requests``); broker/servicer.py translates protobuf.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING

from broker import fencing, partition_state
from broker.alter_log_dirs import ALTER_LOG_DIRS_RATE, ReplicaAlterLogDirsManager, ReplicaHost
from broker.fetch_session import FetchSessionCache
from broker.leader_fetch import LeaderFetchPath
from broker.log_dir_failures import LogDirFailures
from broker.log_dir_ops import LogDirOps
from broker.metadata_cache import MetadataCache
from broker.metrics import BrokerMetrics
from broker.partition import Partition
from broker.produce_path import ProducePath
from broker.replica_background import ReplicaBackground
from broker.replica_gauges import register_replica_gauges
from broker.replication_quota import (
    ReplicationQuota,
    ReplicationQuotas,
)
from broker.storage.errors import KafkaStorageError, LogClosedError, LogDirOfflineError
from broker.storage.log import MAX_TIMESTAMP
from broker.storage.log_manager import LogManager
from broker.topic_config_state import TopicConfigState
from common.clock import wall_ms
from common.config import Config
from common.controller_requests import (
    LeaderAndIsrRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from common.errors import ErrorCode, RequestError
from common.names import TopicPartition
from common.zk_layout import LEADER_DURING_DELETE

if TYPE_CHECKING:
    from broker.alter_partition import AlterPartitionManager
    from broker.fetcher import ReplicaFetcherManager
    from broker.restart_notifier import RestartNotifier

from broker.replica_types import (
    _NO_METADATA_LOOKUP,
    EARLIEST_TIMESTAMP,
    EPOCH_CHECKPOINT_CHUNK,
    LATEST_TIMESTAMP,
)


class ReplicaManager(TopicConfigState, ProducePath, LeaderFetchPath, LogDirOps):
    """The map of partitions, the state-change lock, and the controller requests
    (LeaderAndIsr, StopReplica, UpdateMetadata); each other family of the replica manager is a
    part in its own module: ``topic_config_state``, ``produce_path``,
    ``leader_fetch``, ``log_dir_ops`` (mixins still), and the composed parts, each handed
    what it reads rather than this manager: ``log_dir_failures.LogDirFailures``,
    ``alter_log_dirs.ReplicaAlterLogDirsManager``, ``replica_background.ReplicaBackground``
    and the gauges of ``replica_gauges``.
    A partition's replication state and rules are ``broker.partition``."""

    def __init__(self, broker_id: int, config: Config, log_manager: LogManager,
                 metadata: MetadataCache, metrics: BrokerMetrics, events,
                 topic_config_loader: Callable[[str], Awaitable[dict[str, str]]] | None = None,
                 clock: Callable[[], int] = wall_ms, *,
                 fetcher_manager: ReplicaFetcherManager | None = None,
                 alter_partition: AlterPartitionManager | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 quotas: ReplicationQuotas | None = None,
                 restart_notifier: RestartNotifier | None = None,
                 halt: Callable[[str], None] | None = None,
                 on_log_dir_offline: Callable[[str], None] | None = None,
                 read_pool: Executor | None = None,
                 idle_fetch_short_path: bool = True):
        """``clock``: wall milliseconds for follower fetch states (isr.py); ``monotonic``:
        seconds for request deadlines, serve times and replication quota rates. Without a
        fetcher manager this broker fetches nothing; without an AlterPartition manager it
        never changes an ISR (unit tests of the leader side). ``restart_notifier`` writes the
        /restart_partitions entries (none: not written); ``halt(message)`` ends the process when
        the last log dir goes offline (none: only logged - an embedding process decides);
        ``on_log_dir_offline(dir)`` lets the server update its registration; ``read_pool`` runs
        the leader's log reads (none: the event loop's default executor);
        ``idle_fetch_short_path``: answer an idle, caught-up follower's fetch without the full
        per-partition path (``leader_fetch``; off, every follower fetch takes the full path,
        which the short path must be indistinguishable from)."""
        self.broker_id = broker_id
        self.config = config
        self.log_manager = log_manager
        log_manager.config_for = self.log_config_for  # topic overrides (topic_config_state)
        self.metadata = metadata
        self.metrics = metrics
        self.events = events
        self.clock = clock
        self.monotonic = monotonic
        self.partitions: dict[TopicPartition, Partition] = {}
        # Replicas lost with their log dir or log (Kafka's HostedPartition.Offline): partition
        # -> the log dir they were in. Every request for one is KAFKA_STORAGE_ERROR until a
        # LeaderAndIsr re-creates it.
        self.offline_replicas: dict[TopicPartition, str] = {}
        for tp, log_dir in log_manager.set_aside:  # copies lost before a restart (log_manager)
            if log_manager.get_log(tp) is None:
                self.offline_replicas[tp] = log_dir
        self._stray_deletions: set[asyncio.Task] = set()
        self._background_tasks: set[asyncio.Task] = set()
        self.controller_epoch = -1
        self.broker_epoch = -1
        # False from a broker process's start until its ZooKeeper registration (BrokerServer):
        # what the controller sends meanwhile was queued for the previous incarnation.
        self.registered = True
        # Topic overrides as last read from /config/topics/<t>. A topic missing here while it
        # has partitions is *unknown* (ZooKeeper could not be read): its min ISR is then the
        # strictest one, never the broker default (an unread config must not weaken acks=all).
        self.topic_configs: dict[str, dict[str, str]] = {}
        # This broker's dynamic configs (/config/brokers/<default> under /config/brokers/<id>),
        # None while they cannot be read. Set by broker/config_manager.py.
        self.broker_dynamic_config: dict[str, str] | None = {}
        # /config/brokers/<default> alone: min ISR reads only the cluster-wide entity, as the
        # controller does (dynamic_config.configured_min_isr).
        self.broker_default_config: dict[str, str] | None = {}
        self._load_topic_config = topic_config_loader
        self._config_tickets: dict[str, int] = {}  # topic -> latest load started
        self._config_applied: dict[str, int] = {}  # topic -> ticket of the config held
        self._config_retries: dict[str, asyncio.Task] = {}
        self.fetcher_manager = fetcher_manager
        self.alter_partition = alter_partition
        # KIP-227: the leader's incremental fetch sessions, shared by every listener's
        # servicer (Kafka's FetchManager).
        self.fetch_sessions = FetchSessionCache(
            config["max.incremental.fetch.session.cache.slots"],
            on_evict=metrics.fetch_session_evictions.inc)
        # KIP-73: the leader quota limits what this broker serves to throttled followers, the
        # follower quota what its fetchers ask for; one pair per broker (Kafka's QuotaFactory),
        # set from the topic and broker configs this manager is handed.
        self.quotas = quotas or ReplicationQuotas(
            broker_id, monotonic, config["replication.quota.window.num"],
            config["replication.quota.window.size.seconds"])
        if fetcher_manager is not None:
            fetcher_manager.quota = self.quotas.follower
        # Controller requests change replica state across awaits: one at a time (Kafka's
        # replicaStateChangeLock), or two LeaderAndIsr requests could interleave.
        self.state_change = asyncio.Lock()
        # KIP-113: intra-broker moves, throttled by their own io quota; handed the parts of
        # this manager a move reads, not the manager.
        self.alter_log_dirs = ReplicaAlterLogDirsManager(
            ReplicaHost(self.partitions, self.state_change, lambda: self.broker_epoch,
                        lambda tp, reason: self.handle_log_failure(tp, reason)),
            log_manager, events, metrics, ReplicationQuota(
                monotonic, config[ALTER_LOG_DIRS_RATE],
                config["replication.quota.window.num"],
                config["replication.quota.window.size.seconds"]))
        # design.md#jbod: the log-dir failure handling, handed the maps it moves lost
        # replicas between and the parts it stops, not this manager
        self.log_dir_failures = LogDirFailures(
            broker_id, log_manager, self.partitions, self.offline_replicas, metadata,
            self.alter_log_dirs, events, metrics, fetcher_manager=fetcher_manager,
            restart_notifier=restart_notifier, halt=halt,
            on_log_dir_offline=on_log_dir_offline,
            on_leadership_change=self._leadership_changed,
            failure_policy=config.get("log.dir.failure.policy", "offline"))
        self._leader_held_back = 0  # partitions the leader quota held back at the last fetch
        self.lag_max_ms = config["replica.lag.time.max.ms"]
        # design.md#kip-501
        self.pending_reads_in_sync = config["follower.fetch.pending.reads.insync.enable"]
        self.process_time_max_ms = config["follower.fetch.process.time.max.ms"]
        self._fetch_ids = 0
        self._read_pool = read_pool
        # Kafka's onLeadershipChange callback (the group coordinator, broker/group/
        # coordinator.py): (partitions now led -> leader epoch, partitions no longer led ->
        # the request's leader epoch, None when deleted), after each LeaderAndIsr/StopReplica
        # and when a replica is lost with its log dir.
        self.on_leadership_change: Callable[
            [dict[TopicPartition, int], dict[TopicPartition, int | None]], None] | None = None
        self.idle_fetch_short_path = idle_fetch_short_path
        self.background = ReplicaBackground(
            self.partitions, log_manager, lambda: self.alter_partition, events,
            lambda: self.clock(),
            lag_max_ms=self.lag_max_ms, pending_reads_in_sync=self.pending_reads_in_sync,
            hw_checkpoint_interval_ms=config["replica.high.watermark.checkpoint.interval.ms"],
            retention_check_interval_ms=config["log.retention.check.interval.ms"])
        register_replica_gauges(metrics, self.partitions, self.offline_replicas,
                                self.fetch_sessions, log_manager, self.quotas,
                                lambda: self._leader_held_back)

    # ------------------------------------------------------------------ metrics



    # ------------------------------------------------------------------ controller requests

    # ------------------------------------------------------------------ background tasks

    async def isr_expiration_loop(self) -> None:
        await self.background.isr_expiration_loop()

    def maybe_shrink_isr(self) -> None:
        self.background.maybe_shrink_isr()

    async def checkpoint_loop(self) -> None:
        await self.background.checkpoint_loop()

    async def checkpoint(self) -> None:
        await self.background.checkpoint()

    async def retention_loop(self) -> None:
        await self.background.retention_loop()

    # ------------------------------------------------------------------ log-dir failures

    async def log_dir_failure_loop(self) -> None:
        """The one consumer of the log manager's failure channel (``log_dir_failures``)."""
        await self.log_dir_failures.log_dir_failure_loop()

    def handle_log_dir_failure(self, log_dir: str, reason: str) -> list[TopicPartition]:
        return self.log_dir_failures.handle_log_dir_failure(log_dir, reason)

    def handle_log_failure(self, tp: TopicPartition, reason: str) -> None:
        self.log_dir_failures.handle_log_failure(tp, reason)

    @property
    def restart_notifier(self) -> RestartNotifier | None:
        return self.log_dir_failures.restart_notifier

    @restart_notifier.setter
    def restart_notifier(self, notifier: RestartNotifier | None) -> None:
        self.log_dir_failures.restart_notifier = notifier

    @property
    def halt(self) -> Callable[[str], None] | None:
        return self.log_dir_failures.halt

    @halt.setter
    def halt(self, halt: Callable[[str], None] | None) -> None:
        self.log_dir_failures.halt = halt

    # ------------------------------------------------------------------ controller requests

    def _check_controller(self, controller_epoch: int, broker_epoch: int) -> None:
        if not self.registered:
            # KIP-380: the controller's queue for the previous incarnation (same address)
            # must not reach this one: an UpdateMetadata naming a few partitions made the
            # restarted broker answer Metadata with a partial topic
            # (test_controller_requests_wait_for_the_brokers_registration in
            # tests/broker/test_registration_fence.py).
            raise RequestError(ErrorCode.STALE_BROKER_EPOCH,
                               f"broker {self.broker_id} has not registered yet: broker epoch "
                               f"{broker_epoch} is a previous incarnation's")
        refused = fencing.controller_request_error(controller_epoch, broker_epoch,
                                                   self.controller_epoch, self.broker_epoch)
        if refused is not None:
            raise RequestError(*refused)
        self.controller_epoch = controller_epoch
        # KIP-966: a request at this incarnation's broker epoch means the controller has
        # written an unclean start out of every ISR and ELR (LogManager.registration_handled;
        # tests/storage/test_clean_shutdown_registration.py).
        if broker_epoch == self.broker_epoch:
            self.log_manager.registration_handled()

    # ------------------------------------------------------------------ dynamic topic configs










    async def leader_and_isr(self, req: LeaderAndIsrRequest
                             ) -> list[tuple[TopicPartition, ErrorCode]]:
        async with self.state_change:
            return await self._leader_and_isr(req)

    async def _leader_and_isr(self, req: LeaderAndIsrRequest
                              ) -> list[tuple[TopicPartition, ErrorCode]]:
        """Kafka's becomeLeaderOrFollower, in phases so that a request for thousands of
        partitions costs a few executor hand-offs, not two per partition: (1) fence stale
        states and load topic configs, (2) create the missing logs in one job, (3) apply the
        states, (4) record the new leader epochs' start offsets, one job per log dir. Their
        ``leader-epoch-checkpoint`` files are written after the answer (10k files
        delayed the UpdateMetadata queued behind this answer, so clients saw the new leaders
        seconds late), in chunks that appends on the same log dir can pass."""
        self._check_controller(req.controller_epoch, req.broker_epoch)
        results: list[tuple[TopicPartition, ErrorCode]] = []
        loop = asyncio.get_running_loop()
        todo = []
        for s in req.partition_states:
            tp = s.tp
            answer = partition_state.admit_partition_state(
                self.broker_id, s.replicas, s.leader_epoch, s.partition_epoch,
                partition_state.held_epochs(self.partitions.get(tp)))
            if answer is not None:  # not ours, already held, or stale: nothing applied
                results.append((tp, answer))
                continue
            await self._topic_config(s.topic)
            todo.append((tp, s))

        created_errors: dict[TopicPartition, str] = {}
        missing, refused = [], {}
        some_dir_offline = bool(self.log_manager.offline_dirs)
        for tp, s in todo:
            if self.log_manager.get_log(tp) is not None:
                continue
            action = partition_state.missing_log(s.is_new, tp in self.offline_replicas,
                                                 some_dir_offline)
            if action is partition_state.MissingLog.CREATE:
                missing.append(tp)
            else:
                refused[tp] = self.offline_replicas.get(tp) or ",".join(
                    d.path for d in self.log_manager.offline_dirs)
        if missing:
            created_errors = await loop.run_in_executor(None, self._create_logs, missing)
        for tp in missing:
            lost_in = self.offline_replicas.pop(tp, None) if tp not in created_errors else None
            if lost_in is not None:
                if self.fetcher_manager is not None:
                    # A follower append failed by its dir going offline can mark it failed
                    # after the dir's partitions were cleared: the new replica starts clean.
                    self.fetcher_manager.on_log_dir_offline([tp])
                self.events.warning("replica_recreated", partition=str(tp), lost_in=lost_in,
                                    log_dir=self.log_manager.log_dir_of(tp).path)
        self.log_dir_failures.refuse_lost_replicas(
            refused, {tp: s.partition_epoch for tp, s in todo})
        for tp, lost_in in refused.items():
            created_errors[tp] = (f"the replica of {tp} may be in an offline log dir "
                                  f"({lost_in}) and the request does not say is_new: "
                                  f"restart requested")
        for tp, s in todo:
            log = self.log_manager.get_log(tp)
            p = self.partitions.get(tp)
            if log is not None and partition_state.retry_failed_log(
                    log.failed is not None, s.leader_epoch,
                    p.leader_epoch if p is not None else None):
                # KIP-461: a new leader epoch gives a failed partition another try; a log
                # that failed a write must first be rebuilt from its files.
                try:
                    fresh = await self.log_manager.run(tp, self.log_manager.reload_log, tp)
                    self.events.info("log_reloaded", partition=str(tp), error=log.failed,
                                     leo=fresh.log_end_offset)
                    if p is not None:
                        p.log = fresh
                except KafkaStorageError as e:
                    created_errors[tp] = str(e)

        now = self.clock()
        to_follow: dict[TopicPartition, Partition] = {}
        to_fetch: dict[TopicPartition, Partition] = {}  # followers that have a leader
        epoch_starts: dict[object, list] = {}  # log dir -> [(log, epoch, start offset)]
        for tp, s in todo:
            if tp in created_errors:
                self.events.error("replica_creation_failed", partition=str(tp),
                                  error=created_errors[tp])
                results.append((tp, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            p = self.partitions.get(tp)
            if p is None:
                p = self.partitions[tp] = Partition(tp, self.broker_id)
            if s.topic in req.topic_ids:
                p.topic_id = req.topic_ids[s.topic]
            p.min_isr = self._min_isr(s.topic, len(s.replicas))
            if p.log is None:
                p.log = self.log_manager.get_log(tp)
            t = p.apply_leader_and_isr(s, now)
            if t.new_epoch and self.fetcher_manager is not None:
                # KIP-461: a higher leader epoch clears a failed partition; it fetches again.
                self.fetcher_manager.on_leader_and_isr(tp, s.leader_epoch)
            if t.lead:
                if self.fetcher_manager is not None:
                    self.fetcher_manager.remove_partitions([tp])
                if t.write_epoch_start:
                    # Kafka writes the new epoch's start offset when becoming leader, so that
                    # OffsetForLeaderEpoch / diverging-epoch answers are right before any
                    # append. The start is the LEO *inside* the log dir's executor job: a
                    # truncation, follower append or old-epoch produce append queued there
                    # runs first, and changes the LEO (Kafka reads it under the partition's
                    # write lock, after removing the fetcher). Reading it here, on the loop,
                    # recorded a stale start and let replicas diverge.
                    epoch_starts.setdefault(self.log_manager.log_dir_of(tp), []).append(
                        (p, p.log, s.leader_epoch))
                if t.report_recovered and self.alter_partition is not None:
                    self.alter_partition.mark_recovered(p)
                if t.reset_followers:
                    self.events.info("become_leader", partition=str(tp),
                                     leader_epoch=s.leader_epoch, isr=list(s.isr),
                                     partition_epoch=s.partition_epoch,
                                     controller_epoch=req.controller_epoch,
                                     leo=p.log_end_offset, hw=p.high_watermark)
            elif t.follow:
                to_follow[tp] = p
                if t.fetch:
                    to_fetch[tp] = p
                self.events.info("become_follower", partition=str(tp), leader=s.leader,
                                 leader_epoch=s.leader_epoch,
                                 controller_epoch=req.controller_epoch,
                                 leo=p.log_end_offset)
            results.append((tp, ErrorCode.NONE))
        assigns = [self.log_manager.run_in_dir(d, _assign_epochs, items)
                   for d, items in epoch_starts.items() if d is not None]
        if self.fetcher_manager is not None and to_follow:
            self.fetcher_manager.remove_partitions(list(to_follow))
            endpoints = {e.broker_id: e for e in req.live_leaders}
            self.fetcher_manager.add_partitions(to_fetch, endpoints)
        for started in await asyncio.gather(*assigns):
            for p, epoch, start in started:
                # Only now is the epoch's start known; until then no follower may join the
                # ISR on the strength of it (become_leader set it to "pending").
                if partition_state.epoch_start_applies(p.is_leader, p.leader_epoch, epoch):
                    p.leader_epoch_start_offset = start
        for d, items in epoch_starts.items():
            if d is not None:
                self._background(self._write_epoch_checkpoints(d, [log for _, log, _ in items]))
        if self.log_manager.future_logs:
            # KIP-113: moves a restart cut short resume once their replica is hosted again
            # (Kafka's maybeAddLogDirFetchers in becomeLeaderOrFollower).
            self.alter_log_dirs.resume({tp for tp, code in results if code == ErrorCode.NONE})
        self._notify_leadership(todo, results)
        return results

    def _leadership_changed(self, led: dict[TopicPartition, int],
                            gone: dict[TopicPartition, int | None]) -> None:
        if self.on_leadership_change is not None:
            self.on_leadership_change(led, gone)

    def _notify_leadership(self, todo, results) -> None:
        """onLeadershipChange after a LeaderAndIsr: the partitions it made this broker lead,
        and those it made it follow."""
        if self.on_leadership_change is None:
            return
        applied = {tp for tp, code in results if code == ErrorCode.NONE}
        led = {tp: s.leader_epoch for tp, s in todo
               if tp in applied and self.partitions[tp].is_leader}
        self.on_leadership_change(led, {tp: s.leader_epoch for tp, s in todo
                                        if tp in applied and tp not in led})

    async def _write_epoch_checkpoints(self, d, logs: list) -> None:
        """Write the leader-epoch-checkpoint files that becoming leader left in memory, a
        chunk per log-dir job so that a produce append queued meanwhile waits for one chunk,
        not for all of them. An error takes the log dir offline, as any checkpoint error."""
        for i in range(0, len(logs), EPOCH_CHECKPOINT_CHUNK):
            try:
                failed = await self.log_manager.run_in_dir(
                    d, _write_deferred_epochs, logs[i:i + EPOCH_CHECKPOINT_CHUNK])
            except LogDirOfflineError:
                return  # the dir's partitions are offline; nothing left to write there
            for tp, error in failed:
                self.events.error("leader_epoch_checkpoint_failed", partition=str(tp),
                                  error=str(error))
                self.log_dir_failures.report(error)

    async def stop_background(self) -> None:
        """Shutdown: end the deferred checkpoint writers before the logs close (closing
        flushes every log, deferred epochs included; a writer must not race it)."""
        for task in list(self._background_tasks):
            task.cancel()
        await asyncio.gather(*self._background_tasks, return_exceptions=True)

    def _background(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background_tasks.add(task)  # a strong reference until it ends
        task.add_done_callback(self._background_tasks.discard)

    def _create_logs(self, tps: list[TopicPartition]) -> dict[TopicPartition, str]:
        """Executor: create the logs of new replicas; returns the ones that failed."""
        errors = {}
        for tp in tps:
            try:
                self.log_manager.get_or_create_log(tp, broker_epoch=self.broker_epoch)
            except KafkaStorageError as e:
                errors[tp] = str(e)
        return errors


    async def stop_replica(self, req: StopReplicaRequest) -> list[tuple[TopicPartition, ErrorCode]]:
        async with self.state_change:
            return await self._stop_replica(req)

    async def _stop_replica(self, req: StopReplicaRequest
                            ) -> list[tuple[TopicPartition, ErrorCode]]:
        self._check_controller(req.controller_epoch, req.broker_epoch)
        results = []
        deleted_topics: set[str] = set()
        for s in req.partition_states:
            tp = s.tp
            p = self.partitions.get(tp)
            # The epoch is checked first: a stale StopReplica must leave the fetcher and the
            # KIP-461 failed-partition state alone (Kafka's stopReplicas order).
            if p is not None and fencing.stop_replica_is_stale(s.leader_epoch, p.leader_epoch):
                results.append((tp, ErrorCode.FENCED_LEADER_EPOCH))
                continue
            if self.fetcher_manager is not None:
                self.fetcher_manager.remove_partitions([tp])
                self.fetcher_manager.on_stop_replica(tp)
            self.alter_log_dirs.cancel(tp, "StopReplica")  # KIP-113: a move ends with it
            if s.delete_partition and tp in self.offline_replicas:
                # Its files are in an offline dir (or moved aside): nothing to delete now. If
                # the dir comes back the copy is a stray (UpdateMetadata deletes it then).
                self.events.info("offline_replica_forgotten", partition=str(tp),
                                 log_dir=self.offline_replicas.pop(tp))
            if s.delete_partition:
                self.partitions.pop(tp, None)
                if self.log_manager.get_log(tp) is not None:
                    try:
                        await self.log_manager.run(tp, self.log_manager.delete_log, tp)
                    except KafkaStorageError as e:
                        results.append((tp, ErrorCode.KAFKA_STORAGE_ERROR))
                        self.events.error("replica_deletion_failed", partition=str(tp),
                                          error=str(e))
                        continue
                deleted_topics.add(tp.topic)
                self.events.info("replica_deleted", partition=str(tp))
            elif p is not None:
                p.stopped = True
                p.become_follower()
                self.events.info("replica_stopped", partition=str(tp),
                                 leader_epoch=p.leader_epoch)
            results.append((tp, ErrorCode.NONE))
        if deleted_topics:
            # A topic's overrides are forgotten with its last replica here only: the others
            # still apply them (a finding of the cluster simulation).
            deleted_topics -= {tp.topic for tp in self.partitions}
            for topic in deleted_topics:
                self.topic_configs.pop(topic, None)
        if self.on_leadership_change is not None:
            stopped = {tp for tp, code in results if code == ErrorCode.NONE}
            self.on_leadership_change({}, {s.tp: None if s.delete_partition else s.leader_epoch
                                           for s in req.partition_states if s.tp in stopped})
        return results






    def update_metadata(self, req: UpdateMetadataRequest) -> None:
        self._check_controller(req.controller_epoch, req.broker_epoch)
        self.metadata.update(req)
        if self.fetcher_manager is not None:
            self.fetcher_manager.update_endpoints(self.metadata.brokers)
        strays = tuple(
            StopReplicaPartitionState(topic=s.topic, partition=s.partition, delete_partition=True)
            for s in req.partition_states
            if s.leader != LEADER_DURING_DELETE and partition_state.is_stray_replica(
                self.broker_id, s.replicas, s.leader_epoch,
                self.log_manager.get_log(s.tp) is not None, self.partitions.get(s.tp), s.isr))
        if strays:
            self.events.warning("stray_replicas", partitions=[str(s.tp) for s in strays])
            task = asyncio.get_running_loop().create_task(self.stop_replica(StopReplicaRequest(
                controller_id=req.controller_id, controller_epoch=req.controller_epoch,
                broker_epoch=req.broker_epoch, partition_states=strays)))
            self._stray_deletions.add(task)
            task.add_done_callback(self._stray_deletions.discard)

    # ------------------------------------------------------------------ produce




    # ------------------------------------------------------------------ fetch










    # ------------------------------------------------------------------ offsets

    def _lost_message(self, tp: TopicPartition) -> str:
        return (f"the replica of {tp} on broker {self.broker_id} was lost with log dir "
                f"{self.offline_replicas.get(tp)} (KAFKA_STORAGE_ERROR until it is restarted)")

    def _online_replica(self, tp: TopicPartition) -> Partition | None:
        """The partition if this broker holds a replica of it with a log (not in an offline
        dir); the rules of ``fencing`` take None for "no replica"."""
        p = self.partitions.get(tp)
        return p if p is not None and p.log is not None else None

    async def list_offset_and_timestamp(self, tp: TopicPartition, timestamp: int,
                                        current_leader_epoch: int | None, replica_id: int
                                        ) -> tuple[ErrorCode, int, int, int]:
        """(error, timestamp, offset, leader epoch) for latest (-1), earliest (-2), the largest
        timestamp (-3, KIP-734) or a time (Kafka's fetchOffsetForTimestamp: the first record
        at or after it). Consumers see the HW as "latest" and find only records below it,
        replicas the LEO (Kafka's rule). A time with no record at or after it is
        (NONE, -1, -1, -1), as in Kafka. A search by time reads the log's files: on the read
        pool, as a Fetch's reads, never on the event loop (a slow disk held up every request of
        the broker for as long as the search's reads took)."""
        if tp in self.offline_replicas:
            return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1, -1
        p = self._online_replica(tp)
        refused = fencing.leader_request_error(p, _NO_METADATA_LOOKUP, current_leader_epoch)
        if refused is not None:
            return refused, -1, -1, -1
        if timestamp == EARLIEST_TIMESTAMP:
            return ErrorCode.NONE, -1, p.log.log_start_offset, p.leader_epoch
        upper = p.log.log_end_offset if replica_id >= 0 else p.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            return ErrorCode.NONE, -1, upper, p.leader_epoch
        if timestamp < MAX_TIMESTAMP:  # -4 and below are not defined here
            return ErrorCode.OFFSET_NOT_AVAILABLE, -1, -1, -1
        try:
            found = await asyncio.get_running_loop().run_in_executor(
                self._read_pool, p.log.offset_for_timestamp, timestamp, upper)
        except KafkaStorageError as e:
            self.log_dir_failures.report(e)
            return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1, -1
        except LogClosedError as e:  # deleted, reloaded or offline under the read: no I/O error
            return e.error_code, -1, -1, -1
        if found is None:
            return ErrorCode.NONE, -1, -1, -1
        return ErrorCode.NONE, found[0], found[1], found[2]

    def offset_for_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int | None,
                                leader_epoch: int) -> tuple[ErrorCode, int, int]:
        if tp in self.offline_replicas:
            return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1
        p = self._online_replica(tp)
        refused = fencing.leader_request_error(p, _NO_METADATA_LOOKUP, current_leader_epoch)
        if refused is not None:
            return refused, -1, -1
        epoch, end = p.log.end_offset_for_epoch(leader_epoch)
        return ErrorCode.NONE, epoch, end

    def replica_log_info(self, tp: TopicPartition) -> tuple[ErrorCode, int, int, int]:
        """KIP-966 GetReplicaLogInfo: (error, last written leader epoch, current leader epoch,
        log end offset)."""
        if tp in self.offline_replicas:
            return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1, -1
        p = self.partitions.get(tp)
        log = p.log if p is not None else self.log_manager.get_log(tp)
        if log is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1
        return (ErrorCode.NONE, log.latest_epoch,
                p.leader_epoch if p is not None else -1, log.log_end_offset)

    # ------------------------------------------------------------------ log dirs





    # ------------------------------------------------------------------ background









def _assign_epochs(items):
    """Log dir executor: record each new leader epoch's start offset at the log end offset as
    it is *now*, after every mutation queued before this job, in memory only (the file is
    written by ``_write_deferred_epochs`` after LeaderAndIsr is answered). Returns
    [(partition, epoch, start offset)]."""
    started = []
    for p, log, epoch in items:
        if log.closed:
            continue
        start = log.log_end_offset
        log.epoch_cache.assign(epoch, start, defer=True)
        started.append((p, epoch, start))
    return started


def _write_deferred_epochs(logs):
    """Log dir executor: write each log's deferred leader-epoch-checkpoint; [(tp, error)]."""
    failed = []
    for log in logs:
        try:
            log.write_deferred_epochs()
        except KafkaStorageError as e:
            failed.append((log.tp, e))
    return failed




