"""The ZooKeeper test fixtures and harness/zk_server.py against a real ZooKeeper 3.8 process."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import EventType, KazooState, WatchedEvent

from harness.zk_server import (
    ZooKeeperNotInstalledError,
    ZooKeeperServer,
    ZooKeeperServerError,
    four_letter_word,
)
from harness.zk_sessions import ensure_chroot

pytestmark = pytest.mark.integration

Expire = Callable[[KazooClient], None]


def _cmdline(pid: int) -> str:
    """The process's command line, or "" if there is no such process."""
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.NoSuchProcess:
        return ""


# -- the session server ----------------------------------------------------------------------


def test_server_is_a_real_zookeeper_process_answering_ruok(zk_server: ZooKeeperServer) -> None:
    assert zk_server.is_running()
    assert zk_server.pid is not None
    assert "org.apache.zookeeper.server.ZooKeeperServerMain" in _cmdline(zk_server.pid)
    assert zk_server.hosts == f"127.0.0.1:{zk_server.port}"

    assert four_letter_word("127.0.0.1", zk_server.port, "ruok") == "imok"
    srvr = four_letter_word("127.0.0.1", zk_server.port, "srvr")
    assert "Zookeeper version: 3.8" in srvr
    assert "Mode: standalone" in srvr
    # The generated whitelist is in force: a word outside it is refused.
    assert "not in the whitelist" in four_letter_word("127.0.0.1", zk_server.port, "envi")


def test_short_tick_time_allows_sub_second_sessions(zk_hosts: str) -> None:
    # ZooKeeper clamps the requested timeout to [2, 20] ticks unless configured; with the
    # fixture's 100 ms tick, 300 ms must be granted as asked, not raised to 4 s.
    client = KazooClient(zk_hosts, timeout=0.3)
    client.start(timeout=15)
    try:
        assert client._session_timeout == 300  # negotiated value; kazoo has no public getter
    finally:
        client.stop()
        client.close()


# -- chroot isolation ------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["first", "second"])
def test_each_test_gets_an_empty_chroot_of_its_own(
    zk: KazooClient, zk_hosts: str, which: str
) -> None:
    # Run twice: if the two runs shared a chroot, whichever ran second would find the
    # other's node here (and creating "marker" would raise NodeExistsError).
    assert zk.get_children("/") == []
    zk.create("/marker", which.encode())
    assert zk_hosts.split("/", 1)[1].startswith("replog-test-")


def test_node_under_one_chroot_is_invisible_under_another(
    zk: KazooClient, zk_server: ZooKeeperServer
) -> None:
    other_hosts = ensure_chroot(zk_server.hosts, f"/replog-test-other-{uuid.uuid4().hex[:12]}")
    other = KazooClient(other_hosts)
    other.start(timeout=15)
    try:
        zk.create("/only-here", b"1")
        assert other.exists("/only-here") is None
        assert other.get_children("/") == []
        other.create("/only-there", b"2")
        assert zk.exists("/only-there") is None
        assert zk.get_children("/") == ["only-here"]
    finally:
        other.stop()
        other.close()


# -- session expiry --------------------------------------------------------------------------


def test_expiring_a_session_deletes_its_ephemeral_and_client_gets_a_new_session(
    zk: KazooClient, zk_hosts: str, zk_expire: Expire
) -> None:
    observer = KazooClient(zk_hosts)
    observer.start(timeout=15)
    try:
        zk.create("/owner", b"me", ephemeral=True)
        old_session_id = zk.client_id[0]
        observer_session_id = observer.client_id[0]

        deleted = threading.Event()

        def on_owner(event: WatchedEvent) -> None:
            if event.type == EventType.DELETED:
                deleted.set()

        stat = observer.exists("/owner", watch=on_owner)
        assert stat is not None and stat.ephemeralOwner == old_session_id

        states: list[KazooState] = []
        zk.add_listener(states.append)
        zk_expire(zk)

        # The server really ended the session: the ephemeral is gone at once (a client-side
        # fake expiry would leave it until the old session's 10 s timeout), and another client
        # is told so.
        assert observer.exists("/owner") is None
        assert deleted.wait(5), "observer never saw the expired session's ephemeral deleted"
        assert observer.client_id[0] == observer_session_id  # only the target was expired

        assert KazooState.LOST in states
        assert zk.connected
        assert zk.client_id[0] != old_session_id
        # The new session works and owns what it creates.
        zk.create("/owner", b"me again", ephemeral=True)
        assert observer.exists("/owner").ephemeralOwner == zk.client_id[0]
    finally:
        observer.stop()
        observer.close()


def test_expire_session_refuses_a_client_that_is_not_connected(
    zk_server: ZooKeeperServer, zk_expire: Expire
) -> None:
    client = KazooClient(zk_server.hosts)
    with pytest.raises(ZooKeeperServerError, match="connected client"):
        zk_expire(client)


# -- lifecycle of a private server -----------------------------------------------------------


def test_stop_really_ends_the_process(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk", tick_time_ms=100)
    server.start()
    pid, port = server.pid, server.port
    assert pid is not None and "ZooKeeperServerMain" in _cmdline(pid)

    server.stop()

    assert not server.is_running()
    assert "ZooKeeperServerMain" not in _cmdline(pid)
    with pytest.raises(OSError):
        four_letter_word("127.0.0.1", port, "ruok", timeout=1.0)
    server.stop()  # idempotent


def test_context_manager_and_restart_keep_port_and_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "zk"
    server = ZooKeeperServer(data_dir, tick_time_ms=100)
    with server:
        assert server.is_running()
        assert (data_dir / "zoo.cfg").read_text().count("clientPortAddress=127.0.0.1") == 1
        client = KazooClient(server.hosts)
        client.start(timeout=15)
        client.create("/kept", b"v", makepath=True)
        client.stop()
        client.close()
        first_pid, port = server.pid, server.port
    assert not server.is_running()
    assert "ZooKeeperServerMain" not in _cmdline(first_pid)

    with server:
        assert server.port == port and server.pid != first_pid
        client = KazooClient(server.hosts)
        client.start(timeout=15)
        try:
            assert client.get("/kept")[0] == b"v"
        finally:
            client.stop()
            client.close()
    assert (data_dir / "zookeeper.log").stat().st_size > 0


# -- clear errors ----------------------------------------------------------------------------


def test_missing_java_names_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no java anywhere
    with pytest.raises(ZooKeeperNotInstalledError, match="apt-get install .*jre"):
        ZooKeeperServer(tmp_path / "zk").start()


def test_missing_jar_names_what_to_install(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk", jar=tmp_path / "no-such-zookeeper.jar")
    with pytest.raises(ZooKeeperNotInstalledError, match="apt-get install zookeeper"):
        server.start()


def test_server_that_dies_at_start_up_reports_its_log_tail(tmp_path: Path) -> None:
    not_a_jar = tmp_path / "broken.jar"
    not_a_jar.write_bytes(b"this is not a zip file")
    server = ZooKeeperServer(tmp_path / "zk", jar=not_a_jar)
    with pytest.raises(ZooKeeperServerError, match="exited with code") as excinfo:
        server.start(timeout=30)
    # The JVM's own complaint is carried in the message, not left for someone to dig out.
    assert "ZooKeeperServerMain" in str(excinfo.value)
    assert not server.is_running()


def test_pinned_port_already_in_use_is_a_clear_error(
    tmp_path: Path, zk_server: ZooKeeperServer
) -> None:
    server = ZooKeeperServer(tmp_path / "zk", port=zk_server.port)
    with pytest.raises(ZooKeeperServerError, match=f"port {zk_server.port} .* already in use"):
        server.start()
    assert server.pid is None
    assert zk_server.is_running()
