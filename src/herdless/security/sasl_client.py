"""SASL on the client's side, for this broker's own connections to other brokers: PLAIN
and SCRAM (through scramp's client)."""

from __future__ import annotations

from typing import Protocol

import scramp

from herdless.security.sasl import SaslAuthenticationFailed
from herdless.security.sasl_plain import PLAIN
from herdless.security.scram import SCRAM_MECHANISMS


class SaslClient(Protocol):
    mechanism: str

    def first(self) -> bytes:
        """The first message, sent before any challenge."""
        ...

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The answer to the server's challenge; None once the exchange is complete."""
        ...


class PlainClient:
    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._message = f"\0{username}\0{password}".encode()

    def first(self) -> bytes:
        return self._message

    def evaluate(self, challenge: bytes) -> bytes | None:
        return None


class ScramClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        saslname = username.replace("=", "=3D").replace(",", "=2C")
        self._client = scramp.ScramClient([mechanism], saslname, password)
        self._step = 0

    def first(self) -> bytes:
        return self._client.get_client_first().encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        try:
            if self._step == 0:
                self._step = 1
                self._client.set_server_first(challenge.decode())
                return self._client.get_client_final().encode()
            self._client.set_server_final(challenge.decode())
            return None
        except (scramp.ScramException, UnicodeDecodeError, KeyError, ValueError) as exc:
            # The server could not prove it knows the credential: not the broker we meant.
            raise SaslAuthenticationFailed(f"{self.mechanism}: {exc}") from None


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    if mechanism == PLAIN:
        return PlainClient(username, password)
    return ScramClient(mechanism, username, password)
