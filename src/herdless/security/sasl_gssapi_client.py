"""SASL/GSSAPI (RFC 4752) on the client's side, for this broker's connections to the
others, as Java's GssKrb5Client logs a Kafka broker in to its peers.

The exchange, mirroring security/sasl_gssapi.py:
1. The client's GSS-API context tokens go to `<service>@<peer host>` (Kafka's
   `sasl.kerberos.service.name` and the host the peer is reached at), with mutual
   authentication; the server's AP-REP completes the context. A context completed
   without a token to send is followed by an empty message, which asks the server for
   its offer.
2. The server's offer, wrapped: the security layers it takes and its largest buffer.
   Kafka's server takes "no protection"; anything else is a server we cannot talk to.
3. The answer, wrapped (signed, not encrypted): "no protection", a buffer size of 0
   (RFC 4752: 0 when no layer protects the messages), and the authorization id, which
   is the client's own principal as Kafka's client sends it.
4. The server's last answer is empty: the exchange is over.

The GSS calls are blocking, and the first reaches the KDC for a service ticket: the
caller runs them off its event loop.
"""

from __future__ import annotations

import enum
from typing import Any

from herdless.security.sasl import SaslAuthenticationFailed
from herdless.security.sasl_gssapi import GSSAPI, NO_SECURITY_LAYER, gss_message, load_gssapi


class _Stage(enum.Enum):
    CONTEXT = "establishing the security context"
    OFFER = "waiting for the server's offer of security layers"
    DONE = "waiting for the server's last answer"
    COMPLETE = "complete"


class GssapiClient:
    mechanism = GSSAPI

    def __init__(
        self, credentials: Any, service_name: str, host: str, authorization_id: str
    ) -> None:
        """`credentials`: gssapi.Credentials to initiate with (this broker's login)."""
        self._gssapi = load_gssapi()
        self._target = f"{service_name}@{host}"
        name = self._gssapi.Name(self._target, self._gssapi.NameType.hostbased_service)
        kerberos = self._gssapi.MechType.kerberos
        self._context = self._gssapi.SecurityContext(
            name=name.canonicalize(kerberos),
            creds=credentials,
            usage="initiate",
            mech=kerberos,
            flags=self._gssapi.RequirementFlag.mutual_authentication,
        )
        self._authorization_id = authorization_id.encode()
        self._stage = _Stage.CONTEXT

    def first(self) -> bytes:
        return self._guarded(lambda: self._context.step(None) or b"")

    def evaluate(self, challenge: bytes) -> bytes | None:
        return self._guarded(lambda: self._evaluate(challenge))

    def _evaluate(self, challenge: bytes) -> bytes | None:
        if self._stage is _Stage.CONTEXT:
            token = self._context.step(challenge)
            if self._context.complete:
                self._stage = _Stage.OFFER
            return token or b""
        if self._stage is _Stage.OFFER:
            return self._answer(self._context.unwrap(challenge).message)
        if self._stage is _Stage.DONE and not challenge:
            self._stage = _Stage.COMPLETE
            return None
        raise SaslAuthenticationFailed(
            f"GSSAPI: {self._target} sent {len(challenge)} bytes after the exchange was over"
        )

    def _answer(self, offer: bytes) -> bytes:
        if len(offer) != 4:
            raise SaslAuthenticationFailed(
                f"GSSAPI: {self._target} offered security layers in {len(offer)} bytes, not 4"
            )
        if not offer[0] & NO_SECURITY_LAYER:
            raise SaslAuthenticationFailed(
                f"GSSAPI: {self._target} requires a security layer (offered {offer[0]:#x});"
                " only 'no protection' is spoken between brokers"
            )
        choice = bytes([NO_SECURITY_LAYER, 0, 0, 0]) + self._authorization_id
        self._stage = _Stage.DONE
        return self._context.wrap(choice, False).message

    def _guarded(self, step: Any) -> Any:
        try:
            return step()
        except self._gssapi.exceptions.GSSError as exc:
            self._stage = _Stage.COMPLETE
            raise SaslAuthenticationFailed(
                f"GSSAPI: logging in to {self._target}: {gss_message(exc)}"
            ) from None
