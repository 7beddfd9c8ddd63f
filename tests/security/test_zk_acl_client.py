"""AsyncZk with zookeeper.set.acl against a real ZooKeeper: what it creates carries Kafka's ACLs
(the chroot, ensure_path's parents, creates with makepath, creates inside a transaction), a
client without the credentials cannot change any of it but reads what Kafka leaves readable, and
the credentials are sent again on a new session after an expiry."""

from __future__ import annotations

import asyncio
import socket

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, Id, Permissions

from common import zk_layout as zl
from common.security.zk_acl import default_acls, digest_id, effective_acls
from common.security.zk_auth import ZkSecurity
from common.zk_async import AsyncZk
from harness.zk_sessions import expire_session

CREDENTIALS = "replog:zk-secret"
SECURE = ZkSecurity(set_acl=True, digest=CREDENTIALS)
ME = digest_id(CREDENTIALS)
WORLD = Id("world", "anyone")


def stored(path: str) -> list:
    return effective_acls(default_acls(path, True), ME)


@pytest.fixture
def secure_hosts(zk_hosts: str) -> str:
    # A chroot replog creates itself (the fixture's own is open, as any pre-made parent).
    return zk_hosts + "/secure"


@pytest.fixture
def anonymous(secure_hosts: str):
    clients = []

    def make(hosts: str = secure_hosts, **kwargs) -> KazooClient:
        c = KazooClient(hosts, timeout=10.0, **kwargs)
        c.start(15)
        clients.append(c)
        return c
    yield make
    for c in clients:
        c.stop()
        c.close()


async def started(hosts: str, security: ZkSecurity) -> AsyncZk:
    zk = AsyncZk(hosts, 10000, 15000, security=security)
    await zk.start()
    return zk


async def test_every_znode_created_carries_kafkas_acls(secure_hosts, zk_hosts, anonymous):
    zk = await started(secure_hosts, SECURE)
    try:
        for path in zl.PERSISTENT_PATHS:
            await zk.ensure_path(path)
        await zk.create(zl.CONTROLLER, b"{}", ephemeral=True)
        await zk.create(zl.CONFIG_BROKERS + "/1", b"{}", makepath=True)
        await zk.create(zl.partition_state_path("t", 0), b"{}", makepath=True)
        seq = await zk.create(zl.restart_entry_path(zl.RESTART_ENTRY_PREFIX), b"{}",
                              sequence=True)
        t = zk.transaction()
        t.create(zl.topic_path("u"), b"{}")
        t.create(zl.topic_config_path("u"), b"{}")
        await zk.commit(t)
        acl, _ = await zk.read(lambda: zk.client.get_acls_async(zl.CONTROLLER))
        assert acl == stored(zl.CONTROLLER)  # an ephemeral too
    finally:
        await zk.stop()

    # ZooKeeper shows a digest's hash only to a client with ADMIN on the znode ("replog:x"
    # to others), so the ACLs are read with the credentials
    reader = anonymous(auth_data=SECURE.auth_data)
    paths = set(zl.PERSISTENT_PATHS) | {
        "/brokers", "/config", zl.CONFIG_BROKERS + "/1",
        "/brokers/topics/t", "/brokers/topics/t/partitions", "/brokers/topics/t/partitions/0",
        zl.partition_state_path("t", 0), seq, zl.topic_path("u"), zl.topic_config_path("u")}
    for path in sorted(paths):
        assert reader.get_acls(path)[0] == stored(path), path
    # the chroot, made by replog: creator-all and world-read
    chroot_parent = anonymous(zk_hosts, auth_data=SECURE.auth_data)
    assert chroot_parent.get_acls("/secure")[0] == [
        (Permissions.ALL, ME), (Permissions.READ, WORLD)]
    # sensitive: creator only
    assert reader.get_acls(zl.CONFIG_BROKERS)[0] == [(Permissions.ALL, ME)]
    assert anonymous().get_acls(zl.TOPICS)[0] == [
        (Permissions.ALL, Id("digest", "replog:x")), (Permissions.READ, WORLD)]


async def test_a_client_without_credentials_cannot_change_replogs_znodes(
        secure_hosts, anonymous):
    zk = await started(secure_hosts, SECURE)
    try:
        for path in zl.PERSISTENT_PATHS:
            await zk.ensure_path(path)
        await zk.create(zl.CONTROLLER, b'{"brokerid":1}', ephemeral=True)
        await zk.create(zl.topic_path("t"), b"topic", makepath=True)
        await zk.create(zl.CONFIG_BROKERS + "/1", b"secret", makepath=True)

        for client in (anonymous(), anonymous(auth_data=[("digest", "replog:wrong")])):
            with pytest.raises(NoAuthError):
                client.delete(zl.CONTROLLER)
            with pytest.raises(NoAuthError):
                client.set(zl.topic_path("t"), b"rewritten")
            with pytest.raises(NoAuthError):
                client.delete(zl.topic_path("t"))
            with pytest.raises(NoAuthError):
                client.create(zl.broker_path(9), b"{}", ephemeral=True)
            with pytest.raises(NoAuthError):
                client.create("/admin/reassign_partitions", b"{}")
            with pytest.raises(NoAuthError):
                client.create("/kafka-acl", b"")
            with pytest.raises(NoAuthError):
                client.set_acls(zl.CONTROLLER, list(OPEN_ACL_UNSAFE))
            with pytest.raises(NoAuthError):
                client.get(zl.CONFIG_BROKERS + "/1")
            # world-readable where Kafka leaves it so
            assert client.get(zl.CONTROLLER)[0] == b'{"brokerid":1}'
            assert client.get(zl.topic_path("t"))[0] == b"topic"
            assert client.get_children(zl.TOPICS) == ["t"]

        # the cluster's own credentials still may
        assert (await zk.get(zl.topic_path("t")))[0] == b"topic"
        await zk.set(zl.topic_path("t"), b"changed")
        assert (await zk.get(zl.CONFIG_BROKERS + "/1"))[0] == b"secret"
    finally:
        await zk.stop()


async def test_credentials_are_sent_again_on_a_new_session_after_expiry(
        secure_hosts, zk_server):
    zk = await started(secure_hosts, SECURE)
    try:
        await zk.ensure_path(zl.BROKER_IDS)
        await zk.create(zl.broker_path(1), b"{}", ephemeral=True)
        before = zk.session_id
        loop = zk._loop
        await loop.run_in_executor(None, expire_session, zk.client, zk_server.hosts)
        assert zk.session_id != before
        # the ephemeral went with the old session; registering again needs CREATE on
        # /brokers/ids, which only the credentials give
        assert await zk.exists(zl.broker_path(1)) is None
        await zk.create(zl.broker_path(1), b"{}", ephemeral=True)
        await zk.delete(zl.broker_path(1))
    finally:
        await zk.stop()


async def test_credentials_are_sent_again_on_a_new_connection_of_the_same_session(
        secure_hosts):
    # ZooKeeper keeps a client's identity per connection, not per session: after a dropped
    # connection the session goes on but the new connection must authenticate again.
    zk = await started(secure_hosts, SECURE)
    states: list[str] = []
    reconnected = asyncio.Event()

    def on_state(state: str) -> None:
        states.append(state)
        if state == "CONNECTED" and "SUSPENDED" in states:
            reconnected.set()
    zk.on_state_change(on_state)
    try:
        await zk.ensure_path(zl.BROKER_IDS)
        before = zk.session_id
        zk.client._connection._socket.shutdown(socket.SHUT_RDWR)  # the TCP connection drops
        await asyncio.wait_for(reconnected.wait(), 20)
        assert zk.session_id == before  # same session, new connection
        await zk.create(zl.broker_path(1), b"{}", ephemeral=True)
        await zk.set(zl.broker_path(1), b"{}")
    finally:
        await zk.stop()


async def test_without_set_acl_znodes_stay_open_even_with_credentials(secure_hosts, anonymous):
    zk = await started(secure_hosts, ZkSecurity(set_acl=False, digest=CREDENTIALS))
    try:
        await zk.ensure_path(zl.BROKER_IDS)
        await zk.create(zl.CONTROLLER, b"{}", ephemeral=True)
    finally:
        await zk.stop()
    reader = anonymous()
    for path in ("/brokers", zl.BROKER_IDS):
        assert reader.get_acls(path)[0] == list(OPEN_ACL_UNSAFE)
    reader.create(zl.broker_path(9), b"{}")  # open: anyone may, as before


def test_world_read_is_readonly() -> None:
    assert list(READ_ACL_UNSAFE) == [(Permissions.READ, WORLD)]


@pytest.mark.parametrize("role,id_key", [("broker", "broker.id"), ("controller", "controller.id")])
def test_a_process_with_set_acl_and_no_credentials_refuses_to_start(role, id_key, tmp_path,
                                                                     zk_hosts):
    from tests.admin.test_integration import one_line_error, replog
    cfg = tmp_path / f"{role}.properties"
    cfg.write_text(f"{id_key}=1\nzookeeper.set.acl=true\nzookeeper.connect={zk_hosts}\n")
    one_line_error(replog(role, "--config", str(cfg), timeout=60),
                   "zookeeper.set.acl is true but no ZooKeeper credentials")
