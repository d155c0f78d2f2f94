"""SASL mechanisms on the broker's side, without I/O: each takes what the client sent
and gives the challenge to send back, until it knows who the client is or refuses it."""

from __future__ import annotations

from typing import Protocol

from herdless.security.principal import KafkaPrincipal


class SaslAuthenticationFailed(Exception):
    """The client could not be authenticated; the message is what the client is told (it
    names no secret and does not say whether the user exists), `reason` what the broker
    logs when it may say more (an OAUTHBEARER token's expiry, say)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class SaslServer(Protocol):
    mechanism: str

    def evaluate(self, response: bytes) -> bytes:
        """The client's next message; returns the challenge to send back (b"" for none).
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
