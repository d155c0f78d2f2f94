"""SASL/PLAIN (RFC 4616) on the broker's side: one message, `authzid NUL user NUL password`.

The password is checked against the user's stored SCRAM credential, so PLAIN needs no
clear-text password anywhere on the broker. As Kafka's PlainSaslServer, an authorization
id other than the user is refused: herdless does not let one user act as another.
"""

from __future__ import annotations

from collections.abc import Callable

from herdless.security.principal import KafkaPrincipal, user
from herdless.security.sasl import SaslAuthenticationFailed

PLAIN = "PLAIN"

# Kafka's message for every wrong user or password: it does not say which.
INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"


class PlainServer:
    mechanism = PLAIN

    def __init__(self, verify: Callable[[str, str], bool]) -> None:
        """`verify(user, password)`: whether they match a stored credential."""
        self._verify = verify
        self._principal: KafkaPrincipal | None = None

    def evaluate(self, response: bytes) -> bytes:
        if self._principal is not None:
            raise SaslAuthenticationFailed("PLAIN takes one message; the exchange is over")
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN message: not UTF-8") from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise SaslAuthenticationFailed(
                "Invalid SASL/PLAIN message: expected 3 tokens separated by NUL"
            )
        authorization_id, username, password = parts
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is"
                " different from username"
            )
        if not self._verify(username, password):
            raise SaslAuthenticationFailed(INVALID_CREDENTIALS)
        self._principal = user(username)
        return b""

    @property
    def complete(self) -> bool:
        return self._principal is not None

    @property
    def principal(self) -> KafkaPrincipal:
        assert self._principal is not None, "PLAIN has not completed"
        return self._principal

    @property
    def session_lifetime_ms(self) -> int | None:
        return None
