"""harness/zk_ensemble.ZooKeeperEnsemble and `replog zookeeper --config`: a real quorum of
Debian's ZooKeeper 3.8 servers on 127.0.0.1, its leader found, killed and replaced, a member
restarted by the command an operator would run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from harness.local_cluster import REPO_ROOT
from harness.zk_ensemble import ZooKeeperEnsemble
from harness.zk_server import server_state
from tests.polling import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def ensemble(tmp_path):
    made = []

    def make(size: int = 3) -> ZooKeeperEnsemble:
        e = ZooKeeperEnsemble(tmp_path / f"ensemble-{len(made)}", size, tick_time_ms=100,
                              max_session_timeout_ms=60_000)
        made.append(e)
        return e.start()

    yield make
    for e in made:
        e.stop()


def _client(hosts: str, timeout: float = 4.0) -> KazooClient:
    c = KazooClient(hosts, timeout=timeout)
    c.start(timeout=15)
    return c


def test_a_session_and_its_ephemerals_survive_the_leader(ensemble):
    e = ensemble(3)
    assert sorted(e.states().values()) == ["follower", "follower", "leader"]
    assert e.hosts.count(",") == 2
    client = _client(e.hosts)
    try:
        session = client.client_id[0]
        client.create("/owned", b"x", ephemeral=True)
        leader = e.leader()
        e.kill(leader)
        new_leader = e.wait_for_quorum(30)
        assert new_leader != leader and e.states()[leader] is None
        # a write goes through a surviving member, on the same session: moved, not expired
        wait_until(lambda: client.state == KazooState.CONNECTED, timeout=15,
                   what="the client reconnected")
        client.set("/owned", b"y")
        assert client.client_id[0] == session
        assert client.get("/owned")[0] == b"y"
        # the killed member comes back as a follower with the data written without it
        e.restart(leader)
        assert e.states()[leader] == "follower" and e.leader() == new_leader
        other = _client(e.peers[leader - 1].address)
        try:
            other.sync("/owned")
            assert other.get("/owned")[0] == b"y"
        finally:
            other.stop()
            other.close()
    finally:
        client.stop()
        client.close()


def test_five_members_serve_without_two(ensemble):
    e = ensemble(5)
    assert e.quorum == 3
    leader = e.leader()
    down = [leader, next(i for i in e.members if i != leader)]
    for myid in down:
        e.kill(myid)
    e.wait_for_quorum(30)
    client = _client(e.hosts)
    try:
        client.create("/five", b"ok")
        assert client.get("/five")[0] == b"ok"
    finally:
        client.stop()
        client.close()


def _cli(*args: str, **kwargs) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.Popen([sys.executable, "-m", "admin.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def test_replog_zookeeper_restarts_a_killed_member(ensemble):
    e = ensemble(3)
    follower = next(i for i, s in e.states().items() if s == "follower")
    member = e.member(follower)
    e.kill(follower)
    proc = _cli("zookeeper", "--config", str(member.config_file), start_new_session=True)
    try:
        wait_until(lambda: server_state("127.0.0.1", member.port) == "follower", timeout=30,
                   what=f"member {follower} serving again")
        # the command became the JVM (exec): the pid a supervisor holds is the server's own
        cmdline = " ".join(psutil.Process(proc.pid).cmdline())
        assert "QuorumPeerMain" in cmdline and str(member.config_file) in cmdline
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=30)
    assert e.wait_for_quorum(30) is not None


def test_replog_zookeeper_refuses_a_member_without_its_myid(tmp_path):
    empty = tmp_path / "data"
    empty.mkdir()
    bad = tmp_path / "zoo.cfg"
    bad.write_text(f"dataDir={empty}\nclientPort=2181\ntickTime=100\ninitLimit=10\n"
                   "syncLimit=5\nserver.1=127.0.0.1:1:2\nserver.2=127.0.0.1:3:4\n")
    proc = _cli("zookeeper", "--config", str(bad))
    _out, err = proc.communicate(timeout=60)
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 1
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "myid" in lines[0], err
    assert list(empty.iterdir()) == []  # nothing was started there
