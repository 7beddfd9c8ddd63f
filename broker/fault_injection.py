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
"""

from __future__ import annotations

import asyncio
import errno as errno_mod
import json
import os

from broker.storage.fileops import OPS, FaultInjectingFileOps


def parse_rules(text: str) -> list[dict]:
    rules = json.loads(text or "[]")
    if not isinstance(rules, list):
        raise ValueError("fault rules must be a JSON list")
    for r in rules:
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


def apply_rules(fileops: FaultInjectingFileOps, rules: list[dict]) -> None:
    fileops.clear()
    for r in rules:
        ops = r.get("ops") or None
        if "errno" in r:
            fileops.fail(r["path"], getattr(errno_mod, r["errno"]), ops=ops, times=r.get("times"))
        else:
            fileops.slow(r["path"], r["delay_ms"] / 1000, ops=ops)


async def watch_fault_file(path: str, fileops: FaultInjectingFileOps, events,
                           interval_s: float = 0.1) -> None:
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
                apply_rules(fileops, rules)
                events.warning("fault_injection_rules", rules=rules)
            except (OSError, ValueError) as e:
                events.error("fault_injection_file_invalid", path=path, error=str(e))
        await asyncio.sleep(interval_s)
