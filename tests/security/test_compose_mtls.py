"""docker-compose.mtls.yml read without Docker: the secure compose cluster's configuration is
what `replog cluster up --security mtls` gives a local cluster, and every file it names exists.

The one-shot ``certs`` service's own command (docker/mtls-certs.py with the arguments the
override file gives it) runs here for real, on a stand-in for each container's filesystem: a
directory per service where each of its volumes is a symlink, to a directory per named volume
(``ssl``) or to the bind-mounted host path. Then every broker and controller of
docker-compose.yml, merged with its override as compose merges them (command replaced,
volumes by target, healthcheck and depends_on by key), is started on paper: its ``--config``
file and ``--override`` arguments through replog's config loader, every listener through the
server-side TLS check (keystore and truststore loaded from what certs wrote), its
certificate's principal through the configured mapping rules. tests/security/
test_compose_mtls_cluster.py runs the stack (make soak).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from common.config import build_config, parse_override
from common.listeners import listener_config
from common.properties import parse_properties_text
from common.security.listener_security import principal_builder_for
from common.security.principal import KafkaPrincipal
from common.security.tls import SSL, SslSettings, client_settings, load_client_properties
from harness import cluster_security

REPO = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
MTLS = yaml.safe_load((REPO / "docker-compose.mtls.yml").read_text())
REPLOG_IMAGE = "replog:dev"
SSL_MOUNT = "/etc/replog/ssl"
# The keys whose values are paths inside the container.
PATH_KEYS = ("ssl.keystore.location", "ssl.truststore.location", "zookeeper.auth.digest.file")


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's ``${NAME:-default}`` and ``${NAME}``."""
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}",
                  lambda m: env.get(m[1]) or (m[2] or ""), text)


def merged(name: str) -> dict:
    """Service ``name`` of both files merged as compose 1.29 merges an override."""
    base, over = dict(BASE["services"].get(name, {})), MTLS["services"][name]
    out = {**base, **over}
    by_target = {v.split(":")[1]: v for v in base.get("volumes", []) + over.get("volumes", [])}
    out["volumes"] = list(by_target.values())
    for key in ("healthcheck", "depends_on"):
        out[key] = {**base.get(key, {}), **over.get(key, {})}
    return out


def replog_processes() -> list[str]:
    """Every broker and controller docker-compose.yml runs (the replog image's services)."""
    names = [n for n, s in BASE["services"].items() if s.get("image") == REPLOG_IMAGE]
    assert len(names) == 5, names
    return names


class Containers:
    """A directory standing in for each service's filesystem, its volumes symlinked in."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root, self.env = root, env

    def path(self, service: str, inside: str) -> Path:
        top = self.root / "containers" / service
        for spec in merged(service)["volumes"]:
            source, target = interpolate(spec, self.env).split(":")[:2]
            link = top / target.lstrip("/")
            if not link.is_symlink():
                host = (REPO / source if source.startswith(".") else Path(source)
                        if source.startswith("/") else self.root / "volumes" / source)
                host.mkdir(parents=True, exist_ok=True)
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(host.resolve())
        return top / inside.lstrip("/")


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Containers:
    """The certs service run as compose runs it: its entrypoint and command, in its container."""
    root = tmp_path_factory.mktemp("compose-mtls")
    env = {"REPLOG_MTLS_CLIENT_DIR": str(root / "host-client")}
    fs = Containers(root, env)
    certs = merged("certs")
    assert certs["entrypoint"][:2] == ["python", "/opt/replog/docker/mtls-certs.py"]
    script = fs.path("certs", certs["entrypoint"][1])
    args = [str(fs.path("certs", a)) if a.startswith("/") else a for a in certs["command"]]
    p = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                       cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), check=False)
    assert p.returncode == 0, p.stderr
    return fs


def process_config(fs: Containers, service: str):
    """The configuration the service's process starts with, its paths resolved in its
    container (replog's loader: an unknown key or a bad value fails here)."""
    command = merged(service)["command"]
    assert command[0] in ("broker", "controller"), command
    entries = parse_properties_text(
        fs.path(service, command[command.index("--config") + 1]).read_text(), service)
    entries += [parse_override(v) for k, v in pairwise(command) if k == "--override"]
    entries = [(k, str(fs.path(service, v)) if k in PATH_KEYS else v, w)
               for k, v, w in entries]
    return build_config(entries)


def keystore_certificate(path: str) -> x509.Certificate:
    return x509.load_pem_x509_certificates(Path(path).read_bytes())[0]


def test_every_broker_and_controller_is_overridden_and_waits_for_the_certs():
    assert set(replog_processes()) <= set(MTLS["services"])
    hosts = merged("certs")["command"]
    assert set(hosts[hosts.index("--hosts") + 1].split(",")) == set(replog_processes())
    for name in replog_processes():
        service = merged(name)
        assert service["depends_on"]["certs"] == {"condition": "service_completed_successfully"}
        # ZooKeeper first, as in the plaintext stack.
        assert {"zookeeper-1", "zookeeper-2", "zookeeper-3"} <= set(service["depends_on"])
        assert f"ssl:{SSL_MOUNT}:ro" in service["volumes"], name
    assert "ssl" in MTLS["volumes"]


@pytest.mark.parametrize("service", replog_processes())
def test_every_listener_is_mutual_tls_with_the_material_certs_wrote(stack, service):
    cfg = process_config(stack, service)
    listeners = listener_config(cfg)
    names = {e.listener for e in listeners.listeners}
    assert names and all(listeners.protocol_map.get(n) == SSL for n in names), \
        f"{service}: {listeners.protocol_map} for {sorted(names)}"
    for listener in names:
        settings = SslSettings.from_properties(cfg, listener)
        assert settings.client_auth == "required", f"{service} {listener}"
        settings.check_server(listener)  # loads the keystore and the truststore certs wrote
    # Each advertised host (the compose name on INTERNAL, 127.0.0.1 on EXTERNAL and KAFKA) is
    # a name the certificate serves: gRPC and Kafka's https identification check it.
    cert = keystore_certificate(cfg["ssl.keystore.location"])
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    served = {*san.get_values_for_type(x509.DNSName),
              *map(str, san.get_values_for_type(x509.IPAddress))}
    for endpoint in listeners.advertised:
        assert endpoint.host in served, f"{service}: {endpoint} not in {sorted(served)}"
    # Its own connections (replication, controller <-> broker) are the cluster's super user.
    principal = principal_builder_for(cfg, cfg["inter.broker.listener.name"]).from_der(
        cert.public_bytes(Encoding.DER))
    assert principal == KafkaPrincipal.parse(cluster_security.CLUSTER_PRINCIPAL)
    assert str(principal) in cfg["super.users"].split(";")
    assert cfg["authorizer.class.name"] == cluster_security.AUTHORIZER_CLASS
    assert cfg["zookeeper.set.acl"] is True
    user, _, password = Path(cfg["zookeeper.auth.digest.file"]).read_text().strip() \
        .partition(":")
    assert user and password, "zookeeper.auth.digest.file holds user:password"


@pytest.mark.parametrize("service", replog_processes())
def test_the_healthcheck_presents_the_process_keystore_on_its_internal_listener(stack, service):
    cfg = process_config(stack, service)
    test = merged(service)["healthcheck"]["test"]
    assert test[:3] == ["CMD", "/opt/replog/venv/bin/python",
                        "/opt/replog/docker/healthcheck-tls.py"], test
    target, keystore, truststore = test[3:6]
    internal = next(e for e in listener_config(cfg).listeners
                    if e.listener == cfg["inter.broker.listener.name"])
    assert target == f"localhost:{internal.port}"
    assert str(stack.path(service, keystore)) == cfg["ssl.keystore.location"]
    assert str(stack.path(service, truststore)) == cfg["ssl.truststore.location"]
    assert stack.path(service, test[2]).is_file()


def test_the_host_gets_admin_client_properties_that_load_anywhere(stack):
    path = Path(stack.env["REPLOG_MTLS_CLIENT_DIR"]) / cluster_security.CLIENT_PROPERTIES
    props = load_client_properties(str(path))
    assert not any(k.endswith(".location") for k in props), "paths inside a volume"
    settings = client_settings(props, str(path))
    cert = x509.load_pem_x509_certificates(settings.keystore()[1])[0]
    cfg = process_config(stack, "broker-1")
    principal = principal_builder_for(cfg, "EXTERNAL").from_der(cert.public_bytes(Encoding.DER))
    assert principal == KafkaPrincipal.parse(cluster_security.ADMIN_PRINCIPAL)
    assert str(principal) in cfg["super.users"].split(";")
    assert path.stat().st_mode & 0o077 == 0, "the private key is in it"


def test_the_security_settings_are_cluster_up_security_mtls(stack):
    """The compose processes get what `replog cluster up --security mtls` gives a local one,
    every key but the listener names and the paths."""
    local = cluster_security.security_overrides(stack.root / "local", "mtls", "broker-1",
                                                "broker-1")
    for service in replog_processes():
        cfg = process_config(stack, service)
        for key, value in local.items():
            if key in PATH_KEYS or key == "listener.security.protocol.map":
                continue
            assert str(cfg[key]).lower() == value.lower(), f"{service}: {key}"


@pytest.mark.parametrize("role", ["broker", "controller"])
def test_the_mtls_properties_are_the_plaintext_ones_plus_security(role):
    """docker/<role>.mtls.properties keeps every non-security setting of <role>.properties."""
    def props(name: str) -> dict[str, str]:
        path = REPO / "docker" / name
        return {k: v for k, v, _ in parse_properties_text(path.read_text(), str(path))}
    plain, secure = props(f"{role}.properties"), props(f"{role}.mtls.properties")
    for key, value in plain.items():
        if key == "listener.security.protocol.map":
            assert {n.split(":")[0] for n in value.split(",")} == \
                {n.split(":")[0] for n in secure[key].split(",")}
        else:
            assert secure.get(key) == value, f"{role}.mtls.properties: {key}"


def test_certs_service_refuses_a_bad_common_name_in_one_line(stack):
    certs = merged("certs")
    p = subprocess.run([sys.executable, str(stack.path("certs", certs["entrypoint"][1])),
                        "client", "--data-dir", str(stack.path("certs", "/etc/replog")),
                        "--cn", "a,b", "--client-dir", str(stack.root / "bad")],
                       capture_output=True, text=True, cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=str(REPO)), check=False)
    assert p.returncode != 0
    assert p.stderr.strip().count("\n") == 0 and "--cn" in p.stderr, p.stderr
