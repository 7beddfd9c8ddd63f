"""A local certificate authority for test clusters (``replog cluster up --security mtls``).

What it writes, all PEM (KIP-651's ``ssl.keystore.type=PEM``):
- ``ca.crt`` / ``ca.key``: a self-signed CA. The key is unencrypted: this is a local test
  cluster, and ``replog cluster certs`` must be able to issue a client certificate from it later;
- ``<name>.keystore.pem``: one process's or client's private key followed by its certificate
  and the CA's (the key and chain ``ssl.keystore.location`` names);
- the truststore is ``ca.crt`` itself (``ssl.truststore.location``).

Certificates are EC P-256 and usable for both server and client authentication, so one
keystore serves a broker's listeners and its own connections to other brokers. Server names:
the subject alternative names are ``localhost``, ``127.0.0.1``, ``::1`` and any host given
(gRPC checks the name the client dialled against them, Kafka's
``ssl.endpoint.identification.algorithm=https``).

Not for production: no revocation, no key protection, one CA per cluster.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
ORGANIZATION = "replog"
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
_VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class CertificateAuthority:
    cert_path: Path
    key_path: Path

    def load(self) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        cert = x509.load_pem_x509_certificate(self.cert_path.read_bytes())
        key = serialization.load_pem_private_key(self.key_path.read_bytes(), None)
        return cert, key


def subject_for(cn: str, ou: str | None = None) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
                      *([x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou)] if ou else []),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def distinguished_name(cn: str, ou: str | None = None) -> str:
    """The RFC 2253 name a certificate issued for ``cn`` carries (``CN=cn[,OU=ou],O=replog``):
    its principal under the DEFAULT mapping rule is ``User:`` + this."""
    return subject_for(cn, ou).rfc4514_string()


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _write(path: Path, data: bytes, private: bool = False) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)  # a reader (or a reloading server) never sees half a file


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def create_ca(directory: str | os.PathLike, cn: str = "replog local CA") -> CertificateAuthority:
    """A new self-signed CA in ``directory`` (``ca.crt``, ``ca.key``)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    key = _new_key()
    name = subject_for(cn)
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY * 10)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                         False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    ca = CertificateAuthority(d / CA_CERT, d / CA_KEY)
    _write(ca.key_path, _key_pem(key), private=True)
    _write(ca.cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return ca


def open_ca(directory: str | os.PathLike) -> CertificateAuthority:
    d = Path(directory)
    ca = CertificateAuthority(d / CA_CERT, d / CA_KEY)
    if not ca.cert_path.is_file() or not ca.key_path.is_file():
        raise FileNotFoundError(f"no certificate authority in {d} ({CA_CERT} and {CA_KEY}); "
                                f"was the cluster started with --security mtls?")
    return ca


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for h in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(names)


def issue(ca: CertificateAuthority, cn: str, keystore_path: str | os.PathLike,
          hosts: Iterable[str] = (), ou: str | None = None) -> Path:
    """A key and a certificate for ``cn`` signed by ``ca``, written as one PEM keystore (key,
    certificate, CA certificate) at ``keystore_path``; usable as server and as client."""
    ca_cert, ca_key = ca.load()
    key = _new_key()
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(subject_for(cn, ou))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, True, False, True, False, False, False,
                                         False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(_san([*DEFAULT_HOSTS, *hosts]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    path = Path(keystore_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write(path, _key_pem(key) + cert.public_bytes(serialization.Encoding.PEM)
           + ca_cert.public_bytes(serialization.Encoding.PEM), private=True)
    return path
