"""A crash at every step of a cleaning round loses nothing (design.md#compaction).

Each test runs a round that dies before its n-th file operation - for every n from the first
write of the ``.cleaned`` segment to the last rename and fsync of the swap - then loads the log
as a restart does, and checks what the swap rules promise (swap_files.py): every key's last
record is there at its offset, every record read was written at that offset, nothing past the
round was touched, no ``.cleaned``/``.swap``/``.deleted`` file is left, the segments are
contiguous, and the next round reaches the same log an uninterrupted round makes.

Two kinds of death: a simulated crash through the FileOps seam (after it, no file operation
runs: nothing is cleaned up), and a real SIGKILL of a child process at the n-th operation.
"""

import dataclasses
import os
import shutil
import subprocess
import sys

import pytest

from broker.storage.fileops import FileOps
from broker.storage.log import Log
from tests.storage.cleaner_helpers import CFG, TP, clean_once, fill, latest, new_cleaner, records

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOW = 10_000


class Crash(BaseException):
    """The process died here (a BaseException: no cleanup code catches it)."""


class CrashAt(FileOps):
    """FileOps whose n-th mutating operation - and every one after it - never happens."""

    MUTATING = ("writev", "pwrite", "replace", "unlink", "fsync", "fsync_dir", "ftruncate",
                "rmtree")

    def __init__(self, n: int | None):
        self.n = n
        self.ops: list[tuple[str, str]] = []
        self.crashed = False

    def __getattribute__(self, name):
        attr = super().__getattribute__(name)
        if name in CrashAt.MUTATING:
            def op(*args, **kw):
                if self.crashed or (self.n is not None and len(self.ops) >= self.n):
                    self.crashed = True
                    raise Crash(name)
                self.ops.append((name, str(args[0])))
                return attr(*args, **kw)
            return op
        if name == "open" and not super().__getattribute__("crashed"):
            return attr
        if name == "open":
            def refuse(*args, **kw):
                raise Crash("open")
            return refuse
        return attr


def make_log(directory):
    log = Log.open(directory, TP, CFG, needs_recovery=False)
    written = fill(log, rounds=6, keys=6)
    log.close()
    return written


def run_round(directory, fileops):
    log = Log.open(directory, TP, CFG, needs_recovery=False, fileops=fileops)
    log.high_watermark = log.log_end_offset
    try:
        result = clean_once(log, new_cleaner(), NOW)
    finally:
        log._close_fds()  # what dies with the process: its descriptors
    return result


def reference(tmp_path, written):
    """The log after one uninterrupted round, and after a second round over nothing new."""
    d = str(tmp_path / "reference")
    shutil.copytree(str(tmp_path / "base"), d)
    end, _ = run_round(d, FileOps())
    log = Log.open(d, TP, CFG, needs_recovery=True)
    out = records(log)
    log.close()
    return end, out


def check_nothing_lost(directory, written, end, cleaned):
    log = Log.open(directory, TP, CFG, needs_recovery=True)
    problems = list(log.load_problems)
    got = records(log)
    assert log.log_end_offset == max(written) + 1
    for off, key, value in got:  # only what was written, where it was written
        assert written[off] == (key, value)
    offsets = {o for o, _, _ in got}
    for key, (off, _value) in latest(written).items():  # every key's last record
        assert off in offsets, f"{key} lost its last record at {off}"
    assert {o for o in written if o >= end} <= offsets  # past the round: untouched
    names = os.listdir(os.path.join(directory, TP.dir_name))
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    segs = log.segments
    assert all(a.next_offset == b.base_offset for a, b in zip(segs, segs[1:]))
    log.high_watermark = log.log_end_offset
    # the next round finishes the work: the same log as an uninterrupted round
    if got != cleaned:
        clean_once(log, new_cleaner(), NOW)
    assert records(log) == cleaned
    log.close()
    return " ".join(problems)


@pytest.fixture
def base(tmp_path):
    written = make_log(str(tmp_path / "base"))
    probe = CrashAt(None)
    d = str(tmp_path / "probe")
    shutil.copytree(str(tmp_path / "base"), d)
    run_round(d, probe)
    end, cleaned = reference(tmp_path, written)
    return written, probe.ops, end, cleaned


def test_a_simulated_crash_before_every_file_operation_of_a_round(tmp_path, base):
    written, ops, end, cleaned = base
    kinds = {name for name, _ in ops}
    assert {"writev", "replace", "fsync", "fsync_dir"} <= kinds and len(ops) > 20
    # every rename of the swap is among them: .cleaned -> .swap, old -> .deleted, .swap -> final
    renames = [path for name, path in ops if name == "replace"]
    assert any(p.endswith(".cleaned") for p in renames)
    assert any(p.endswith(".swap") for p in renames)
    seen = set()
    for n in range(len(ops) + 1):
        d = str(tmp_path / f"crash-{n}")
        shutil.copytree(str(tmp_path / "base"), d)
        fo = CrashAt(n)
        try:
            run_round(d, fo)
            assert n == len(ops)  # only the last run finishes
        except Crash:
            assert n < len(ops)
        problems = check_nothing_lost(d, written, end, cleaned)
        seen |= {w for w in ("undone", "completed") if w in problems}
        shutil.rmtree(d)
    # both repairs happened: swaps cut short before all files were .swap, and after
    assert seen == {"undone", "completed"}


def test_a_real_kill_at_each_step_of_the_swap(tmp_path, base):
    written, ops, end, cleaned = base
    # each operation of the swaps (renames, their fsyncs, the old files' .deleted), and
    # a few writes of the .cleaned segments
    steps = [i for i, (name, path) in enumerate(ops)
             if name in ("replace", "fsync_dir", "unlink")
             or (name in ("fsync", "writev") and ".cleaned" in path and i % 5 == 0)]
    assert len(steps) >= 10
    seen = set()
    for n in steps:
        d = str(tmp_path / f"kill-{n}")
        shutil.copytree(str(tmp_path / "base"), d)
        child = subprocess.run([sys.executable, "-m", "tests.storage.cleaner_helpers", d,
                                str(n)], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert child.returncode == -9, child.stderr[-2000:]  # SIGKILL, mid-round
        assert "finished" not in child.stdout
        problems = check_nothing_lost(d, written, end, cleaned)
        seen |= {w for w in ("undone", "completed") if w in problems}
        shutil.rmtree(d)
    assert seen == {"undone", "completed"}


def test_the_helpers_config_compacts():
    assert CFG.compact and not CFG.delete
    assert dataclasses.replace(CFG, cleanup_policy="compact,delete").delete
