"""Kafka principals: who sent a request.

Kafka names the sender of every request by a ``KafkaPrincipal`` (``User:CN=broker-1,O=replog``):
on an SSL listener it is built from the client certificate's distinguished name through
``ssl.principal.mapping.rules``; on a PLAINTEXT listener it is ``User:ANONYMOUS``. The authorizer
(AclAuthorizer) decides on the principal alone, so the transport code and the authorization code
meet only here.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    """Kafka's KafkaPrincipal: a type (always ``User`` for TLS and plaintext) and a name."""

    principal_type: str
    name: str

    def __str__(self) -> str:  # Kafka's toString, the form ACLs and super.users name
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``Type:name`` as kafka-acls and ``super.users`` write it (SecurityUtils.parseKafkaPrincipal)."""  # noqa: E501
        kind, sep, name = text.strip().partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"principal {text!r} is not of the form Type:name (e.g. User:alice)")
        return cls(kind, name)


class SslAuthenticationFailed(Exception):
    """A connection's certificate names no principal: its subject matches no
    ``ssl.principal.mapping.rules`` rule. Kafka's DefaultKafkaPrincipalBuilder throws from
    SslPrincipalMapper's NoMatchingRule and the connection fails authentication; replog refuses
    every gRPC call on it (UNAUTHENTICATED) and closes a Kafka-protocol connection."""


# What Kafka calls every sender on a PLAINTEXT listener (KafkaPrincipal.ANONYMOUS).
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


class PrincipalBuilder:
    """Builds the principal of a gRPC request from its ``grpc.aio.ServicerContext``.

    This default is a PLAINTEXT listener's: every sender is ``User:ANONYMOUS`` (Kafka's
    DefaultKafkaPrincipalBuilder on PLAINTEXT). The TLS transport supplies one that reads the
    client certificate's distinguished name and applies ``ssl.principal.mapping.rules``; servicers
    take a builder as a constructor parameter and never look at the transport themselves.
    """

    def from_grpc(self, context: object) -> KafkaPrincipal:
        return ANONYMOUS

    def from_peer_certificate(self, der: bytes | None) -> KafkaPrincipal:
        """The principal of a connection whose peer sent certificate ``der`` (DER bytes, None
        when it sent none): the Kafka listener's form, built once per connection. Raises
        SslAuthenticationFailed when the certificate maps to no principal."""
        return ANONYMOUS


# The principal of the Kafka-protocol connection a request arrived on. The Kafka listener serves
# each connection in a task of its own and sets this once per connection, so every handler the
# connection's requests reach reads its sender here without a parameter threaded through.
current_kafka_principal: ContextVar[KafkaPrincipal] = ContextVar(
    "current_kafka_principal", default=ANONYMOUS)
