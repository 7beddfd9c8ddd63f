"""A client and a listener that disagree about TLS: the CLI's one error line says so. A
plaintext client against a real ``--security mtls`` listener, and an SSL client (the cluster's
``--command-config``) against a plaintext gRPC listener, each get BROKER_NOT_AVAILABLE with a
short hint; before, the line ended at gRPC's "Socket closed" or "WRONG_VERSION_NUMBER"."""

from __future__ import annotations

import uuid
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2_grpc

from client.errors import tls_mismatch_hint
from harness.local_cluster import LocalCluster
from tests.security.test_tls_cluster import _replog

pytestmark = pytest.mark.integration

SSL_HINT = "(is the listener SSL? pass --command-config with security.protocol=SSL)"
PLAINTEXT_HINT = "(is the listener PLAINTEXT? --command-config asks for security.protocol=SSL)"


@pytest.mark.parametrize("message,client_tls,hint", [
    ("127.0.0.1:1: UNAVAILABLE (failed to connect; last error: ... Socket closed)", False,
     " " + SSL_HINT),
    ("127.0.0.1:1: UNAVAILABLE (failed to connect; last error: ... Socket closed)", True, ""),
    ("... Tls handshake failed ... WRONG_VERSION_NUMBER ...", True, " " + PLAINTEXT_HINT),
    ("... Tls handshake failed ... WRONG_VERSION_NUMBER ...", False, ""),
    ("127.0.0.1:1: UNAVAILABLE (Connection refused)", False, ""),  # nothing listens: no hint
    ("127.0.0.1:1: UNAVAILABLE (Connection refused)", True, ""),
])
def test_tls_mismatch_hint(message, client_tls, hint):
    assert tls_mismatch_hint(message, client_tls) == hint


@pytest.fixture(scope="module")
def secure(zk_server, tmp_path_factory):
    data = tmp_path_factory.mktemp("hint")
    c = LocalCluster(data / "cluster", brokers=1, log_dirs_per_broker=1, security="mtls",
                     zookeeper=f"{zk_server.hosts}/replog-hint-{uuid.uuid4().hex[:10]}")
    c.start()
    try:
        yield c
    finally:
        c.stop(graceful=False)


def test_a_plaintext_cli_against_an_ssl_listener_is_told_to_pass_command_config(secure):
    rc, _, err = _replog("topics", "list", "--bootstrap-server", secure.bootstrap_servers,
                         "--timeout-ms", "1500")
    assert rc == 1 and err.count("\n") == 1, err
    assert "BROKER_NOT_AVAILABLE" in err and err.rstrip().endswith(SSL_HINT), err


def test_an_ssl_cli_against_a_plaintext_listener_is_told_so(secure):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        rc, _, err = _replog("topics", "list", "--bootstrap-server", f"127.0.0.1:{port}",
                             "--timeout-ms", "1500", "--command-config",
                             str(secure.client_properties_path))
    finally:
        server.stop(0)
    assert rc == 1 and err.count("\n") == 1, err
    assert err.rstrip().endswith(PLAINTEXT_HINT), err


def test_the_right_protocol_gets_no_hint(secure):
    rc, _, err = _replog("topics", "list", "--bootstrap-server", secure.bootstrap_servers,
                         "--command-config", str(secure.client_properties_path))
    assert rc == 0, err
