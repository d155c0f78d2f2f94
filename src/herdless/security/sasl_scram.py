"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the broker's side.

The exchange is scramp's; what is Kafka's here: the user name's saslname escapes (=2C,
=3D) are undone before the lookup, channel binding is not offered (Kafka's clients send
`n,,`), and every failure gets the same message, whether the user is unknown or the
proof is wrong, so that nobody learns which users exist.
"""

from __future__ import annotations

import scramp

from herdless.security.principal import KafkaPrincipal, user
from herdless.security.sasl import SaslAuthenticationFailed, invalid_credentials
from herdless.security.scram import SCRAM_MECHANISMS, CredentialCache


class _UnknownUser(Exception):
    pass


class ScramServer:
    def __init__(self, mechanism: str, credentials: CredentialCache) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._credentials = credentials
        self._server = scramp.ScramMechanism(mechanism).make_server(self._lookup)
        self._user: str | None = None
        self._step = 0
        # Why the exchange failed, for the broker's log (never told to the client).
        self.failure: str | None = None

    def _lookup(self, saslname: str) -> tuple[bytes, bytes, bytes, int]:
        name = saslname.replace("=2C", ",").replace("=3D", "=")
        credential = self._credentials.scram(name, self.mechanism)
        if credential is None:
            raise _UnknownUser(name)
        self._user = name
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def evaluate(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed(f"Invalid {self.mechanism} message: not UTF-8") from None
        try:
            if self._step == 0:
                self._server.set_client_first(text)
                self._step = 1
                return self._server.get_server_first().encode()
            if self._step == 1:
                self._accept_nonce_prefix(text)
                self._server.set_client_final(text)
                self._step = 2
                return self._server.get_server_final().encode()
        except _UnknownUser:
            raise invalid_credentials(self.mechanism) from None
        except (scramp.ScramException, KeyError, ValueError, IndexError) as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            raise invalid_credentials(self.mechanism, self.failure) from None
        raise SaslAuthenticationFailed(f"{self.mechanism}: the exchange is already over")

    def _accept_nonce_prefix(self, client_final: str) -> None:
        """Kafka's server has long accepted a client-final nonce that ends with the nonce
        it sent, where RFC 5802 asks for the same: librdkafka 2.0 (Debian's kcat) sends
        its own nonce twice before the server's. The proof covers the message as sent, so
        a prefix proves nothing less; scramp checks equality, so it is told to expect the
        client's nonce when the server's ends it."""
        for attribute in client_final.split(","):
            if attribute.startswith("r="):
                nonce, expected = attribute[2:], self._server.nonce
                if nonce != str(expected) and nonce.endswith(str(expected)):
                    # scramp keeps its nonces as its own type: one of it is made.
                    self._server.nonce = type(expected)(nonce)
                return

    @property
    def complete(self) -> bool:
        return self._step == 2

    @property
    def principal(self) -> KafkaPrincipal:
        assert self._user is not None and self.complete, f"{self.mechanism} has not completed"
        return user(self._user)

    @property
    def session_lifetime_ms(self) -> int | None:
        return None
