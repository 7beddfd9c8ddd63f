"""Test-only fault injection for a running broker process, through the file-operation seam.

Faults that cannot be produced for real on demand — an I/O error in one partition's files, a
read that is slow for one partition or log dir — are injected by FaultInjectingFileOps, which
sits behind the same interface as the real FileOps. A broker started with
``fault.injection.file=PATH`` uses it and applies the rules in PATH whenever the file changes
(checked every 100 ms), replacing the previous ones. The file holds a JSON list of rules::

    [{"path": "/data/b2/logdir-0/t-0", "errno": "EIO", "ops": ["write", "fsync"]},
     {"path": "/data/b1/logdir-1", "delay_ms": 2000, "ops": ["pread"]}]

``path`` is a file or directory prefix; ``ops`` defaults to every operation (names in
broker.storage.fileops.OPS); ``times`` limits how often an error fires. An empty list clears.

One more rule moves the broker's clock: ``{"clock_offset_ms": 45000}`` (at most one; negative
goes back). It offsets the wall clock the replica manager reads (``InjectedClock``): follower
fetch times and ISR expiration, as Kafka's Time.milliseconds() is wall time - the chaos
runner's clock nemesis (Jepsen's "clock" faults, where the code reads an injected clock).
"""

from __future__ import annotations

import asyncio
import errno as errno_mod
import json
import os
from collections.abc import Callable

from broker.storage.fileops import OPS, FaultInjectingFileOps
from common import clock


class InjectedClock:
    """Wall milliseconds plus the offset of the current clock rule (0 without one)."""

    def __init__(self, wall_ms: Callable[[], int] = clock.wall_ms):
        self.wall_ms = wall_ms
        self.offset_ms = 0

    def __call__(self) -> int:
        return self.wall_ms() + self.offset_ms


def parse_rules(text: str) -> list[dict]:
    rules = json.loads(text or "[]")
    if not isinstance(rules, list):
        raise ValueError("fault rules must be a JSON list")
    clock_rules = [r for r in rules if isinstance(r, dict) and "clock_offset_ms" in r]
    if len(clock_rules) > 1:
        raise ValueError("at most one \"clock_offset_ms\" rule")
    for r in rules:
        if isinstance(r, dict) and "clock_offset_ms" in r:
            if set(r) != {"clock_offset_ms"} or type(r["clock_offset_ms"]) is not int:
                raise ValueError(f"clock rule {r!r} must be {{\"clock_offset_ms\": <int>}}")
            continue
        if not isinstance(r, dict) or not isinstance(r.get("path"), str):
            raise ValueError(f"fault rule {r!r} needs a \"path\"")
        if ("errno" in r) == ("delay_ms" in r):
            raise ValueError(f"fault rule {r!r} needs exactly one of \"errno\", \"delay_ms\"")
        if "errno" in r and not hasattr(errno_mod, str(r["errno"])):
            raise ValueError(f"unknown errno {r['errno']!r}")
        unknown = set(r.get("ops", [])) - OPS
        if unknown:
            raise ValueError(f"unknown file operations {sorted(unknown)}")
    return rules


def apply_rules(fileops: FaultInjectingFileOps, rules: list[dict],
                clock: InjectedClock | None = None) -> None:
    fileops.clear()
    if clock is not None:
        clock.offset_ms = next((r["clock_offset_ms"] for r in rules if "clock_offset_ms" in r),
                               0)
    for r in rules:
        if "clock_offset_ms" in r:
            continue
        ops = r.get("ops") or None
        if "errno" in r:
            fileops.fail(r["path"], getattr(errno_mod, r["errno"]), ops=ops, times=r.get("times"))
        else:
            fileops.slow(r["path"], r["delay_ms"] / 1000, ops=ops)


async def watch_fault_file(path: str, fileops: FaultInjectingFileOps, events,
                           interval_s: float = 0.1, clock: InjectedClock | None = None) -> None:
    last = None
    while True:
        try:
            stamp = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            stamp = None
        if stamp != last:
            last = stamp
            try:
                text = open(path).read() if stamp is not None else "[]"
                rules = parse_rules(text)
                apply_rules(fileops, rules, clock)
                events.warning("fault_injection_rules", rules=rules)
            except (OSError, ValueError) as e:
                events.error("fault_injection_file_invalid", path=path, error=str(e))
        await asyncio.sleep(interval_s)
