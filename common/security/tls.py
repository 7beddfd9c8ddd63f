"""TLS and mutual TLS on replog's listeners and channels, with Kafka's SSL properties.

Settings (Kafka's names; PEM only, as KIP-651 writes it):
- ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (one PEM file: the private key and
  its certificate chain) or ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` (inline
  PEM in the properties); ``ssl.key.password`` if the key is encrypted;
- ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or ``ssl.truststore.certificates``;
- ``ssl.client.auth`` (none | requested | required) on a server;
- ``ssl.principal.mapping.rules`` (ssl_principal_mapper.py).
A broker or controller reads each of these per listener first
(``listener.name.<name>.ssl.keystore.location``) and then unprefixed, as Kafka does.

Servers: a gRPC listener mapped to SSL is bound with ``grpc.dynamic_ssl_server_credentials``;
gRPC asks the fetcher for a new configuration at each handshake, and it gives one when a
keystore or truststore file changed on disk (Kafka's dynamic SSL reconfiguration, without an
AlterConfigs call: replacing the file is the reconfiguration). The Kafka-protocol listener's
``ssl.SSLContext`` does the same through its SNI callback, which OpenSSL calls on every
handshake: a changed file swaps a freshly loaded context in for the new connection. A file
that no longer loads is logged and the previous material is kept.

Clients: a channel to a listener mapped to SSL is a ``grpc.aio.secure_channel`` with the
truststore (and, for mutual TLS, the keystore) read when the channel is opened, so new channels
pick up new files. The server's name is checked against the certificate's subject alternative
names (Kafka's default ``ssl.endpoint.identification.algorithm=https``).

``ssl.client.auth=requested`` on a gRPC listener: gRPC's Python server can either require a
client certificate or not ask for one; it cannot ask and accept its absence. ``requested`` is
served there as ``required``, the safer reading (a client without a certificate is refused);
the Kafka listener serves it as Kafka does (CERT_OPTIONAL).

Principals: ``SslPrincipalBuilder`` maps the peer certificate's subject (RFC 2253 form, as
Java's X500Principal.getName()) through the rules; a connection without a client certificate
is ``User:ANONYMOUS`` (Kafka's DefaultKafkaPrincipalBuilder). A subject no rule matches fails
authentication, as Kafka's NoMatchingRule does: every gRPC call on the connection is refused
UNAUTHENTICATED (``SslAuthenticationInterceptor``), a Kafka-protocol connection is closed.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from common.errors import ConfigError
from common.properties import parse_properties_text
from common.security.principal import (
    ANONYMOUS,
    USER_TYPE,
    KafkaPrincipal,
    PrincipalBuilder,
    SslAuthenticationFailed,
)
from common.security.ssl_principal_mapper import NoMatchingRule, SslPrincipalMapper

_log = logging.getLogger(__name__)

SSL = "SSL"
PLAINTEXT = "PLAINTEXT"
CLIENT_AUTH = ("none", "requested", "required")

# Every SSL key a server or a client reads (Kafka's SslConfigs names).
SSL_KEYS = ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain",
            "ssl.keystore.key", "ssl.key.password", "ssl.truststore.type",
            "ssl.truststore.location", "ssl.truststore.certificates", "ssl.client.auth",
            "ssl.principal.mapping.rules", "ssl.endpoint.identification.algorithm")
# Kafka's listener-prefixed form of a server's SSL key: listener.name.<name>.ssl.*
LISTENER_PREFIXED = re.compile(r"^listener\.name\.([A-Za-z0-9_.-]+?)\.(ssl\.[a-z.]+)$")

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


class SslConfigError(ConfigError):
    """SSL material that cannot be used: one line naming the key and the reason."""


def normalize_pem(text: str) -> bytes:
    """PEM blocks from a properties value: Kafka writes inline PEM on one line (line breaks
    lost to the properties format, or written ``\\n``); each block is rewrapped as PEM."""
    text = text.replace("\\n", "\n")
    out = []
    for kind, body in _PEM_BLOCK.findall(text):
        b64 = re.sub(r"\s+", "", body)
        lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
        out.append(f"-----BEGIN {kind}-----\n" + "\n".join(lines) + f"\n-----END {kind}-----\n")
    return "".join(out).encode()


def pem_blocks(data: bytes) -> list[tuple[str, bytes]]:
    """(kind, block) of each PEM block, in order."""
    return [(m.group(1), m.group(0).encode() + b"\n")
            for m in _PEM_BLOCK.finditer(data.decode("ascii", "replace"))]


def split_keystore(data: bytes, password: str | None, where: str) -> tuple[bytes, bytes]:
    """A PEM keystore's (private key, certificate chain); the key decrypted when encrypted."""
    blocks = pem_blocks(data)
    keys = [b for kind, b in blocks if kind.endswith("PRIVATE KEY")]
    chain = b"".join(b for kind, b in blocks if kind == "CERTIFICATE")
    if len(keys) != 1:
        raise SslConfigError(f"{where}: a PEM keystore holds exactly one private key, found "
                             f"{len(keys)}")
    if not chain:
        raise SslConfigError(f"{where}: the PEM keystore has no certificate")
    key = keys[0]
    try:
        loaded = serialization.load_pem_private_key(
            key, password.encode() if password else None)
    except (ValueError, TypeError) as e:
        raise SslConfigError(f"{where}: cannot read the private key: {e}") from None
    if password:  # gRPC and OpenSSL here are given the key unencrypted, in memory only
        key = loaded.private_bytes(serialization.Encoding.PEM,
                                   serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption())
    try:
        x509.load_pem_x509_certificates(chain)
    except ValueError as e:
        raise SslConfigError(f"{where}: cannot read the certificate chain: {e}") from None
    return key, chain


def _read(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise SslConfigError(f"{key} {path}: {e.strerror or e}") from None


@dataclass(frozen=True)
class SslSettings:
    """One listener's (or one client's) SSL properties, as set."""

    keystore_location: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    key_password: str | None = None
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    principal_mapping_rules: str = "DEFAULT"

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], listener: str | None = None
                        ) -> SslSettings:
        """From ``ssl.*`` keys; with ``listener``, ``listener.name.<listener>.ssl.*`` first."""
        def get(key: str) -> Any:
            if listener is not None:
                v = props.get(f"listener.name.{listener.lower()}.{key}")
                if v is not None:
                    return v
            return props.get(key)
        for key in ("ssl.keystore.type", "ssl.truststore.type"):
            kind = get(key)
            if kind is not None and str(kind).upper() != "PEM":
                raise SslConfigError(f"{key}={kind}: replog reads PEM key and trust stores "
                                     f"only (KIP-651: ssl.keystore.type=PEM)")
        auth = (get("ssl.client.auth") or "none").lower()
        if auth not in CLIENT_AUTH:
            raise SslConfigError(f"ssl.client.auth={auth}: must be one of "
                                 f"{', '.join(CLIENT_AUTH)}")
        algo = get("ssl.endpoint.identification.algorithm")
        if algo is not None and algo.lower() != "https":
            raise SslConfigError("ssl.endpoint.identification.algorithm: only https (the "
                                 "server name is checked against the certificate) is served")
        out = cls(get("ssl.keystore.location"), get("ssl.keystore.certificate.chain"),
                  get("ssl.keystore.key"), get("ssl.key.password"),
                  get("ssl.truststore.location"), get("ssl.truststore.certificates"), auth,
                  get("ssl.principal.mapping.rules") or "DEFAULT")
        if out.keystore_location and (out.keystore_certificate_chain or out.keystore_key):
            raise SslConfigError("ssl.keystore.location and ssl.keystore.certificate.chain/"
                                 "ssl.keystore.key are alternatives: set one")
        if bool(out.keystore_certificate_chain) != bool(out.keystore_key):
            raise SslConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go "
                                 "together")
        if out.truststore_location and out.truststore_certificates:
            raise SslConfigError("ssl.truststore.location and ssl.truststore.certificates are "
                                 "alternatives: set one")
        return out

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_key)

    @property
    def has_truststore(self) -> bool:
        return bool(self.truststore_location or self.truststore_certificates)

    def keystore(self) -> tuple[bytes, bytes] | None:
        """(private key, certificate chain), read now; None when no keystore is set."""
        if self.keystore_location:
            return split_keystore(_read(self.keystore_location, "ssl.keystore.location"),
                                  self.key_password, self.keystore_location)
        if self.keystore_key:
            return split_keystore(normalize_pem(self.keystore_key)
                                  + normalize_pem(self.keystore_certificate_chain or ""),
                                  self.key_password, "ssl.keystore.key")
        return None

    def truststore(self) -> bytes | None:
        """The trusted certificates (PEM), read now; None when none is set."""
        if self.truststore_location:
            data = _read(self.truststore_location, "ssl.truststore.location")
            where = self.truststore_location
        elif self.truststore_certificates:
            data, where = normalize_pem(self.truststore_certificates), \
                "ssl.truststore.certificates"
        else:
            return None
        try:
            x509.load_pem_x509_certificates(data)
        except ValueError as e:
            raise SslConfigError(f"{where}: cannot read the trusted certificates: {e}") \
                from None
        return data

    def files(self) -> tuple[str, ...]:
        """The files whose change is a reconfiguration."""
        return tuple(p for p in (self.keystore_location, self.truststore_location) if p)

    def check_server(self, listener: str) -> None:
        """A server listener needs a keystore; a client-authenticating one a truststore."""
        if not self.has_keystore:
            raise SslConfigError(f"configuration key 'ssl.keystore.location': listener "
                                 f"{listener} is SSL but has no keystore (ssl.keystore.location"
                                 f", or ssl.keystore.certificate.chain and ssl.keystore.key)")
        if self.client_auth != "none" and not self.has_truststore:
            raise SslConfigError(f"configuration key 'ssl.truststore.location': listener "
                                 f"{listener} has ssl.client.auth={self.client_auth}, which "
                                 f"needs a truststore (ssl.truststore.location or "
                                 f"ssl.truststore.certificates)")
        self.keystore()
        self.truststore()
        SslPrincipalMapper.from_rules(self.principal_mapping_rules)


class FileWatch:
    """Has any of these files changed (modification time, size, inode) since last asked?"""

    def __init__(self, paths: Sequence[str]):
        self.paths = tuple(paths)
        self._lock = threading.Lock()  # gRPC calls the fetcher from its own threads
        self._seen = self._stat()

    def _stat(self) -> tuple:
        out = []
        for p in self.paths:
            try:
                st = os.stat(p)
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                out.append(None)
        return tuple(out)

    def changed(self) -> bool:
        now = self._stat()
        with self._lock:
            if now == self._seen:
                return False
            self._seen = now
            return True


# ---------------------------------------------------------------------------- servers


def grpc_server_credentials(settings: SslSettings) -> grpc.ServerCredentials:
    """Credentials for ``add_secure_port``, reloaded when the keystore or truststore files
    change. ``requested`` is served as ``required`` (module docstring)."""
    def configuration() -> Any:
        key, chain = settings.keystore()
        roots = settings.truststore() if settings.client_auth != "none" else None
        return grpc.ssl_server_certificate_configuration([(key, chain)], roots)

    watch = FileWatch(settings.files())

    def fetch() -> Any:
        if not watch.changed():
            return None
        try:
            new = configuration()
        except Exception as e:  # noqa: BLE001 - a half-written file: keep serving the old one
            _log.warning("TLS material not reloaded, keeping the previous one: %s", e)
            return None
        _log.info("TLS material reloaded from %s", ", ".join(settings.files()))
        return new

    return grpc.dynamic_ssl_server_credentials(
        configuration(), fetch, require_client_authentication=settings.client_auth != "none")


def _server_context(settings: SslSettings, key: bytes, chain: bytes) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_cert_chain(ctx, key, chain)
    if settings.client_auth != "none":
        ctx.load_verify_locations(cadata=settings.truststore().decode())
        ctx.verify_mode = ssl.CERT_REQUIRED if settings.client_auth == "required" \
            else ssl.CERT_OPTIONAL
    return ctx


def _load_cert_chain(ctx: ssl.SSLContext, key: bytes, chain: bytes) -> None:
    """ssl wants files: a private temporary file for the key, removed at once."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="replog-tls-") as d:
        kp, cp = os.path.join(d, "key.pem"), os.path.join(d, "chain.pem")
        for path, data in ((kp, key), (cp, chain)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        ctx.load_cert_chain(cp, kp)


def kafka_server_context(settings: SslSettings) -> ssl.SSLContext:
    """The Kafka listener's context; a changed file is loaded at the next handshake."""
    def build() -> ssl.SSLContext:
        key, chain = settings.keystore()
        return _server_context(settings, key, chain)

    base = build()
    current = [base]
    watch = FileWatch(settings.files())

    def on_handshake(sslobj: ssl.SSLObject, _server_name: str | None,
                     _ctx: ssl.SSLContext) -> None:
        if watch.changed():
            try:
                current[0] = build()
                _log.info("TLS material reloaded from %s", ", ".join(settings.files()))
            except Exception as e:  # noqa: BLE001 - keep serving the previous material
                _log.warning("TLS material not reloaded, keeping the previous one: %s", e)
        if current[0] is not base:
            sslobj.context = current[0]

    base.sni_callback = on_handshake
    return base


# ---------------------------------------------------------------------------- clients


class SslChannelFactory:
    """A ChannelFactory (common/grpc_options.py) opening TLS channels; the key and trust
    material are read at each new channel, so replaced files are used from then on."""

    def __init__(self, settings: SslSettings):
        self.settings = settings

    def credentials(self) -> grpc.ChannelCredentials:
        ks = self.settings.keystore()
        return grpc.ssl_channel_credentials(
            root_certificates=self.settings.truststore(),
            private_key=ks[0] if ks else None, certificate_chain=ks[1] if ks else None)

    def __call__(self, address: str, options: Sequence[tuple[str, int]] = ()
                 ) -> grpc.aio.Channel:
        return grpc.aio.secure_channel(address, self.credentials(), options=list(options))

    def blocking(self, address: str, options: Sequence[tuple[str, int]] = ()) -> grpc.Channel:
        """A synchronous channel (health checks outside an event loop)."""
        return grpc.secure_channel(address, self.credentials(), options=list(options))


# ---------------------------------------------------------------------------- principals


def subject_dn(cert: x509.Certificate) -> str:
    """The subject in RFC 2253 form, as Java's X500Principal.getName() writes it."""
    return cert.subject.rfc4514_string()


class SslPrincipalBuilder(PrincipalBuilder):
    """Kafka's DefaultKafkaPrincipalBuilder on an SSL listener: ``User:`` + the peer
    certificate's subject mapped by ``ssl.principal.mapping.rules``; no certificate (client
    auth none or requested) is ``User:ANONYMOUS``."""

    # gRPC hands every request its connection's certificate again: parsing it and running the
    # rules each time showed in a profile of the produce path, so principals are kept by the
    # certificate's bytes (a few connections' worth: clients, brokers, the controller).
    CACHE_SIZE = 1024

    def __init__(self, mapping_rules: str | None = "DEFAULT"):
        self.mapper = SslPrincipalMapper.from_rules(mapping_rules)
        # a certificate's principal, or the reason it has none (a str: its refusal's message)
        self._by_cert: dict[bytes, KafkaPrincipal | str] = {}

    @property
    def can_refuse(self) -> bool:
        """Whether some subject can match no rule (the rules lack DEFAULT)."""
        return not any(r.is_default for r in self.mapper.rules)

    def _cached(self, cert: bytes, load: Callable[[bytes], x509.Certificate]) -> KafkaPrincipal:
        got = self._by_cert.get(cert)
        if got is None:
            if len(self._by_cert) >= self.CACHE_SIZE:
                self._by_cert.clear()
            got = self._by_cert[cert] = self._principal(load(cert))
        if isinstance(got, str):
            raise SslAuthenticationFailed(got)
        return got

    def from_der(self, der: bytes) -> KafkaPrincipal:
        return self._cached(der, x509.load_der_x509_certificate)

    def _principal(self, cert: x509.Certificate) -> KafkaPrincipal | str:
        dn = subject_dn(cert)
        try:
            return KafkaPrincipal(USER_TYPE, self.mapper.get_name(dn))
        except NoMatchingRule:
            # DefaultKafkaPrincipalBuilder: the mapper's NoMatchingRule fails the
            # connection's authentication (logged once per certificate: it is cached)
            refusal = (f"SSL authentication failed: the certificate's DN '{dn}' matches no "
                       f"ssl.principal.mapping.rules rule")
            _log.warning("%s", refusal)
            return refusal

    def from_peer_certificate(self, der: bytes | None) -> KafkaPrincipal:
        return ANONYMOUS if not der else self.from_der(der)

    def from_grpc(self, context: Any) -> KafkaPrincipal:
        try:
            auth = context.auth_context()
        except Exception:  # noqa: BLE001 - a context without transport security data
            return ANONYMOUS
        pem = (auth.get("x509_pem_cert") or [None])[0]
        if not pem:
            return ANONYMOUS
        return self._cached(pem, x509.load_pem_x509_certificate)


_HANDLER_KINDS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")


class SslAuthenticationInterceptor(grpc.aio.ServerInterceptor):
    """Refuses every call on a connection whose certificate maps to no principal, with
    UNAUTHENTICATED and the builder's one-line reason, before any servicer sees it: gRPC's
    handshake cannot run the mapping rules, so this is where replog fails the connection's
    authentication as Kafka's DefaultKafkaPrincipalBuilder does."""

    def __init__(self, builder: SslPrincipalBuilder):
        self.builder = builder

    async def _check(self, context: Any) -> None:
        try:
            self.builder.from_grpc(context)
        except SslAuthenticationFailed as e:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(e))

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        kind = next(k for k in _HANDLER_KINDS if getattr(handler, k) is not None)
        behavior, check = getattr(handler, kind), self._check
        if inspect.isasyncgenfunction(behavior):
            async def guarded(request, context):
                await check(context)
                async for item in behavior(request, context):
                    yield item
        else:
            async def guarded(request, context):
                await check(context)
                out = behavior(request, context)
                return await out if inspect.isawaitable(out) else out
        return getattr(grpc, f"{kind}_rpc_method_handler")(
            guarded, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def ssl_server_interceptors(settings: SslSettings) -> tuple[grpc.aio.ServerInterceptor, ...]:
    """The interceptors of a gRPC listener with ``settings``: the authentication check when a
    client certificate is asked for and the mapping rules can refuse one, none otherwise (a
    DEFAULT rule maps every subject, and the data path pays nothing)."""
    builder = SslPrincipalBuilder(settings.principal_mapping_rules)
    if settings.client_auth == "none" or not builder.can_refuse:
        return ()
    return (SslAuthenticationInterceptor(builder),)


# ---------------------------------------------------------------------------- client files


CLIENT_KEYS = ("security.protocol", *SSL_KEYS)


def client_settings(props: Mapping[str, str], source: str) -> SslSettings | None:
    """The SSL settings of Kafka client properties (``--command-config``), None for
    PLAINTEXT; the material is read now so a bad file is one line at start."""
    proto = (props.get("security.protocol") or PLAINTEXT).upper()
    if proto.startswith("SASL"):
        raise SslConfigError(f"{source}: security.protocol={proto} is not supported "
                             f"(replog serves PLAINTEXT and SSL)")
    if proto not in (PLAINTEXT, SSL):
        raise SslConfigError(f"{source}: security.protocol={proto}: must be PLAINTEXT or SSL")
    for key in props:
        if key.startswith(("ssl.", "sasl.")) and key not in SSL_KEYS:
            raise SslConfigError(f"{source}: unknown client configuration key '{key}'")
    if proto == PLAINTEXT:
        return None
    try:
        settings = SslSettings.from_properties(props)
        if not settings.has_truststore:
            raise SslConfigError("security.protocol=SSL needs ssl.truststore.location or "
                                 "ssl.truststore.certificates")
        settings.keystore()
        settings.truststore()
    except SslConfigError as e:
        raise SslConfigError(f"{source}: {e}") from None
    return settings


def load_client_properties(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"cannot read --command-config file {path}: "
                          f"{e.strerror or e}") from None
    return {k: v for k, v, _ in parse_properties_text(text, path)}


def client_channel_factory(path: str) -> Callable | None:
    """``--command-config FILE``: the channel factory its properties ask for (None: plain)."""
    settings = client_settings(load_client_properties(path), path)
    return None if settings is None else SslChannelFactory(settings)
