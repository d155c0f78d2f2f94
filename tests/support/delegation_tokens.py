"""Delegation tokens spoken raw: a SCRAM login (with Kafka's `tokenauth=true` extension
when logging in with a token, which no Python or librdkafka client sends) over a Wire,
and the four token requests built with herdless's codec classes."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import scramp
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import REQUESTS, RESPONSES
from tests.support.broker import BrokerProcess
from tests.support.wire import Wire

SCRAM_SHA_256 = "SCRAM-SHA-256"


@dataclass
class Login:
    wire: Wire
    # The last SaslAuthenticate answer: its error, message and session lifetime.
    answer: Any

    @property
    def error_code(self) -> int:
        return int(self.answer.error_code)

    def close(self) -> None:
        self.wire.close()


def scram_login(
    broker: BrokerProcess,
    port: int,
    user: str,
    password: str,
    *,
    token: bool = False,
    mechanism: str = SCRAM_SHA_256,
    wire: Wire | None = None,
) -> Login:
    """SaslHandshake v1 then SCRAM in SaslAuthenticate v2, on a new connection or again on
    `wire` (KIP-368 re-authentication); the login stops at the first answer with an
    error."""
    wire = Wire(broker, port=port) if wire is None else wire
    handshake = wire.call(SaslHandshakeRequest[1](mechanism=mechanism), SaslHandshakeResponse)
    assert handshake.error_code == 0, handshake  # type: ignore[attr-defined]
    client = scramp.ScramClient([mechanism], user, password)
    first = client.get_client_first()
    if token:
        # Kafka's ScramSaslClient: the extension ends the bare message, which the proofs
        # cover.
        first += ",tokenauth=true"
        client.client_first_bare += ",tokenauth=true"
    answer = wire.call(
        SaslAuthenticateRequest[2](auth_bytes=first.encode()), SaslAuthenticateResponse
    )
    if answer.error_code != 0:  # type: ignore[attr-defined]
        return Login(wire, answer)
    client.set_server_first(answer.auth_bytes.decode())  # type: ignore[attr-defined]
    final = client.get_client_final()
    answer = wire.call(
        SaslAuthenticateRequest[2](auth_bytes=final.encode()), SaslAuthenticateResponse
    )
    if answer.error_code == 0:  # type: ignore[attr-defined]
        client.set_server_final(answer.auth_bytes.decode())  # type: ignore[attr-defined]
    return Login(wire, answer)


def _authenticate(wire: Wire, message: str) -> Any:
    return wire.call(
        SaslAuthenticateRequest[2](auth_bytes=message.encode()), SaslAuthenticateResponse
    )


def call(wire: Wire, api: ApiKey, version: int, **fields: Any) -> Any:
    return wire.call(REQUESTS[api][version](**fields), RESPONSES[api])


def create_token(
    wire: Wire,
    *,
    renewers: list[str] = (),  # type: ignore[assignment]
    max_lifetime_ms: int = -1,
    owner: str | None = None,
    version: int = 3,
) -> Any:
    Request = REQUESTS[ApiKey.CREATE_DELEGATION_TOKEN]
    Renewer = Request.CreatableRenewers
    fields: dict[str, Any] = {
        "renewers": [Renewer(principal_type="User", principal_name=r) for r in renewers],
        "max_lifetime_ms": max_lifetime_ms,
    }
    if version >= 3:
        fields["owner_principal_type"] = None if owner is None else "User"
        fields["owner_principal_name"] = owner
    return call(wire, ApiKey.CREATE_DELEGATION_TOKEN, version, **fields)


def renew_token(wire: Wire, hmac: bytes, period_ms: int = -1) -> Any:
    return call(wire, ApiKey.RENEW_DELEGATION_TOKEN, 2, hmac=hmac, renew_period_ms=period_ms)


def expire_token(wire: Wire, hmac: bytes, period_ms: int = -1) -> Any:
    return call(wire, ApiKey.EXPIRE_DELEGATION_TOKEN, 2, hmac=hmac, expiry_time_period_ms=period_ms)


def describe_tokens(wire: Wire, owners: list[str] | None = None, version: int = 3) -> Any:
    Owner = REQUESTS[ApiKey.DESCRIBE_DELEGATION_TOKEN].DescribeDelegationTokenOwner
    named = (
        None if owners is None else [Owner(principal_type="User", principal_name=o) for o in owners]
    )
    return call(wire, ApiKey.DESCRIBE_DELEGATION_TOKEN, version, owners=named)


def password(hmac: bytes) -> str:
    """A token's password as clients use it: its HMAC in base64."""
    return base64.b64encode(hmac).decode()
