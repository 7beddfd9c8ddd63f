"""``replog chaos`` end to end: a real cluster (its own ZooKeeper, a controller, 3 brokers),
seed 1's kill/pause schedule under acks=all + acks=1 load, the heal, and the checker's verdict.

The run's history stays in the test's tmp dir (pytest keeps the last runs' dirs) and its path
is printed; ``REPLOG_CHAOS_ARTIFACTS=DIR`` also copies it there (CI can keep that dir).
Nemeses needing root are tested in their own test, skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chaos import disk, netfilter
from chaos.checker import check
from chaos.history import read_history

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def _chaos(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    data = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "admin.cli", "chaos", *args,
                           "--data-dir", str(data)],
                          cwd=REPO, capture_output=True, text=True, timeout=480, check=False)
    history = data / "history.jsonl"
    keep = os.environ.get("REPLOG_CHAOS_ARTIFACTS")
    if keep and history.exists():
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(history, Path(keep) / f"history-{'-'.join(args)}.jsonl".replace("/", "_"))
    print(proc.stdout)
    print(f"history: {history}")
    return proc, data


def test_seed_1_kill_and_pause_is_valid_and_replays_its_schedule(tmp_path):
    args = ("--seed", "1", "--duration", "20", "--nemesis", "kill,pause")
    proc, data = _chaos(tmp_path, *args)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    out = proc.stdout
    assert "Seed: 1" in out and "Verdict: VALID" in out, out
    # The schedule printed is the one a second invocation prints (nothing started this time).
    again = subprocess.run([sys.executable, "-m", "admin.cli", "chaos", *args,
                            "--schedule-only"], cwd=REPO, capture_output=True, text=True,
                           check=True)
    assert again.stdout.split("Schedule:")[1] == \
        out.split("Schedule:")[1].split("Cluster up")[0]
    # The history on disk is complete and the checker agrees with the printed verdict.
    ops = read_history(data / "history.jsonl")
    assert check(ops).valid
    started = [op["value"]["fault"]["nemesis"] for op in ops
               if op["process"] == "nemesis" and op["f"] == "start" and op["type"] == "ok"]
    schedule = json.loads((data / "schedule.json").read_text())
    assert started == [f["nemesis"] for f in schedule["faults"]]
    assert any(op["f"] == "read" and op["type"] == "ok" and op["value"]["records"]
               for op in ops), "the reader read records during the run"


@pytest.mark.skipif(netfilter.unavailable() is not None or disk.unavailable() is not None,
                    reason=f"partition/expire/ext4 nemeses: "
                           f"{netfilter.unavailable() or disk.unavailable()}")
# A 30 s run: make soak runs it. make test replays the same nemeses (partition, expire, ext4,
# enospc, elect) in regression seed 2's 8 s line (tests/chaos/regression_seeds.txt).
@pytest.mark.soak
def test_root_nemeses_partition_expire_and_ext4_are_valid(tmp_path):
    # Seed 3 draws a session expiry, a controller/broker partition and a full disk, with a
    # preferred election in the middle of the expiry.
    proc, _data = _chaos(tmp_path, "--seed", "3", "--duration", "30",
                         "--nemesis", "partition,expire,ext4,enospc,elect")
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "Verdict: VALID" in proc.stdout
