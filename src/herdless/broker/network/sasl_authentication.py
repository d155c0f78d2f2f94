"""A connection's SASL authentication on a SASL listener, as Kafka's SaslServerAuthenticator.

Until a client has authenticated it may send ApiVersions, SaslHandshake and then its
mechanism's tokens: in SaslAuthenticate requests after a v1 handshake, or bare, each
in a size-prefixed frame of its own, after a v0 handshake (the flow old clients use).
Anything else closes the connection. A failed authentication is answered
SASL_AUTHENTICATION_FAILED where the flow can say so, and the connection is closed
after connection.failed.authentication.delay.ms, so a client cannot try passwords
faster than that.

KIP-368: with connections.max.reauth.ms set (or a credential that expires), the client
is told its session's lifetime and re-authenticates on the same connection before it
ends, with a v1 SaslHandshake then SaslAuthenticate, as the same principal. A request
after the session has ended closes the connection.

Nothing here touches the socket or reads the clock: the connection passes each frame
and the time in, and writes and closes as told.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import (
    Request,
    RequestPrefix,
    encode_response,
    response_class,
)
from herdless.protocol.errors import ErrorCode
from herdless.protocol.regions import Chunk
from herdless.security.principal import KafkaPrincipal
from herdless.security.sasl import SaslAuthenticationFailed, SaslServer


@dataclass(frozen=True, slots=True)
class SaslListener:
    """What one SASL listener offers."""

    # sasl.enabled.mechanisms, in order
    mechanisms: tuple[str, ...]
    # A new server side for a mechanism of `mechanisms`.
    make_server: Callable[[str], SaslServer]
    # connections.max.reauth.ms: 0, sessions never end.
    max_reauth_ms: int = 0
    # connection.failed.authentication.delay.ms
    failed_authentication_delay_ms: int = 100


class _State(enum.Enum):
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "waiting for SaslAuthenticate"
    RAW_TOKEN = "waiting for a SASL token (v0 flow)"
    AUTHENTICATED = "authenticated"
    REAUTH_AUTHENTICATE = "re-authenticating, waiting for SaslAuthenticate"


@dataclass(slots=True)
class Step:
    """What the connection does with one frame: send `reply` (if any), then either go on,
    or close after `close_after_ms` when `close` names why."""

    reply: list[Chunk] | None = None
    close: str | None = None
    close_after_ms: int = 0
    # Set when this step authenticated the client (first time or again).
    authenticated: KafkaPrincipal | None = None
    mechanism: str | None = None
    # The client failed to authenticate (its address's failures are counted).
    failed: bool = False
    # The connection's SASL session ran out before it re-authenticated (KIP-368).
    expired: bool = False


class SaslAuthentication:
    def __init__(self, listener: SaslListener, peer: str) -> None:
        self._listener = listener
        self._peer = peer
        self._state = _State.HANDSHAKE
        self._server: SaslServer | None = None
        self._mechanism: str | None = None
        self._principal: KafkaPrincipal | None = None
        # When the session ends, on the monotonic clock (ms); None: never.
        self._session_end_ms: int | None = None

    @property
    def authenticated(self) -> bool:
        """Whether requests other than SASL's may be served (re-authentication included)."""
        return self._state in (_State.AUTHENTICATED, _State.REAUTH_AUTHENTICATE)

    @property
    def expects_raw_token(self) -> bool:
        return self._state is _State.RAW_TOKEN

    def session_expired(self, now_ms: int) -> bool:
        return self._session_end_ms is not None and now_ms >= self._session_end_ms

    def refuse(self, prefix: RequestPrefix) -> Step:
        """A request that is not SASL's where the connection may not send it."""
        if self.authenticated:
            return Step(close="its SASL session expired without re-authentication", expired=True)
        return Step(
            close=f"unexpected request (API key {prefix.api_key}) before SASL authentication:"
            f" {self._state.value}"
        )

    def handshake(self, request: Request) -> Step:
        version = request.api_version
        mechanisms = list(self._listener.mechanisms)
        if self._state is _State.AUTHENTICATED and version >= 1:
            reauthenticating = True
        elif self._state is _State.HANDSHAKE:
            reauthenticating = False
        else:
            return self._illegal(request, f"SaslHandshake while {self._state.value}")
        mechanism = request.body.mechanism
        if mechanism not in mechanisms:
            answer = self._handshake_answer(request, ErrorCode.UNSUPPORTED_SASL_MECHANISM)
            return Step(
                answer,
                close=f"asked for SASL mechanism {mechanism!r}; enabled: {', '.join(mechanisms)}",
            )
        if reauthenticating and mechanism != self._mechanism:
            answer = self._handshake_answer(request, ErrorCode.ILLEGAL_SASL_STATE)
            return Step(
                answer,
                close=f"re-authentication with {mechanism}, not {self._mechanism}, its mechanism",
            )
        self._server = self._listener.make_server(mechanism)
        self._mechanism = mechanism
        if reauthenticating:
            self._state = _State.REAUTH_AUTHENTICATE
        else:
            self._state = _State.AUTHENTICATE if version >= 1 else _State.RAW_TOKEN
        return Step(self._handshake_answer(request, ErrorCode.NONE))

    def authenticate(self, request: Request, now_ms: int) -> Step:
        if self._state not in (_State.AUTHENTICATE, _State.REAUTH_AUTHENTICATE):
            return self._illegal(request, f"SaslAuthenticate while {self._state.value}")
        assert self._server is not None
        try:
            challenge = self._server.evaluate(request.body.auth_bytes)
            step = self._completed(now_ms) if self._server.complete else Step()
        except SaslAuthenticationFailed as exc:
            answer = self._authenticate_answer(
                request, ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b"", 0
            )
            return self._failed(answer, _logged(exc))
        lifetime = 0
        if step.authenticated is not None and self._session_end_ms is not None:
            lifetime = self._session_end_ms - now_ms
        step.reply = self._authenticate_answer(
            request, ErrorCode.NONE, None, challenge or b"", lifetime
        )
        return step

    def raw_token(self, token: bytes, now_ms: int) -> Step:
        """A bare token of the v0 flow; the answer is a bare, size-prefixed token."""
        assert self._server is not None and self._state is _State.RAW_TOKEN
        try:
            challenge = self._server.evaluate(token)
            step = self._completed(now_ms) if self._server.complete else Step()
        except SaslAuthenticationFailed as exc:
            return self._failed(None, _logged(exc))  # the v0 flow cannot carry an error
        if challenge is not None:
            step.reply = [len(challenge).to_bytes(4, "big") + challenge]
        return step

    def _completed(self, now_ms: int) -> Step:
        assert self._server is not None
        principal = self._server.principal
        if self._principal is not None and principal != self._principal:
            raise SaslAuthenticationFailed(
                f"Cannot change principals during re-authentication from {self._principal}:"
                f" {principal}"
            )
        self._principal = principal
        lifetimes = [
            ms
            for ms in (self._listener.max_reauth_ms, self._server.session_lifetime_ms)
            if ms is not None and ms > 0
        ]
        self._session_end_ms = now_ms + min(lifetimes) if lifetimes else None
        self._state = _State.AUTHENTICATED
        mechanism, self._server = self._mechanism, None
        return Step(authenticated=principal, mechanism=mechanism)

    def _failed(self, answer: list[Chunk] | None, reason: str) -> Step:
        self._state = _State.HANDSHAKE
        self._server = None
        return Step(
            answer,
            close=f"SASL authentication failed: {reason}",
            close_after_ms=self._listener.failed_authentication_delay_ms,
            mechanism=self._mechanism,
            failed=True,
        )

    def _illegal(self, request: Request, problem: str) -> Step:
        if request.api_key == ApiKey.SASL_HANDSHAKE:
            answer = self._handshake_answer(request, ErrorCode.ILLEGAL_SASL_STATE)
        else:
            answer = self._authenticate_answer(
                request, ErrorCode.ILLEGAL_SASL_STATE, f"Unexpected {problem}", b"", 0
            )
        return Step(answer, close=problem)

    def _handshake_answer(self, request: Request, error: ErrorCode) -> list[Chunk]:
        response = response_class(ApiKey.SASL_HANDSHAKE)(
            error_code=error, mechanisms=list(self._listener.mechanisms)
        )
        return encode_response(response, request.api_version, request.correlation_id)

    def _authenticate_answer(
        self,
        request: Request,
        error: ErrorCode,
        message: str | None,
        auth_bytes: bytes,
        session_lifetime_ms: int,
    ) -> list[Chunk]:
        response = response_class(ApiKey.SASL_AUTHENTICATE)(
            error_code=error,
            error_message=message,
            auth_bytes=auth_bytes,
            session_lifetime_ms=session_lifetime_ms,
        )
        return encode_response(response, request.api_version, request.correlation_id)


def _logged(failure: SaslAuthenticationFailed) -> str:
    """What the broker's log says of a failed authentication: the client's message, and
    the cause the client is not told."""
    return str(failure) if failure.reason is None else f"{failure} ({failure.reason})"
