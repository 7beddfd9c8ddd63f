"""`replog cluster up --zookeeper-nodes 3`: the cluster runs its own ensemble, every broker and
controller is given every member in zookeeper.connect, cluster.json lists each member, and
`cluster down` stops them all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from admin.local_cluster import REPO_ROOT
from common.config import load_config
from common.zk_server import server_state
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def _replog(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-m", "admin.cli", *args], check=False,
                          capture_output=True, timeout=120, env=env, cwd=REPO_ROOT)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_cluster_up_runs_an_ensemble_and_lists_each_member(tmp_path):
    data = tmp_path / "data"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    up = subprocess.Popen([sys.executable, "-m", "admin.cli", "cluster", "up", "--brokers", "1",
                           "--log-dirs-per-broker", "1", "--zookeeper-nodes", "3",
                           "--data-dir", str(data)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO_ROOT)
    try:
        deadline = time.monotonic() + 120
        lines: list[str] = []
        while not any(x.startswith("Bootstrap servers: ") for x in lines):
            line = up.stdout.readline().decode()
            if (not line and up.poll() is not None) or time.monotonic() > deadline:
                raise AssertionError(f"cluster up exited: {lines} {up.stderr.read().decode()}")
            lines.append(line)
        info = json.loads((data / "cluster.json").read_text())
        members = info["zookeeper_nodes"]
        assert [m["id"] for m in members] == [1, 2, 3]
        assert len({m["address"] for m in members}) == 3
        for m in members:
            assert m["namespace"] is None
            assert "QuorumPeerMain" in " ".join(psutil.Process(m["pid"]).cmdline())
            assert m["config_file"].endswith(f"zookeeper-{m['id']}/zoo.cfg")
            host, port = m["address"].split(":")
            assert server_state(host, int(port)) in ("leader", "follower")
        # zookeeper.connect names every member (then the chroot), for brokers and controllers
        servers, _, chroot = info["zookeeper"].partition("/")
        assert servers.split(",") == [m["address"] for m in members] and chroot == "replog"
        for p in info["brokers"] + info["controllers"]:
            assert load_config(p["config_file"])["zookeeper.connect"] == info["zookeeper"]
        pids = [m["pid"] for m in members] + [p["pid"] for p in info["brokers"]
                                              + info["controllers"]]
        p = _replog("cluster", "down", "--data-dir", str(data))
        assert p.returncode == 0, p.stderr.decode()
        assert up.wait(60) == 0
        for pid in pids:
            wait_until(lambda pid=pid: _gone(pid), what=f"pid {pid} to exit")
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            up.wait(60)


def test_cluster_up_refuses_an_ensemble_and_an_external_zookeeper(tmp_path):
    p = _replog("cluster", "up", "--zookeeper-nodes", "3", "--zookeeper", "127.0.0.1:1",
                "--data-dir", str(tmp_path / "d"))
    err = p.stderr.decode().strip().splitlines()
    assert p.returncode == 1 and len(err) == 1 and err[0].startswith("Error: "), err
    assert "--zookeeper-nodes" in err[0]
    assert not (tmp_path / "d").exists()
