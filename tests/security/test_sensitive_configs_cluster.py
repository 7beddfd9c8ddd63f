"""Issue 42's acceptance for secrets, on a real mutual-TLS cluster (``replog cluster up
--security mtls``): ``replog configs --describe --entity-type brokers --entity-name 1 --all``
and librdkafka's ``describe_configs`` show every password key ``sensitive=true`` with no
value - the broker's dynamic per-listener passwords as its static keys."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

import pytest

from harness import certs, cluster_security
from harness.local_cluster import LocalCluster
from tests.security.test_tls_cluster import _librdkafka_ssl, _ssl_dir

REPO = Path(__file__).resolve().parents[2]
SECRET = "dynpass-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def secure(zk_server, tmp_path_factory):
    data = tmp_path_factory.mktemp("mtls-secrets")
    c = LocalCluster(data / "cluster", brokers=1, security="mtls",
                     zookeeper=f"{zk_server.hosts}/replog-secrets-{uuid.uuid4().hex[:10]}")
    c.start()
    try:
        yield c
    finally:
        c.stop(graceful=False)


def _replog(*args: str, timeout: float = 60) -> tuple[int, str, str]:
    async def run():
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "admin.cli", *args, cwd=REPO,
            env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
        return proc.returncode, out.decode(), err.decode()
    return asyncio.run(run())


PASSWORDS = ("listener.name.ssl.ssl.key.password", "listener.name.ssl.ssl.keystore.password")


@pytest.mark.integration
def test_configs_describe_all_shows_passwords_sensitive_without_a_value(secure):
    c = secure
    cfg = str(c.client_properties_path)
    rc, _, err = _replog("configs", "--bootstrap-server", c.bootstrap_servers,
                         "--entity-type", "brokers", "--entity-name", "1", "--alter",
                         "--add-config", ",".join(f"{k}={SECRET}" for k in PASSWORDS),
                         "--command-config", cfg)
    assert rc == 0, err
    rc, out, err = _replog("configs", "--bootstrap-server", c.bootstrap_servers,
                           "--entity-type", "brokers", "--entity-name", "1", "--describe",
                           "--all", "--command-config", cfg)
    assert rc == 0, err
    digest = (_ssl_dir(c) / cluster_security.ZOOKEEPER_DIGEST_FILE).read_text().strip()
    assert SECRET not in out and digest not in out
    lines = {line.split("=", 1)[0].strip(): line for line in out.splitlines() if "=" in line}
    for k in PASSWORDS:
        assert f"{k}=null sensitive=true" in lines[k], lines[k]
        assert "DYNAMIC_BROKER_CONFIG:" + k + "=null" in lines[k], lines[k]
    assert "sensitive=false" in lines["broker.id"]


@pytest.mark.integration
def test_librdkafka_describe_configs_shows_passwords_sensitive_without_a_value(secure):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
    c = secure
    cfg = str(c.client_properties_path)
    rc, _, err = _replog("configs", "--bootstrap-server", c.bootstrap_servers,
                         "--entity-type", "brokers", "--entity-name", "1", "--alter",
                         "--add-config", f"{PASSWORDS[0]}={SECRET}", "--command-config", cfg)
    assert rc == 0, err
    keystore = cluster_security.keystore_path(c.data_dir, "client-admin")
    admin = AdminClient({"bootstrap.servers": c.kafka_bootstrap_servers,
                         **_librdkafka_ssl(keystore, _ssl_dir(c) / certs.CA_CERT)})
    [f] = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")],
                                 request_timeout=20).values()
    entries = f.result(timeout=30)
    e = entries[PASSWORDS[0]]
    assert e.is_sensitive and e.value is None
    assert all(s.value is None for s in e.synonyms.values())
    assert not any(x.value and SECRET in x.value for x in entries.values())
    assert not entries["broker.id"].is_sensitive and entries["broker.id"].value == "1"
