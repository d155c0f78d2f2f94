"""SASL mechanisms on the broker's side, without I/O: each takes what the client sent
and gives the challenge to send back, until it knows who the client is or refuses it."""

from __future__ import annotations

from typing import Protocol

from herdless.security.principal import KafkaPrincipal


class SaslAuthenticationFailed(Exception):
    """The client could not be authenticated; the message is what the client is told (it
    names no secret and does not say whether the user exists). `reason`, if given, says
    more for the broker's log alone, as Kafka logs the cause it does not tell."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


def invalid_credentials(mechanism: str, reason: str | None = None) -> SaslAuthenticationFailed:
    """Kafka's answer to credentials its mechanism refused, whatever was wrong with them."""
    return SaslAuthenticationFailed(
        "Authentication failed during authentication due to invalid credentials with"
        f" SASL mechanism {mechanism}",
        reason,
    )


class SaslServer(Protocol):
    mechanism: str

    def evaluate(self, response: bytes) -> bytes | None:
        """The client's next message; returns the challenge to send back: b"" an empty
        one, None nothing at all (Java's null, which the unframed v0 flow does not send).
        Raises SaslAuthenticationFailed."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def principal(self) -> KafkaPrincipal:
        """Who the client is, once complete."""
        ...

    @property
    def session_lifetime_ms(self) -> int | None:
        """How long the credential stays good from now (an OAUTHBEARER token's expiry),
        if the mechanism knows; KIP-368 ends the session at the earlier of this and
        connections.max.reauth.ms."""
        ...
