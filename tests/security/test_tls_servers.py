"""TLS on real servers without a cluster: gRPC listeners bound by bind_listeners from a config
(ssl.client.auth none / requested / required), the principal a servicer is given
(SslPrincipalBuilder with mapping rules), the Kafka listener's per-connection principal, and
client channels that read replaced key files when they open."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from broker.kafka_listener import KafkaListener
from common.config import build_config
from common.kafka_protocol.api import ApiKey
from common.listener_servers import bind_listeners
from common.listeners import listener_config
from common.security.listener_security import kafka_listener_tls, principal_builder_for
from common.security.principal import current_kafka_principal
from common.security.tls import SslChannelFactory, SslSettings, split_keystore
from harness import certs

RULES = "RULE:^CN=([^,]+),O=replog$/$1/L,DEFAULT"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    ca = certs.create_ca(d)
    certs.issue(ca, "server", d / "server.pem")
    certs.issue(ca, "Alice", d / "alice.pem")
    other = certs.create_ca(d / "other")
    certs.issue(other, "mallory", d / "mallory.pem")
    return d


def _config(pki: Path, client_auth: str):
    return build_config([(k, v, "test") for k, v in {
        "listeners": "SECURE://127.0.0.1:0,KAFKA://127.0.0.1:0",
        "listener.security.protocol.map": "SECURE:SSL,KAFKA:SSL",
        "ssl.keystore.location": str(pki / "server.pem"),
        "ssl.truststore.location": str(pki / certs.CA_CERT),
        "ssl.client.auth": client_auth,
        "ssl.principal.mapping.rules": RULES}.items()])


class _WhoAmI(health_pb2_grpc.HealthServicer):
    """Records each caller's principal as the servicer's builder gives it."""

    def __init__(self, builder):
        self.builder = builder
        self.seen: list[str] = []

    async def Check(self, request, context):
        self.seen.append(str(self.builder.from_grpc(context)))
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


async def _grpc_principal(pki: Path, client_auth: str, keystore: str | None) -> str:
    cfg = _config(pki, client_auth)
    (bound,) = bind_listeners(tuple(e for e in listener_config(cfg).listeners
                                    if e.listener == "SECURE"), cfg)
    svc = _WhoAmI(principal_builder_for(cfg, "SECURE"))
    health_pb2_grpc.add_HealthServicer_to_server(svc, bound.server)
    await bound.server.start()
    try:
        factory = SslChannelFactory(SslSettings(
            keystore_location=str(pki / keystore) if keystore else None,
            truststore_location=str(pki / certs.CA_CERT)))
        async with factory(f"127.0.0.1:{bound.port}", ()) as ch:
            await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(),
                                                        timeout=5)
        return svc.seen[-1]
    finally:
        await bound.server.stop(0)


@pytest.mark.parametrize("client_auth,keystore,principal", [
    ("required", "alice.pem", "User:alice"),       # the mapping rule lower-cases
    ("requested", "alice.pem", "User:alice"),
    ("none", "alice.pem", "User:ANONYMOUS"),       # no certificate is asked for
    ("none", None, "User:ANONYMOUS"),
])
def test_a_grpc_listener_gives_the_servicer_the_mapped_principal(pki, client_auth, keystore,
                                                                 principal):
    assert asyncio.run(_grpc_principal(pki, client_auth, keystore)) == principal


@pytest.mark.parametrize("client_auth", ["required", "requested"])
@pytest.mark.parametrize("keystore", [None, "mallory.pem"])
def test_a_grpc_listener_that_asks_for_a_certificate_refuses_none_or_a_foreign_one(
        pki, client_auth, keystore):
    # requested is served as required on gRPC listeners (tls.py says why)
    with pytest.raises(grpc.aio.AioRpcError) as e:
        asyncio.run(_grpc_principal(pki, client_auth, keystore))
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_client_channel_reads_a_replaced_keystore_when_it_opens(pki, tmp_path):
    path = tmp_path / "client.pem"
    path.write_bytes((pki / "alice.pem").read_bytes())
    factory = SslChannelFactory(SslSettings(keystore_location=str(path),
                                            truststore_location=str(pki / certs.CA_CERT)))
    cfg = _config(pki, "required")

    async def principals() -> list[str]:
        (bound,) = bind_listeners(tuple(e for e in listener_config(cfg).listeners
                                        if e.listener == "SECURE"), cfg)
        svc = _WhoAmI(principal_builder_for(cfg, "SECURE"))
        health_pb2_grpc.add_HealthServicer_to_server(svc, bound.server)
        await bound.server.start()
        try:
            for _ in range(2):
                async with factory(f"127.0.0.1:{bound.port}", ()) as ch:
                    await health_pb2_grpc.HealthStub(ch).Check(
                        health_pb2.HealthCheckRequest(), timeout=5)
                certs.issue(certs.open_ca(pki), "Bob", path)
            return svc.seen
        finally:
            await bound.server.stop(0)

    assert asyncio.run(principals()) == ["User:alice", "User:bob"]


# ---------------------------------------------------------------------------- Kafka listener


def _client_context(pki: Path, keystore: str | None, tmp: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / certs.CA_CERT))
    if keystore:
        key, chain = split_keystore((pki / keystore).read_bytes(), None, keystore)
        (tmp / "k.pem").write_bytes(key)
        (tmp / "c.pem").write_bytes(chain)
        ctx.load_cert_chain(str(tmp / "c.pem"), str(tmp / "k.pem"))
    return ctx


def _api_versions_request() -> bytes:
    body = (18).to_bytes(2, "big") + (0).to_bytes(2, "big") + (7).to_bytes(4, "big") + \
        (-1).to_bytes(2, "big", signed=True)
    return len(body).to_bytes(4, "big") + body


async def _kafka_principal(pki: Path, client_auth: str, keystore: str | None,
                           tmp: Path) -> str:
    cfg = _config(pki, client_auth)
    listener = KafkaListener(None, 1, "KAFKA", "127.0.0.1", 0, None,
                             **kafka_listener_tls(cfg, "KAFKA"))
    seen: list[str] = []
    served = listener._handlers[ApiKey.API_VERSIONS]

    async def api_versions(req, version):  # the real handler, after noting the principal
        seen.append(str(current_kafka_principal.get()))
        return await served(req, version)
    listener._handlers[ApiKey.API_VERSIONS] = api_versions
    port = await listener.start()
    ctx = _client_context(pki, keystore, tmp)
    try:
        def exchange() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                    ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(_api_versions_request())
                got = b""
                while len(got) < 8:  # size, then correlation id (maybe in two TLS records)
                    chunk = s.recv(8 - len(got))
                    if not chunk:
                        raise ConnectionResetError(f"closed after {got!r}")
                    got += chunk
                return got
        got = await asyncio.to_thread(exchange)
        assert got[4:8] == (7).to_bytes(4, "big")  # the answer's correlation id
        return seen[-1]
    finally:
        await listener.stop()


@pytest.mark.parametrize("client_auth,keystore,principal", [
    ("required", "alice.pem", "User:alice"),
    ("requested", "alice.pem", "User:alice"),
    ("requested", None, "User:ANONYMOUS"),   # Kafka's CERT_OPTIONAL reading
    ("none", "alice.pem", "User:ANONYMOUS"),
])
def test_the_kafka_listener_sets_each_connections_principal(pki, tmp_path, client_auth,
                                                            keystore, principal):
    assert asyncio.run(_kafka_principal(pki, client_auth, keystore, tmp_path)) == principal


@pytest.mark.parametrize("keystore", [None, "mallory.pem"])
def test_the_kafka_listener_refuses_no_or_a_foreign_certificate_when_required(pki, tmp_path,
                                                                              keystore):
    with pytest.raises((ssl.SSLError, ConnectionError)):
        asyncio.run(_kafka_principal(pki, "required", keystore, tmp_path))
