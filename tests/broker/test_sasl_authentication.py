"""A SASL listener's connection state, frame by frame, with the time given (fake clock)."""

from __future__ import annotations

from typing import Any

import scramp

from herdless.broker.network.sasl_authentication import SaslAuthentication, SaslListener, Step
from herdless.protocol.codec import REQUESTS, RESPONSES, Request, RequestPrefix
from herdless.protocol.errors import ErrorCode
from herdless.security.principal import user
from herdless.security.sasl_plain import PlainServer
from herdless.security.sasl_scram import ScramServer
from herdless.security.scram import ScramCredential

HANDSHAKE, AUTHENTICATE = 17, 36
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}


class Credentials:
    def scram(self, name: str, mechanism: str) -> ScramCredential | None:
        if name not in PASSWORDS:
            return None
        return ScramCredential(*scramp.ScramMechanism(mechanism).make_auth_info(PASSWORDS[name]))


def listener(max_reauth_ms: int = 0) -> SaslListener:
    def make_server(mechanism: str) -> Any:
        if mechanism == "PLAIN":
            return PlainServer(lambda name, password: PASSWORDS.get(name) == password)
        return ScramServer(mechanism, Credentials())

    return SaslListener(("SCRAM-SHA-256", "PLAIN"), make_server, max_reauth_ms, 100)


def request(api_key: int, version: int, **fields: Any) -> Request:
    return Request(api_key, version, 7, "test", REQUESTS[api_key](**fields))


def answer(step: Step, api_key: int, version: int) -> Any:
    assert step.reply is not None
    frame = b"".join(bytes(chunk) for chunk in step.reply)[4:]
    return RESPONSES[api_key].decode(frame, version=version, header=True)


def plain_login(auth: SaslAuthentication, name: str, password: str, now_ms: int = 0) -> Step:
    step = auth.handshake(request(HANDSHAKE, 1, mechanism="PLAIN"))
    assert step.close is None
    message = f"\0{name}\0{password}".encode()
    return auth.authenticate(request(AUTHENTICATE, 2, auth_bytes=message), now_ms)


def test_a_v1_handshake_then_authenticate_logs_the_client_in() -> None:
    auth = SaslAuthentication(listener(), "peer")
    step = auth.handshake(request(HANDSHAKE, 1, mechanism="PLAIN"))
    handshake = answer(step, HANDSHAKE, 1)
    assert handshake.error_code == ErrorCode.NONE
    assert handshake.mechanisms == ["SCRAM-SHA-256", "PLAIN"]
    assert not auth.authenticated
    step = auth.authenticate(request(AUTHENTICATE, 2, auth_bytes=b"\0alice\0alice-secret"), 0)
    assert step.authenticated == user("alice") and step.mechanism == "PLAIN"
    assert answer(step, AUTHENTICATE, 2).error_code == ErrorCode.NONE
    assert auth.authenticated and not auth.session_expired(10**12)


def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones_and_closed() -> None:
    auth = SaslAuthentication(listener(), "peer")
    step = auth.handshake(request(HANDSHAKE, 1, mechanism="GSSAPI"))
    response = answer(step, HANDSHAKE, 1)
    assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert response.mechanisms == ["SCRAM-SHA-256", "PLAIN"]
    assert step.close is not None


def test_a_failed_login_is_answered_then_closed_after_the_delay() -> None:
    auth = SaslAuthentication(listener(), "peer")
    step = plain_login(auth, "alice", "wrong")
    response = answer(step, AUTHENTICATE, 2)
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == "Authentication failed: Invalid username or password"
    assert step.close is not None and step.close_after_ms == 100
    assert not auth.authenticated


def test_a_request_before_authentication_closes_the_connection() -> None:
    auth = SaslAuthentication(listener(), "peer")
    step = auth.refuse(RequestPrefix(3, 12, 1))
    assert step.reply is None and "before SASL authentication" in (step.close or "")
    # SaslAuthenticate before a handshake: ILLEGAL_SASL_STATE, then closed.
    step = auth.authenticate(request(AUTHENTICATE, 2, auth_bytes=b""), 0)
    assert answer(step, AUTHENTICATE, 2).error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert step.close is not None


def test_the_v0_flow_carries_bare_tokens_after_the_handshake() -> None:
    auth = SaslAuthentication(listener(), "peer")
    step = auth.handshake(request(HANDSHAKE, 0, mechanism="SCRAM-SHA-256"))
    assert answer(step, HANDSHAKE, 0).error_code == ErrorCode.NONE
    assert auth.expects_raw_token
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "alice-secret")
    step = auth.raw_token(client.get_client_first().encode(), 0)
    assert step.reply is not None
    token = b"".join(bytes(c) for c in step.reply)
    assert int.from_bytes(token[:4], "big") == len(token) - 4
    client.set_server_first(token[4:].decode())
    step = auth.raw_token(client.get_client_final().encode(), 0)
    assert step.authenticated == user("alice")
    assert step.reply is not None
    client.set_server_final(b"".join(bytes(c) for c in step.reply)[4:].decode())
    assert auth.authenticated and not auth.expects_raw_token


def test_sessions_end_after_connections_max_reauth_ms_and_renew_as_the_same_principal() -> None:
    auth = SaslAuthentication(listener(max_reauth_ms=5_000), "peer")
    step = plain_login(auth, "alice", "alice-secret", now_ms=1_000)
    assert answer(step, AUTHENTICATE, 2).session_lifetime_ms == 5_000
    assert not auth.session_expired(5_999) and auth.session_expired(6_000)
    # Re-authentication (KIP-368): a v1 handshake on the authenticated connection;
    # requests keep being served meanwhile.
    step = plain_login(auth, "alice", "alice-secret", now_ms=4_000)
    assert step.authenticated == user("alice") and step.close is None
    assert auth.authenticated and not auth.session_expired(8_999)
    # Another principal on the same connection is refused.
    step = plain_login(auth, "bob", "bob-secret", now_ms=5_000)
    response = answer(step, AUTHENTICATE, 2)
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Cannot change principals" in response.error_message
    assert step.close is not None


def test_re_authentication_must_keep_its_mechanism() -> None:
    auth = SaslAuthentication(listener(max_reauth_ms=5_000), "peer")
    plain_login(auth, "alice", "alice-secret")
    step = auth.handshake(request(HANDSHAKE, 1, mechanism="SCRAM-SHA-256"))
    assert answer(step, HANDSHAKE, 1).error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert step.close is not None
