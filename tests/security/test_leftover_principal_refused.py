"""A certificate whose subject matches no ``ssl.principal.mapping.rules`` rule fails
authentication, as Kafka's DefaultKafkaPrincipalBuilder fails on SslPrincipalMapper's
NoMatchingRule: a gRPC listener answers every call UNAUTHENTICATED naming the DN, the Kafka
listener closes the connection and logs one line. Real servers, real TLS handshakes."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from broker.kafka_listener import KafkaListener
from common.config import build_config
from common.listener_servers import bind_listeners
from common.listeners import listener_config
from common.observability import configure_event_log
from common.security.listener_security import kafka_listener_tls
from common.security.principal import SslAuthenticationFailed
from common.security.tls import (
    SslChannelFactory,
    SslPrincipalBuilder,
    SslSettings,
    split_keystore,
    ssl_server_interceptors,
)
from harness import certs
from tests.security.test_tls_servers import _api_versions_request

# maps CN=x,O=replog only: a certificate with an OU matches nothing (no DEFAULT)
RULES = "RULE:^CN=([^,]+),O=replog$/$1/L"
UNMATCHED_DN = certs.distinguished_name("eve", ou="ops")


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    ca = certs.create_ca(d)
    for cn, ou in (("server", None), ("Alice", None), ("eve", "ops")):
        certs.issue(ca, cn, d / f"{cn.lower()}.pem", ou=ou)
    return d


def _config(pki: Path, rules: str = RULES):
    return build_config([(k, v, "test") for k, v in {
        "listeners": "SECURE://127.0.0.1:0,KAFKA://127.0.0.1:0",
        "listener.security.protocol.map": "SECURE:SSL,KAFKA:SSL",
        "ssl.keystore.location": str(pki / "server.pem"),
        "ssl.truststore.location": str(pki / certs.CA_CERT),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": rules}.items()])


def test_the_builder_refuses_a_subject_no_rule_matches(pki):
    der = x509.load_pem_x509_certificate((pki / "eve.pem").read_bytes()).public_bytes(
        serialization.Encoding.DER)
    builder = SslPrincipalBuilder(RULES)
    for _ in range(2):  # the refusal is cached with the principals, and raised each time
        with pytest.raises(SslAuthenticationFailed, match="matches no ssl.principal.mapping"):
            builder.from_peer_certificate(der)


@pytest.mark.parametrize("rules,client_auth,installed", [
    (RULES, "required", True),
    (RULES + ",DEFAULT", "required", False),  # DEFAULT maps every subject
    (RULES, "none", False),                   # no certificate is asked for
])
def test_the_interceptor_is_installed_only_where_a_refusal_is_possible(rules, client_auth,
                                                                       installed):
    settings = SslSettings(principal_mapping_rules=rules, client_auth=client_auth)
    assert bool(ssl_server_interceptors(settings)) is installed


async def _health_check(pki: Path, keystore: str) -> None:
    cfg = _config(pki)
    (bound,) = bind_listeners(tuple(e for e in listener_config(cfg).listeners
                                    if e.listener == "SECURE"), cfg)
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), bound.server)
    await bound.server.start()
    try:
        factory = SslChannelFactory(SslSettings(keystore_location=str(pki / keystore),
                                                truststore_location=str(pki / certs.CA_CERT)))
        async with factory(f"127.0.0.1:{bound.port}", ()) as ch:
            await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(),
                                                        timeout=5)
    finally:
        await bound.server.stop(0)


def test_a_grpc_listener_serves_a_mapped_certificate(pki):
    asyncio.run(_health_check(pki, "alice.pem"))


def test_a_grpc_listener_refuses_an_unmapped_certificate_as_unauthenticated(pki):
    with pytest.raises(grpc.aio.AioRpcError) as e:
        asyncio.run(_health_check(pki, "eve.pem"))
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert UNMATCHED_DN in e.value.details()
    assert "ssl.principal.mapping.rules" in e.value.details()
    assert "\n" not in e.value.details()


async def _kafka_exchange(pki: Path, keystore: str, tmp: Path) -> bytes:
    """The bytes the Kafka listener sends back to one ApiVersions request (b"" when it
    closes the connection instead)."""
    cfg = _config(pki)
    events = configure_event_log(str(tmp / "events.log"), "broker")
    listener = KafkaListener(None, 1, "KAFKA", "127.0.0.1", 0, events,
                             **kafka_listener_tls(cfg, "KAFKA"))
    port = await listener.start()
    ctx = ssl.create_default_context(cafile=str(pki / certs.CA_CERT))
    key, chain = split_keystore((pki / keystore).read_bytes(), None, keystore)
    (tmp / "k.pem").write_bytes(key)
    (tmp / "c.pem").write_bytes(chain)
    ctx.load_cert_chain(str(tmp / "c.pem"), str(tmp / "k.pem"))
    try:
        def exchange() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                    ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                try:
                    s.sendall(_api_versions_request())
                    got = b""
                    while len(got) < 8:
                        chunk = s.recv(8 - len(got))
                        if not chunk:
                            return got
                        got += chunk
                    return got
                except (ssl.SSLError, ConnectionError):
                    return b""
        return await asyncio.to_thread(exchange)
    finally:
        await listener.stop()


def test_the_kafka_listener_answers_a_mapped_certificate(pki, tmp_path):
    got = asyncio.run(_kafka_exchange(pki, "alice.pem", tmp_path))
    assert got[4:8] == (7).to_bytes(4, "big")


def test_the_kafka_listener_closes_a_connection_with_an_unmapped_certificate(pki, tmp_path):
    assert asyncio.run(_kafka_exchange(pki, "eve.pem", tmp_path)) == b""
    lines = [json.loads(line) for line in (tmp_path / "events.log").read_text().splitlines()]
    failed = [e for e in lines if e.get("event") == "kafka_authentication_failed"]
    assert len(failed) == 1 and UNMATCHED_DN in failed[0]["reason"]
