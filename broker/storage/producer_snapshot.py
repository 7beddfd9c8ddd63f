"""Kafka's producer-state snapshot files: ``<offset, 20 digits>.snapshot`` in a partition dir.

The format is Kafka's ProducerSnapshot message (storage/src/main/resources/message/
ProducerSnapshot.json, version 1, not flexible), written version-prefixed as
ProducerStateManager.writeSnapshot does; all integers big-endian::

    version               int16    0    = 1
    crc                   uint32   2    CRC-32C of every byte from offset 6 to the end
    entry count           int32    6    a non-flexible array: int32 length
    entries, 46 bytes each:
        producerId            int64    0
        epoch                 int16    8
        lastSequence          int32   10
        lastOffset            int64   14    -1: the producer has no batch (then no metadata)
        offsetDelta           int32   22    lastOffset - first offset of the last batch
        timestamp             int64   26    max timestamp of the last batch
        coordinatorEpoch      int32   34    -1 outside transactions
        currentTxnFirstOffset int64   38    -1: no ongoing transaction

Only the last batch of each producer is kept (as in Kafka), so after a reload a retry of one of
the four older batches is no longer recognised until more batches are replayed.

This module holds the byte format (pure) and the thin file I/O over FileOps. The offset in
the file name is the producer state's map end offset: the state covers every batch below it.
A file that does not decode raises CorruptSnapshotError (Kafka's CorruptSnapshotException);
its reader skips it and falls back to an older snapshot, or to a replay from the log start.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from crc32c import crc32c

from broker.storage.fileops import FileOps
from broker.storage.segment import segment_name

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1  # ProducerSnapshot.json: "validVersions": "1"
VERSION_OFFSET = 0
CRC_OFFSET = VERSION_OFFSET + 2
PRODUCER_ENTRIES_OFFSET = CRC_OFFSET + 4  # the CRC covers the bytes from here on

_PREFIX = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
ENTRY_SIZE = _ENTRY.size  # 46


class SnapshotEntry(NamedTuple):
    """One row of ProducerSnapshot.ProducerEntries, field for field."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1


class CorruptSnapshotError(ValueError):
    """A snapshot file that fails its schema or CRC check (Kafka's CorruptSnapshotException)."""


def encode_snapshot(entries: list[SnapshotEntry]) -> bytes:
    body = bytearray(struct.pack(">i", len(entries)))
    for e in entries:
        body += _ENTRY.pack(*e)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(bytes(body))) + bytes(body)


def decode_snapshot(data: bytes) -> list[SnapshotEntry]:
    """The entries of a snapshot file's bytes; CorruptSnapshotError when they do not parse or
    the CRC does not match (ProducerStateManager.readSnapshot's checks)."""
    if len(data) < _PREFIX.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its header")
    version, crc, count = _PREFIX.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot contained an unknown file version {version}")
    if count < 0 or len(data) != _PREFIX.size + count * ENTRY_SIZE:
        raise CorruptSnapshotError(f"snapshot failed schema validation: {count} entries in "
                                   f"{len(data)} bytes")
    computed = crc32c(data[PRODUCER_ENTRIES_OFFSET:])
    if computed != crc:
        raise CorruptSnapshotError(f"snapshot is corrupt (CRC is no longer valid). Stored crc: "
                                   f"{crc}. Computed crc: {computed}")
    return [SnapshotEntry(*_ENTRY.unpack_from(data, _PREFIX.size + i * ENTRY_SIZE))
            for i in range(count)]


# ---------------------------------------------------------------------------- files

def snapshot_file_name(offset: int) -> str:
    return segment_name(offset, SNAPSHOT_SUFFIX)


def offset_from_file_name(name: str) -> int | None:
    stem = name[:-len(SNAPSHOT_SUFFIX)] if name.endswith(SNAPSHOT_SUFFIX) else ""
    return int(stem) if stem.isdigit() else None


def list_snapshot_offsets(fileops: FileOps, partition_dir: str) -> list[int]:
    """The offsets of the snapshot files in a partition dir, ascending."""
    if not fileops.exists(partition_dir):
        return []
    found = (offset_from_file_name(n) for n in fileops.listdir(partition_dir))
    return sorted(o for o in found if o is not None)


def write_snapshot(fileops: FileOps, partition_dir: str, offset: int, data: bytes,
                   fsync: bool = True) -> str:
    """Write one snapshot file atomically (tmp, fsync, rename): a crash leaves no torn file
    under the final name. Kafka writes in place; a torn file there is caught by the CRC."""
    path = os.path.join(partition_dir, snapshot_file_name(offset))
    fileops.write_file_atomically(path, data, fsync=fsync)
    return path


def read_snapshot(fileops: FileOps, partition_dir: str, offset: int) -> bytes:
    return fileops.read_file(os.path.join(partition_dir, snapshot_file_name(offset)))


def delete_snapshot(fileops: FileOps, partition_dir: str, offset: int) -> None:
    path = os.path.join(partition_dir, snapshot_file_name(offset))
    if fileops.exists(path):
        fileops.unlink(path)


class FileSnapshotDir:
    """A partition dir's snapshot files through FileOps (broker/producer_state.py's SnapshotDir).
    OSErrors propagate; the caller wraps them into its storage error with the log dir."""

    def __init__(self, fileops: FileOps, partition_dir: str, fsync: bool = True):
        self.fileops = fileops
        self.partition_dir = partition_dir
        self.fsync = fsync

    def offsets(self) -> list[int]:
        return list_snapshot_offsets(self.fileops, self.partition_dir)

    def read(self, offset: int) -> bytes:
        return read_snapshot(self.fileops, self.partition_dir, offset)

    def write(self, offset: int, data: bytes) -> None:
        write_snapshot(self.fileops, self.partition_dir, offset, data, fsync=self.fsync)

    def delete(self, offset: int) -> None:
        delete_snapshot(self.fileops, self.partition_dir, offset)
