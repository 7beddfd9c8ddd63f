"""Kafka's SSL properties as replog reads them (common/security/tls.py, common/config.py): PEM
from files and inline (KIP-651), listener-prefixed overrides, client properties, and every bad
setting refused in one line naming the key. Pure: real files, no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.config import build_config
from common.errors import ConfigError
from common.security.listener_security import principal_builder_for
from common.security.tls import (
    SslConfigError,
    SslSettings,
    client_settings,
    normalize_pem,
    pem_blocks,
    split_keystore,
)
from harness import certs


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    ca = certs.create_ca(d)
    certs.issue(ca, "broker-1", d / "broker-1.pem", hosts=("broker-1.example",))
    certs.issue(ca, "alice", d / "alice.pem")
    return d


def _one_line(text: str) -> str:
    """A PEM text as Kafka writes it inline in a properties file: on one line."""
    return " ".join(text.split("\n"))


def test_normalize_pem_rewraps_one_line_and_escaped_forms(pki):
    pem = (pki / certs.CA_CERT).read_text()
    assert normalize_pem(_one_line(pem)) == pem.encode()
    assert normalize_pem(pem.replace("\n", "\\n")) == pem.encode()
    assert normalize_pem("no pem here") == b""


def test_a_keystore_is_one_key_and_its_chain(pki):
    key, chain = split_keystore((pki / "alice.pem").read_bytes(), None, "alice.pem")
    assert b"PRIVATE KEY" in key and [k for k, _ in pem_blocks(chain)] == ["CERTIFICATE"] * 2
    only_cert = (pki / certs.CA_CERT).read_bytes()
    with pytest.raises(SslConfigError, match="exactly one private key, found 0"):
        split_keystore(only_cert, None, "ca.crt")
    with pytest.raises(SslConfigError, match="has no certificate"):
        split_keystore(key, None, "k.pem")


def test_an_encrypted_key_needs_its_password(pki, tmp_path):
    from cryptography.hazmat.primitives import serialization
    key, chain = split_keystore((pki / "alice.pem").read_bytes(), None, "alice.pem")
    loaded = serialization.load_pem_private_key(key, None)
    enc = loaded.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.BestAvailableEncryption(b"secret"))
    (tmp_path / "enc.pem").write_bytes(enc + chain)
    got, _ = SslSettings(keystore_location=str(tmp_path / "enc.pem"),
                         key_password="secret").keystore()
    assert b"ENCRYPTED" not in got
    with pytest.raises(SslConfigError, match="cannot read the private key"):
        SslSettings(keystore_location=str(tmp_path / "enc.pem")).keystore()


def _server(pki: Path, **extra: str) -> list[tuple[str, str, str]]:
    props = {"listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
             "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:PLAINTEXT",
             "inter.broker.listener.name": "INTERNAL",
             "ssl.keystore.location": str(pki / "broker-1.pem"),
             "ssl.truststore.location": str(pki / certs.CA_CERT),
             "ssl.client.auth": "required", **extra}
    return [(k, v, "server.properties:1") for k, v in props.items()]


def test_an_ssl_listener_with_pem_files_is_accepted(pki):
    cfg = build_config(_server(pki))
    s = SslSettings.from_properties(cfg, "INTERNAL")
    assert s.client_auth == "required" and s.keystore() and s.truststore()
    assert str(principal_builder_for(cfg, "EXTERNAL").from_peer_certificate(b"x")) == \
        "User:ANONYMOUS"


def test_inline_pem_material_is_accepted(pki):
    key, chain = split_keystore((pki / "broker-1.pem").read_bytes(), None, "b")
    cfg = build_config([e for e in _server(pki) if not e[0].startswith("ssl.")] + [
        ("ssl.keystore.type", "PEM", "f:1"),
        ("ssl.keystore.key", _one_line(key.decode()), "f:2"),
        ("ssl.keystore.certificate.chain", _one_line(chain.decode()), "f:3"),
        ("ssl.truststore.certificates", _one_line((pki / certs.CA_CERT).read_text()), "f:4"),
        ("ssl.client.auth", "required", "f:5")])
    s = SslSettings.from_properties(cfg, "INTERNAL")
    assert s.keystore() == (key, chain)
    assert s.truststore() == (pki / certs.CA_CERT).read_bytes()


def test_a_listener_prefixed_setting_wins_for_its_listener(pki):
    cfg = build_config(_server(pki, **{
        "listener.name.internal.ssl.client.auth": "none",
        "listener.name.INTERNAL.ssl.keystore.location": str(pki / "alice.pem")}))
    s = SslSettings.from_properties(cfg, "INTERNAL")
    assert s.client_auth == "none" and s.keystore_location == str(pki / "alice.pem")
    assert SslSettings.from_properties(cfg, "OTHER").client_auth == "required"


@pytest.mark.parametrize("extra,words", [
    ({"ssl.client.auth": "sometimes"}, "'ssl.client.auth'"),
    ({"ssl.keystore.type": "JKS"}, "'ssl.keystore.type'"),
    ({"ssl.keystore.location": "/no/such/file.pem"}, "No such file"),
    ({"ssl.truststore.location": "/no/such/ca.pem"}, "No such file"),
    ({"ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/X"}, "Invalid rule"),
    ({"ssl.endpoint.identification.algorithm": ""}, "'ssl.endpoint.identification.algorithm'"),
    ({"listener.name.internal.ssl.client.auth": "maybe"},
     "'listener.name.internal.ssl.client.auth'"),
    ({"listener.name.internal.ssl.nonsense": "1"}, "unknown configuration key"),
    ({"ssl.keystore.key": "-----BEGIN PRIVATE KEY----- x -----END PRIVATE KEY-----"},
     "alternatives"),
])
def test_a_bad_ssl_setting_is_one_line(pki, extra, words):
    with pytest.raises(ConfigError) as e:
        build_config(_server(pki, **extra))
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_client_auth_needs_a_truststore(pki):
    entries = [e for e in _server(pki) if e[0] != "ssl.truststore.location"]
    with pytest.raises(ConfigError, match="'ssl.truststore.location'.*needs a truststore"):
        build_config(entries)
    build_config([e for e in entries if e[0] != "ssl.client.auth"])  # none: no truststore


def test_client_properties(pki):
    ca, ks = str(pki / certs.CA_CERT), str(pki / "alice.pem")
    assert client_settings({}, "c.properties") is None
    assert client_settings({"security.protocol": "plaintext"}, "c") is None
    s = client_settings({"security.protocol": "SSL", "ssl.truststore.location": ca,
                         "ssl.keystore.location": ks, "client.id": "x"}, "c")
    assert s.keystore() and s.truststore()
    for props, words in [
            ({"security.protocol": "SASL_SSL"}, "SASL_SSL is not supported"),
            ({"security.protocol": "TLS"}, "must be PLAINTEXT or SSL"),
            ({"security.protocol": "SSL"}, "needs ssl.truststore.location"),
            ({"security.protocol": "SSL", "ssl.truststore.location": ca,
              "ssl.keystore.location": "/nope"}, "No such file"),
            ({"security.protocol": "SSL", "ssl.trustsore.location": ca}, "unknown client"),
            ({"security.protocol": "SSL", "ssl.truststore.location": ks + "x"}, "No such")]:
        with pytest.raises(SslConfigError) as e:
            client_settings(props, "c.properties")
        assert words in str(e.value) and str(e.value).startswith("c.properties: "), e.value
