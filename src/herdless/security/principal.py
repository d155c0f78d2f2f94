"""Who a connection is, in Kafka's form: a principal type and a name ("User:alice")."""

from __future__ import annotations

from dataclasses import dataclass, field

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    # Authenticated with a delegation token (KIP-48): it may not ask for tokens itself.
    # Not part of who it is: ACLs and equality see the token's owner alone, as Kafka's.
    token_authenticated: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


# Whoever connected to a PLAINTEXT listener, or over TLS without a client certificate.
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)


def parse_principal(text: str) -> KafkaPrincipal:
    """`Type:name` as ACLs and super.users write it; ValueError names what is wrong."""
    principal_type, sep, name = text.strip().partition(":")
    if not sep or not principal_type or not name:
        raise ValueError(f"a principal is written Type:name (User:alice), not {text!r}")
    return KafkaPrincipal(principal_type, name)
