"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the broker's side.

The exchange is scramp's; what is Kafka's here: the user name's saslname escapes (=2C,
=3D) are undone before the lookup, channel binding is not offered (Kafka's clients send
`n,,`), and every failure gets the same message, whether the user is unknown or the
proof is wrong, so that nobody learns which users exist.

Delegation tokens (KIP-48) log in through the same exchange: the client names the token
id as its user, uses the token's HMAC as its password, and adds Kafka's SCRAM extension
`tokenauth=true` to its first message. The credential is then the token's, the client
becomes the token's owner (marked token-authenticated), and its session ends when the
token expires (KIP-368 re-authentication then needs a token still valid). scramp does
not parse extensions, so they are taken off before it reads the message and put back in
the bare message the proofs are computed over, as the client computed them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import scramp

from herdless.security.delegation_tokens import TokenInformation
from herdless.security.principal import USER_TYPE, KafkaPrincipal, user
from herdless.security.sasl import SaslAuthenticationFailed, invalid_credentials
from herdless.security.scram import SCRAM_MECHANISMS, CredentialCache, ScramCredential

# Kafka's ScramLoginModule.TOKEN_AUTH_CONFIG, the extension naming a token login.
TOKEN_AUTH_EXTENSION = "tokenauth"


class _UnknownUser(Exception):
    pass


class TokenCredentialCache(Protocol):
    """The delegation tokens SCRAM logs in with (Kafka's DelegationTokenCache)."""

    def token_credential(
        self, token_id: str, mechanism: str
    ) -> tuple[ScramCredential, TokenInformation] | None: ...


def split_extensions(client_first: str) -> tuple[str, str, dict[str, str]]:
    """A client-first message without the extensions after its nonce, the bare message
    as sent (extensions included), and the extensions; ValueError if one is not
    `key=value`."""
    header_end = client_first.find(",", client_first.find(",") + 1)
    if header_end < 0:
        raise ValueError("malformed client-first message")
    bare = client_first[header_end + 1 :]
    parts = bare.split(",")
    nonce_at = next((i for i, part in enumerate(parts) if part.startswith("r=")), len(parts))
    extensions = {}
    for part in parts[nonce_at + 1 :]:
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ValueError(f"malformed SCRAM extension {part!r}")
        extensions[key] = value
    stripped = client_first[: header_end + 1] + ",".join(parts[: nonce_at + 1])
    return stripped, bare, extensions


class ScramServer:
    def __init__(
        self,
        mechanism: str,
        credentials: CredentialCache,
        tokens: TokenCredentialCache | None = None,
        wall_ms: Callable[[], int] | None = None,
    ) -> None:
        """`tokens` (with the wall clock `wall_ms`) when delegation tokens are enabled."""
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._credentials = credentials
        self._tokens = tokens
        self._wall_ms = wall_ms
        self._token_login = False
        self._token: TokenInformation | None = None
        self._session_lifetime_ms: int | None = None
        self._server = scramp.ScramMechanism(mechanism).make_server(self._lookup)
        self._user: str | None = None
        self._step = 0
        # Why the exchange failed, for the broker's log (never told to the client).
        self.failure: str | None = None

    def _lookup(self, saslname: str) -> tuple[bytes, bytes, bytes, int]:
        name = saslname.replace("=2C", ",").replace("=3D", "=")
        if self._token_login:
            return self._lookup_token(name)
        credential = self._credentials.scram(name, self.mechanism)
        if credential is None:
            raise _UnknownUser(name)
        self._user = name
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def _lookup_token(self, token_id: str) -> tuple[bytes, bytes, bytes, int]:
        found = None
        if self._tokens is not None and self._wall_ms is not None:
            found = self._tokens.token_credential(token_id, self.mechanism)
        if found is None:
            raise _UnknownUser(token_id)
        credential, token = found
        now = self._wall_ms()  # type: ignore[misc]
        # Kafka leaves an expired token to its expiry check; refused here at once, so a
        # token expired by ExpireDelegationToken logs nobody in from then on.
        if token.expired(now) or token.expiry_timestamp_ms <= now:
            self.failure = f"delegation token {token_id} has expired"
            raise _UnknownUser(token_id)
        self._user, self._token = token_id, token
        self._session_lifetime_ms = token.expiry_timestamp_ms - now
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def evaluate(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed(f"Invalid {self.mechanism} message: not UTF-8") from None
        try:
            if self._step == 0:
                stripped, bare, extensions = split_extensions(text)
                self._token_login = extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true"
                self._server.set_client_first(stripped)
                # The proofs cover the bare message as the client sent it.
                self._server.client_first_bare = bare
                self._step = 1
                return self._server.get_server_first().encode()
            if self._step == 1:
                self._accept_nonce_prefix(text)
                self._server.set_client_final(text)
                self._step = 2
                return self._server.get_server_final().encode()
        except _UnknownUser:
            raise invalid_credentials(self.mechanism, self.failure) from None
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
        if self._token is not None:
            # Kafka's principal builder: a User named as the token's owner.
            return KafkaPrincipal(USER_TYPE, self._token.owner.name, token_authenticated=True)
        return user(self._user)

    @property
    def session_lifetime_ms(self) -> int | None:
        """A token's login lasts until the token expires; a password's, indefinitely."""
        return self._session_lifetime_ms
