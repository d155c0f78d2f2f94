"""Tokens the broker refuses: expired, not yet valid, badly signed, signed by a key the
JWKS lacks. The client gets SASL_AUTHENTICATION_FAILED after RFC 7628's challenge, the
broker logs one line saying why, and nothing else changes: the next good token logs in.

Raw exchanges come from loopback addresses of their own, so that each one's log line is
found by its address; the broker of this module allows many failed logins per address,
so that a client retrying a bad token never turns the next test away.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from herdless.broker.auth.oauthbearer import OIDC_VALIDATORS
from herdless.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess, free_port, module_broker
from tests.support.tokens import SigningKey, claims, unsecured_token, write_jwks
from tests.support.wire import Wire

LISTENERS = {"UNSECURED": "SASL_PLAINTEXT", "SIGNED": "SASL_PLAINTEXT"}
INVALID_TOKEN = '{"status":"invalid_token"}'


class Brokered:
    def __init__(self, broker: BrokerProcess, ports: dict[str, int], key: SigningKey) -> None:
        self.broker = broker
        self.ports = ports
        self.key = key


@pytest.fixture(scope="module")
def brokered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokered]:
    base = tmp_path_factory.mktemp("oauthbearer-failures")
    key = SigningKey.named("idp-key-1")
    jwks = write_jwks(base / "jwks.json", key)
    ports = {name: free_port() for name in LISTENERS}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    protocols = ",".join(f"{name}:{protocol}" for name, protocol in LISTENERS.items())
    settings = {
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{protocols}",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": OIDC_VALIDATORS[0],
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "connection.failed.authentication.limit": "1000",
    }
    args = [arg for k, v in settings.items() for arg in ("--set", f"{k}={v}")]
    with module_broker(base / "data", *args, listeners=listeners) as broker:
        yield Brokered(broker, ports, key)


def sasl_login(brokered: Brokered, listener: str, token: str, source: str) -> list[Any]:
    """SaslHandshake then SaslAuthenticate with `token`, and 0x01 after a challenge, as
    Kafka's clients answer one; the answers, and whether the broker then hung up."""
    wire = Wire(brokered.broker, port=brokered.ports[listener], source_host=source)
    try:
        handshake = wire.call(
            SaslHandshakeRequest[1](mechanism="OAUTHBEARER"), SaslHandshakeResponse
        )
        assert handshake.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
        message = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
        answers = [
            wire.call(SaslAuthenticateRequest[2](auth_bytes=message), SaslAuthenticateResponse)
        ]
        if answers[0].auth_bytes:  # type: ignore[attr-defined]
            answers.append(
                wire.call(SaslAuthenticateRequest[2](auth_bytes=b"\x01"), SaslAuthenticateResponse)
            )
            wire.sock.settimeout(5)
            answers.append(wire.sock.recv(1) == b"")
        return answers
    finally:
        wire.close()


def log_lines(brokered: Brokered, source: str) -> list[str]:
    return [
        line for line in brokered.broker.log().splitlines() if f"connection from {source}:" in line
    ]


def eventually_logged(brokered: Brokered, source: str) -> list[str]:
    deadline = time.monotonic() + 5
    while not log_lines(brokered, source) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # a second line, were there one, would be there by now
    return log_lines(brokered, source)


def good_login(brokered: Brokered, listener: str, source: str) -> None:
    token_claims = claims("alice", time.time())
    token = (
        brokered.key.sign(token_claims) if listener == "SIGNED" else unsecured_token(token_claims)
    )
    [answer] = sasl_login(brokered, listener, token, source)
    assert answer.error_code == ErrorCode.NONE
    assert answer.session_lifetime_ms > 0


def bad_tokens(key: SigningKey) -> dict[str, tuple[str, str, str]]:
    """case: (listener, token, what the broker's line says)"""
    now = time.time()
    forger = SigningKey.named("forger")
    return {
        "expired-unsecured": (
            "UNSECURED",
            unsecured_token(claims("alice", now - 7200)),
            "the token expired",
        ),
        "expired-signed": ("SIGNED", key.sign(claims("alice", now - 7200)), "the token expired"),
        "not-yet-valid": (
            "SIGNED",
            key.sign(claims("alice", now, nbf=int(now) + 600)),
            "the token is not valid yet",
        ),
        "bad-signature": (
            "SIGNED",
            forger.sign(claims("alice", now), kid=key.kid),
            "the signature does not verify",
        ),
        "unknown-kid": ("SIGNED", forger.sign(claims("alice", now)), "no key for kid 'forger'"),
        "unsecured-on-signed": (
            "SIGNED",
            unsecured_token(claims("alice", now)) + "c2ln",
            "the JWT is not signed (alg none)",
        ),
    }


CASES = [
    "expired-unsecured",
    "expired-signed",
    "not-yet-valid",
    "bad-signature",
    "unknown-kid",
    "unsecured-on-signed",
]


@pytest.mark.parametrize("case", CASES)
def test_a_refused_token_fails_with_one_log_line_saying_why(brokered: Brokered, case: str) -> None:
    listener, token, reason = bad_tokens(brokered.key)[case]
    source = f"127.0.0.{10 + CASES.index(case)}"
    challenge, failure, hung_up = sasl_login(brokered, listener, token, source)
    assert challenge.error_code == ErrorCode.NONE
    assert challenge.auth_bytes == INVALID_TOKEN.encode()
    assert failure.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert failure.error_message == INVALID_TOKEN
    assert hung_up
    [line] = eventually_logged(brokered, source)
    # The client's message, then the cause it is not told.
    assert "SASL authentication failed: " in line and f"(invalid token: {reason}" in line
    # Nothing else changed: a good token from the same address logs in.
    good_login(brokered, listener, source)
    assert "Traceback" not in brokered.broker.log()


def test_confluent_kafka_hears_its_badly_signed_token_refused(brokered: Brokered) -> None:
    forged = SigningKey.named("forger").sign(claims("alice", time.time()), kid=brokered.key.kid)
    errors: list[KafkaError] = []
    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{brokered.ports['SIGNED']}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (forged, time.time() + 3600),
            "error_cb": errors.append,
        }
    )
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "no error reached the client"
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert INVALID_TOKEN in errors[0].str()
    del producer


def test_a_message_that_is_not_oauthbearer_s_is_refused_without_a_challenge(
    brokered: Brokered,
) -> None:
    source = "127.0.0.9"
    wire = Wire(brokered.broker, port=brokered.ports["UNSECURED"], source_host=source)
    try:
        wire.call(SaslHandshakeRequest[1](mechanism="OAUTHBEARER"), SaslHandshakeResponse)
        answer = wire.call(
            SaslAuthenticateRequest[2](auth_bytes=b"n,,\x01auth=Basic abc\x01\x01"),
            SaslAuthenticateResponse,
        )
    finally:
        wire.close()
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
    assert "invalid credentials with SASL mechanism OAUTHBEARER" in answer.error_message  # type: ignore[attr-defined]
    [line] = eventually_logged(brokered, source)
    assert "Invalid scheme" in line
