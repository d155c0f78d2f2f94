"""Delegation tokens' rules as Kafka's DelegationTokenManager applies them, their znode
JSON as Kafka writes it, and a SCRAM login with a token (the `tokenauth=true`
extension), without a broker."""

from __future__ import annotations

import os

import pytest
import scramp

from herdless.protocol.errors import ErrorCode
from herdless.security.delegation_tokens import (
    TokenInformation,
    TokenLifetimes,
    expired,
    hmac_text,
    new_token,
    new_token_id,
    renewed,
    token_credentials,
    token_hmac,
    visible,
)
from herdless.security.principal import user
from herdless.security.sasl import SaslAuthenticationFailed
from herdless.security.sasl_scram import ScramServer, split_extensions
from herdless.security.scram import ScramCredential

HOUR, DAY, WEEK = 3_600_000, 86_400_000, 7 * 86_400_000
NOW = 1_700_000_000_000
ALICE, BOB, CAROL = user("alice"), user("bob"), user("carol")
LIFETIMES = TokenLifetimes()


def token(max_lifetime_ms: int = -1, renewers: tuple = (BOB,)) -> TokenInformation:
    return new_token("id-1", ALICE, ALICE, renewers, max_lifetime_ms, LIFETIMES, NOW)


def test_a_new_token_lives_a_day_unless_renewed_and_a_week_at_most() -> None:
    made = token()
    assert (made.issue_timestamp_ms, made.expiry_timestamp_ms, made.max_timestamp_ms) == (
        NOW,
        NOW + DAY,
        NOW + WEEK,
    )
    assert token(HOUR).max_timestamp_ms == token(HOUR).expiry_timestamp_ms == NOW + HOUR
    assert token(2 * WEEK).max_timestamp_ms == NOW + WEEK  # capped
    assert token(0).max_timestamp_ms == NOW + WEEK  # 0 or less: the broker's maximum


def test_renewal_is_the_owners_and_renewers_and_never_past_the_maximum() -> None:
    made = token()
    change = renewed(made, BOB, HOUR, LIFETIMES, NOW + 10)
    assert change.error == ErrorCode.NONE and change.timestamp_ms == NOW + 10 + HOUR
    assert change.token is not None and change.token.expiry_timestamp_ms == NOW + 10 + HOUR
    assert renewed(made, ALICE, -1, LIFETIMES, NOW + 10).timestamp_ms == NOW + 10 + DAY
    assert renewed(made, ALICE, 2 * WEEK, LIFETIMES, NOW).timestamp_ms == NOW + WEEK
    refused = renewed(made, CAROL, HOUR, LIFETIMES, NOW)
    assert (refused.error, refused.timestamp_ms, refused.token) == (
        ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH,
        -1,
        None,
    )
    late = renewed(made, ALICE, HOUR, LIFETIMES, NOW + DAY + 1)
    assert late.error == ErrorCode.DELEGATION_TOKEN_EXPIRED


def test_expiry_at_once_removes_and_a_period_moves_the_expiry() -> None:
    made = token()
    now_gone = expired(made, BOB, -1, NOW + 5)
    assert (now_gone.error, now_gone.timestamp_ms, now_gone.remove) == (
        ErrorCode.NONE,
        NOW + 5,
        True,
    )
    later = expired(made, ALICE, HOUR, NOW)
    assert (later.timestamp_ms, later.remove) == (NOW + HOUR, False)
    assert expired(made, CAROL, -1, NOW).error == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert expired(made, ALICE, HOUR, NOW + WEEK + 1).error == ErrorCode.DELEGATION_TOKEN_EXPIRED


def test_who_sees_a_token() -> None:
    made = new_token("id-2", ALICE, CAROL, (BOB,), -1, LIFETIMES, NOW)

    def no(_: object) -> bool:
        return False

    for principal in (ALICE, BOB, CAROL):  # owner, renewer, requester
        assert visible(made, principal, None, no, no)
    assert not visible(made, user("dave"), None, no, no)
    assert visible(made, user("dave"), None, lambda token_id: token_id == "id-2", no)
    assert visible(made, user("dave"), None, no, lambda owner: owner == ALICE)
    # Owners asked for: the token's owner or a renewer among them.
    assert visible(made, ALICE, [BOB], no, no)
    assert not visible(made, ALICE, [user("dave")], no, no)


def test_token_json_is_kafkas() -> None:
    made = new_token("aBc-_1", ALICE, user("admin"), (BOB,), HOUR, LIFETIMES, NOW)
    assert made.to_json() == (
        b'{"version":3,"owner":"User%3Aalice","tokenRequester":"User%3Aadmin",'
        b'"renewers":["User%3Abob"],"issueTimestamp":1700000000000,'
        b'"maxTimestamp":1700003600000,"expiryTimestamp":1700003600000,"tokenId":"aBc-_1"}'
    )
    assert TokenInformation.from_json(made.to_json()) == made
    # Version 2 (Kafka before 3.3) has no requester: the owner asked for it.
    old = TokenInformation.from_json(
        b'{"version":2,"owner":"User%3Aalice","renewers":[],"issueTimestamp":1,'
        b'"maxTimestamp":3,"expiryTimestamp":2,"tokenId":"t"}'
    )
    assert old.requester == ALICE and old.renewers == ()
    for bad in (b"{}", b"[]", b"not json", b'{"version":4}'):
        with pytest.raises(ValueError, match="not a delegation token"):
            TokenInformation.from_json(bad)


def test_a_token_id_and_hmac() -> None:
    token_id = new_token_id()
    assert len(token_id) == 22 and "=" not in token_id and "+" not in token_id
    assert len(token_hmac(token_id, "key")) == 64  # HmacSHA512
    assert token_hmac(token_id, "key") != token_hmac(token_id, "other key")
    assert hmac_text(b"\xfb\xff") == "+/8="  # standard base64, as Kafka's tools print it


def test_split_extensions() -> None:
    assert split_extensions("n,,n=user,r=abc") == ("n,,n=user,r=abc", "n=user,r=abc", {})
    assert split_extensions("n,,n=t,r=abc,tokenauth=true") == (
        "n,,n=t,r=abc",
        "n=t,r=abc,tokenauth=true",
        {"tokenauth": "true"},
    )
    with pytest.raises(ValueError):
        split_extensions("n,,n=t,r=abc,broken")


class Tokens:
    def __init__(self, token: TokenInformation, secret: str) -> None:
        self.token = token
        self.credentials = token_credentials(token.token_id, secret, lambda: os.urandom(32))

    def token_credential(
        self, token_id: str, mechanism: str
    ) -> tuple[ScramCredential, TokenInformation] | None:
        if token_id != self.token.token_id:
            return None
        return self.credentials[mechanism], self.token


class NoUsers:
    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return None


def log_in(server: ScramServer, name: str, password: str, extension: str) -> None:
    client = scramp.ScramClient([server.mechanism], name, password)
    first = client.get_client_first() + extension
    client.client_first_bare += extension
    client.set_server_first(server.evaluate(first.encode()).decode())
    client.set_server_final(server.evaluate(client.get_client_final().encode()).decode())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_scram_login_with_a_token_is_its_owner_until_it_expires(mechanism: str) -> None:
    made = token()
    tokens = Tokens(made, "secret")
    password = hmac_text(token_hmac(made.token_id, "secret"))
    server = ScramServer(mechanism, NoUsers(), tokens, lambda: NOW + 1000)
    log_in(server, made.token_id, password, ",tokenauth=true")
    assert server.complete
    assert server.principal == ALICE and server.principal.token_authenticated
    assert server.session_lifetime_ms == DAY - 1000

    for name, secret, extension, clock in (
        (made.token_id, "wrong", ",tokenauth=true", NOW),  # not the HMAC
        (made.token_id, password, "", NOW),  # no extension: an unknown user
        ("other-id", password, ",tokenauth=true", NOW),  # no such token
        (made.token_id, password, ",tokenauth=true", NOW + DAY + 1),  # expired
    ):
        refused = ScramServer(mechanism, NoUsers(), tokens, lambda c=clock: c)
        with pytest.raises(SaslAuthenticationFailed, match="invalid credentials"):
            log_in(refused, name, secret, extension)
    # A broker without tokens knows none.
    without = ScramServer(mechanism, NoUsers())
    with pytest.raises(SaslAuthenticationFailed):
        log_in(without, made.token_id, password, ",tokenauth=true")
