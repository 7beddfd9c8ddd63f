"""``replog chaos --cluster DATA_DIR``: a run against a cluster that ``replog cluster up``
started. While the supervisor runs, the run may not restart processes (it would not know
them); once it is gone, a killed broker or controller is started again by the run, its new
pid written into cluster.json, and ``replog cluster down`` still stops every process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from chaos.attached import AttachedCluster
from chaos.checker import check
from chaos.history import read_history
from tests.polling import wait_until

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "admin.cli"]


def _pids(info: dict) -> dict[str, int]:
    return {f"{role[:-1]}-{p['id']}": p["pid"] for role in ("brokers", "controllers")
            for p in info[role]}


def test_chaos_against_a_running_cluster(tmp_path):
    data, out = tmp_path / "cluster", tmp_path / "cluster-up.out"
    with out.open("w") as f:
        up = subprocess.Popen([*CLI, "cluster", "up", "--data-dir", str(data),
                               "--log-dirs-per-broker", "1",
                               "--override", "zookeeper.session.timeout.ms=4000",
                               "--override", "replica.lag.time.max.ms=2000"],
                              cwd=REPO, stdout=f, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "Press Ctrl-C" in out.read_text() or up.poll() is not None,
                   timeout=90.0, what="the cluster")
        assert up.poll() is None, out.read_text()
        attached = AttachedCluster(data)
        try:
            why = attached.restart_unavailable()
            assert why is not None and str(up.pid) in why, why  # the supervisor runs
            assert attached.timeouts().session_timeout_s == 4.0
        finally:
            attached.close()
        # The supervisor dies; its children (own sessions) run on.
        up.send_signal(signal.SIGKILL)
        up.wait()
        before = _pids(json.loads((data / "cluster.json").read_text()))
        assert all(psutil.pid_exists(p) for p in before.values())

        # Seed 3 x 12 s kills the leader of partition 0 and the (only) controller, with
        # preferred elections in between.
        proc = subprocess.run([*CLI, "chaos", "--cluster", str(data), "--seed", "3",
                               "--duration", "12", "--nemesis", "kill,pause,elect"],
                              cwd=REPO, capture_output=True, text=True, timeout=400, check=False)
        print(proc.stdout, proc.stderr)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Verdict: VALID" in proc.stdout and "Skipped nemesis" not in proc.stdout
        history = Path(next(line.split(": ", 1)[1] for line in proc.stdout.splitlines()
                            if line.startswith("History: ")))
        assert history.parent.parent == data / "chaos"  # the run's files in the cluster's dir
        ops = read_history(history)
        assert check(ops).valid
        killed = {op["value"]["result"]["killed"] for op in ops
                  if op["process"] == "nemesis" and op["f"] == "start" and op["type"] == "ok"
                  and op["value"]["fault"]["nemesis"] == "kill"}
        assert "controller-100" in killed and any(k.startswith("broker-") for k in killed)

        after = _pids(json.loads((data / "cluster.json").read_text()))
        for name in killed:  # started again by the run, recorded for cluster down
            assert after[name] != before[name] and psutil.pid_exists(after[name])
            assert not psutil.pid_exists(before[name])
        topics = subprocess.run([*CLI, "topics", "list", "--bootstrap-server",
                                 AttachedCluster(data).bootstrap_servers],
                                cwd=REPO, capture_output=True, text=True, check=False).stdout
        assert "chaos-3-" in topics, topics  # a topic of its own
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            up.wait(120)
        down = subprocess.run([*CLI, "cluster", "down", "--data-dir", str(data)], cwd=REPO,
                              capture_output=True, text=True, timeout=180, check=False)
        print(down.stdout, down.stderr)
    left = [p for p in _pids(json.loads((data / "cluster.json").read_text())).values()
            if p and psutil.pid_exists(p)
            and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not left, f"processes left running after replog cluster down: {left}"
