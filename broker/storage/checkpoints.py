"""Kafka's plain-text checkpoint files.

Log-dir checkpoints (``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint``,
``log-start-offset-checkpoint``, the cleaner's ``cleaner-offset-checkpoint``)::

    0                      <- version
    2                      <- number of entries
    topic 0 1234           <- topic partition offset
    topic 1 99

and a partition's ``leader-epoch-checkpoint`` (``epoch start_offset`` lines). Writes go through
FileOps.write_file_atomically (tmp, fsync, rename, fsync dir): a crash mid-write leaves the
previous checkpoint intact. A file that does not parse raises CheckpointIOError naming it.
"""

from __future__ import annotations

import os

from broker.storage.errors import CheckpointIOError
from broker.storage.fileops import FileOps
from common.names import TopicPartition

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# the log cleaner's: per compacted log, the first offset not yet cleaned (LogCleanerManager)
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CHECKPOINT_VERSION = 0


def _encode(lines: list[str]) -> bytes:
    return (f"{CHECKPOINT_VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)).encode()  # noqa: E501


def _decode(path: str, data: bytes, fields: int) -> list[list[str]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError("not UTF-8") from e
    lines = text.splitlines()
    if len(lines) < 2:
        raise ValueError("missing version or entry count")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise ValueError(f"unrecognized version {lines[0].strip()!r}")
    count = int(lines[1])
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise ValueError(f"expected {count} entries but found {len(entries)}")
    for e in entries:
        if len(e) != fields:
            raise ValueError(f"malformed line {' '.join(e)!r}")
    return entries


class MalformedCheckpointError(CheckpointIOError):
    """The file was read but does not parse (a power loss after an unsynced write can leave
    it empty or torn, or it was edited): the leader-epoch checkpoint is then rebuilt from the
    log, the recovery point and log start offset are reset (log_manager.py), as in Kafka."""


class OffsetCheckpointFile:
    """One of a log dir's ``topic partition offset`` checkpoints."""

    def __init__(self, log_dir: str, name: str, fileops: FileOps):
        self.log_dir = log_dir
        self.path = os.path.join(log_dir, name)
        self.fileops = fileops

    def write(self, offsets: dict[TopicPartition, int]) -> None:
        lines = [f"{tp.topic} {tp.partition} {off}" for tp, off in sorted(offsets.items())]
        try:
            self.fileops.write_file_atomically(self.path, _encode(lines))
        except OSError as e:
            raise CheckpointIOError(self.log_dir, cause=e,
                                    detail=f"writing {self.path}: {e.strerror or e}") from e

    def read(self) -> dict[TopicPartition, int]:
        if not self.fileops.exists(self.path):
            return {}
        try:
            data = self.fileops.read_file(self.path)
        except OSError as e:
            raise CheckpointIOError(self.log_dir, cause=e,
                                    detail=f"reading {self.path}: {e.strerror or e}") from e
        try:
            return {TopicPartition(t, int(p)): int(o) for t, p, o in _decode(self.path, data, 3)}
        except ValueError as e:
            raise MalformedCheckpointError(self.log_dir,
                                           detail=f"malformed {self.path}: {e}") from e


class LeaderEpochCheckpointFile:
    """A partition's ``leader-epoch-checkpoint``: ``epoch start_offset`` entries."""

    def __init__(self, log_dir: str, partition_dir: str, partition: str, fileops: FileOps):
        self.log_dir = log_dir
        self.partition = partition
        self.path = os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT)
        self.fileops = fileops

    def write(self, entries: list[tuple[int, int]], fsync: bool = True) -> None:
        try:
            self.fileops.write_file_atomically(
                self.path, _encode([f"{e} {o}" for e, o in entries]), fsync=fsync)
        except OSError as e:
            raise CheckpointIOError(self.log_dir, self.partition, cause=e) from e

    def read(self) -> list[tuple[int, int]]:
        if not self.fileops.exists(self.path):
            return []
        try:
            data = self.fileops.read_file(self.path)
        except OSError as e:
            raise CheckpointIOError(self.log_dir, self.partition, cause=e) from e
        try:
            return [(int(e), int(o)) for e, o in _decode(self.path, data, 2)]
        except ValueError as e:
            raise MalformedCheckpointError(self.log_dir, self.partition,
                                           detail=f"malformed {self.path}: {e}") from e
