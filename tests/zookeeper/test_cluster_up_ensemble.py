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

from common.config import load_config
from harness.local_cluster import REPO_ROOT
from harness.zk_server import server_state
from tests.admin.test_integration import exited, one_line_error, replog
from tests.polling import wait_until

pytestmark = pytest.mark.integration


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
        down = replog("cluster", "down", "--data-dir", str(data))
        assert down.returncode == 0 and up.wait(60) == 0, down.stderr.decode()
        wait_until(lambda: all(exited(pid) for pid in pids), what=f"pids {pids} to exit")
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            up.wait(60)


def test_cluster_up_refuses_an_ensemble_and_an_external_zookeeper(tmp_path):
    one_line_error(replog("cluster", "up", "--zookeeper-nodes", "3", "--zookeeper",
                          "127.0.0.1:1", "--data-dir", str(tmp_path / "d")),
                   "--zookeeper-nodes starts an ensemble here")
    assert not (tmp_path / "d").exists()
