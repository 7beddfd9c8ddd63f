"""Intra-broker replica moves (KIP-113): Kafka's ReplicaAlterLogDirsManager and its thread.

AlterReplicaLogDirs asks this broker to move a replica to another of its log dirs. A *future
replica* is created in the target dir, ``<topic>-<partition>.<uniqueId>-future`` (Kafka's
UnifiedLog future dir naming; loading ignores the suffix), and one copier task per broker
(``ReplicaAlterLogDirsManager.run``, like a replica fetcher) fills it from the current replica's
log start: batches are appended follower-style, so offsets and leader epochs are kept byte for
byte. Copying is throttled by ``replica.alter.log.dirs.io.max.bytes.per.second`` (a KIP-73
byte-rate quota; Kafka's default: unlimited).

Rules that bind:
- Once the future replica has caught up, the swap runs on the *current* log's dir executor,
  the thread every append, truncation and flush of the partition runs on: the tail is copied
  there, so no append lands between the last copy and the swap (Kafka holds the partition's
  leaderIsrUpdateLock and the log lock for the same reason).
- The future dir gets a placement record superseding the current dir and is renamed to
  ``<topic>-<partition>`` *before* the current dir is renamed to ``-delete``: a crash between the
  two leaves two copies, and startup keeps the new one (placement.py). A restart before the
  swap (a crash, or a clean shutdown, which closes the future replica and keeps it) leaves a
  ``-future`` dir that startup opens (LogManager.future_logs) and the move resumes from it
  once the replica is hosted again (``resume``, after a LeaderAndIsr), as Kafka's does; the
  copier reconciles it with the current replica first (the current one may have truncated).
- Work queued for the old log after the swap is forwarded to the new one (``Log.moved_to``),
  and the new dir's executor runs nothing for the partition until the old dir's queue has
  drained past it, so the partition's write order holds across the change of thread.
- A storage error in the future replica (the destination dir) drops the future replica and
  leaves the current one as it was; StopReplica, a lost current replica, or an
  AlterReplicaLogDirs naming the current dir cancels the move. Failed moves are counted as
  ``FailedPartitionsCount{clientId="ReplicaAlterLogDirs"}``.
- The destination dir going offline calls its moves off (Kafka's handleLogDirFailure removes
  the future replicas of the failed dir; the move may be asked again), and the swap checks the
  dir is online at its point of no return, the first rename: before it, an offline destination
  aborts the swap and the current replica stays; after it, the swap completes and the replica
  is lost with the dir (offline, a restart entry), as a Kafka swap followed by the dir's
  failure - never a live log mapped to an offline dir.
- After its first rename a failed swap must not leave a copy that outranks the live one at
  the next start: the live copy gets a newer placement record superseding the renamed copy
  before that copy is renamed back to its ``-future`` name (placement rules 1 and 3: each
  supersedes the other, the newer wins), so either step alone is enough.

The decisions - what to copy next, when to swap - are the pure functions ``next_step`` and
``future_dir_name``; where the future replica must be truncated first (``reconcile``) applies
the follower truncation rules of broker/truncation.py (KIP-101) with the current replica as the
leader. The manager performs them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from broker.replication_quota import ReplicationQuota
from broker.storage import placement
from broker.storage.errors import CheckpointIOError, KafkaStorageError, LogDirOfflineError
from broker.storage.log import Log
from broker.truncation import (
    OUT_OF_RANGE,
    follower_truncation,
    leader_divergence,
    leader_end_for_epoch,
)
from common.errors import OffsetOutOfRangeError, ReplogError
from common.names import TopicPartition

if TYPE_CHECKING:
    from broker.partition import Partition
    from broker.storage.log_manager import LogDir, LogManager

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
CLIENT_ID = "ReplicaAlterLogDirs"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
MAX_RECONCILE_ROUNDS = 64  # each round drops at least one epoch of the future replica
COPY_MAX_BYTES = 1 << 20  # one copy per partition and round, as a fetch's partition max bytes


def future_dir_name(tp: TopicPartition, unique_id: str) -> str:
    """Kafka's ``UnifiedLog.logFutureDirName``: ``<topic>-<partition>.<uniqueId>-future``."""
    return f"{tp.dir_name}.{unique_id}{FUTURE_SUFFIX}"


class Step(Enum):
    COPY = "copy"          # copy the next batches into the future replica
    SWAP = "swap"          # caught up: copy the tail and swap on the write path
    THROTTLED = "throttled"  # the io quota is exhausted: wait


def next_step(current_leo: int, future_leo: int, quota_exceeded: bool,
              swap_lag: int) -> Step:
    """What the copier does next for one move. A future replica within ``swap_lag`` offsets
    of the current LEO is swapped: the rest is copied under the write path, where no append
    can race it (Kafka swaps once the future replica's fetch reaches the LEO; under load the
    LEO moves on, so a small tail is left for the swap)."""
    if future_leo >= current_leo - swap_lag:
        return Step.SWAP
    if quota_exceeded:
        return Step.THROTTLED
    return Step.COPY


@dataclass
class Move:
    """One future replica being filled."""

    tp: TopicPartition
    target: LogDir
    future: Log
    failed: str | None = None
    swapping: bool = False  # the swap job is queued or running on the write path
    done: asyncio.Future | None = field(default=None, repr=False)
    # Why the swap was called off before its point of no return, and whether it passed it:
    # set under ``lock`` by the event loop (the dir went offline) and the swap's thread.
    aborted: str | None = None
    committed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def check_target(self, commit: bool) -> bool:
        """Swap thread: False (and ``aborted`` set) when the move was called off or its target
        dir is offline; with ``commit``, True passes the point of no return for good."""
        with self.lock:
            if self.aborted is None and not self.target.online:
                self.aborted = f"the log dir {self.target.path} is offline"
            self.committed = commit and self.aborted is None
            return self.aborted is None

    def abort(self, reason: str) -> bool:
        """Event loop: call the swap off, unless it passed its point of no return."""
        with self.lock:
            if not self.committed and self.aborted is None:
                self.aborted = reason
            return not self.committed


@dataclass(frozen=True)
class ReplicaHost:
    """What a move reads of the broker's replicas, and the one thing it does to them - the
    replica manager hands over these parts, not itself: the replicas held, the lock
    their state changes take (the swap must not interleave with a LeaderAndIsr), this
    incarnation's broker epoch for placement records, and the way to lose one replica's
    log."""

    partitions: dict[TopicPartition, Partition]
    state_change: asyncio.Lock
    broker_epoch: Callable[[], int]
    lose_log: Callable[[TopicPartition, str], None]


class ReplicaAlterLogDirsManager:
    """The future replicas of this broker and the one task that fills and swaps them."""

    def __init__(self, host: ReplicaHost, log_manager: LogManager, events, metrics,
                 quota: ReplicationQuota, swap_lag: int = 1000):
        """``events``: the event log; ``metrics``: where FailedPartitionsCount registers."""
        self.host = host
        self.lm = log_manager
        self.events = events
        self.quota = quota
        self.swap_lag = swap_lag
        self.moves: dict[TopicPartition, Move] = {}
        self.failed: set[TopicPartition] = set()
        self._last_stamp = 0
        self._stamp_lock = threading.Lock()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        metrics.failed_partitions.labels(clientId=CLIENT_ID).set_function(
            lambda: len(self.failed))

    # ------------------------------------------------------------------ requests

    def future_log(self, tp: TopicPartition) -> Move | None:
        return self.moves.get(tp)

    async def start_move(self, tp: TopicPartition, target: LogDir) -> Move:
        """Create the future replica of ``tp`` in ``target`` (on that dir's executor, which
        reports a storage error to the failure channel) and have the copier fill it."""
        current = self.lm.get_log(tp)
        assert current is not None
        name = future_dir_name(tp, uuid.uuid4().hex)
        start = current.segments[0].base_offset
        future = await self.lm.run_in_dir(
            target, functools.partial(Log.open, target.path, tp, self.lm.config,
                                      fileops=self.lm.fileops, clock=self.lm.clock,
                                      log_start_offset=start, needs_recovery=False,
                                      partition_dir=os.path.join(target.path, name)))
        if not target.online:  # went offline while the future replica was created
            self._abandon(target, future)
            raise LogDirOfflineError(target.path, str(tp), detail="the log dir went offline")
        move = Move(tp, target, future, done=asyncio.get_running_loop().create_future())
        self.moves[tp] = move
        self.failed.discard(tp)
        self.events.info("future_replica_created", partition=str(tp), log_dir=target.path,
                            future_dir=future.dir, current_dir=current.log_dir)
        self._ensure_running()
        self._wakeup.set()
        return move

    def resume(self, hosted) -> None:
        """Resume the moves a restart cut short (LogManager.future_logs) of the partitions in
        ``hosted`` (this broker holds their current replica again)."""
        for tp in [tp for tp in self.lm.future_logs if tp in hosted]:
            future, target = self.lm.future_logs.pop(tp)
            if tp in self.moves or not target.online or self.lm.get_log(tp) is None:
                future._close_fds()
                with contextlib.suppress(OSError):
                    self.lm.fileops.rmtree(future.dir)
                continue
            self.moves[tp] = Move(tp, target, future,
                                  done=asyncio.get_running_loop().create_future())
            self.failed.discard(tp)
            self.events.info("future_replica_resumed", partition=str(tp),
                                log_dir=target.path, future_dir=future.dir,
                                future_log_end_offset=future.log_end_offset)
            self._ensure_running()
            self._wakeup.set()

    def cancel(self, tp: TopicPartition, reason: str) -> bool:
        """Drop the future replica of ``tp`` (if any); the current one is left as it is."""
        move = self.moves.get(tp)
        if move is None:
            return False
        if move.swapping:
            # The swap is under way on the write path: it completes (Kafka's is atomic too).
            self.events.info("future_replica_cancel_too_late", partition=str(tp),
                                reason=reason)
            return False
        del self.moves[tp]
        self._drop(move, reason)
        return True

    def log_dir_offline(self, path: str) -> None:
        """Call off the moves into ``path``, a dir that went offline (Kafka's
        handleLogDirFailure removes the future replicas of the failed dir). A swap past its
        point of no return completes, and its replica is lost with the dir (``_complete``)."""
        reason = f"the log dir {path} went offline"
        for tp, move in list(self.moves.items()):
            if move.target.path != path:
                continue
            if not move.swapping:
                self.cancel(tp, reason)
            elif not move.abort(reason):
                self.events.info("future_replica_cancel_too_late", partition=str(tp),
                                    reason=reason)

    def _drop(self, move: Move, reason: str) -> None:
        fut = move.future
        fut.closed = True
        self.events.info("future_replica_dropped", partition=str(move.tp),
                            log_dir=move.target.path, reason=reason)
        self._abandon(move.target, fut)
        if move.done is not None and not move.done.done():
            move.done.set_result(False)

    def _abandon(self, target: LogDir, fut: Log) -> None:
        """Close a dropped future replica on its dir's thread (behind a copy that may still
        run there) and delete it; in an offline dir it is only closed (Kafka removes it with
        deleteFromLogDir=false): nothing more runs there, and the next start resumes it."""
        def close_and_delete() -> None:
            fut._close_fds()
            if target.online:
                try:
                    self.lm.fileops.rmtree(fut.dir)
                except OSError:
                    pass  # a -future dir is deleted at the next start anyway
        try:
            target.executor.submit(close_and_delete)
        except RuntimeError:  # executor shut down
            close_and_delete()

    def _fail(self, move: Move, error: BaseException) -> None:
        if self.moves.get(move.tp) is not move:
            return  # cancelled meanwhile: dropped already
        del self.moves[move.tp]
        move.failed = str(error)
        self.failed.add(move.tp)
        self.events.error("future_replica_failed", partition=str(move.tp),
                             log_dir=move.target.path, error=str(error)[:300])
        self._drop(move, f"failed: {error}")
        # The future replica is gone: a later error of a replica of this partition in that
        # dir is a new failure for the channel.
        self.lm.failure_channel.forget(move.target.path, str(move.tp))

    # ------------------------------------------------------------------ the copier

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run())

    async def shutdown(self) -> None:
        # A swap under way finishes first: cut short, the log manager would keep pointing at
        # the old log while its dir is already renamed aside.
        for move in list(self.moves.values()):
            if move.swapping and move.done is not None:
                await asyncio.shield(move.done)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        # The future replicas are closed, not deleted: the next start resumes the moves.
        for tp, move in list(self.moves.items()):
            del self.moves[tp]
            move.future.closed = True
            # On the target dir's thread: behind a copy that may still be running there.
            try:
                move.target.executor.submit(move.future._close_fds)
            except RuntimeError:  # executor shut down
                move.future._close_fds()
            self.events.info("future_replica_closed", partition=str(tp),
                                log_dir=move.target.path)
            if move.done is not None and not move.done.done():
                move.done.set_result(False)

    async def run(self) -> None:
        """One round copies up to COPY_MAX_BYTES into every future replica; it waits when
        there is nothing to move or the io quota is exhausted."""
        while True:
            if not self.moves:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            progressed = False
            for move in list(self.moves.values()):
                if self.moves.get(move.tp) is not move:
                    continue  # cancelled meanwhile
                try:
                    progressed |= await self._step(move)
                except (ReplogError, OSError) as e:
                    # Anything else one move meets (a batch the future log refuses) fails
                    # that move only, never the copier of every other one (KIP-461's
                    # failed partitions).
                    self._fail(move, e)
                    progressed = True
            if not progressed:
                # Only the throttle holds every move back: wait for the rate to fall.
                await asyncio.sleep(0.05)

    async def _step(self, move: Move) -> bool:
        current = self.lm.get_log(move.tp)
        if current is None:
            self.cancel(move.tp, "the current replica is gone")
            return True
        step = next_step(current.log_end_offset, move.future.log_end_offset,
                         self.quota.is_quota_exceeded(), self.swap_lag)
        if step is Step.THROTTLED:
            return False
        if step is Step.SWAP:
            await self._swap(move, current)
            return True
        try:
            data, fix = await self.lm.run(move.tp, _read_for_copy, current, move.future)
        except KafkaStorageError as e:  # the current replica's dir: its handler sees it
            self.cancel(move.tp, f"reading the current replica failed: {e}")
            return True
        if self.moves.get(move.tp) is not move:
            return True
        try:
            await self.lm.run_in_dir(move.target, _copy_into, move.future, data, fix)
        except KafkaStorageError as e:
            self._fail(move, e)
            return True
        self.quota.record(len(data))
        return True

    async def _swap(self, move: Move, current: Log) -> None:
        # Under the replica state change lock, as Kafka swaps under the partition's
        # leaderIsrUpdateLock: a LeaderAndIsr (its leader epoch written to the log) or a
        # StopReplica is either wholly before the swap or wholly after it.
        async with self.host.state_change:
            if self.moves.get(move.tp) is not move:
                return  # cancelled while waiting for the lock
            if self.lm.get_log(move.tp) is not current:
                # Reloaded or re-created meanwhile: what was copied may not match it any more.
                self.cancel(move.tp, "the current replica changed during the move")
                return
            src = self.lm.log_dir_of(move.tp)
            move.swapping = True
            try:
                result = await self.lm.run(move.tp, self._swap_on_write_path, move, current,
                                           src)
            except KafkaStorageError as e:
                move.swapping = False
                self.cancel(move.tp, f"the swap failed in the current replica's dir: {e}")
                return
            finally:
                move.swapping = False
            self._after_swap(move, current, src, result)

    def _after_swap(self, move: Move, current: Log, src: LogDir, result) -> None:
        if result is None:  # dropped (broker shutdown) before the swap ran, or called off
            if move.aborted is not None and self.moves.get(move.tp) is move:
                del self.moves[move.tp]
                self._drop(move, move.aborted)
            if move.done is not None and not move.done.done():
                move.done.set_result(False)
            return
        if isinstance(result, BaseException):
            self._fail(move, result)
            return
        self.moves.pop(move.tp, None)
        new, doomed, record = result
        self._complete(move, current, src, new, doomed, record)

    def _swap_on_write_path(self, move: Move, current: Log, src: LogDir):
        """Current log dir's executor: copy the tail, close the future log, write its placement
        record, rename it to ``<topic>-<partition>`` and reopen it there, then move the current
        dir aside. Returns (new log, -delete dir, placement record), or the error that
        stopped it, reported here for the dir it names (the executor would blame the current
        dir for every error, the destination's included)."""
        lm, fo, tp = self.lm, self.lm.fileops, move.tp
        fut = move.future
        if fut.closed or not move.check_target(commit=False):
            return None  # dropped while queued, or its dir went offline: nothing written
        final = os.path.join(move.target.path, tp.dir_name)
        renamed = False
        try:
            _copy_tail(current, fut)
            fut.log_start_offset = max(fut.log_start_offset, current.log_start_offset)
            fut.high_watermark = current.high_watermark
            record = self._placement(src.path)
            placement.write(fut.dir, record, fo)
            fut.close()
            if not move.check_target(commit=True):
                return None  # a -future dir is no copy: the current replica stays
            fo.replace(fut.dir, final)
            renamed = True
            fo.fsync_dir(move.target.path)
            leo = current.log_end_offset
            new = Log.open(move.target.path, tp, lm.config, fileops=fo, clock=lm.clock,
                           recovery_point=leo, log_start_offset=fut.log_start_offset,
                           high_watermark=current.high_watermark, needs_recovery=False)
        except (OSError, KafkaStorageError) as e:
            fut._close_fds()
            lm.report_failure(src if getattr(e, "log_dir", None) == src.path else move.target,
                              e)
            if renamed:
                self._disown(move, current, src, final)
            return e
        # From here the new log is the replica: anything still queued for the old one is
        # forwarded to it (KIP-113's swap under the log lock).
        current.moved_to = new
        doomed = f"{current.dir}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        try:
            fo.replace(current.dir, doomed)
            fo.fsync_dir(src.path)
        except OSError as e:
            # The old copy stays under its name; the placement record of the new one makes
            # the next start delete it.
            lm.report_failure(src, e)
            doomed = None
        return new, doomed, record

    def _disown(self, move: Move, current: Log, src: LogDir, final: str) -> None:
        """Swap thread, after a failure past the first rename: the renamed copy's placement
        record supersedes the current replica, which keeps taking appends, so at the next
        start it would win with stale data. The current replica's own record, newer and
        superseding the destination, is written first, in its healthy dir: with it the live
        copy wins (placement rules 1 and 3) whatever else fails. Then the copy is renamed
        back to its ``-future`` name (no copy at all for the next start; ``_drop`` deletes it)."""
        fo = self.lm.fileops
        try:
            placement.write(current.dir, self._placement(move.target.path), fo)
        except OSError as e:
            # The live copy cannot be protected: lost (a restart entry), never outranked
            # unseen.
            self.lm.report_failure(src, CheckpointIOError(src.path, str(move.tp), e))
        try:
            fo.replace(final, move.future.dir)
            fo.fsync_dir(move.target.path)
        except OSError:
            pass  # the destination dir is failing, reported already; the record above holds

    def _placement(self, supersedes: str) -> placement.Placement:
        """A record newer than every other this broker wrote in this incarnation: placement
        rule 3 compares (broker epoch, creation time), and wall time repeats a millisecond."""
        with self._stamp_lock:
            self._last_stamp = max(self.lm.clock(), self._last_stamp + 1)
            return placement.Placement((supersedes,), self.host.broker_epoch(), self._last_stamp)

    def _complete(self, move: Move, old: Log, src: LogDir, new: Log, doomed: str | None,
                  record: placement.Placement) -> None:
        """Event loop, in one step: point the log manager and the partition at the new log,
        gate the new dir's executor behind what is still queued for the old one, then delete
        the old files and write both dirs' checkpoints."""
        tp = move.tp
        # The destination went offline past the swap's point of no return: the replica is
        # in it now, and lost with it (below).
        lost = not move.target.online
        new.high_watermark = max(new.high_watermark, old.high_watermark)
        self.lm.replace_current_with_future(tp, new, move.target, record)
        p = self.host.partitions.get(tp)
        if p is not None and p.log is old:
            p.log = new
        drained = threading.Event()

        def close_old() -> None:
            # Set from this thread, not the event loop: the gate must open even while the
            # loop itself waits for the executors (a shutdown).
            try:
                old._close_fds()
                old.closed = True
                if lost:  # behind the work forwarded to it; its own dir's thread runs nothing
                    new._close_fds()
                if doomed is not None:
                    try:
                        self.lm.fileops.rmtree(doomed)
                    except OSError:
                        pass  # a -delete dir is removed at the next start
            finally:
                drained.set()
        marker = self.lm.run_in_dir(src, close_old)
        # The old dir went offline: its queue fails at once, and nothing of it runs.
        marker.add_done_callback(lambda f: (f.cancelled() or f.exception(), drained.set()))
        self.lm.run_in_dir(move.target, drained.wait, 30.0).add_done_callback(_ignore)
        for d in (src, move.target):
            if d.online:
                self.lm.run_in_dir(d, self.lm.checkpoint, d).add_done_callback(_ignore)
        self.events.info("future_replica_swapped", partition=str(tp), log_dir=move.target.path,
                            old_log_dir=src.path, log_end_offset=new.log_end_offset)
        if lost:
            self.host.lose_log(tp, f"the log dir {move.target.path} went offline "
                                           f"during the swap into it")
        if move.done is not None and not move.done.done():
            move.done.set_result(True)


def reconcile(current: Log, future: Log) -> tuple[str, int] | None:
    """Where the future replica stops matching the current one, by leader epochs (KIP-101,
    as Kafka's ReplicaAlterLogDirsThread truncates it against the current log): the current
    replica, a follower, may have truncated after a leader change. ("truncate", offset),
    ("restart", log start) when retention passed the future LEO, or None."""
    fleo = future.log_end_offset
    last = future.latest_epoch if fleo > future.log_start_offset else None
    found = leader_divergence(last, fleo, leader_end_for_epoch(last, current.end_offset_for_epoch),
                              current.log_start_offset)
    if found is OUT_OF_RANGE or fleo < current.log_start_offset:
        return "restart", current.segments[0].base_offset
    if found is None:
        return None
    decision = follower_truncation(found, future.end_offset_for_epoch(found.epoch), fleo,
                                   future.high_watermark)
    return "truncate", decision.offset


def _read_for_copy(current: Log, future: Log) -> tuple[bytes, tuple[str, int] | None]:
    """Current dir's executor: the batches after the future replica's LEO, or what to do to
    the future replica first (``reconcile``)."""
    if future.closed:
        return b"", None
    fix = reconcile(current, future)
    if fix is not None:
        return b"", fix
    try:
        return current.read(future.log_end_offset, COPY_MAX_BYTES,
                            max_offset=current.log_end_offset), None
    except OffsetOutOfRangeError:
        return b"", ("restart", current.segments[0].base_offset)


def _apply_fix(future: Log, fix: tuple[str, int]) -> None:
    how, offset = fix
    if how == "restart":
        future.truncate_fully_and_start_at(offset)
    else:
        future.truncate_to(offset)


def _copy_into(future: Log, data: bytes, fix: tuple[str, int] | None) -> None:
    """Destination dir's executor: reconcile, or append follower-style (offsets and epochs
    kept)."""
    if future.closed:
        return
    if fix is not None:
        _apply_fix(future, fix)
    elif data:
        future.append_as_follower(data)


def _copy_tail(current: Log, future: Log) -> None:
    """On the current dir's executor, with no append able to run: the rest of the log, and
    leader epochs that start at the LEO without a batch yet (a new leadership)."""
    for _ in range(MAX_RECONCILE_ROUNDS):
        fix = reconcile(current, future)
        if fix is None:
            break
        _apply_fix(future, fix)
    else:  # epochs that never settle: copy it all again rather than swap in a diverged log
        future.truncate_fully_and_start_at(current.segments[0].base_offset)
    while future.log_end_offset < current.log_end_offset:
        data = current.read(future.log_end_offset, COPY_MAX_BYTES,
                            max_offset=current.log_end_offset)
        if not data:
            break
        future.append_as_follower(data)
    latest = future.epoch_cache.latest_epoch()
    for epoch, start in current.epoch_cache.entries:
        if epoch > latest:
            future.epoch_cache.assign(epoch, start)


def _ignore(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()
