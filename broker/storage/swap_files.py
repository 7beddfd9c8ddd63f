"""What loading a partition dir does with the files an interrupted clean-and-swap left
(design.md#compaction): Kafka's LogLoader rules, as pure functions of the file names.

The swap (``Log.replace_segments``, Kafka's LocalLog.replaceSegments) goes:
1. the cleaner writes the new segment as ``<base>.log.cleaned`` (+ ``.index.cleaned``,
   ``.timeindex.cleaned``), fsyncs it;
2. renames each of its files to ``.swap`` (the log file first), fsyncs the dir;
3. renames the replaced segments' files to ``.deleted``;
4. renames each ``.swap`` file to its final name, fsyncs the dir.

A crash at any point is repaired on load:
- ``.deleted`` and ``.tmp`` files go (``.deleted``: the replaced segments, step 3 on);
- every ``.cleaned`` file goes, and so does every ``.swap`` file whose base offset is at or
  above the smallest ``.cleaned`` one: the swap was cut short in step 2, the old segments are
  all there (KAFKA-6264's rule);
- each remaining ``<base>.log.swap`` covers [base, its next offset): every other segment file
  with a base offset in that range is one it replaces, and goes (a crash in step 3);
- every remaining ``.swap`` file is renamed to its final name (steps 3 and 4 finished).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

CLEANED = ".cleaned"
SWAP = ".swap"
DELETED = ".deleted"
TMP = ".tmp"
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")


def base_offset_of(name: str) -> int | None:
    """The 20-digit base offset a segment file's name starts with, or None."""
    stem = name.split(".", 1)[0]
    if len(stem) == 20 and stem.isascii() and stem.isdigit():
        return int(stem)
    return None


def _kind(name: str) -> str | None:
    """The segment file's own suffix (.log, .index, .timeindex), ignoring a trailing
    .cleaned/.swap/.deleted; None for any other file."""
    if base_offset_of(name) is None:
        return None
    rest = "." + name.split(".", 1)[1] if "." in name else ""
    for extra in (CLEANED, SWAP, DELETED, ""):
        if extra and not rest.endswith(extra):
            continue
        core = rest[:len(rest) - len(extra)] if extra else rest
        if core in SEGMENT_SUFFIXES:
            return core
    return None


@dataclass(frozen=True)
class FirstPass:
    delete: tuple[str, ...]      # leftovers: .deleted, .tmp, .cleaned, cut-short .swap files
    swap_logs: tuple[int, ...]   # bases of the <base>.log.swap files that complete a swap


def first_pass(names: Iterable[str]) -> FirstPass:
    """LogLoader.removeTempFilesAndCollectSwapFiles."""
    names = sorted(names)
    delete = [n for n in names if n.endswith((DELETED, TMP))]
    cleaned = [n for n in names if n.endswith(CLEANED) and _kind(n) is not None]
    min_cleaned = min((base_offset_of(n) for n in cleaned), default=None)
    swaps = [n for n in names if n.endswith(SWAP) and _kind(n) is not None]
    cut_short = [n for n in swaps if min_cleaned is not None and base_offset_of(n) >= min_cleaned]
    delete += cleaned + cut_short
    valid_logs = sorted(base_offset_of(n) for n in swaps
                        if n not in cut_short and _kind(n) == ".log")
    return FirstPass(tuple(delete), tuple(valid_logs))


def replaced_files(names: Iterable[str], swap_ends: Mapping[int, int]) -> list[str]:
    """LogLoader's second pass: the segment files (not .swap) with a base offset within
    [min swap base, max swap next offset) - segments a completed swap replaces.
    ``swap_ends`` maps each valid swap log's base to its next offset."""
    if not swap_ends:
        return []
    lo = min(swap_ends)
    hi = max(swap_ends.values())
    out = []
    for n in sorted(names):
        if n.endswith(SWAP) or _kind(n) is None:
            continue
        base = base_offset_of(n)
        if lo <= base < hi:
            out.append(n)
    return out


def swap_renames(names: Iterable[str]) -> list[tuple[str, str]]:
    """LogLoader's third pass: every remaining ``.swap`` segment file -> its final name."""
    return [(n, n[:-len(SWAP)]) for n in sorted(names)
            if n.endswith(SWAP) and _kind(n) is not None]
