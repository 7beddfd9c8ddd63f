"""ZooKeeper ACLs on a real cluster (ZooKeeper, two controllers, three brokers as processes).

With zookeeper.set.acl=true and digest credentials the cluster works as before (topics,
acks=all produce and consume, a controller failover), while a kazoo client without the
credentials gets NoAuth deleting /controller, rewriting /brokers/topics/<t> or registering in
/brokers/ids, reads what Kafka leaves world-readable, and changes nothing. A cluster running
with credentials but open znodes (the migration's first roll) is secured by
``replog zookeeper-security-migration`` and goes on working."""

from __future__ import annotations

import asyncio

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE

from client import AdminClient, Consumer, Producer
from common import zk_layout as zl
from harness.local_cluster import LocalCluster
from harness.testing import *  # the real-cluster fixtures (cluster_factory)
from tests.admin.test_integration import replog

pytestmark = pytest.mark.integration

CREDENTIALS = "replog:cluster-secret"


def _secure_overrides(tmp_path, set_acl: bool) -> dict:
    f = tmp_path / "zk-digest"
    f.write_text(CREDENTIALS + "\n")
    f.chmod(0o600)
    return {"zookeeper.set.acl": str(set_acl).lower(), "zookeeper.auth.digest.file": str(f),
            "min.insync.replicas": 2}


async def _produce_consume(bootstrap: str, topic: str, n: int = 20) -> None:
    async with AdminClient(bootstrap, default_api_timeout_ms=60000) as admin:
        await admin.create_topic(topic, 2, 3)
    sent = {}
    async with Producer(bootstrap, acks="all", linger_ms=2) as producer:
        for i in range(n):
            md = await producer.send_and_wait(topic, f"v{i}".encode(), partition=i % 2)
            sent[(md.partition, md.offset)] = f"v{i}".encode()
    got = {}
    async with Consumer(bootstrap) as consumer:
        await consumer.assign([(topic, 0), (topic, 1)])
        consumer.seek_to_beginning()
        while len(got) < len(sent):
            for r in await consumer.poll(1000):
                got[(r.partition, r.offset)] = r.value
    assert got == sent


def _anonymous(cluster: LocalCluster) -> KazooClient:
    c = KazooClient(cluster.zookeeper_connect, timeout=10.0)
    c.start(15)
    return c


def _refused_everything(cluster: LocalCluster, topic: str) -> None:
    anon = _anonymous(cluster)
    try:
        controller = anon.get(zl.CONTROLLER)[0]  # world-readable, as in Kafka
        assignment = anon.get(zl.topic_path(topic))[0]
        assert sorted(anon.get_children(zl.BROKER_IDS)) == ["1", "2", "3"]
        with pytest.raises(NoAuthError):
            anon.delete(zl.CONTROLLER)
        with pytest.raises(NoAuthError):
            anon.set(zl.topic_path(topic), b'{"version":3,"partitions":{"0":[9]}}')
        with pytest.raises(NoAuthError):
            anon.delete(zl.topic_path(topic), recursive=True)
        with pytest.raises(NoAuthError):
            anon.create(zl.broker_path(9), b"{}", ephemeral=True)
        with pytest.raises(NoAuthError):
            anon.set(zl.CONTROLLER_EPOCH, b"999")
        with pytest.raises(NoAuthError):
            anon.create(zl.RESTART_PARTITIONS + "/restart-", b"{}", sequence=True)
        # nothing changed
        assert anon.get(zl.CONTROLLER)[0] == controller
        assert anon.get(zl.topic_path(topic))[0] == assignment
        assert sorted(anon.get_children(zl.BROKER_IDS)) == ["1", "2", "3"]
    finally:
        anon.stop()
        anon.close()


def test_a_cluster_with_zookeeper_acls_works_and_keeps_out_a_client_without_credentials(
        cluster_factory, tmp_path):
    # a killed controller's /controller goes with its session: a short one fails over sooner
    overrides = {**_secure_overrides(tmp_path, True), "zookeeper.session.timeout.ms": 3000}
    cluster: LocalCluster = cluster_factory(brokers=3, controllers=2, overrides=overrides)
    b = cluster.bootstrap_servers
    asyncio.run(_produce_consume(b, "t"))
    _refused_everything(cluster, "t")

    first = cluster.wait_for_controller()
    cluster.controller(first).kill()
    cluster.wait_for_controller(exclude=[first])
    # the new controller changes znodes its predecessor created (same credentials)
    asyncio.run(_produce_consume(b, "u"))
    _refused_everything(cluster, "u")
    admin = cluster.zk_client()  # the cluster's own client carries the credentials
    assert admin.get(zl.CONTROLLER_EPOCH)[0]


def test_migration_secures_a_running_cluster(cluster_factory, tmp_path):
    # the first roll of the migration: credentials, zookeeper.set.acl still false
    overrides = _secure_overrides(tmp_path, False)
    cluster: LocalCluster = cluster_factory(brokers=3, controllers=1, overrides=overrides)
    b = cluster.bootstrap_servers
    asyncio.run(_produce_consume(b, "t"))
    anon = _anonymous(cluster)
    try:
        assert anon.get_acls(zl.topic_path("t"))[0] == list(OPEN_ACL_UNSAFE)
    finally:
        anon.stop()
        anon.close()

    props = tmp_path / "migrator.properties"
    props.write_text(f"zookeeper.auth.digest.file={overrides['zookeeper.auth.digest.file']}\n")
    p = replog("zookeeper-security-migration", "--zookeeper.acl", "secure",
               "--zookeeper.connect", cluster.zookeeper_connect, "--zk-config-file", str(props))
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.decode().startswith("Set secure ACLs on ")

    _refused_everything(cluster, "t")
    # the cluster, authenticated as the znodes' creator, goes on: a new topic, records
    asyncio.run(_produce_consume(b, "u"))


def test_a_secure_local_cluster_runs_with_zookeeper_acls(cluster_factory):
    """``replog cluster up --security mtls``: ZooKeeper ACLs with the cluster's own digest
    identity (ssl/zookeeper.digest, owner-only), the cluster's own kazoo client included."""
    cluster: LocalCluster = cluster_factory(brokers=3, controllers=1, security="mtls")
    digest = cluster.data_dir / "ssl" / "zookeeper.digest"
    assert digest.stat().st_mode & 0o077 == 0
    user = digest.read_text().strip().split(":")[0]
    assert user == "replog-cluster"
    for h in [*cluster.brokers.values(), *cluster.controllers.values()]:
        props = h.properties()
        assert props["zookeeper.set.acl"] == "true"
        assert props["zookeeper.auth.digest.file"] == str(digest)
    assert sorted(cluster.registered_brokers()) == [1, 2, 3]  # through the credentials
    anon = _anonymous(cluster)
    try:
        assert anon.get(zl.CONTROLLER)[0]
        with pytest.raises(NoAuthError):
            anon.delete(zl.CONTROLLER)
        with pytest.raises(NoAuthError):
            anon.create(zl.broker_path(9), b"{}", ephemeral=True)
    finally:
        anon.stop()
        anon.close()
