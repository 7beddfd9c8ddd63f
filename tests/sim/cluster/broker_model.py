"""One simulated broker: the real replication rules and the real Log, driven synchronously.

What is called, not copied: ``broker.partition.Partition`` (apply_leader_and_isr and
on_follower_fetch - a partition's LeaderAndIsr state and a follower's fetch as events - HW,
ISR, maximal ISR, follower states, out_of_sync), ``broker.isr``,
``broker.partition_state`` (admit_partition_state, missing_log, transition,
epoch_start_applies, is_stray_replica), ``broker.truncation``, ``broker.fencing``,
``broker.delayed_produce.produce_wait``, ``broker.fetch_failures.classify``,
``broker.alter_partition.AlterPartitionManager`` (expand/shrink/mark_recovered, the stale-drop
and the answer handling), ``common.dynamic_config.effective_min_isr``, and
``broker.storage.log.Log`` and ``broker.storage.log_manager.LogManager`` over
``memfs.MemFileOps`` - the real startup (meta.properties, checkpoints, the clean-shutdown
marker and its KIP-966 content, placement-resolved duplicates, the copies
/brokers/lost_replicas/<id> names set aside, strays), checkpoint, shutdown, log creation in the
online dir with the fewest partitions (with its placement record while a dir is offline), log
deletion and mark_offline; its executors and uuid-made ids through the seams of ``seams.py``.
``ReplicaManager._check_controller``, ``_create_logs``, ``_min_isr``, ``_refresh_min_isr`` and
``ReplicaBackground.maybe_shrink_isr`` are called as they are, and so are
``ReplicaManager._stop_replica`` (KIP-570's fence, the fetcher and its failed set, a lost
replica forgotten, the deletion on the log dir's executor, a topic's overrides with its last
replica) and ``update_metadata`` (the real ``MetadataCache``, the fetchers' endpoints, the
stray rule and the stray deletions it starts), run to their end by ``seams.run_now``.

The replica fetcher is the real one (``broker.fetcher``): a ``ReplicaFetcherManager`` per
broker process over its LogManager, its fetch states (``track``), its failed set (KIP-461:
``on_leader_and_isr``, ``on_stop_replica``, and ``on_log_dir_offline`` through the real
log-dir failure handling), and for each answer ``ReplicaFetcher.build_request`` and
``handle_response`` - ``_process``, ``_truncate`` on a diverging epoch, ``_reset_offset`` on
OFFSET_OUT_OF_RANGE with its ListOffsets answered by the leader's real
``ReplicaManager.list_offset_and_timestamp`` through the in-memory stub
(``_LeaderStub``, the manager's ``stub_factory`` seam) - run to their end by
``seams.run_now``. World's network carries each partition's request and answer (one partition
a request; the fetcher's ``_run`` round, long poll and fetch sessions are not run: the
leader answers session id 0, so every request is a full one).

What is re-expressed here (the asyncio/gRPC glue of broker/replica_manager.py and fetcher.py,
which a plain per-partition state object in production would let this module call instead -
the next step of the issue):
    - ReplicaManager._leader_and_isr's phases around Partition.apply_leader_and_isr (one
      LeaderAndIsr applied at once, the epoch start written synchronously where production
      awaits the log dir's executor);
    - produce's _append and _await_replication's loop; apply_topic_config /
      apply_broker_config's bookkeeping (config_changed: the configs re-read from the tree);
    - the leader's fetch around the real _prepare_read and _read_result (called as they
      are, one partition at a time): fetch/_read_all (the idle short path, long polling, the
      seed-002 pending reads, quotas and fetch sessions) and _read_logs' read-pool hand-off
      (the one read is done at once);
    - the fetcher's round (ReplicaFetcher._run: World sends one partition's request at a
      time, times it out and backs off that partition, SimFetch);
    - ReplicaManager._write_epoch_checkpoints (run a few ticks after the LeaderAndIsr);
    - JBOD (KIP-112, design.md#jbod): forget_lost_replicas (the znode is
      World.lost_replicas); ReplicaManager._leader_and_isr's refusal of a missing log
      (missing_log's REFUSE, the offline_replicas bookkeeping) and the KAFKA_STORAGE_ERROR
      answers to produce and GetReplicaLogInfo for a lost replica (a follower fetch gets
      it from the real _prepare_read); RestartNotifier.run's write loop
      (World._write_restart_entries: record_lost_copies and the sequential entry in one
      ZooKeeper round trip, retried until it lands, sometimes twice). Called as they are:
      broker.log_dir_failures.LogDirFailures (handle_log_dir_failure, lose_replicas,
      refuse_lost_replicas, over the real LogManager), RestartNotifier.request and
      restart_entry, and placement's records (written for a log created while a dir is
      offline; newer_copy decides between two copies found at a start). Not modelled:
      a single log's failure (handle_log_failure), KIP-113 moves between dirs, preferred
      dirs, and the registration rewrite that lists offline dirs (no controller rule reads
      it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING

import grpc

from broker import delayed_produce, fencing, partition_state
from broker.alter_partition import AlterPartitionManager, Proposal
from broker.delayed_produce import ProduceWait
from broker.fetcher import FetchState, ReplicaFetcher, ReplicaFetcherManager
from broker.log_dir_failures import LogDirFailures
from broker.metadata_cache import MetadataCache
from broker.partition import Partition
from broker.replica_background import ReplicaBackground
from broker.replica_manager import ReplicaManager
from broker.replica_types import FetchPartitionRequest, _LogRead
from broker.replication_quota import ReplicationQuota
from broker.restart_notifier import RestartNotifier
from broker.storage.errors import KafkaStorageError, LogClosedError
from broker.storage.log import Log, LogConfig
from broker.storage.log_manager import LogManager
from common import records as rec
from common.config import build_config
from common.errors import ErrorCode, OffsetOutOfRangeError
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from controller.decisions.recovery import ReplicaLogInfo
from tests.sim.cluster.memfs import MemFileOps
from tests.sim.cluster.seams import Ids, InlineExecutor, call_in_loop, run_now

if TYPE_CHECKING:
    from common.controller_requests import (
        LeaderAndIsrRequest,
        StopReplicaRequest,
        UpdateMetadataRequest,
    )

LOG_DIR = "/data"


class _Counter:
    def inc(self, *_a) -> None:
        pass

    def labels(self, **_k) -> _Counter:
        return self

    def set_function(self, _f) -> None:
        pass

    def register(self, _collector) -> None:
        pass


class _Quiet:
    """Metrics and events sink: everything is a no-op counter or a no-op logger."""

    def __getattr__(self, _name):
        return _Counter() if not _name.startswith(("info", "warning", "error", "critical")) \
            else (lambda *a, **k: None)


@dataclass
class _Dir:
    """A stopped broker's log dirs, as the next start finds them: every one online."""

    path: str
    index: int
    online: bool = True
    error: str | None = None


class _NoLock:
    async def __aenter__(self) -> None:
        pass

    async def __aexit__(self, *_exc) -> None:
        pass


class _NoMoves:
    """broker.alter_log_dirs.AlterLogDirs: no KIP-113 move is modelled."""

    def cancel(self, tp, reason) -> None:
        pass

    def log_dir_offline(self, path) -> None:
        pass


@dataclass
class SimFetch:
    """What the simulated network knows of one real fetch state (``broker.fetcher.FetchState``
    in the real ``ReplicaFetcher`` for its leader): the request in flight. The fetcher's round
    (``ReplicaFetcher._run``: one Fetch per leader, the long poll, the whole-fetcher back-off)
    is not run; World sends one partition's request at a time, built and answered by the
    fetcher's own ``build_request`` and ``handle_response``."""

    state: FetchState
    fetcher: ReplicaFetcher
    in_flight: int | None = None  # the id of the fetch awaiting its answer
    sent_at: int = 0
    # an answer without a divergence came back in this epoch: the log matches the leader's
    # up to its end (what the diverging-epoch protocol promises); the invariants compare
    # replicas from then on
    synced: bool = False

    @property
    def partition(self) -> Partition:
        return self.state.partition

    @property
    def leader_id(self) -> int:
        return self.fetcher.leader_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    def live(self) -> bool:
        """Still the fetcher's state (not failed, removed or replaced)."""
        return self.fetcher.partitions.get(self.partition.tp) is self.state

    def ready(self, now_ms: int) -> bool:
        """Past its back-off (the fetcher's clock is the simulation's, in seconds)."""
        return round(self.state.delayed_until * 1000) <= now_ms

    def back_off(self) -> None:
        """No answer within the fetch timeout: as the fetcher's transport error, wait
        ``replica.fetch.backoff.ms`` (for this partition: requests are per partition here)."""
        self.state.delayed_until = self.fetcher.monotonic() + self.fetcher.manager.backoff_s


class _LeaderStub:
    """The in-memory transport (``broker.fetcher.LeaderStub``, through the manager's
    ``stub_factory``): the fetcher's ListOffsets (its offset reset) is answered at once by the
    leader's real ``ReplicaManager.list_offset_and_timestamp`` over its current state; a dead
    leader is a transport error. Fetch itself goes over World's network (``SimBroker.
    fetch_request`` / ``serve_fetch`` / ``process_fetch``)."""

    def __init__(self, world, leader_id: int):
        self.world = world
        self.leader_id = leader_id

    async def ListOffsets(self, req: pb.ListOffsetsRequest, *, timeout: float  # noqa: N802
                          ) -> pb.ListOffsetsResponse:
        leader = self.world.brokers.get(self.leader_id)
        if leader is None or not leader.alive:
            raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(),
                                       grpc.aio.Metadata(), "the leader is down")
        out = pb.ListOffsetsResponse()
        for t in req.topics:
            tr = out.topics.add(topic=t.topic)
            for lp in t.partitions:
                epoch = lp.current_leader_epoch if lp.HasField("current_leader_epoch") \
                    else None
                error, ts, offset, leader_epoch = await ReplicaManager.list_offset_and_timestamp(
                    leader, TopicPartition(t.topic, lp.partition), lp.timestamp, epoch,
                    req.replica_id)
                tr.partitions.add(partition=lp.partition, error_code=error, timestamp=ts,
                                  offset=offset, leader_epoch=leader_epoch)
        return out

    def Fetch(self, req, *, timeout):  # noqa: N802 - World's network carries fetches
        raise NotImplementedError("the simulation sends fetches over World's network")

    def FetchStream(self):  # noqa: N802
        raise NotImplementedError("the simulation sends fetches over World's network")


@dataclass
class PendingProduce:
    tp: TopicPartition
    partition: Partition
    epoch: int
    offset: int
    value: bytes
    deadline: int


@dataclass
class FetchRequest:
    tp: TopicPartition
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int | None
    log_start_offset: int


@dataclass
class FetchAnswer:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    diverging: tuple[int, int] | None = None


@dataclass
class SimBroker:
    broker_id: int
    static_min_isr: int
    log_config: LogConfig
    world: object  # tests.sim.cluster.world.World (clock, tree, configs)
    fs: MemFileOps = field(default_factory=MemFileOps)
    alive: bool = False
    log_dirs: tuple[str, ...] = (LOG_DIR,)

    def __post_init__(self) -> None:
        for d in self.log_dirs:
            self.fs.mkdir(d)
        self.fs.fsync_dir("/")
        self.events = _Quiet()
        self.alter_log_dirs = _NoMoves()
        # ReplicaManager's onLeadershipChange hook: no group coordinator runs in the
        # simulation (docs/simulation.md lists __consumer_offsets as unmodelled).
        self.on_leadership_change = None
        self._reset_process()

    def _reset_process(self) -> None:
        # the real LogManager, made at each start (it reads /brokers/lost_replicas then)
        self.log_manager: LogManager | None = None
        self.offline_replicas: dict[TopicPartition, str] = {}
        self.restart_notifier = RestartNotifier(self.broker_id, lambda: self.broker_epoch,
                                                None, _Quiet())
        self.restart_in_flight = False
        self.halted: str | None = None
        self.partitions: dict[TopicPartition, Partition] = {}
        self.metadata = MetadataCache()
        self._stray_deletions: set = set()  # ReplicaManager.update_metadata's stray tasks
        # the real fetcher manager, made at each start over the LogManager; ``fetching`` is
        # what World's network knows of its fetch states
        self.fetcher_manager: ReplicaFetcherManager | None = None
        self.fetching: dict[TopicPartition, SimFetch] = {}
        self.produces: list[PendingProduce] = []
        self.deferred_epoch_writes: list[tuple[int, Log]] = []  # (due ms, log)
        self.controller_epoch = -1
        self.broker_epoch = -1
        self.registered = False
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.broker_dynamic: dict[str, str] | None = {}
        self.alter = AlterPartitionManager(self.broker_id, lambda: self.broker_epoch, None,
                                           _Quiet(), _Quiet())
        self.alter_in_flight: dict[TopicPartition, Proposal] | None = None
        self.alter_sent_at = 0
        self.log_versions: dict[TopicPartition, int] = {}
        # KIP-73: no throttled replica is configured in the simulation
        self.quotas = SimpleNamespace(leader=ReplicationQuota(lambda: self.now() / 1000))

    # ------------------------------------------------------------------ clock

    def now(self) -> int:
        return self.world.now_ms

    def _touched(self, tp: TopicPartition) -> None:
        """A log changed (the invariants re-read it)."""
        self.world.log_version += 1
        self.log_versions[tp] = self.world.log_version

    # ------------------------------------------------------------------ process life

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return self.log_manager.logs if self.log_manager is not None else {}

    @property
    def dir_of(self) -> dict[TopicPartition, str]:
        lm = self.log_manager
        return {tp: d.path for tp, d in lm._dir_of.items()} if lm is not None else {}

    @property
    def dirs(self) -> list:
        """The real LogManager's LogDirs; a stopped broker's as its next start finds them."""
        if self.log_manager is not None:
            return self.log_manager.dirs
        return [_Dir(d, i) for i, d in enumerate(self.log_dirs)]

    def start(self) -> bool:
        """A broker process starts: the real LogManager's startup over this broker's disk
        (every dir readable again; the lost copies /brokers/lost_replicas/<id> names set
        aside), then that record forgotten for the dirs read, and the replicas set aside
        counted lost (BrokerServer's startup, ReplicaManager.__init__)."""
        self._reset_process()
        lost = self.world.lost_replicas.get(self.broker_id, {})
        lm = self.log_manager = LogManager(
            list(self.log_dirs), self.broker_id, self.log_config, fileops=self.fs,
            clock=self.now, lost_replicas={d: set(tps) for d, tps in lost.items()},
            executor_factory=lambda _i: InlineExecutor(),
            new_id=Ids(self.broker_id, self.world.incarnation[self.broker_id]))
        # BrokerServer._rewrite_registration: the first controller request of an unclean
        # start's incarnation makes its registration say clean (LogManager.registration_handled)
        lm.on_unclean_start_handled = lambda: self.world.rewrite_registration(
            self.broker_id, self.broker_epoch)
        lm.startup()
        self.fetcher_manager = fm = ReplicaFetcherManager(
            self.broker_id, lambda: self.broker_epoch, build_config([
                ("broker.id", str(self.broker_id), "sim"),
                ("replica.fetch.backoff.ms", str(self.world.fetch_backoff_ms), "sim")]),
            lm, _Quiet(), _Quiet(), monotonic=lambda: self.now() / 1000,
            stub_factory=lambda leader, _address: _LeaderStub(self.world, leader))
        # every leader has an address before the first UpdateMetadata names them (the stub
        # needs none)
        fm.addresses = {b: f"broker-{b}:9092" for b in self.world.broker_ids}
        # the real isr-expiration round over this process's partitions
        self.background = ReplicaBackground(
            self.partitions, lm, lambda: self.alter, self.events, self.now,
            lag_max_ms=self.world.lag_max_ms, pending_reads_in_sync=False,
            hw_checkpoint_interval_ms=0, retention_check_interval_ms=0)  # loops not run
        # the real log-dir failure handling over this process's maps (design.md#jbod)
        self.failures = LogDirFailures(
            self.broker_id, lm, self.partitions, self.offline_replicas, self.metadata,
            self.alter_log_dirs, self.events, _Quiet(), fetcher_manager=fm,
            restart_notifier=self.restart_notifier, halt=self.halt)
        for d in lm.dirs:
            if d.error and "duplicate log directories" in d.error:
                # production takes the dir offline; in the simulation no such pair may arise
                self.world.inv.fail(f"broker {self.broker_id} found two copies at its start "
                                    f"and no placement record decides: {d.error}")
        for tp in sorted(lm.logs):
            self._touched(tp)
        for tp, log_dir in lm.set_aside:  # ReplicaManager.__init__: lost until re-created
            if lm.get_log(tp) is None:
                self.offline_replicas[tp] = log_dir
        self.world.forget_lost_replicas(self.broker_id, self.log_dirs)
        self.broker_dynamic = dict(self.world.broker_default_config)
        self.alive = True
        return lm.had_clean_shutdown

    def checkpoint(self) -> None:
        """LogManager.checkpoint: recovery points, HWs and log starts, per online dir."""
        self.log_manager.checkpoint()

    def shutdown(self) -> None:
        """A clean shutdown: LogManager.shutdown (per online dir, close and flush its logs,
        checkpoint, and write the clean-shutdown marker; an offline dir gets nothing)."""
        self.log_manager.shutdown()
        self.alive = False
        self._reset_process()

    # ------------------------------------------------------------------ log-dir failure

    def fail_log_dir(self, path: str, reason: str) -> list[TopicPartition]:
        """An I/O error in ``path`` (design.md#jbod-step-2): the real
        ReplicaManager.handle_log_dir_failure - the dir's logs closed and forgotten, their
        replicas out of ``partitions`` into ``offline_replicas``, a restart of them asked
        of the controller (RestartNotifier.request), a halt if no dir is left. The fetcher
        forgets them (FetcherManager.remove_partitions)."""
        lost = self.failures.handle_log_dir_failure(path, reason)
        for tp in lost:
            self._touched(tp)
            self.fetching.pop(tp, None)  # the real fetcher manager forgot it
        self.deferred_epoch_writes = [e for e in self.deferred_epoch_writes
                                      if not e[1].closed]
        return lost

    def _online_replica(self, tp: TopicPartition) -> Partition | None:
        return ReplicaManager._online_replica(self, tp)

    def halt(self, message: str) -> None:
        """Every log dir is offline: the process exits (World stops it after the call)."""
        self.halted = message


    def power_loss(self) -> None:
        """An unclean stop: what was not fsynced is gone (memfs.crash)."""
        self.fs.crash()
        self.alive = False
        self._reset_process()

    # ------------------------------------------------------------------ configs

    # what ReplicaManager._min_isr and _refresh_min_isr read
    @property
    def config(self) -> dict[str, object]:
        return {"min.insync.replicas": self.static_min_isr}

    @property
    def broker_default_config(self) -> dict[str, str] | None:
        return self.broker_dynamic

    def _min_isr(self, topic: str, replication_factor: int) -> int:
        return ReplicaManager._min_isr(self, topic, replication_factor)

    def _topic_config(self, topic: str) -> None:
        if topic not in self.topic_configs:
            self.topic_configs[topic] = dict(self.world.d.tree.configs.get(topic, {}))

    def config_changed(self, topic: str | None) -> None:
        """A /config/changes notification: a topic's overrides (topic) or the dynamic broker
        default (None) were re-read (ReplicaManager.apply_*_config's bookkeeping), then the
        real _refresh_min_isr."""
        if topic is None:
            self.broker_dynamic = dict(self.world.broker_default_config)
        elif topic in self.topic_configs or any(tp.topic == topic for tp in self.partitions):
            self.topic_configs[topic] = dict(self.world.d.tree.configs.get(topic, {}))
        ReplicaManager._refresh_min_isr(self, lambda tp: topic is None or tp.topic == topic)

    # ------------------------------------------------------------------ controller requests

    def _check_controller(self, controller_epoch: int, broker_epoch: int) -> None:
        """ReplicaManager._check_controller, as it is (KIP-380 fencing, the KIP-966
        registration handled)."""
        ReplicaManager._check_controller(self, controller_epoch, broker_epoch)

    @property
    def registration_clean(self) -> bool:
        """LogManager.registration_clean: what /brokers/ids/<id> says of this process's
        start - clean, or unclean and already handled by a controller."""
        return self.log_manager.registration_clean

    def leader_and_isr(self, req: LeaderAndIsrRequest) -> dict[TopicPartition, ErrorCode]:
        self._check_controller(req.controller_epoch, req.broker_epoch)
        results: dict[TopicPartition, ErrorCode] = {}
        todo = []
        for s in req.partition_states:
            answer = partition_state.admit_partition_state(
                self.broker_id, s.replicas, s.leader_epoch, s.partition_epoch,
                partition_state.held_epochs(self.partitions.get(s.tp)))
            if answer is not None:
                results[s.tp] = answer
                continue
            self._topic_config(s.topic)
            todo.append(s)
        refused: dict[TopicPartition, str] = {}
        some_dir_offline = any(not d.online for d in self.dirs)
        for s in todo:
            if s.tp in self.logs:
                continue
            if partition_state.missing_log(s.is_new, s.tp in self.offline_replicas,
                                           some_dir_offline) is partition_state.MissingLog.CREATE:
                # ReplicaManager._create_logs: LogManager.get_or_create_log places it and,
                # created while a dir is offline, supersedes the copy there
                failed = ReplicaManager._create_logs(self, [s.tp])
                if failed:
                    refused[s.tp] = failed[s.tp]
                    continue
                self._touched(s.tp)
                self.offline_replicas.pop(s.tp, None)  # re-created (replica_recreated)
            else:
                refused[s.tp] = self.offline_replicas.get(s.tp) or ",".join(
                    d.path for d in self.dirs if not d.online)
        self.failures.refuse_lost_replicas(
            refused, {s.tp: s.partition_epoch for s in todo})
        now = self.now()
        epoch_starts = []
        for s in todo:
            tp = s.tp
            if tp in refused:
                results[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            p = self.partitions.get(tp)
            if p is None:
                p = self.partitions[tp] = Partition(tp, self.broker_id)
            p.min_isr = self._min_isr(s.topic, len(s.replicas))
            if p.log is None:
                p.log = self.logs[tp]
            t = p.apply_leader_and_isr(s, now)
            if t.new_epoch:
                self.fetcher_manager.on_leader_and_isr(tp, s.leader_epoch)  # KIP-461
            if t.lead:
                self._stop_fetching(tp)
                if t.write_epoch_start:
                    epoch_starts.append((p, p.log, s.leader_epoch))
                if t.report_recovered:
                    self.alter.mark_recovered(p)
                if t.reset_followers:
                    self.world.on_become_leader(self, tp, s.leader_epoch)
            elif t.follow:
                self._stop_fetching(tp)
                if t.fetch:
                    f = self.fetcher_manager.track(tp, p)
                    self.fetching[tp] = SimFetch(f.partitions[tp], f)
            results[tp] = ErrorCode.NONE
        for p, log, epoch in epoch_starts:
            # replica_manager._assign_epochs, then the epoch_start_applies check
            start = log.log_end_offset
            log.epoch_cache.assign(epoch, start, defer=True)
            if partition_state.epoch_start_applies(p.is_leader, p.leader_epoch, epoch):
                p.leader_epoch_start_offset = start
            self.deferred_epoch_writes.append(
                (now + self.world.rng.choice(self.world.profile.get(
                    "deferred_ms", (0, 200, 1000, 3000))), log))
        return results

    def _stop_fetching(self, tp: TopicPartition) -> None:
        self.fetcher_manager.remove_partitions([tp])
        self.fetching.pop(tp, None)

    # what update_metadata's stray tasks call
    stop_replica = ReplicaManager.stop_replica
    _stop_replica = ReplicaManager._stop_replica

    def apply_stop_replica(self, req: StopReplicaRequest) -> dict[TopicPartition, ErrorCode]:
        """The real ReplicaManager._stop_replica (KIP-570's fence, the fetcher, a lost
        replica forgotten, the deletion on the log dir's executor, a topic's overrides with
        its last replica), run to its end now."""
        held = set(self.logs)
        results = run_now(self._stop_replica(req))
        self._deleted(held, [s.tp for s in req.partition_states])
        return dict(results)

    def update_metadata(self, req: UpdateMetadataRequest) -> None:
        """The real ReplicaManager.update_metadata (the metadata cache, the fetchers'
        endpoints, the stray rule), and the stray deletions it starts run to their end now."""
        held = set(self.logs)
        call_in_loop(ReplicaManager.update_metadata, self, req)
        if self._stray_deletions:  # one task a request (ReplicaManager.stop_replica)

            async def finish() -> None:
                for task in list(self._stray_deletions):
                    await task
            run_now(finish())
        self._deleted(held, [s.tp for s in req.partition_states])

    def _deleted(self, held: set[TopicPartition], tps) -> None:
        """After a request: the fetch states the real code removed leave the network's view,
        and each log it deleted is reported (the invariants re-read it)."""
        for tp in [tp for tp, f in self.fetching.items() if not f.live()]:
            del self.fetching[tp]
        for tp in tps:
            if tp in held and tp not in self.logs:
                self._touched(tp)
                self.world.on_replica_deleted(self, tp)

    @property
    def state_change(self):
        """ReplicaManager.stop_replica's lock: the simulation applies one request at a time."""
        return _NoLock()

    def replica_log_info(self, tps) -> dict[TopicPartition, ReplicaLogInfo]:
        """KIP-966 GetReplicaLogInfo through the real ReplicaManager.replica_log_info; the
        answer as the controller's recovery reads it (the servicer's translation)."""
        out = {}
        for tp in tps:
            error, last_epoch, _current, leo = ReplicaManager.replica_log_info(self, tp)
            out[tp] = ReplicaLogInfo(last_epoch, leo, error)
        return out

    # ------------------------------------------------------------------ produce

    def produce(self, tp: TopicPartition, value: bytes, acks: int, timeout_ms: int
                ) -> tuple[ErrorCode, int]:
        """_append; for acks=all the batch then waits in ``produces``. Returns (error, offset)."""
        if tp in self.offline_replicas:
            return ErrorCode.KAFKA_STORAGE_ERROR, -1
        p = self.partitions.get(tp)
        p = p if p is not None and p.log is not None else None
        refused = fencing.produce_error(p, tp in self.metadata.partitions, acks)
        if refused is not None:
            return refused, -1
        batch = rec.build_batch([rec.ProducerRecord(None, value)], now_ms=self.now())
        info = p.log.append_as_leader(batch, p.leader_epoch)
        self._touched(tp)
        p.maybe_advance_hw()
        if acks == -1:
            self.produces.append(PendingProduce(tp, p, p.leader_epoch, info.first_offset,
                                                value, self.now() + timeout_ms))
        return ErrorCode.NONE, info.first_offset

    def settle_produces(self) -> list[tuple[PendingProduce, ProduceWait]]:
        """_await_replication for every waiting batch: the finished ones, with their state."""
        done, waiting = [], []
        for w in self.produces:
            p = w.partition
            current = p if self.partitions.get(w.tp) is p else None
            state = delayed_produce.produce_wait(
                current, w.epoch, w.offset + 1,
                lambda o, p=p: p.log.epoch_cache.epoch_for_offset(o),
                (w.deadline - self.now()) / 1000)
            (waiting if state is ProduceWait.WAIT else done).append((w, state))
        self.produces = [w for w, _ in waiting]
        return done

    # ------------------------------------------------------------------ leader fetch path

    def serve_fetch(self, req: pb.FetchRequest) -> pb.FetchResponse:
        """A follower's Fetch, as the fetcher built it: each partition read as below; no
        fetch session (session id 0: the fetcher sends every partition each time)."""
        out = pb.FetchResponse()
        for t in req.topics:
            tr = out.responses.add(topic=t.topic)
            for fp in t.partitions:
                a = self._serve_partition(
                    req.replica_state.broker_id, req.replica_state.broker_epoch,
                    FetchRequest(TopicPartition(t.topic, fp.partition), fp.fetch_offset,
                                 fp.current_leader_epoch,
                                 fp.last_fetched_epoch if fp.HasField("last_fetched_epoch")
                                 else None, fp.log_start_offset), fp.partition_max_bytes)
                r = tr.partitions.add(partition=fp.partition, error_code=a.error,
                                      high_watermark=a.high_watermark,
                                      log_start_offset=a.log_start_offset, records=a.records)
                if a.diverging is not None:
                    r.diverging_epoch.epoch, r.diverging_epoch.end_offset = a.diverging
        return out

    def _serve_partition(self, replica_id: int, broker_epoch: int, fp: FetchRequest,
                         max_bytes: int) -> FetchAnswer:
        """One partition of a follower's fetch: the real ReplicaManager._prepare_read (lost
        replica, leader and KIP-320 epoch checks, the follower's membership, divergence, the
        follower's fetch state with its ISR expansion and the HW), the log read
        ``_read_logs`` does on the read pool (here at once: one partition, no KIP-501 serve
        time), and the real _read_result."""
        r = ReplicaManager._prepare_read(
            self, replica_id, broker_epoch, 0,
            FetchPartitionRequest(fp.tp, fp.fetch_offset, max_bytes, fp.current_leader_epoch,
                                  fp.last_fetched_epoch, fp.log_start_offset))
        if isinstance(r, _LogRead):
            try:
                r.data = r.log.read(r.fetch_offset, r.max_bytes, r.upper, True)
            except (OffsetOutOfRangeError, KafkaStorageError, LogClosedError) as e:
                r.error = e
            r = ReplicaManager._read_result(self, r)
        return FetchAnswer(r.error, r.high_watermark, r.log_start_offset, r.records,
                           r.diverging)

    # what _prepare_read and _read_result read of the replica manager
    def clock(self) -> int:
        return self.now()

    @property
    def alter_partition(self) -> AlterPartitionManager:
        return self.alter

    def _lost_message(self, tp: TopicPartition) -> str:
        return ReplicaManager._lost_message(self, tp)

    # ------------------------------------------------------------------ follower (fetcher)

    def fetch_request(self, s: SimFetch) -> pb.FetchRequest:
        """The real fetcher's request for this one partition (ReplicaFetcher.build_request)."""
        return s.fetcher.build_request({s.partition.tp: s.state})

    def process_fetch(self, s: SimFetch, answer: pb.FetchResponse) -> None:
        """The real fetcher's answer handling (ReplicaFetcher.handle_response: _process, and
        _truncate or _reset_offset), run to its end now: the log dir's executor is inline
        and the ListOffsets stub answers at once (seams.run_now)."""
        tp = s.partition.tp
        log = s.partition.log
        if not s.live():
            return
        if s.fetcher.still_following(tp, s.state, log) and any(
                r.error_code == ErrorCode.NONE and not r.HasField("diverging_epoch")
                for t in answer.responses for r in t.partitions):
            s.synced = True
        before = (log.log_end_offset, log.log_start_offset, log.latest_epoch)
        run_now(s.fetcher.handle_response(answer, {tp: s.state}))
        if (log.log_end_offset, log.log_start_offset, log.latest_epoch) != before or any(
                r.HasField("diverging_epoch") for t in answer.responses for r in t.partitions):
            self._touched(tp)
        if not s.live() and self.fetching.get(tp) is s:
            self.fetching.pop(tp)  # KIP-461: failed (the manager's failed set has it)

    # ------------------------------------------------------------------ background

    def maybe_shrink_isr(self) -> None:
        """The real ReplicaBackground.maybe_shrink_isr (the isr-expiration task's round)."""
        self.background.maybe_shrink_isr()

    def write_due_epochs(self) -> None:
        due = [e for e in self.deferred_epoch_writes if e[0] <= self.now()]
        self.deferred_epoch_writes = [e for e in self.deferred_epoch_writes if e[0] > self.now()]
        for _, log in due:
            log.write_deferred_epochs()

    def take_alter_batch(self) -> dict[TopicPartition, Proposal]:
        """AlterPartitionManager._run's batch: the queued proposals that are not stale."""
        batch = {tp: item for tp, item in sorted(self.alter._queue.items())
                 if not self.alter._drop_if_stale(item)}
        self.alter._queue = {}
        return batch

    def requeue_alter_batch(self, batch: dict[TopicPartition, Proposal]) -> None:
        for tp, item in batch.items():
            self.alter._queue.setdefault(tp, item)

    def apply_alter_answers(self, batch: dict[TopicPartition, Proposal], answers) -> None:
        for a in answers:
            item = batch.get(a.tp)
            if item is not None:
                self.alter._apply(item, SimpleNamespace(
                    error_code=a.error_code, leader_id=a.leader, leader_epoch=a.leader_epoch,
                    isr=a.isr, partition_epoch=a.partition_epoch,
                    leader_recovery_state=a.leader_recovery_state, elr=a.elr))
