"""log.dir.failure.policy=halt, the pre-design baseline of ``replog lab``'s jbod experiment:
a broker process with two log dirs exits on the failure of one, as Kafka did before KIP-112,
where the seed-003 default (offline) takes that dir offline and keeps serving the other.

The failure is real: a genuine ext4 error (loop-mounted with errors=remount-ro, as root) or EIO
through the broker's fault-injection file (without root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.local_cluster import free_port
from tests.polling import wait_until
from tests.storage.test_real_disk_faults import ext4_dir  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def _start(tmp_path: Path, zk_hosts: str, faulty: Path, policy: str | None):
    healthy, faults = tmp_path / "healthy", tmp_path / "faults.json"
    config = tmp_path / "broker.properties"
    lines = ["broker.id=1", f"listeners=127.0.0.1:{free_port()}",
             f"log.dirs={faulty},{healthy}", f"zookeeper.connect={zk_hosts}",
             f"event.log.file={tmp_path / 'events.json'}", f"fault.injection.file={faults}",
             # each dir's HW checkpoint is written every 100 ms: the write that meets the fault
             "replica.high.watermark.checkpoint.interval.ms=100",
             "controlled.shutdown.enable=false"]
    if policy is not None:
        lines.append(f"log.dir.failure.policy={policy}")
    config.write_text("\n".join(lines) + "\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "admin.cli", "broker", "--config",
                             str(config)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert "listening on" in proc.stdout.readline()  # started: both dirs healthy
    return proc, faults


def _events(tmp_path: Path) -> list[dict]:
    path = tmp_path / "events.json"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _assert_halted(proc, tmp_path: Path, faulty: Path) -> None:
    assert proc.wait(timeout=60) == 1
    stderr = proc.stderr.read().strip().splitlines()
    assert len(stderr) == 1, stderr
    assert stderr[0].startswith("FATAL: broker 1 halting: log.dir.failure.policy=halt and "
                                f"log dir {faulty} failed"), stderr
    names = [e["event"] for e in _events(tmp_path)]
    # halted at the first failure: the dir was never taken offline, the other never mattered
    assert names[-1] == "broker_halting" and "log_dir_offline" not in names, names


def _assert_lives(proc, tmp_path: Path, faulty: Path) -> None:
    def offline_or_exited() -> bool:
        assert proc.poll() is None, proc.stderr.read()
        return any(e["event"] == "log_dir_offline" for e in _events(tmp_path))
    wait_until(offline_or_exited, 60, "the faulty dir to go offline")
    offline = [e for e in _events(tmp_path) if e["event"] == "log_dir_offline"]
    assert [e["log_dir"] for e in offline] == [str(faulty)]
    time.sleep(1.0)  # more checkpoint rounds: the healthy dir keeps the broker up
    assert proc.poll() is None


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("policy", ["halt", None])
def test_eio_on_one_of_two_dirs(tmp_path, zk_hosts, policy):
    faulty = tmp_path / "d0"
    proc, faults = _start(tmp_path, zk_hosts, faulty, policy)
    try:
        faults.write_text(json.dumps([{"path": str(faulty), "errno": "EIO"}]))
        if policy == "halt":
            _assert_halted(proc, tmp_path, faulty)
        else:  # the default, design.md#jbod's design
            _assert_lives(proc, tmp_path, faulty)
    finally:
        _stop(proc)


@pytest.mark.parametrize("policy", ["halt", "offline"])
def test_a_real_ext4_error_on_one_of_two_dirs(tmp_path, zk_hosts, ext4_dir, policy):  # noqa: F811
    mnt, trigger = ext4_dir
    faulty = mnt / "d0"
    proc, _ = _start(tmp_path, zk_hosts, faulty, policy)
    try:
        trigger.write_text("replog test: disk failure\n")  # the kernel remounts it read-only
        if policy == "halt":
            _assert_halted(proc, tmp_path, faulty)
        else:
            _assert_lives(proc, tmp_path, faulty)
    finally:
        _stop(proc)  # every fd closed before the fixture unmounts
