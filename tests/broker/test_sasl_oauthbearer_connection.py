"""An OAUTHBEARER login on a SASL listener's connection, frame by frame with a fake clock:
the refused token's challenge and the failure after the client's 0x01, and a session that
ends with its token (KIP-368)."""

from __future__ import annotations

from typing import Any

from herdless.broker.network.sasl_authentication import SaslAuthentication, SaslListener, Step
from herdless.protocol.codec import REQUESTS, RESPONSES, Request
from herdless.protocol.errors import ErrorCode
from herdless.security.oauthbearer_unsecured import UnsecuredValidator
from herdless.security.principal import user
from herdless.security.sasl_oauthbearer import OAuthBearerServer
from tests.support.tokens import claims, unsecured_token

HANDSHAKE, AUTHENTICATE = 17, 36
# The wall clock tokens are dated by, and the monotonic one sessions are timed by.
WALL_S = 1_800_000_000


class Clock:
    def __init__(self) -> None:
        self.wall_ms = WALL_S * 1000


def listener(clock: Clock, max_reauth_ms: int = 0) -> SaslListener:
    def make_server(mechanism: str) -> Any:
        return OAuthBearerServer(UnsecuredValidator(), lambda: clock.wall_ms)

    return SaslListener(("OAUTHBEARER",), make_server, max_reauth_ms, 100)


def request(api_key: int, version: int, **fields: Any) -> Request:
    return Request(api_key, version, 7, "test", REQUESTS[api_key](**fields))


def answer(step: Step) -> Any:
    assert step.reply is not None
    frame = b"".join(bytes(chunk) for chunk in step.reply)[4:]
    return RESPONSES[AUTHENTICATE].decode(frame, version=2, header=True)


def send_token(auth: SaslAuthentication, token: str, now_ms: int) -> Step:
    step = auth.handshake(request(HANDSHAKE, 1, mechanism="OAUTHBEARER"))
    assert step.close is None
    message = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
    return auth.authenticate(request(AUTHENTICATE, 2, auth_bytes=message), now_ms)


def test_a_refused_token_is_challenged_then_fails_with_its_reason_in_the_log() -> None:
    clock = Clock()
    auth = SaslAuthentication(listener(clock), "peer")
    expired = unsecured_token(claims("alice", WALL_S - 7200))
    step = send_token(auth, expired, 0)
    challenge = answer(step)
    assert challenge.error_code == ErrorCode.NONE
    assert challenge.auth_bytes == b'{"status":"invalid_token"}'
    assert step.close is None and not auth.authenticated
    step = auth.authenticate(request(AUTHENTICATE, 2, auth_bytes=b"\x01"), 10)
    failure = answer(step)
    assert failure.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert failure.error_message == '{"status":"invalid_token"}'
    assert step.failed and step.close is not None and step.close_after_ms == 100
    assert "invalid token: the token expired" in step.close


def test_the_session_ends_when_the_token_expires() -> None:
    clock = Clock()
    auth = SaslAuthentication(listener(clock), "peer")
    step = send_token(auth, unsecured_token(claims("alice", WALL_S, lifetime_s=60)), 1_000)
    assert step.authenticated == user("alice")
    assert answer(step).session_lifetime_ms == 60_000
    assert not auth.session_expired(60_999) and auth.session_expired(61_000)


def test_connections_max_reauth_ms_ends_it_sooner_and_a_new_token_renews_it() -> None:
    clock = Clock()
    auth = SaslAuthentication(listener(clock, max_reauth_ms=10_000), "peer")
    step = send_token(auth, unsecured_token(claims("alice", WALL_S, lifetime_s=60)), 0)
    assert answer(step).session_lifetime_ms == 10_000
    clock.wall_ms += 9_000
    fresh = unsecured_token(claims("alice", WALL_S + 9, lifetime_s=5))
    step = send_token(auth, fresh, 9_000)
    assert step.authenticated == user("alice")
    assert answer(step).session_lifetime_ms == 5_000
    # Re-authentication as someone else is refused.
    step = send_token(auth, unsecured_token(claims("bob", WALL_S + 9)), 12_000)
    assert answer(step).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
