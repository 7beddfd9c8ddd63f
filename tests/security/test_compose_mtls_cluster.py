"""docker-compose.mtls.yml run for real on top of docker-compose.yml: the certs service
completes, every broker and controller comes up healthy over mutual TLS, and from the host,
through the published EXTERNAL listeners:
- the admin's client.properties (written by certs, key material inline) creates a topic,
  produces acks=all and consumes;
- a plaintext client, and a TLS client without a certificate, are refused;
- a certificate issued by ``certs client --cn alice`` (User:alice, no ACLs) gets
  TOPIC_AUTHORIZATION_FAILED, and produces once ``replog acls --add --allow-principal
  User:alice --producer`` (sent with the admin's properties through a broker) has reached the
  brokers;
- Prometheus still scrapes every process's /metrics (plain HTTP).
Torn down with ``down -v``. Skips, saying why, only when Docker cannot run at all, as
tests/observability/test_compose.py does (whose helpers it uses).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from common.security.tls import load_client_properties
from tests.observability.catalog import REPO
from tests.observability.test_compose import docker_unusable, run, wait_for

pytestmark = pytest.mark.integration

PROJECT = "replog-mtls-test"  # apart from a developer's stack and the plaintext test's
FILES = ("-f", "docker-compose.yml", "-f", "docker-compose.mtls.yml")
BOOTSTRAP = "127.0.0.1:19092"
TOPIC = "compose-mtls"


def compose(*args: str) -> str:
    return run("docker-compose", "-p", PROJECT, *FILES, *args)


def replog(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """The CLI on the host; the caller judges the outcome."""
    return subprocess.run([sys.executable, "-m", "admin.cli", *args], input=stdin,
                          capture_output=True, timeout=120, cwd=REPO, check=False)


def ok(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 0, f"{p.args} failed:\n{p.stdout.decode()}\n{p.stderr.decode()}"
    return p.stdout.decode()


# Minutes of containers under vfs (12 in its first run, at a load average near 30; images,
# ten containers, down -v): make soak runs it. make test keeps tests/security/
# test_compose_mtls.py, which checks the same files without Docker.
@pytest.mark.soak
def test_compose_mtls_cluster_admin_plaintext_refused_and_acls(tmp_path, monkeypatch):
    reason = docker_unusable()
    if reason:
        pytest.skip(f"Docker cannot run here: {reason}")
    client_dir = tmp_path / "client"
    monkeypatch.setenv("REPLOG_MTLS_CLIENT_DIR", str(client_dir))
    run(str(REPO / "docker" / "build-images.sh"), sys.executable)
    compose("down", "-v")  # leftovers of an interrupted run
    try:
        compose("up", "-d")
        ids = compose("ps", "-q").split()
        # certs, 3 zookeeper members, 2 controllers, 3 brokers, prometheus
        assert len(ids) == 10, ids

        def healthy():
            states = json.loads(run("docker", "inspect", *ids))
            certs = [s for s in states if s["Config"]["Labels"].get(
                "com.docker.compose.service") == "certs"]
            assert certs[0]["State"]["Status"] == "exited" and \
                certs[0]["State"]["ExitCode"] == 0, certs[0]["State"]
            return all(s["State"].get("Health", {"Status": "healthy"})["Status"] == "healthy"
                       for s in states if s not in certs)
        wait_for(healthy, 300, "the certs service done and every process healthy")

        admin = str(client_dir / "client.properties")
        assert not any(k.endswith(".location") for k in load_client_properties(admin))
        wait_for(lambda: ok(replog("topics", "create", "--bootstrap-server", BOOTSTRAP,
                                   "--topic", TOPIC, "--partitions", "3",
                                   "--replication-factor", "3", "--if-not-exists",
                                   "--command-config", admin)) or True, 120, "topic created")
        records = [f"record-{i}" for i in range(100)]
        wait_for(lambda: ok(replog("produce", "--bootstrap-server", BOOTSTRAP, "--topic", TOPIC,
                                   "--acks", "all", "--command-config", admin,
                                   stdin="\n".join(records).encode() + b"\n")) or True,
                 60, "admin's records acked")

        def consume(properties: str, count: int) -> list[str]:
            return sorted(ok(replog("consume", "--bootstrap-server", "127.0.0.1:19093",
                                    "--topic", TOPIC, "--from-beginning", "--max-messages",
                                    str(count), "--timeout-ms", "60000",
                                    "--command-config", properties)).split())
        assert consume(admin, len(records)) == sorted(records)

        # No certificate at all: a plaintext client, and TLS trusting the CA but sending none.
        plaintext = replog("topics", "list", "--bootstrap-server", BOOTSTRAP)
        assert plaintext.returncode == 1 and TOPIC not in plaintext.stdout.decode(), plaintext
        anonymous = tmp_path / "anonymous.properties"
        anonymous.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                             "ssl.truststore.certificates="
                             + load_client_properties(admin)["ssl.truststore.certificates"]
                             + "\n")
        no_cert = replog("topics", "list", "--bootstrap-server", BOOTSTRAP,
                         "--command-config", str(anonymous))
        assert no_cert.returncode == 1 and TOPIC not in no_cert.stdout.decode(), no_cert

        # Another client from the same CA: authenticated, but no ACL names it yet.
        compose("run", "--rm", "certs", "client", "--data-dir", "/etc/replog", "--cn", "alice",
                "--client-dir", "/client")
        alice = str(client_dir / "alice.properties")

        def alice_produces() -> subprocess.CompletedProcess:
            return replog("produce", "--bootstrap-server", BOOTSTRAP, "--topic", TOPIC,
                          "--acks", "all", "--command-config", alice, stdin=b"from-alice\n")
        refused = alice_produces()
        assert refused.returncode == 1, refused
        assert "TOPIC_AUTHORIZATION_FAILED" in refused.stderr.decode(), refused.stderr
        ok(replog("acls", "--bootstrap-server", BOOTSTRAP, "--command-config", admin, "--add",
                  "--allow-principal", "User:alice", "--producer", "--topic", TOPIC))
        # Every broker leading a partition learns the ACL from ZooKeeper's notification.
        wait_for(lambda: ok(alice_produces()) or True, 60, "alice's produce allowed")
        assert "from-alice" in consume(admin, len(records) + 1)

        def targets_up():
            with urllib.request.urlopen("http://127.0.0.1:19090/api/v1/targets",
                                        timeout=5) as r:
                active = json.loads(r.read())["data"]["activeTargets"]
            return len(active) == 5 and all(t["health"] == "up" for t in active)
        wait_for(targets_up, 120, "Prometheus sees all 5 targets up")
    finally:
        compose("down", "-v")
