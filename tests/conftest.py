"""Shared pytest fixtures: a real ZooKeeper 3.8 server and kazoo clients isolated per test.

One server runs for the whole session (JVM start-up is the slow part); each test gets its own
chroot, so tests never see each other's znodes and need no cleanup. The server's tickTime is
100 ms so tests may ask for sessions as short as 200 ms; the max is raised to 60 s so a client
with kazoo's default 10 s timeout keeps it (ZooKeeper's default max would be 20 ticks = 2 s).
"""

from __future__ import annotations

import os
import random
import re
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from harness.zk_server import ZooKeeperServer
from harness.zk_sessions import ensure_chroot, expire_session

ZK_TICK_TIME_MS = 100
ZK_MAX_SESSION_TIMEOUT_MS = 60_000
ZK_CLIENT_TIMEOUT_S = 10.0


@pytest.fixture(autouse=True)
def _seeded_random(request: pytest.FixtureRequest) -> None:
    """Under ``make soak`` (REPLOG_SEED set) every test's module-level ``random`` (the
    clients' broker order and partitioner, the tests' own choices) starts from that round's
    seed and the test's name, so each round varies them and a failing seed replays them."""
    seed = os.environ.get("REPLOG_SEED")
    if seed is not None:
        random.seed(f"{seed}:{request.node.nodeid}")


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A real standalone ZooKeeper on a free 127.0.0.1 port, stopped at session end."""
    server = ZooKeeperServer(
        tmp_path_factory.mktemp("zookeeper"),
        tick_time_ms=ZK_TICK_TIME_MS,
        max_session_timeout_ms=ZK_MAX_SESSION_TIMEOUT_MS,
    )
    # No skip when java or the jar is missing: ZooKeeperNotInstalledError says what to install,
    # and a silently skipped integration suite would hide that.
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_hosts(zk_server: ZooKeeperServer, request: pytest.FixtureRequest) -> str:
    """A connect string with a fresh chroot, e.g. "127.0.0.1:PORT/replog-test-<name>-<uuid>"."""
    if not zk_server.is_running():
        pytest.fail(f"the session's ZooKeeper is not running; log tail:\n{zk_server.log_tail()}")
    # The test name makes the tree readable when debugging; the uuid makes it unique even
    # across reruns and pytest-xdist workers.
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:60]
    return ensure_chroot(zk_server.hosts, f"/replog-test-{name}-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def zk(zk_hosts: str) -> Iterator[KazooClient]:
    """A started kazoo client chrooted to this test's zk_hosts; stopped and closed afterwards."""
    client = KazooClient(zk_hosts, timeout=ZK_CLIENT_TIMEOUT_S)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def zk_expire(zk_server: ZooKeeperServer) -> Callable[[KazooClient], None]:
    """`zk_expire(client)` expires the client's session on the server (ephemerals deleted) and
    returns once the client is connected again on a new session."""

    def expire(client: KazooClient) -> None:
        # Unchrooted hosts: sessions are server-wide, and the client may use any chroot.
        expire_session(client, zk_server.hosts)

    return expire
