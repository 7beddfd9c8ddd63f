"""Which of two copies of a partition in different log dirs is the broker's replica.

A replica lost with its log dir (design.md#jbod) is re-created in a healthy dir. If the old dir
comes back after a restart, the broker finds two copies of the partition. The newer placement wins
and the stale copy is deleted - never loaded beside it, never mixed in.

"Newer" is decided from a small placement record, ``replica-placement`` in the partition dir,
written (fsynced) when a log is created while a copy of it may exist elsewhere: while some log
dir is offline, or after this partition's log failed in a dir. It names the dirs whose copy
it supersedes (``supersedes``) and the broker epoch (the czxid of the broker's registration,
which only grows across incarnations) and wall time at creation::

    {"version":1,"supersedes":["/data/d0"],"broker_epoch":4294967321,"created_ms":17000}

Why a record and not the data: leader-epoch checkpoints or log end offsets cannot tell a
re-created replica that has not caught up yet (or whose leader wrote nothing since) from the
stale copy - the stale one may even look longer, holding records above the HW that the new
leader truncated away. The record states the one fact that matters: this copy was created
*because* the other dir was unusable, so the other copy is older.

Rules (``newer_copy``, pure):
1. A copy whose record supersedes the other copy's dir wins, unless both supersede each other;
2. then a copy with a record beats one without (a copy without one predates every re-creation);
3. both with records: the larger (broker epoch, creation time) wins - a later incarnation, or
   later in the same one;
4. neither has a record: undecided - the caller keeps today's refusal (the later dir goes
   offline naming both), so an operator decides; a duplicate without records cannot come from
   re-creation.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from enum import Enum

from broker.storage.fileops import FileOps

PLACEMENT_FILE = "replica-placement"


@dataclass(frozen=True)
class Placement:
    supersedes: tuple[str, ...]
    broker_epoch: int = -1
    created_ms: int = 0


@dataclass(frozen=True)
class Copy:
    """One copy of a partition found on disk: its log dir and its record (None: none)."""

    log_dir: str
    placement: Placement | None


class Winner(Enum):
    EXISTING = "existing"
    CANDIDATE = "candidate"
    UNDECIDED = "undecided"


def newer_copy(existing: Copy, candidate: Copy) -> Winner:
    """Which of two copies of one partition is kept (module docstring, rules 1-4)."""
    a, b = existing.placement, candidate.placement
    a_over_b = a is not None and candidate.log_dir in a.supersedes
    b_over_a = b is not None and existing.log_dir in b.supersedes
    if a_over_b != b_over_a:
        return Winner.EXISTING if a_over_b else Winner.CANDIDATE
    if (a is None) != (b is None):
        return Winner.EXISTING if a is not None else Winner.CANDIDATE
    if a is None or b is None:
        return Winner.UNDECIDED
    ka, kb = (a.broker_epoch, a.created_ms), (b.broker_epoch, b.created_ms)
    if ka == kb:
        return Winner.UNDECIDED
    return Winner.EXISTING if ka > kb else Winner.CANDIDATE


def encode(p: Placement) -> bytes:
    return json.dumps({"version": 1, "supersedes": list(p.supersedes),
                       "broker_epoch": p.broker_epoch, "created_ms": p.created_ms},
                      separators=(",", ":")).encode()


def decode(data: bytes) -> Placement | None:
    """None for a record that does not parse (a torn write counts as no record)."""
    try:
        o = json.loads(data)
        sup = o["supersedes"]
        if not isinstance(sup, list) or not all(isinstance(s, str) for s in sup):
            return None
        return Placement(tuple(sup), int(o.get("broker_epoch", -1)), int(o.get("created_ms", 0)))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def read(partition_dir: str, fileops: FileOps) -> Placement | None:
    """The record of a copy; raises OSError when the file exists but cannot be read."""
    path = os.path.join(partition_dir, PLACEMENT_FILE)
    if not fileops.exists(path):
        return None
    return decode(fileops.read_file(path))


def write(partition_dir: str, p: Placement, fileops: FileOps) -> None:
    fileops.write_file_atomically(os.path.join(partition_dir, PLACEMENT_FILE), encode(p))
