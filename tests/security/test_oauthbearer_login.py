"""Kafka's unsecured OAUTHBEARER login, as a broker logs in to the others with it: the
token made from the JAAS options, checked by Kafka's unsecured validator; options that
cannot be used named."""

from __future__ import annotations

import pytest

from herdless.security.oauthbearer_login import OAuthBearerClient, UnsecuredLogin
from herdless.security.oauthbearer_unsecured import UnsecuredValidator
from herdless.security.sasl import SaslAuthenticationFailed
from herdless.security.sasl_oauthbearer import OAuthBearerServer, parse_initial_response

NOW_S = 1_800_000_000.0


def test_the_token_carries_the_claims_and_lasts_the_lifetime() -> None:
    login = UnsecuredLogin.from_options(
        {
            "unsecuredLoginStringClaim_sub": "broker",
            "unsecuredLoginNumberClaim_level": "3",
            "unsecuredLoginListClaim_scope": "|replicate|admin",
            "unsecuredLoginLifetimeSeconds": "600",
            "unsecuredLoginExtension_traceId": "abc",
        }
    )
    validator = UnsecuredValidator(required_scope=("replicate",))
    token = validator.validate(login.token(NOW_S), int(NOW_S * 1000))
    assert token.principal_name == "broker"
    assert token.scope == frozenset({"replicate", "admin"})
    assert token.lifetime_ms == int((NOW_S + 600) * 1000)
    message = parse_initial_response(login.client(lambda: NOW_S).first())
    assert message.extensions == {"traceId": "abc"}


def test_another_principal_claim_names_the_principal() -> None:
    login = UnsecuredLogin.from_options(
        {"unsecuredLoginPrincipalClaimName": "who", "unsecuredLoginStringClaim_who": "b1"}
    )
    server = OAuthBearerServer(UnsecuredValidator("who"), lambda: int(NOW_S * 1000))
    client = login.client(lambda: NOW_S)
    assert client.evaluate(server.evaluate(client.first())) is None
    assert server.principal.name == "b1"


def test_a_refused_token_says_why() -> None:
    server = OAuthBearerServer(UnsecuredValidator(required_scope=("x",)), lambda: 0)
    client = UnsecuredLogin.from_options({"unsecuredLoginStringClaim_sub": "b"}).client(lambda: 0.0)
    with pytest.raises(SaslAuthenticationFailed, match="insufficient_scope"):
        client.evaluate(server.evaluate(client.first()))


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({}, "unsecuredLoginStringClaim_sub must give the principal"),
        ({"unsecuredLoginNumberClaim_sub": "1"}, "unsecuredLoginStringClaim_sub must give"),
        (
            {"unsecuredLoginStringClaim_sub": "b", "unsecuredLoginStringClaim_exp": "1"},
            "iat and exp are set from the clock",
        ),
        (
            {"unsecuredLoginStringClaim_sub": "b", "unsecuredLoginNumberClaim_n": "many"},
            "unsecuredLoginNumberClaim_n must be a number",
        ),
        (
            {"unsecuredLoginStringClaim_sub": "b", "unsecuredLoginLifetimeSeconds": "0"},
            "must be positive",
        ),
        (
            {"unsecuredLoginStringClaim_sub": "b", "unsecuredLoginExtension_auth": "x"},
            "not 'auth'",
        ),
    ],
)
def test_options_that_cannot_be_used_are_named(options: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        UnsecuredLogin.from_options(options)


def test_the_message_is_rfc_7628s() -> None:
    assert (
        OAuthBearerClient("t.k.", {"a": "1"}).first() == b"n,,\x01auth=Bearer t.k.\x01a=1\x01\x01"
    )
