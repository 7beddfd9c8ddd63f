"""Kafka principals: who sent a request.

Kafka names the sender of every request by a ``KafkaPrincipal`` (``User:CN=broker-1,O=replog``):
on an SSL listener it is built from the client certificate's distinguished name through
``ssl.principal.mapping.rules``; on a PLAINTEXT listener it is ``User:ANONYMOUS``. The authorizer
(AclAuthorizer) decides on the principal alone, so the transport code and the authorization code
meet only here.
"""

from __future__ import annotations

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
        """``Type:name`` as kafka-acls and ``super.users`` write it (SecurityUtils.parseKafkaPrincipal)."""
        kind, sep, name = text.strip().partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"principal {text!r} is not of the form Type:name (e.g. User:alice)")
        return cls(kind, name)


# What Kafka calls every sender on a PLAINTEXT listener (KafkaPrincipal.ANONYMOUS).
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
