"""The broker's logs across its log dirs (``log.dirs``, JBOD): Kafka's LogManager.

- On startup each log dir is checked (``meta.properties``), its checkpoints are read and its
  partition dirs are loaded; a dir without the clean-shutdown marker has its logs recovered from
  their recovery points. A dir that fails to load goes offline instead of stopping the broker
  (design.md#jbod / KIP-112); only when no dir is left does startup fail.
- A new partition goes to the online dir holding the fewest partitions (Kafka's placement).
- Each log dir has one single-thread executor for appends, truncation and fsync: it keeps the
  write order of a partition and confines a stalled or failing disk to its own thread, off the
  event loop.
- Checkpoints (recovery point, replication offset = HW, log start offset) are written per dir,
  atomically.
- The clean-shutdown marker also carries KIP-966's registration flag across restarts: an
  incarnation that started after an unclean shutdown writes, at its clean shutdown, a marker
  that still registers unclean unless a controller handled its registration
  (``registration_handled``; tests/storage/test_clean_shutdown_registration.py::
  test_an_unhandled_unclean_start_still_registers_unclean_after_a_clean_shutdown).

- Every storage I/O error raised by a log dir's work (``run``/``submit``/``run_in_dir``), by log
  creation or by loading the dir at startup is reported, naming the dir, to the
  ``failure_channel`` (Kafka's LogDirFailureChannel, log_dir_failure_channel.py). The code that
  hit the error still gets it; the channel's consumer decides what the dir's failure means.

- JBOD (design.md#jbod): the channel's consumer (the replica manager's ExceptionHandler) probes
  the dir (``probe``) and takes either the dir offline (``mark_offline``) or one log
  (``take_log_offline``). An offline dir stays offline: its pending executor work fails at
  once (LogDirOfflineError), nothing new runs or is created there, the flush, retention and
  checkpoint jobs skip it, and its logs are forgotten, so no other dir's checkpoint lists them.
- A log created while a copy of it may exist elsewhere (some dir offline, or its log failed in
  a dir) carries a placement record naming the dirs it supersedes; at startup two copies of one
  partition are resolved by it (placement.py): the stale copy is deleted, never loaded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import os
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor

from broker.storage import meta, placement
from broker.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    MalformedCheckpointError,
    OffsetCheckpointFile,
)
from broker.storage.errors import (
    KafkaStorageError,
    LogDeletionError,
    LogDirError,
    LogDirOfflineError,
    LogLoadError,
)
from broker.storage.failure_scope import PROBE_TIMEOUT_S, ProbeResult, probe_log_dir
from broker.storage.fileops import FileOps
from broker.storage.log import Log, LogConfig
from broker.storage.log_cleaner import CleanerConfig, LogCleaner
from broker.storage.log_dir_failure_channel import LogDirFailureChannel
from common.clock import wall_ms
from common.names import TopicPartition, validate_topic

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_log = logging.getLogger(__name__)
# The marker's content when the next registration must still say unclean (an empty marker,
# as every marker before this rule, registers clean).
UNHANDLED_UNCLEAN_START = b'{"version":1,"unclean_start_unhandled":true}\n'
_STRAY_SUFFIX = "-stray"
_IGNORED_DIR_SUFFIXES = ("-delete", "-future", _STRAY_SUFFIX)
_DISCARDED_DIR_SUFFIXES = ("-delete",)
_FUTURE_SUFFIX = "-future"


class LogDir:
    """One entry of ``log.dirs`` and what the manager knows about it."""

    def __init__(self, path: str, index: int, fileops: FileOps, executor: Executor | None = None):
        self.path = os.path.abspath(path)
        self.index = index
        self.online = True
        self.error: str | None = None
        self.directory_id: str | None = None
        self.had_clean_shutdown = False  # the marker was there: the logs need no recovery
        self.load_problems: list[str] = []  # what loading found unreadable and reset
        self.unclean_start_unhandled = False  # ... but it registers unclean (KIP-966)
        self.executor = executor or ThreadPoolExecutor(max_workers=1,
                                                       thread_name_prefix=f"log-dir-{index}")
        # Storage calls waiting for the executor, drained in order by one job at a time: under
        # concurrent produce load many appends share one thread hand-off and one wake-up of the
        # event loop (group commit), instead of paying ~100 us each.
        self.pending: list[tuple[Callable, tuple, asyncio.Future]] = []
        self.draining = False
        self.lock = threading.Lock()
        self.checkpoint_lock = threading.Lock()
        self.checkpoints = {name: OffsetCheckpointFile(self.path, name, fileops)
                            for name in (RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                                         LOG_START_OFFSET_CHECKPOINT)}

    def __repr__(self) -> str:
        return f"LogDir({self.path}, {'online' if self.online else 'offline'})"


class LogManager:
    def __init__(self, log_dirs: list[str], broker_id: int, config: LogConfig | None = None, *,
                 cluster_id: str | None = None, fileops: FileOps | None = None,
                 clock: Callable[[], int] = wall_ms,
                 failure_channel: LogDirFailureChannel | None = None,
                 lost_replicas: dict[str, set[TopicPartition]] | None = None,
                 executor_factory: Callable[[int], Executor] | None = None,
                 new_id: Callable[[], str] | None = None,
                 cleaner_config: CleanerConfig | None = None, events=None):
        """``lost_replicas``: log dir -> the copies this broker lost there (ZooKeeper's
        /brokers/lost_replicas/<id>, read before startup): set aside, never loaded.
        ``cleaner_config``: run the log cleaner (design.md#compaction) from ``startup`` on,
        if it is enabled; ``events`` gets its rounds' summaries.

        Seams for the cluster simulation, which runs this class over its in-memory disk
        (docs/simulation.md): ``executor_factory(index)`` makes a log dir's executor (none:
        one thread per dir), ``new_id()`` the unique suffixes of set-aside and deleted
        copies and the directory.id of a new dir (none: random UUIDs)."""
        if not log_dirs:
            raise ValueError("log.dirs must name at least one directory")
        if len({os.path.abspath(d) for d in log_dirs}) != len(log_dirs):
            raise ValueError(f"log.dirs lists a directory twice: {','.join(log_dirs)}")
        self.fileops = fileops or FileOps()
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.config = config or LogConfig()
        # A topic's log config: the broker's under the topic's overrides; the replica manager
        # installs its resolver (it holds the topic configs read from ZooKeeper).
        self.config_for: Callable[[str], LogConfig] = lambda _topic: self.config
        self.clock = clock
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self.dirs = [LogDir(d, i, self.fileops,
                            executor_factory(i) if executor_factory is not None else None)
                     for i, d in enumerate(log_dirs)]
        self._new_id = new_id or (lambda: uuid.uuid4().hex)
        self._new_directory_id = new_id or meta.new_directory_id
        self.unclean_start_handled = False  # registration_handled
        # Called once when a controller first handles this incarnation's unclean registration
        # (the server rewrites /brokers/ids/<id> to say clean then: registration_clean).
        self.on_unclean_start_handled: Callable[[], None] | None = None
        self.logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, LogDir] = {}
        # Logs are created on the default executor, deleted on a log dir's thread, taken
        # offline on the event loop, and listed by checkpoint/retention jobs on log dir
        # threads: every change to ``logs``/``_dir_of`` and every iteration over them holds
        # this lock (iterations copy under it). Without it a checkpoint iterating while a
        # LeaderAndIsr created a log raised "dictionary changed size during iteration" and
        # checkpointing stopped for good.
        self._lock = threading.Lock()
        # Dirs where a partition's log failed alone (design.md#jbod-step-3): its re-creation avoids
        # them and supersedes the copy left there.
        self._failed_in: dict[TopicPartition, set[str]] = {}
        self._placements: dict[TopicPartition, placement.Placement | None] = {}
        # KIP-113: AlterReplicaLogDirs for a replica not created yet names the dir it is to be
        # created in (Kafka's preferredLogDirs).
        self.preferred_dirs: dict[TopicPartition, str] = {}
        # What startup resolved: (partition, dir of the stale copy deleted, dir kept).
        self.stale_copies_deleted: list[tuple[TopicPartition, str, str]] = []
        self.lost_replicas = {os.path.abspath(d): set(tps)
                              for d, tps in (lost_replicas or {}).items()}
        # Copies startup set aside as lost (partition, dir): see _set_aside_lost_copy.
        self.set_aside: list[tuple[TopicPartition, str]] = []
        # KIP-113: future replicas found at startup, a move cut short by a restart, until the
        # replica manager resumes them (Kafka's futureLogs): partition -> (log, its dir).
        self.future_logs: dict[TopicPartition, tuple[Log, LogDir]] = {}
        self._futures_found: list[tuple[LogDir, str]] = []
        # (partition, dir) of each ``<tp>.<id>-stray`` copy found at startup (_note_stray).
        self._strays_found: list[tuple[TopicPartition, str]] = []
        # Kafka's LogManager owns the LogCleaner: started with the logs, stopped first.
        self.cleaner_config = cleaner_config
        self.cleaner: LogCleaner | None = None
        self._events = events

    # ------------------------------------------------------------------ startup

    def startup(self) -> None:
        """Load every log dir; a failing dir goes offline, all failing raises LogDirError."""
        for d in self.dirs:
            try:
                self._load_dir(d)
            except KafkaStorageError as e:
                self.report_failure(d, e)
                self._take_offline(d, str(e))
        for d, full in self._futures_found:
            if d.online:
                self._load_future(d, full)
        self._futures_found.clear()
        # A -stray copy of a partition no dir holds a log of is a replica lost here that no
        # LeaderAndIsr has re-created since (only losses make strays: _set_aside_lost_copy,
        # take_log_offline). It stays lost across any number of restarts: the record of the
        # loss (/brokers/lost_replicas) is forgotten once a start has read the dirs, and a
        # second restart before the controller handled the restart entry left nothing saying
        # so - the controller's LeaderAndIsr (not is_new: the broker still leads it) would
        # create an empty log and the broker lead it cleanly without its committed records
        # (tests/broker/test_lost_replica_second_restart.py::
        # test_a_copy_set_aside_as_lost_still_counts_as_lost_at_the_next_start). A re-created
        # replica has a log, so its old strays no longer count.
        for tp, path in dict.fromkeys(self._strays_found):
            if tp not in self.logs and (tp, path) not in self.set_aside:
                self.set_aside.append((tp, path))
        self._strays_found.clear()
        if not self.online_dirs:
            raise LogDirError(",".join(d.path for d in self.dirs),
                              detail="no log dir could be loaded: " +
                              "; ".join(f"{d.path}: {d.error}" for d in self.dirs))
        if self.cleaner_config is not None and self.cleaner_config.enable:
            self.cleaner = LogCleaner(self.cleaner_config, self, [d.path for d in self.dirs],
                                      self.fileops, self.clock, self._report_path_failure,
                                      events=self._events)
            self.cleaner.startup()

    # ------------------------------------------------------------------ the log cleaner's view

    def cleaner_logs(self) -> list[tuple[TopicPartition, Log, str]]:
        """(partition, log, dir) of every log in an online dir (log_cleaner_manager.py)."""
        with self._lock:
            return [(tp, self.logs[tp], d.path) for tp, d in self._dir_of.items()
                    if d.online and tp in self.logs]

    def call_in_dir(self, log_dir: str, fn: Callable, *args) -> concurrent.futures.Future:
        """``run_in_dir`` for a thread outside the event loop (a cleaner's swap): queued
        with the dir's other storage calls, run in order on its executor."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        d = self.dir_by_path(log_dir)
        if d is None or not d.online:
            fut.set_exception(LogDirOfflineError(log_dir, detail="the log dir is offline"))
            return fut
        with d.lock:
            d.pending.append((fn, args, fut))
            start = not d.draining
            d.draining = True
        if start:
            d.executor.submit(self._drain, d, None)
        return fut

    def _report_path_failure(self, log_dir: str, error: BaseException) -> None:
        d = self.dir_by_path(log_dir)
        if d is not None:
            self.report_failure(d, error)

    def _load_dir(self, d: LogDir) -> None:
        fo = self.fileops
        try:
            fo.mkdir(d.path)
        except OSError as e:
            raise LogDirError(d.path, cause=e) from e
        props = meta.load_or_create(d.path, self.broker_id, self.cluster_id, fo,
                                    new_id=self._new_directory_id, clock_ms=self.clock)
        d.directory_id = props.get("directory.id")
        marker = os.path.join(d.path, CLEAN_SHUTDOWN_FILE)
        try:
            d.had_clean_shutdown = fo.exists(marker)
            d.unclean_start_unhandled = d.had_clean_shutdown and fo.read_file(marker) != b""
        except OSError as e:
            raise LogDirError(d.path, cause=e) from e
        # Kafka's LogManager.loadLogs: an unreadable recovery point checkpoint is reset (every
        # log is recovered from its first segment), an unreadable log start checkpoint too (each
        # log starts at its first segment's base). The HW checkpoint is not: an unreadable one
        # takes the dir offline (Kafka's KafkaStorageException), naming the file.
        recovery_points = self._read_or_reset(d, RECOVERY_POINT_CHECKPOINT,
                                              "recovering every log from its first segment")
        hws = d.checkpoints[REPLICATION_OFFSET_CHECKPOINT].read()
        starts = self._read_or_reset(d, LOG_START_OFFSET_CHECKPOINT,
                                     "each log starts at its first segment")
        try:
            names = sorted(fo.listdir(d.path))
        except OSError as e:
            raise LogDirError(d.path, cause=e) from e
        for name in names:
            full = os.path.join(d.path, name)
            if fo.isdir(full) and name.endswith(_FUTURE_SUFFIX):
                self._futures_found.append((d, full))  # once every current replica is loaded
                continue
            if fo.isdir(full) and name.endswith(_DISCARDED_DIR_SUFFIXES):
                # KIP-113: a swapped-out copy is gone.
                try:
                    fo.rmtree(full)
                except OSError as e:
                    raise LogDirError(d.path, cause=e) from e
                continue
            if fo.isdir(full) and name.endswith(_STRAY_SUFFIX):
                self._note_stray(d, name)
                continue
            if not fo.isdir(full) or name.endswith(_IGNORED_DIR_SUFFIXES):
                continue
            try:
                tp = TopicPartition.parse(name)
            except ValueError:
                continue  # not a partition dir
            if tp in self.lost_replicas.get(d.path, ()):
                self._set_aside_lost_copy(d, tp, full)
                continue
            try:
                record = placement.read(full, fo)
            except OSError as e:
                raise LogLoadError(d.path, str(tp), e) from e
            if tp in self.logs and not self._resolve_duplicate(tp, d, full, record):
                continue  # the copy here is the stale one, and is gone
            log = Log.open(d.path, tp, self.config_for(tp.topic), fileops=fo, clock=self.clock,
                           recovery_point=recovery_points.get(tp, 0),
                           log_start_offset=starts.get(tp, 0), high_watermark=hws.get(tp, 0),
                           needs_recovery=not d.had_clean_shutdown)
            self._adopt(tp, log, d, record)
        # The marker is removed only once the dir is loaded: a crash from here on means
        # "not clean" at the next start (Kafka does the same).
        if d.had_clean_shutdown:
            try:
                fo.unlink(marker)
                fo.fsync_dir(d.path)
            except OSError as e:
                raise LogDirError(d.path, cause=e) from e

    def _note_stray(self, d: LogDir, name: str) -> None:
        try:
            tp = TopicPartition.parse(name[:-len(_STRAY_SUFFIX)].rsplit(".", 1)[0])
        except ValueError:
            return  # not a partition's copy
        self._strays_found.append((tp, d.path))

    @staticmethod
    def _read_or_reset(d: LogDir, name: str, consequence: str) -> dict[TopicPartition, int]:
        try:
            return d.checkpoints[name].read()
        except MalformedCheckpointError as e:
            d.load_problems.append(f"{e}; {consequence}")
            _log.warning("%s; %s", e, consequence)
            return {}

    def _load_future(self, d: LogDir, full: str) -> None:
        """A ``<tp>.<id>-future`` dir: a move into ``d`` cut short by a restart. It is opened
        and kept for the replica manager to resume (Kafka's LogManager loads future logs and
        ReplicaManager re-adds their alter-log-dirs fetchers), recovered like an unclean log
        (it is never in the checkpoints). It is deleted instead when there is nothing to
        resume: no current replica, one already in ``d``, a second future replica, or files
        that do not open - the current replica is untouched either way."""
        name = os.path.basename(full)
        try:
            tp = TopicPartition.parse(name[:-len(_FUTURE_SUFFIX)].rsplit(".", 1)[0])
        except ValueError:
            tp = None
        current = self.logs.get(tp) if tp is not None else None
        future = None
        if current is not None and self._dir_of[tp] is not d and tp not in self.future_logs:
            try:
                future = Log.open(d.path, tp, self.config_for(tp.topic), fileops=self.fileops,
                                  clock=self.clock, log_start_offset=current.log_start_offset,
                                  needs_recovery=True, partition_dir=full)
            except (KafkaStorageError, OSError, ValueError):
                future = None  # a broken future replica: the move starts over if asked
        if future is not None:
            self.future_logs[tp] = (future, d)
            return
        try:
            self.fileops.rmtree(full)
        except OSError as e:
            self.report_failure(d, LogDirError(d.path, cause=e))
            self._take_offline(d, str(e))

    def _set_aside_lost_copy(self, d: LogDir, tp: TopicPartition, full: str) -> None:
        """A copy this broker reported lost (its dir or log failed, design.md#jbod) and that is
        readable again after a restart. It predates the failure: the controller has since
        re-created the replica (is_new, in another dir) or will, and that newer copy may be
        in a dir that is broken now - so placement (which needs both copies) cannot decide,
        and loading this one would serve records the partition has moved past; if this broker
        were its last ISR or ELR member it would even be elected cleanly with them. It is
        moved aside like a log taken offline (``-stray``, kept for an operator), and the
        replica manager counts the replica lost until a LeaderAndIsr re-creates it."""
        try:
            self.fileops.replace(full, f"{full}.{self._new_id()}-stray")
        except OSError as e:
            raise LogDirError(d.path, str(tp), cause=e) from e
        self.set_aside.append((tp, d.path))

    def _resolve_duplicate(self, tp: TopicPartition, d: LogDir, full: str,
                           record: placement.Placement | None) -> bool:
        """Two copies of ``tp``: the one loaded from another dir and the one in ``d``. Delete
        the stale one (placement.newer_copy); True when the copy in ``d`` is to be loaded."""
        kept = self._dir_of[tp]
        winner = placement.newer_copy(placement.Copy(kept.path, self._placements.get(tp)),
                                      placement.Copy(d.path, record))
        if winner is placement.Winner.UNDECIDED:
            raise LogDirError(d.path, str(tp), detail=f"duplicate log directories for {tp}: "
                              f"{kept.path} and {d.path}, neither with a placement record "
                              f"that supersedes the other")
        if winner is placement.Winner.EXISTING:
            self._delete_stale_copy(d, full)
            self.stale_copies_deleted.append((tp, d.path, kept.path))
            return False
        with self._lock:
            old = self.logs.pop(tp)
            self._dir_of.pop(tp)
        old._close_fds()
        old.closed = True
        self._delete_stale_copy(kept, old.dir)
        self.stale_copies_deleted.append((tp, kept.path, d.path))
        return True

    def _delete_stale_copy(self, d: LogDir, partition_dir: str) -> None:
        """Rename the copy out of the way first (a crash leaves a ``-delete`` dir that loading
        ignores, never a half-deleted partition), then remove it. A failure is reported for
        ``d`` (not for the dir being loaded); the stale copy is not loaded either way, and the
        next start resolves what is left of it again."""
        doomed = f"{partition_dir}.{self._new_id()}-delete"
        try:
            self.fileops.replace(partition_dir, doomed)
            self.fileops.fsync_dir(d.path)
            self.fileops.rmtree(doomed)
        except OSError as e:
            self.report_failure(d, LogDeletionError(d.path, os.path.basename(partition_dir), e))

    @property
    def online_dirs(self) -> list[LogDir]:
        return [d for d in self.dirs if d.online]

    @property
    def offline_dirs(self) -> list[LogDir]:
        return [d for d in self.dirs if not d.online]

    @property
    def had_clean_shutdown(self) -> bool:
        """What KIP-966 registers: every online dir was shut down cleanly, and no earlier
        unclean shutdown is still waiting for a controller to handle it (``shutdown``)."""
        return all(d.had_clean_shutdown and not d.unclean_start_unhandled
                   for d in self.online_dirs)

    def registration_handled(self) -> None:
        """A controller request carrying this incarnation's broker epoch was accepted
        (ReplicaManager._check_controller). The controller sends one only once it has added
        the registration to its live brokers, and that step (onBrokerStartup, or its
        failover) first writes a broker that registered unclean out of every ISR and ELR
        (controller/decisions/brokers.py remove_unclean_replicas, Kafka's
        handleBrokerUncleanShutdown) before any request goes out. From then on the records
        this broker lost at its unclean shutdown are nobody's committed records: it rejoins
        an ISR only by catching up with a leader."""
        if self.unclean_start_handled:
            return
        self.unclean_start_handled = True
        if not self.had_clean_shutdown and self.on_unclean_start_handled is not None:
            self.on_unclean_start_handled()

    @property
    def registration_clean(self) -> bool:
        """What /brokers/ids/<id> says of this incarnation's start: clean, or unclean and
        already handled by a controller. A controller failover re-applies KIP-966's removal to
        every broker whose registration says unclean (ZooKeeper keeps no record that it was
        handled); once handled, the broker rewrites its registration, so a failover does not
        depose it again from partitions it has caught up with since."""
        return self.had_clean_shutdown or self.unclean_start_handled

    # ------------------------------------------------------------------ logs

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    def logs_of_topic(self, topic: str) -> list[tuple[TopicPartition, Log]]:
        """The topic's current logs and future logs (a KIP-113 move in progress)."""
        out = [(tp, log) for tp, log in self.logs.items() if tp.topic == topic]
        return out + [(tp, f[0]) for tp, f in self.future_logs.items() if tp.topic == topic]

    def log_dir_of(self, tp: TopicPartition) -> LogDir | None:
        return self._dir_of.get(tp)

    def dir_by_path(self, path: str) -> LogDir | None:
        path = os.path.abspath(path)
        return next((d for d in self.dirs if d.path == path), None)

    def partitions_in(self, d: LogDir) -> list[TopicPartition]:
        with self._lock:
            items = list(self._dir_of.items())
        return sorted(tp for tp, ld in items if ld is d)

    def next_log_dir(self, avoid: frozenset[str] = frozenset()) -> LogDir:
        """The online dir with the fewest partitions; ties go to the earlier one in log.dirs.
        Dirs in ``avoid`` (where the partition's log failed) only when no other is online."""
        online = [d for d in self.online_dirs if d.path not in avoid] or self.online_dirs
        if not online:
            raise LogDirOfflineError(",".join(d.path for d in self.dirs),
                                     detail="no online log dir is left")
        counts = {d.path: 0 for d in online}
        with self._lock:
            placed = list(self._dir_of.values())
        for ld in placed:
            if ld.path in counts:
                counts[ld.path] += 1
        return min(online, key=lambda d: (counts[d.path], d.index))

    def get_or_create_log(self, tp: TopicPartition, log_dir: str | None = None,
                          broker_epoch: int = -1) -> Log:
        """The log of ``tp``, created if absent: in ``log_dir``, or the online dir with the
        fewest partitions (never an offline one, design.md#jbod-step-2-1). Created while a copy may
        exist elsewhere, it gets a placement record superseding those dirs (placement.py)."""
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        validate_topic(tp.topic)
        failed_in = frozenset(self._failed_in.get(tp, ()))
        if log_dir is not None:
            d = self.dir_by_path(log_dir)
            if d is None:
                raise LogDirError(log_dir, str(tp), detail="not one of this broker's log.dirs")
            if not d.online:
                raise LogDirOfflineError(d.path, str(tp), detail="the log dir is offline")
        else:
            wanted = self.preferred_dirs.pop(tp, None)
            preferred = self.dir_by_path(wanted) if wanted else None
            d = preferred if preferred is not None and preferred.online and \
                preferred.path not in failed_in else self.next_log_dir(avoid=failed_in)
        supersedes = tuple(sorted({o.path for o in self.offline_dirs} | failed_in))
        record = placement.Placement(supersedes, broker_epoch, self.clock()) \
            if supersedes else None
        try:
            log = Log.open(d.path, tp, self.config_for(tp.topic), fileops=self.fileops, clock=self.clock,  # noqa: E501
                           needs_recovery=False)
            if record is not None:
                try:
                    placement.write(log.dir, record, self.fileops)
                except OSError as e:
                    log._close_fds()
                    raise LogLoadError(d.path, str(tp), e) from e
        except KafkaStorageError as e:
            self.report_failure(d, e)
            raise
        self._adopt(tp, log, d, record)
        for path in self._failed_in.pop(tp, ()):
            self.failure_channel.forget(path, str(tp))
        return log

    def reload_log(self, tp: TopicPartition) -> Log:
        """Re-open a failed log from its files, with recovery from its recovery point (run on
        its dir's executor). A log that failed a write refuses writes until this rebuilds
        its in-memory state from what is on disk."""
        old = self.logs[tp]
        d = self._dir_of[tp]
        old._close_fds()
        old.closed = True
        log = Log.open(d.path, tp, self.config_for(tp.topic), fileops=self.fileops, clock=self.clock,  # noqa: E501
                       recovery_point=old.recovery_point, log_start_offset=old.log_start_offset,
                       high_watermark=old.high_watermark, needs_recovery=True)
        log.on_truncation = functools.partial(self._checkpoint_after_truncation, tp)
        with self._lock:
            if self.logs.get(tp) is old:
                self.logs[tp] = log
        return log

    def replace_current_with_future(self, tp: TopicPartition, log: Log, d: LogDir,
                                    record: placement.Placement | None) -> None:
        """KIP-113's swap (Kafka's replaceCurrentWithFutureLog): ``log``, the future replica
        renamed and reopened in ``d`` with placement ``record``, is now ``tp``'s log
        (alter_log_dirs.py)."""
        old = self._dir_of.get(tp)
        self._adopt(tp, log, d, record)
        if self.cleaner is not None and old is not None and old is not d:
            self.cleaner.alter_checkpoint_dir(tp, old.path, d.path)

    def _adopt(self, tp: TopicPartition, log: Log, d: LogDir,
               record: placement.Placement | None) -> None:
        """``log`` in ``d`` is now ``tp``'s replica."""
        log.on_truncation = functools.partial(self._checkpoint_after_truncation, tp)
        with self._lock:
            self.logs[tp] = log
            self._dir_of[tp] = d
            self._placements[tp] = record

    def _checkpoint_after_truncation(self, tp: TopicPartition) -> None:
        """Kafka's LogManager.truncateTo: once a truncation has lowered a log's recovery
        point, its dir's checkpoint follows at once, not at the next periodic job: recovery
        rebuilds leader epochs only past the checkpointed point, and one deferred below it
        would be lost in a crash (see ``Log.on_truncation``). Runs on the
        thread that truncated; raises CheckpointIOError, which that caller reports."""
        d = self._dir_of.get(tp)
        if d is not None and d.online:
            self.checkpoint(d)
            log = self.logs.get(tp)
            if self.cleaner is not None and log is not None:
                # Kafka's LogManager.truncateTo: the cleaner's checkpoint never stays above
                # the log end offset, or records appended there again would count as clean
                self.cleaner.maybe_truncate_checkpoint(d.path, tp, log.log_end_offset)

    def delete_log(self, tp: TopicPartition) -> None:
        with self._lock:
            log = self.logs.pop(tp, None)
            d = self._dir_of.pop(tp, None)
        if log is not None:
            if self.cleaner is not None:
                # Kafka's LogManager.deleteLog: no round may write into the dir being removed
                # (the cleaner stops between reads, or calls off its queued swap)
                self.cleaner.abort_cleaning(tp)
            log.delete()
            if self.cleaner is not None and d is not None:
                self.cleaner.update_checkpoints(d.path, remove=tp)

    # ------------------------------------------------------------------ executors

    def executor_for(self, tp: TopicPartition) -> ThreadPoolExecutor:
        d = self._dir_of.get(tp)
        if d is None:
            raise KeyError(f"no log for {tp}")
        return d.executor

    async def run(self, tp: TopicPartition, fn: Callable, *args):
        """Run ``fn(*args)`` on the executor of ``tp``'s log dir (appends, truncation,
        flush): storage I/O never runs on the event loop, and calls for one dir run in the
        order they were made."""
        return await self.submit(tp, fn, *args)

    def submit(self, tp: TopicPartition, fn: Callable, *args) -> asyncio.Future:
        """``run`` without the coroutine: the call is queued when this returns, so a caller
        queuing several (a fetcher's appends for every partition of one response) has them
        drained in one executor hand-off."""
        d = self._dir_of.get(tp)
        if d is None:
            raise KeyError(f"no log for {tp}")
        if not d.online:
            raise LogDirOfflineError(d.path, str(tp), detail="the log dir is offline")
        return self.run_in_dir(d, fn, *args)

    def run_in_dir(self, d: LogDir, fn: Callable, *args) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if not d.online:  # design.md#jbod-step-2-1: nothing more runs on an offline dir
            fut.set_exception(LogDirOfflineError(d.path, detail="the log dir is offline"))
            return fut
        with d.lock:
            d.pending.append((fn, args, fut))
            start = not d.draining
            d.draining = True
        if start:
            d.executor.submit(self._drain, d, loop)
        return fut

    def report_failure(self, d: LogDir, error: BaseException) -> None:
        """Hand a storage I/O error of ``d`` to the failure channel (any thread). A refusal
        because the dir is already offline is no new failure."""
        if isinstance(error, (KafkaStorageError, OSError)) and \
                not isinstance(error, LogDirOfflineError):
            self.failure_channel.maybe_add_offline_log_dir(d.path, str(error), error)

    def _drain(self, d: LogDir, loop: asyncio.AbstractEventLoop | None) -> None:
        """Executor thread: run every queued call in order, settle them in one loop wake-up;
        every I/O error goes to the failure channel as well as to its caller."""
        while True:
            with d.lock:
                batch, d.pending = d.pending, []
                if not batch:
                    d.draining = False
                    return
            done = []
            for fn, args, fut in batch:
                if not d.online:  # taken offline meanwhile: fail fast, touch nothing
                    done.append((fut, None, LogDirOfflineError(d.path,
                                                               detail="the log dir is offline")))
                    continue
                try:
                    done.append((fut, fn(*args), None))
                except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
                    self.report_failure(d, e)
                    done.append((fut, None, e))
            _settle_from_thread(done, loop)

    async def append_as_leader(self, tp: TopicPartition, records, leader_epoch: int):
        log = self.logs[tp]
        return await self.run(tp, log.append_as_leader, records, leader_epoch)

    async def append_as_follower(self, tp: TopicPartition, records):
        log = self.logs[tp]
        return await self.run(tp, log.append_as_follower, records)

    # ------------------------------------------------------------------ maintenance

    def checkpoint(self, d: LogDir | None = None) -> None:
        """Write the recovery-point, replication-offset (HW) and log-start checkpoints."""
        for ld in ([d] if d else self.online_dirs):
            if not ld.online:
                continue  # went offline after this job was queued: nothing of it is written
            # One writer per dir: a truncation forwarded to a swapped-in log (KIP-113) runs
            # on the old dir's thread and checkpoints the new dir from there.
            with ld.checkpoint_lock:
                logs = self._logs_in(ld)
                ld.checkpoints[RECOVERY_POINT_CHECKPOINT].write(
                    {tp: log.recovery_point for tp, log in logs})
                ld.checkpoints[REPLICATION_OFFSET_CHECKPOINT].write(
                    {tp: log.high_watermark for tp, log in logs})
                ld.checkpoints[LOG_START_OFFSET_CHECKPOINT].write(
                    {tp: log.log_start_offset for tp, log in logs})

    def _logs_in(self, d: LogDir) -> list[tuple[TopicPartition, Log]]:
        """A snapshot of the logs of ``d``, taken under the lock."""
        with self._lock:
            return sorted(((tp, self.logs[tp]) for tp, ld in self._dir_of.items() if ld is d),
                          key=lambda e: e[0])

    def cleanup(self, d: LogDir | None = None) -> dict[TopicPartition, list[int]]:
        """Apply retention to the logs of ``d`` (every online dir if None); returns the deleted
        segments per partition. Run it on the dir's executor (``run_in_dir``)."""
        deleted = {}
        for ld in ([d] if d else self.online_dirs):
            for tp, log in self._logs_in(ld):
                if log.closed or not ld.online:
                    continue  # deleted or taken offline while this job ran
                log.delete_due_segments()
                gone = log.delete_old_segments()
                if gone:
                    deleted[tp] = gone
        return deleted

    def mark_offline(self, path: str, reason: str) -> list[TopicPartition]:
        """Take a log dir offline after an I/O error: its logs are closed (without flushing)
        and forgotten. Returns the partitions that were in it."""
        d = self.dir_by_path(path)
        if d is None or not d.online:
            return []
        return self._take_offline(d, reason)

    def _take_offline(self, d: LogDir, reason: str) -> list[TopicPartition]:
        d.online = False
        d.error = reason
        if self.cleaner is not None:
            self.cleaner.handle_log_dir_failure(d.path)
        self.failure_channel.mark_offline(d.path)
        with self._lock:
            lost = sorted(tp for tp, ld in self._dir_of.items() if ld is d)
            logs = [self.logs.pop(tp) for tp in lost]
            for tp in lost:
                self._dir_of.pop(tp)
                self._placements.pop(tp, None)
        for log in logs:
            log.closed = True
            log.failed = log.failed or reason
        # Work queued for the dir fails now, not when (if ever) a stalled disk lets its thread
        # reach it. The fds are closed on that thread, after the job it may be stuck in: an fd
        # closed under a running write could be reused by another file and written to.
        with d.lock:
            pending, d.pending = d.pending, []
        _fail_pending(pending, LogDirOfflineError(d.path, detail=f"the log dir went offline: "
                                                                f"{reason}"))
        try:
            d.executor.submit(_close_logs, logs)
        except RuntimeError:  # executor already shut down
            _close_logs(logs)
        return lost

    def take_log_offline(self, tp: TopicPartition, reason: str) -> str | None:
        """design.md#jbod-step-3: only ``tp``'s log failed, its dir is healthy. The log is forgotten
        and its files moved aside to ``<tp>.<id>-stray`` (kept for an operator, ignored by
        loading) so a re-created replica may use the name; returns its dir, None if gone."""
        with self._lock:
            log = self.logs.pop(tp, None)
            d = self._dir_of.pop(tp, None)
            self._placements.pop(tp, None)
        if log is None or d is None:
            return None
        self._failed_in.setdefault(tp, set()).add(d.path)
        log.closed = True
        log.failed = log.failed or reason

        def close_and_move_aside() -> None:
            _close_logs([log])
            try:
                self.fileops.replace(log.dir, f"{log.dir}.{self._new_id()}-stray")
            except OSError:
                pass  # the re-created replica goes to another dir and supersedes this one
        if d.online:
            try:
                d.executor.submit(close_and_move_aside)
            except RuntimeError:
                close_and_move_aside()
        return d.path

    async def probe(self, d: LogDir, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeResult:
        """design.md#jbod's disk availability check (failure_scope.probe_log_dir) on the dir's own
        thread, behind the work queued there; a probe slower than ``timeout_s`` fails."""
        if not d.online:
            return ProbeResult(False, detail="the log dir is offline")
        fut = self.run_in_dir(d, probe_log_dir, d.path, self.fileops)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            return ProbeResult(False, detail=f"the disk check took longer than {timeout_s} s",
                               timed_out=True)

    def shutdown(self) -> None:
        """Clean shutdown: close every log, write checkpoints, then the clean-shutdown marker
        (only for a dir whose every step succeeded). An incarnation that started unclean and
        whose registration no controller handled writes a marker that still registers
        unclean (design.md#kip-966): it may have lost records an ISR or ELR still counts on it
        for, and a plain marker would let it register clean and be elected cleanly."""
        if self.cleaner is not None:  # Kafka stops the cleaner before closing the logs
            self.cleaner.shutdown()
        content = UNHANDLED_UNCLEAN_START if not (self.had_clean_shutdown
                                                  or self.unclean_start_handled) else b""
        for future, _d in self.future_logs.values():  # never resumed: resumed at next start
            future._close_fds()
        for d in self.online_dirs:
            ok = True
            for tp in self.partitions_in(d):
                try:
                    self.logs[tp].close()
                except KafkaStorageError:
                    ok = False
            try:
                self.checkpoint(d)
                if ok:
                    self.fileops.write_file_atomically(os.path.join(d.path, CLEAN_SHUTDOWN_FILE),
                                                       content)
            except (KafkaStorageError, OSError):
                pass
        for d in self.dirs:
            # An offline dir's thread may be stuck on a dead disk: do not wait for it.
            d.executor.shutdown(wait=d.online)


def _close_logs(logs) -> None:
    for log in logs:
        log._close_fds()


def _fail_pending(pending, error: BaseException) -> None:
    for _fn, _args, fut in pending:
        _settle_from_thread([(fut, None, error)], None)


def _settle_from_thread(done, loop: asyncio.AbstractEventLoop | None) -> None:
    """Settle calls made from the event loop (one wake-up of their loop) and from other
    threads (``call_in_dir``: their concurrent futures, at once)."""
    by_loop: dict[asyncio.AbstractEventLoop, list] = {}
    for entry in done:
        fut = entry[0]
        if isinstance(fut, concurrent.futures.Future):
            _settle_all([entry])
        else:
            by_loop.setdefault(loop or fut.get_loop(), []).append(entry)
    for lp, entries in by_loop.items():
        try:
            lp.call_soon_threadsafe(_settle_all, entries)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass


def _settle_all(done) -> None:
    for fut, value, error in done:
        if fut.cancelled() or (isinstance(fut, concurrent.futures.Future)
                               and not fut.set_running_or_notify_cancel()):
            continue
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(value)
