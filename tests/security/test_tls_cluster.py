"""Mutual TLS on a real cluster (LocalCluster with security="mtls", what ``replog cluster up
--security mtls`` starts): every gRPC and Kafka listener requires a certificate from the
cluster's CA; the CLI connects with ``--command-config``; replication runs over TLS; the Kafka
listener serves librdkafka over SSL; a certificate replaced on disk is served to new
connections. One cluster for the module (real processes, real ZooKeeper)."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import sys
import uuid
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from common.records import iter_batches
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.security.tls import SslChannelFactory, SslSettings, split_keystore
from harness import certs, cluster_security
from harness.local_cluster import LocalCluster

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def secure(zk_server, tmp_path_factory):
    data = tmp_path_factory.mktemp("mtls")
    c = LocalCluster(data / "cluster", brokers=3, security="mtls",
                     zookeeper=f"{zk_server.hosts}/replog-tls-{uuid.uuid4().hex[:10]}")
    c.start()
    # a CA of its own, and a client certificate from it
    other = certs.create_ca(data / "other-ca")
    certs.issue(other, "mallory", data / "other-ca" / "mallory.keystore.pem")
    try:
        yield c, data
    finally:
        c.stop(graceful=False)


def _replog(*args: str, timeout: float = 60) -> tuple[int, str, str]:
    async def run():
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "admin.cli", *args, cwd=REPO,
            env=dict(os.environ, PYTHONPATH=str(REPO)), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(b"\n".join(
            b"record-%d" % i for i in range(200)) + b"\n"), timeout)
        return proc.returncode, out.decode(), err.decode()
    return asyncio.run(run())


def _metadata(channel_factory, address: str):
    async def call():
        ch = channel_factory(address, ())
        try:
            return await replog_pb2_grpc.BrokerStub(ch).Metadata(pb.MetadataRequest(),
                                                                 timeout=5)
        finally:
            await ch.close()
    return asyncio.run(call())


def _ssl_dir(c: LocalCluster) -> Path:
    return cluster_security.ssl_dir(c.data_dir)


def test_the_admin_properties_create_produce_and_consume_through_the_cli(secure):
    c, _ = secure
    cfg = str(c.client_properties_path)
    rc, out, err = _replog("topics", "create", "--bootstrap-server", c.bootstrap_servers,
                           "--topic", "tls", "--partitions", "1", "--replication-factor", "3",
                           "--config", "min.insync.replicas=2", "--command-config", cfg)
    assert rc == 0, err
    rc, _, err = _replog("produce", "--bootstrap-server", c.bootstrap_servers, "--topic",
                         "tls", "--acks", "all", "--command-config", cfg)
    assert rc == 0, err
    rc, out, err = _replog("consume", "--bootstrap-server", c.bootstrap_servers, "--topic",
                           "tls", "--from-beginning", "--max-messages", "200",
                           "--timeout-ms", "20000", "--command-config", cfg)
    assert rc == 0, err
    assert out.split() == [f"record-{i}" for i in range(200)]
    # replication ran over TLS: every replica holds the 200 acks=all records
    for b in c.brokers:
        assert _replica_record_count(c, b, "tls") == 200, f"broker {b}"


def _replica_record_count(c: LocalCluster, broker_id: int, topic: str) -> int:
    from tests.polling import wait_until

    def count() -> int:
        n = 0
        for d in c.broker(broker_id).log_dirs:
            for seg in sorted((Path(d) / f"{topic}-0").glob("*.log")):
                for b in iter_batches(seg.read_bytes(), validate=False,
                                      allow_partial_tail=True):
                    n += b.header.last_offset - b.header.base_offset + 1
        return n
    wait_until(lambda: count() >= 200, timeout=20, interval=0.1)
    return count()


def test_the_cli_without_a_certificate_cannot_connect(secure):
    c, data = secure
    rc, _, err = _replog("topics", "list", "--bootstrap-server", c.bootstrap_servers,
                         "--timeout-ms", "3000", timeout=60)
    assert rc == 1 and "Traceback" not in err, err
    bad = data / "no-such.properties"
    rc, _, err = _replog("topics", "list", "--bootstrap-server", c.bootstrap_servers,
                         "--command-config", str(bad))
    assert rc == 1 and err.strip().count("\n") == 0 and "cannot read" in err, err
    wrong = data / "sasl.properties"
    wrong.write_text("security.protocol=SASL_SSL\n")
    rc, _, err = _replog("topics", "list", "--bootstrap-server", c.bootstrap_servers,
                         "--command-config", str(wrong))
    assert rc == 1 and "SASL_SSL is not supported" in err and err.strip().count("\n") == 0, err


@pytest.mark.parametrize("client", ["plaintext", "no-certificate", "other-ca"])
def test_a_grpc_client_without_a_certificate_of_the_cluster_is_refused(secure, client):
    c, data = secure
    address = c.broker(1).address
    ca = str(_ssl_dir(c) / certs.CA_CERT)
    factory = {
        "plaintext": lambda a, o: grpc.aio.insecure_channel(a),
        "no-certificate": SslChannelFactory(SslSettings(truststore_location=ca)),
        "other-ca": SslChannelFactory(SslSettings(
            keystore_location=str(data / "other-ca" / "mallory.keystore.pem"),
            truststore_location=ca)),
    }[client]
    with pytest.raises(grpc.aio.AioRpcError) as e:
        _metadata(factory, address)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    # the controller's listener too
    with pytest.raises(grpc.aio.AioRpcError):
        _metadata(factory, c.controller(next(iter(c.controllers))).address)
    # while the cluster's own certificate is served
    assert _metadata(c.channel_factory(), address).brokers


def _librdkafka_ssl(keystore: Path | None, ca: Path) -> dict:
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
    if keystore is not None:
        key, chain = split_keystore(keystore.read_bytes(), None, str(keystore))
        conf.update({"ssl.key.pem": key.decode(), "ssl.certificate.pem": chain.decode()})
    return conf


def test_the_kafka_listener_serves_librdkafka_over_mutual_tls(secure):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    c, _ = secure
    ca = _ssl_dir(c) / certs.CA_CERT
    client = cluster_security.issue_client(c.data_dir, "kafka-client")
    # the admin's certificate: a super user of the cluster's AclAuthorizer (kafka-client has
    # no ACLs; test_authorizer_cluster.py covers a principal that needs them)
    keystore = cluster_security.keystore_path(c.data_dir, "client-admin")
    assert client.is_file()
    asyncio.run(_create_topic(c, "kafka-tls"))
    conf = {"bootstrap.servers": c.kafka_bootstrap_servers, **_librdkafka_ssl(keystore, ca)}
    producer = confluent_kafka.Producer({**conf, "acks": "all"})
    for i in range(50):
        producer.produce("kafka-tls", value=b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({**conf, "group.id": "g", "enable.auto.commit": False,
                                         "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition("kafka-tls", 0, 0)])
    got = []
    from tests.polling import wait_until

    def poll() -> bool:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
        return len(got) >= 50
    wait_until(poll, timeout=30, interval=0)
    consumer.close()
    assert got == [b"v%d" % i for i in range(50)]


async def _create_topic(c: LocalCluster, topic: str) -> None:
    from client.admin_client import AdminClient
    from client.transport import ChannelPool
    async with AdminClient(c.bootstrap_servers, pool=ChannelPool(c.channel_factory())) as a:
        await a.create_topic(topic, 1, 3)


@pytest.mark.parametrize("client", ["no-certificate", "other-ca"])
def test_the_kafka_listener_refuses_a_client_without_a_certificate_of_the_cluster(secure,
                                                                                  client):
    c, data = secure
    address = c.broker(1).kafka_address
    # the same exchange with the admin certificate is answered
    assert _kafka_api_versions(_client_context(c, cluster_security.keystore_path(
        c.data_dir, "client-admin")), address)
    keystore = None if client == "no-certificate" else \
        data / "other-ca" / "mallory.keystore.pem"
    # TLS 1.3: the server's verdict on the client certificate arrives after the client's
    # handshake completes, as an alert on the first read
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _kafka_api_versions(_client_context(c, keystore), address)


def _client_context(c: LocalCluster, keystore: Path | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(_ssl_dir(c) / certs.CA_CERT))
    if keystore is not None:
        key, chain = split_keystore(keystore.read_bytes(), None, str(keystore))
        d = c.data_dir / "probe"
        d.mkdir(exist_ok=True)
        (d / f"{keystore.stem}.key").write_bytes(key)
        (d / f"{keystore.stem}.crt").write_bytes(chain)
        ctx.load_cert_chain(str(d / f"{keystore.stem}.crt"), str(d / f"{keystore.stem}.key"))
    return ctx


def _kafka_api_versions(ctx: ssl.SSLContext, address: str) -> bytes:
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname=host) as s:
        s.sendall(_api_versions_request())
        got = s.recv(4)
        if not got:
            raise ConnectionResetError("closed")
        return got


def _api_versions_request() -> bytes:
    body = (18).to_bytes(2, "big") + (0).to_bytes(2, "big") + (1).to_bytes(4, "big") + \
        (-1).to_bytes(2, "big", signed=True)
    return len(body).to_bytes(4, "big") + body


def _served_serial(c: LocalCluster, address: str, alpn: list[str] | None) -> int:
    ctx = _client_context(c, cluster_security.keystore_path(c.data_dir, "client-admin"))
    if alpn:
        ctx.set_alpn_protocols(alpn)
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname=host) as s:
        return x509.load_der_x509_certificate(s.getpeercert(binary_form=True)).serial_number


def test_a_certificate_replaced_on_disk_is_served_to_new_connections(secure):
    c, _ = secure
    h = c.broker(2)
    before = (_served_serial(c, h.address, ["h2"]), _served_serial(c, h.kafka_address, None))
    keystore = cluster_security.keystore_path(c.data_dir, h.name)
    certs.issue(certs.open_ca(_ssl_dir(c)), h.name, keystore, ou=cluster_security.CLUSTER_OU)
    new = x509.load_pem_x509_certificates(keystore.read_bytes())[0].serial_number
    assert new not in before
    assert _served_serial(c, h.address, ["h2"]) == new
    assert _served_serial(c, h.kafka_address, None) == new
    # and the broker still serves (and replicates) with it
    assert _metadata(c.channel_factory(), h.address).brokers


def test_cluster_certs_issues_a_second_principal_in_one_command(secure):
    c, data = secure
    rc, out, err = _replog("cluster", "certs", "--data-dir", str(c.data_dir), "--cn", "alice")
    assert rc == 0, err
    path = _ssl_dir(c) / "alice.properties"
    assert str(path) in out and "User:alice" in out
    rc, out, err = _replog("topics", "list", "--bootstrap-server", c.bootstrap_servers,
                           "--command-config", str(path))
    assert rc == 0, err
    rc, _, err = _replog("cluster", "certs", "--data-dir", str(data / "nothing"), "--cn", "x")
    assert rc == 1 and err.strip().count("\n") == 0 and "no certificate authority" in err, err


def test_replog_cluster_security_makes_every_local_cluster_secure(tmp_path, monkeypatch):
    from harness.local_cluster import SECURITY_ENV
    monkeypatch.setenv(SECURITY_ENV, "mtls")
    assert LocalCluster(tmp_path / "a", brokers=1).security == "mtls"
    monkeypatch.setenv(SECURITY_ENV, "")
    assert LocalCluster(tmp_path / "b", brokers=1).security is None
    monkeypatch.setenv(SECURITY_ENV, "tls-please")
    with pytest.raises(Exception, match="unknown security mode 'tls-please'"):
        LocalCluster(tmp_path / "c", brokers=1)


def test_the_registration_names_every_listener_ssl(secure):
    c, _ = secure
    regs = c.registered_brokers()
    assert set(regs) == set(c.brokers)
    for reg in regs.values():
        assert reg.security_protocols == (("KAFKA", "SSL"), ("SSL", "SSL"))
