"""DescribeLogDirs and AlterReplicaLogDirs (KIP-113): the describe answer (broker.log_dirs) and the
moves, carried out by broker.alter_log_dirs.

A part of ``broker.replica_manager.ReplicaManager`` (split by family); it
runs on the ReplicaManager's own state (``partitions``, ``log_manager``, ``events``, ...).
"""

from __future__ import annotations

import asyncio
import shutil

from broker import log_dirs
from broker.storage.errors import KafkaStorageError
from common.errors import ErrorCode
from common.names import TopicPartition


class LogDirOps:
    async def describe_log_dirs(self, filter_: frozenset[tuple[str, int]] = frozenset()
                                ) -> list[log_dirs.LogDirDescription]:
        """DescribeLogDirs: each dir's replicas as they are now, and its disk usage read on a
        worker thread (statvfs blocks on a stalled disk; never on the event loop)."""
        lm = self.log_manager
        out = []
        for d in lm.dirs:
            replicas = [log_dirs.ReplicaInDir(tp, log.size, p is not None and not p.is_leader,
                                              p.high_watermark if p is not None else 0,
                                              log.log_end_offset)
                        for tp, log, p in ((tp, lm.get_log(tp), self.partitions.get(tp))
                                           for tp in lm.partitions_in(d))
                        if log is not None] if d.online else []
            if d.online:
                replicas += [log_dirs.ReplicaInDir(
                    tp, m.future.size, False, 0, m.future.log_end_offset, True,
                    current.log_end_offset)
                    for tp, m in sorted(self.alter_log_dirs.moves.items())
                    if m.target is d and (current := lm.get_log(tp)) is not None]
            usage = await asyncio.to_thread(_disk_usage, d.path) if d.online else None
            out.append(log_dirs.describe_log_dir(d.path, d.directory_id, d.online, usage,
                                                 replicas, filter_))
        return out

    async def alter_replica_log_dirs(self, moves: dict[str, list[TopicPartition]]
                                     ) -> list[tuple[TopicPartition, ErrorCode, str]]:
        """KIP-113 AlterReplicaLogDirs (Kafka's ReplicaManager.alterReplicaLogDirs): move each
        replica to the log dir it is listed under. A replica already there is left alone (and
        a move of it elsewhere is cancelled); one not hosted yet is created there later."""
        async with self.state_change:
            return [(tp, *await self._alter_replica_log_dir(tp, path))
                    for path, tps in moves.items() for tp in tps]

    async def _alter_replica_log_dir(self, tp: TopicPartition, path: str
                                     ) -> tuple[ErrorCode, str]:
        lm = self.log_manager
        target = lm.dir_by_path(path)
        if target is None:
            return ErrorCode.LOG_DIR_NOT_FOUND, f"{path} is not one of this broker's log.dirs"
        if not target.online:
            return ErrorCode.KAFKA_STORAGE_ERROR, f"log dir {target.path} is offline"
        if tp in self.offline_replicas:
            return ErrorCode.KAFKA_STORAGE_ERROR, self._lost_message(tp)
        move = self.alter_log_dirs.future_log(tp)
        if move is not None and move.target is not target:
            # A new destination replaces the move under way (Kafka's futureReplicaDirChanged).
            self.alter_log_dirs.cancel(tp, f"AlterReplicaLogDirs to {target.path}")
        log = lm.get_log(tp)
        if log is None:
            # Not hosted yet: remembered for its creation (Kafka's preferredLogDirs).
            lm.preferred_dirs[tp] = target.path
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION \
                if tp not in self.metadata.partitions else ErrorCode.REPLICA_NOT_AVAILABLE
            return code, (f"broker {self.broker_id} has no replica of {tp} yet; it will be "
                          f"created in {target.path}")
        if lm.log_dir_of(tp) is target:
            return ErrorCode.NONE, ""  # already there; any move elsewhere was cancelled
        if self.alter_log_dirs.future_log(tp) is not None:
            return ErrorCode.NONE, ""  # already moving there
        if lm.offline_dirs:
            # Kafka creates no future replica while a dir is offline: a copy of the partition
            # could be in it, and two placements would be ambiguous.
            return ErrorCode.KAFKA_STORAGE_ERROR, "a log dir of this broker is offline"
        try:
            await self.alter_log_dirs.start_move(tp, target)
        except KafkaStorageError as e:
            return ErrorCode.KAFKA_STORAGE_ERROR, str(e)
        return ErrorCode.NONE, ""


def _disk_usage(path: str) -> tuple[int, int] | None:
    """(total, free) bytes of the file system holding ``path``; None when it cannot be read.
    Blocking: run it on a worker thread."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    return usage.total, usage.free
