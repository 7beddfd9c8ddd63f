"""``replog cluster up --security mtls``: what a secure local cluster adds to each process's
configuration, and the certificates it needs.

Under the data dir, ``ssl/`` holds the cluster's CA (``ca.crt``, ``ca.key``: unencrypted, a local
test cluster) and one PEM keystore per process and client (harness/certs.py).
``client.properties`` beside ``cluster.json`` is Kafka client properties for the admin principal
(``replog ... --command-config DATA_DIR/client.properties``); ``replog cluster certs --cn NAME``
issues another client's.

Principals (``ssl.principal.mapping.rules``, the same on every process):
- every broker and controller certificate is ``CN=<name>,OU=replog-cluster,O=replog`` and maps
  to one principal, ``User:replog-cluster`` (the cluster's own, for super.users: brokers added
  later need no change to anyone's configuration);
- a client certificate ``CN=<name>,O=replog`` maps to ``User:<name>`` (the admin's is
  ``User:admin``); anything else keeps its distinguished name (DEFAULT).

``security_overrides`` is the one place a secure cluster's process configuration is made:
TLS on every listener (gRPC and Kafka) with ``ssl.client.auth=required``; Kafka's AclAuthorizer
with the cluster's own principal and the admin's as ``super.users`` (every other principal needs
ACLs: ``replog acls``); ZooKeeper ACLs.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from harness import certs

SECURITY_MODES = ("mtls",)
SSL_DIR = "ssl"
CLIENT_PROPERTIES = "client.properties"
CLUSTER_OU = "replog-cluster"
CLUSTER_PRINCIPAL = "User:replog-cluster"
ADMIN_CN = "admin"
ADMIN_PRINCIPAL = f"User:{ADMIN_CN}"
AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"
# Kafka's rule syntax (KIP-371); the comma inside a pattern is a class, never a separator.
MAPPING_RULES = (f"RULE:^CN=[^,]+,OU={CLUSTER_OU},O={certs.ORGANIZATION}$/replog-cluster/,"
                 f"RULE:^CN=([^,]+),O={certs.ORGANIZATION}$/$1/,DEFAULT")
# The listener name of every gRPC listener of a secure cluster (the Kafka one stays KAFKA).
SSL_LISTENER = "SSL"
# The cluster's ZooKeeper digest credentials (replog-cluster:<random>), made once per data dir.
ZOOKEEPER_DIGEST_FILE = "zookeeper.digest"


def ssl_dir(data_dir: str | os.PathLike) -> Path:
    return Path(data_dir) / SSL_DIR


def keystore_path(data_dir: str | os.PathLike, name: str) -> Path:
    return ssl_dir(data_dir) / f"{name}.keystore.pem"


def ensure_ca(data_dir: str | os.PathLike) -> certs.CertificateAuthority:
    """The cluster's CA, created on first use and kept for the data dir's life (a restarted
    cluster's clients stay valid)."""
    try:
        return certs.open_ca(ssl_dir(data_dir))
    except FileNotFoundError:
        return certs.create_ca(ssl_dir(data_dir), "replog local CA")


def ensure_process_certificate(data_dir: str | os.PathLike, name: str,
                               hosts: tuple[str, ...] = ()) -> Path:
    """Process ``name``'s keystore (issued once; the server names include ``hosts``)."""
    path = keystore_path(data_dir, name)
    if not path.is_file():
        certs.issue(ensure_ca(data_dir), name, path, hosts=hosts, ou=CLUSTER_OU)
    return path


def zookeeper_overrides(data_dir: str | os.PathLike) -> dict[str, str]:
    """ZooKeeper ACLs (docs/security-zookeeper.md): every process and the cluster's own kazoo
    clients authenticate with one digest identity, kept in ``ssl/zookeeper.digest`` (0600)."""
    path = ssl_dir(data_dir) / ZOOKEEPER_DIGEST_FILE
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{CLUSTER_OU}:{secrets.token_urlsafe(24)}\n")
    return {"zookeeper.set.acl": "true", "zookeeper.auth.digest.file": str(path.resolve())}


def security_overrides(data_dir: str | os.PathLike, security: str, name: str,
                       host: str) -> dict[str, str]:
    """A broker's or controller's configuration on a ``security`` cluster (process ``name``
    on ``host``). Its listeners must be named SSL_LISTENER (gRPC) and KAFKA."""
    if security not in SECURITY_MODES:
        raise ValueError(f"unknown --security {security!r} (expected one of "
                         f"{', '.join(SECURITY_MODES)})")
    keystore = ensure_process_certificate(data_dir, name, (host,))
    return {
        "listener.security.protocol.map": f"{SSL_LISTENER}:SSL,KAFKA:SSL",
        "ssl.client.auth": "required",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ssl_dir(data_dir) / certs.CA_CERT),
        "ssl.principal.mapping.rules": MAPPING_RULES,
        "authorizer.class.name": AUTHORIZER_CLASS,
        "super.users": f"{CLUSTER_PRINCIPAL};{ADMIN_PRINCIPAL}",
        **zookeeper_overrides(data_dir),
    }


def client_properties(keystore: str | os.PathLike, truststore: str | os.PathLike) -> str:
    """Kafka client properties for TLS with a client certificate (mutual TLS)."""
    return ("# replog client properties (mutual TLS); --command-config FILE\n"
            "security.protocol=SSL\n"
            "ssl.keystore.type=PEM\n"
            f"ssl.keystore.location={keystore}\n"
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={truststore}\n")


def issue_client(data_dir: str | os.PathLike, cn: str, properties_path: str | os.PathLike
                 | None = None) -> Path:
    """A client certificate ``CN=<cn>,O=replog`` (principal ``User:<cn>``) from the cluster's
    CA and its properties file (default ``ssl/<cn>.properties``); the properties path."""
    if not cn or "," in cn or "/" in cn or cn != cn.strip():
        raise ValueError(f"--cn {cn!r}: a common name without commas, slashes or outer spaces")
    ca = certs.open_ca(ssl_dir(data_dir))
    keystore = certs.issue(ca, cn, keystore_path(data_dir, f"client-{cn}"))
    path = Path(properties_path) if properties_path else ssl_dir(data_dir) / f"{cn}.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(client_properties(keystore.resolve(), ca.cert_path.resolve()),
                    encoding="utf-8")
    return path


def write_admin_properties(data_dir: str | os.PathLike) -> Path:
    """``client.properties`` beside cluster.json, for the admin principal."""
    ensure_ca(data_dir)
    return issue_client(data_dir, ADMIN_CN, Path(data_dir) / CLIENT_PROPERTIES)


# ---------------------------------------------------------------------------- compose
# The secure compose cluster (docker-compose.mtls.yml): its one-shot ``certs`` service runs
# docker/mtls-certs.py, which calls these. Server material stays in the ``ssl`` named volume
# (DATA_DIR/ssl inside the containers); the host gets self-contained client properties.


def inline_client_properties(keystore: str | os.PathLike, truststore: str | os.PathLike) -> str:
    """Kafka client properties carrying the key, its chain and the CA inline (KIP-651's
    ``ssl.keystore.key``, ``ssl.keystore.certificate.chain``, ``ssl.truststore.certificates``),
    one line each: valid wherever the file is copied, e.g. from a container's volume to the
    host, where the volume's paths mean nothing."""
    from common.security.tls import split_keystore

    key, chain = split_keystore(Path(keystore).read_bytes(), None, str(keystore))

    def one_line(pem: bytes) -> str:
        return " ".join(pem.decode("ascii").split())
    return ("# replog client properties (mutual TLS), key material inline; "
            "--command-config FILE\n"
            "security.protocol=SSL\n"
            "ssl.keystore.type=PEM\n"
            f"ssl.keystore.key={one_line(key)}\n"
            f"ssl.keystore.certificate.chain={one_line(chain)}\n"
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.certificates={one_line(Path(truststore).read_bytes())}\n")


def issue_inline_client(data_dir: str | os.PathLike, cn: str,
                        out: str | os.PathLike) -> Path:
    """Client ``cn``'s certificate (``User:<cn>``; issued once, kept in DATA_DIR/ssl) and its
    inline client properties at ``out`` (0600: the private key is in it); ``out``."""
    keystore = keystore_path(data_dir, f"client-{cn}")
    if not keystore.is_file():
        issue_client(data_dir, cn)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(inline_client_properties(keystore, ssl_dir(data_dir) / certs.CA_CERT))
    os.replace(tmp, path)
    return path


def init_compose(data_dir: str | os.PathLike, processes: tuple[str, ...],
                 client_dir: str | os.PathLike) -> list[Path]:
    """Everything a secure compose cluster reads, made once and kept on a rerun (a restarted
    stack keeps its CA, so issued clients stay valid): the CA, each process's keystore with its
    compose name as a server name (``<name>.keystore.pem``: the INTERNAL listener is dialled
    by that name), the ZooKeeper digest credentials, the admin's certificate with
    ``admin.properties`` (paths inside the volume, for ``docker-compose exec``) and, in
    ``client_dir``, ``client.properties`` for the host (inline). The paths written."""
    for name in processes:
        if not name or name != name.strip() or any(c in name for c in ",/ "):
            raise ValueError(f"--hosts: {name!r} is not a compose service name")
    ensure_ca(data_dir)
    written = [ensure_process_certificate(data_dir, name, (name,)) for name in processes]
    written.append(Path(zookeeper_overrides(data_dir)["zookeeper.auth.digest.file"]))
    admin = ssl_dir(data_dir) / f"{ADMIN_CN}.properties"
    if not admin.is_file():
        issue_client(data_dir, ADMIN_CN, admin)
    written.append(admin)
    written.append(issue_inline_client(data_dir, ADMIN_CN, Path(client_dir) / CLIENT_PROPERTIES))
    return written
