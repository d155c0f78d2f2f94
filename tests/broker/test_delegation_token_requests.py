"""Which connections may ask for delegation tokens (Kafka's KafkaApis.allowTokenRequests),
and the token manager's cache and stored changes, with a fake store and clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from herdless.broker.auth.delegation_tokens import DelegationTokenManager
from herdless.broker.auth.token_store import LocalTokens, read_file
from herdless.broker.handlers.delegation_tokens import allow_token_requests
from herdless.protocol.codec import Request
from herdless.protocol.errors import ErrorCode
from herdless.security.delegation_tokens import TokenLifetimes
from herdless.security.listeners import SecurityProtocol
from herdless.security.principal import ANONYMOUS, KafkaPrincipal, user
from herdless.security.session import ClientSession

ALICE = user("alice")
ALICE_BY_TOKEN = KafkaPrincipal("User", "alice", token_authenticated=True)


def request(principal: KafkaPrincipal, protocol: SecurityProtocol | None) -> Request:
    session = None
    if protocol is not None:
        session = ClientSession(principal, protocol.name, protocol, "127.0.0.1")
    return Request(38, 3, 1, None, None, session=session)


@pytest.mark.parametrize(
    ("principal", "protocol", "allowed"),
    [
        (ALICE, SecurityProtocol.SASL_PLAINTEXT, True),
        (ALICE, SecurityProtocol.SASL_SSL, True),
        (user("CN=client"), SecurityProtocol.SSL, True),  # TLS with a client certificate
        (ANONYMOUS, SecurityProtocol.SSL, False),  # one-way TLS
        (ANONYMOUS, SecurityProtocol.PLAINTEXT, False),
        (ALICE_BY_TOKEN, SecurityProtocol.SASL_SSL, False),  # logged in with a token
        (ALICE, None, False),  # no session at all
    ],
)
def test_who_may_ask_for_tokens(
    principal: KafkaPrincipal, protocol: SecurityProtocol | None, allowed: bool
) -> None:
    assert allow_token_requests(request(principal, protocol)) is allowed


def test_a_token_owner_is_the_same_principal_to_acls() -> None:
    assert ALICE_BY_TOKEN == ALICE and hash(ALICE_BY_TOKEN) == hash(ALICE)


def test_the_manager_stores_each_change_and_its_cache_follows(tmp_path: Path) -> None:
    now = [1_000_000]
    manager = DelegationTokenManager(
        "secret", TokenLifetimes(10_000, 1_000), LocalTokens(tmp_path), lambda: now[0]
    )

    async def run() -> None:
        await manager.start()
        made = await manager.create(ALICE, ALICE, [user("bob")], -1)
        token_id = made.info.token_id
        assert read_file(tmp_path)[token_id] == made.info
        credential = manager.token_credential(token_id, "SCRAM-SHA-512")
        assert credential is not None and credential[1] == made.info
        assert manager.find(made.hmac) == made.info

        now[0] += 500
        change = await manager.renew(user("bob"), made.hmac, -1)
        assert change is not None and change.timestamp_ms == now[0] + 1_000
        assert read_file(tmp_path)[token_id].expiry_timestamp_ms == now[0] + 1_000
        assert await manager.renew(ALICE, b"unknown", -1) is None

        now[0] += 2_000  # past its expiry: the check removes it, there and here
        assert await manager.expire_tokens() == 1
        assert read_file(tmp_path) == {}
        assert manager.token_credential(token_id, "SCRAM-SHA-512") is None
        assert manager.find(made.hmac) is None

        short = await manager.create(ALICE, ALICE, [], -1)
        gone = await manager.expire(ALICE, short.hmac, -1)
        assert gone is not None and gone.error == ErrorCode.NONE
        assert manager.tokens(lambda t: True) == []
        kept.append(await manager.create(ALICE, ALICE, [], -1))

    kept: list = []
    asyncio.run(run())
    # Read again at start, as after a restart: the same tokens, the same HMACs.
    again = DelegationTokenManager("secret", TokenLifetimes(), LocalTokens(tmp_path), lambda: 0)
    asyncio.run(again.start())
    assert again.tokens(lambda t: True) == kept
    assert again.find(kept[0].hmac) == kept[0].info
