"""The OAUTHBEARER exchange (RFC 7628) as Kafka's OAuthBearerSaslServer answers it, and
Kafka's unsecured-JWT validator rule by rule, with a fake clock."""

from __future__ import annotations

import json

import pytest

from herdless.security.oauthbearer_token import INSUFFICIENT_SCOPE, InvalidToken
from herdless.security.oauthbearer_unsecured import UnsecuredValidator
from herdless.security.principal import user
from herdless.security.sasl import SaslAuthenticationFailed
from herdless.security.sasl_oauthbearer import (
    INVALID_CREDENTIALS,
    OAuthBearerServer,
    parse_initial_response,
)
from tests.support.tokens import claims, unsecured_token

NOW_S = 1_800_000_000
NOW_MS = NOW_S * 1000


def message(token: str, authzid: str = "", **extensions: str) -> bytes:
    pairs = "".join(f"{key}={value}\x01" for key, value in extensions.items())
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01{pairs}\x01".encode()


def server(validator: UnsecuredValidator | None = None, now_ms: int = NOW_MS) -> OAuthBearerServer:
    return OAuthBearerServer(validator or UnsecuredValidator(), lambda: now_ms)


def test_a_valid_token_authenticates_its_subject_for_the_token_s_lifetime() -> None:
    exchange = server()
    token = unsecured_token(claims("alice", NOW_S, lifetime_s=600))
    assert exchange.evaluate(message(token, traceId="abc 123")) == b""
    assert exchange.complete
    assert exchange.principal == user("alice")
    assert exchange.extensions == {"traceId": "abc 123"}
    assert exchange.session_lifetime_ms == 600_000


def test_a_refused_token_gets_the_json_challenge_then_fails_on_the_client_s_0x01() -> None:
    exchange = server()
    expired = unsecured_token(claims("alice", NOW_S - 7200, lifetime_s=3600))
    challenge = exchange.evaluate(message(expired))
    assert json.loads(challenge) == {"status": "invalid_token"}
    assert challenge == b'{"status":"invalid_token"}'
    assert not exchange.complete
    with pytest.raises(SaslAuthenticationFailed) as failed:
        exchange.evaluate(b"\x01")
    # The client is told what Kafka tells it; the broker's log says why.
    assert str(failed.value) == '{"status":"invalid_token"}'
    assert failed.value.reason is not None and "expired" in failed.value.reason


def test_a_0x01_without_a_challenge_before_it_is_an_unreadable_message() -> None:
    with pytest.raises(SaslAuthenticationFailed) as failed:
        server().evaluate(b"\x01")
    assert str(failed.value) == INVALID_CREDENTIALS


def test_an_authorization_id_must_name_the_token_s_principal() -> None:
    token = unsecured_token(claims("alice", NOW_S))
    assert server().evaluate(message(token, authzid="alice")) == b""
    with pytest.raises(SaslAuthenticationFailed, match="different from the token's principal"):
        server().evaluate(message(token, authzid="bob"))


def test_the_exchange_is_one_message() -> None:
    exchange = server()
    token = unsecured_token(claims("alice", NOW_S))
    exchange.evaluate(message(token))
    with pytest.raises(SaslAuthenticationFailed, match="exchange is over"):
        exchange.evaluate(message(token))


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"n,,\x01auth=Bearer abc\x01", "client first message"),  # no closing 0x01
        (b"y,,\x01auth=Bearer abc\x01\x01", "client first message"),  # channel binding
        (b"n,,\x01\x01", "'auth' not specified"),
        (b"n,,\x01auth=Bearer\x01\x01", "invalid 'auth' format"),
        (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme"),
        (b"n,,\x01auth=Bearer a\x01key1=v\x01\x01", "client first message"),  # key: letters
        (b"n,,\x01auth=Bearer a\x01key=\x01\x01", "client first message"),  # empty value
        (b"n,,\x01auth=Bearer \xff\x01\x01", "not UTF-8"),
        (b"", "client first message"),
    ],
)
def test_unreadable_messages_are_refused_without_saying_more(raw: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_initial_response(raw)
    with pytest.raises(SaslAuthenticationFailed) as failed:
        server().evaluate(raw)
    assert str(failed.value) == INVALID_CREDENTIALS
    assert failed.value.reason is not None and problem in failed.value.reason


def test_the_initial_response_undoes_saslname_escapes_and_keeps_padding() -> None:
    initial = parse_initial_response(b"n,a=a=2Cb=3Dc,\x01auth=bearer tok.en.sig==\x01\x01")
    assert initial.authorization_id == "a,b=c"
    assert initial.token == "tok.en.sig=="
    assert "en.sig" not in repr(initial)


def test_a_token_accepted_within_the_clock_skew_after_its_exp_ends_its_session_at_once() -> None:
    skewed = UnsecuredValidator(allowable_clock_skew_ms=60_000)
    exchange = server(skewed)
    exchange.evaluate(message(unsecured_token(claims("alice", NOW_S - 3610, lifetime_s=3600))))
    assert exchange.complete
    assert exchange.session_lifetime_ms == 1


# -- the unsecured validator, rule by rule ------------------------------------------------


def refusal(validator: UnsecuredValidator, token: str, now_ms: int = NOW_MS) -> InvalidToken:
    with pytest.raises(InvalidToken) as refused:
        validator.validate(token, now_ms)
    return refused.value


def test_unsecured_tokens_as_librdkafka_writes_them() -> None:
    token = unsecured_token(claims("alice", NOW_S, scope=["read", "write"]))
    accepted = UnsecuredValidator().validate(token, NOW_MS)
    assert accepted.principal_name == "alice"
    assert accepted.scope == {"read", "write"}
    assert accepted.lifetime_ms == (NOW_S + 3600) * 1000
    assert accepted.start_time_ms == NOW_MS


def test_an_expired_token_is_refused_unless_within_the_allowable_skew() -> None:
    token = unsecured_token(claims("alice", NOW_S - 100, lifetime_s=50))
    assert "expired" in refusal(UnsecuredValidator(), token).reason
    skewed = UnsecuredValidator(allowable_clock_skew_ms=60_000)
    assert skewed.validate(token, NOW_MS).principal_name == "alice"
    # exp is exclusive: a token is no good at its exp.
    at_exp = unsecured_token(claims("alice", NOW_S - 10, lifetime_s=10))
    assert "expired" in refusal(UnsecuredValidator(), at_exp).reason


def test_a_token_issued_in_the_future_is_refused_unless_within_the_skew() -> None:
    token = unsecured_token(claims("alice", NOW_S + 30))
    assert "issued" in refusal(UnsecuredValidator(), token).reason
    assert UnsecuredValidator(allowable_clock_skew_ms=30_000).validate(token, NOW_MS)


def test_a_token_that_expires_before_it_was_issued_is_refused() -> None:
    token = unsecured_token({"sub": "alice", "iat": NOW_S + 100, "exp": NOW_S + 50})
    validator = UnsecuredValidator(allowable_clock_skew_ms=200_000)
    assert "before it was issued" in refusal(validator, token).reason


def test_the_required_scope_must_all_be_granted() -> None:
    validator = UnsecuredValidator(required_scope=("read", "write"))
    assert validator.validate(unsecured_token(claims("a", NOW_S, scope="write read")), NOW_MS)
    refused = refusal(validator, unsecured_token(claims("a", NOW_S, scope=["read"])))
    assert refused.status == INSUFFICIENT_SCOPE
    assert refused.scope == "read write"
    assert "'write'" in refused.reason
    no_scope = refusal(validator, unsecured_token(claims("a", NOW_S)))
    assert no_scope.status == INSUFFICIENT_SCOPE


def test_insufficient_scope_is_told_to_the_client_with_the_scope_needed() -> None:
    exchange = server(UnsecuredValidator(required_scope=("write",)))
    challenge = exchange.evaluate(message(unsecured_token(claims("a", NOW_S))))
    assert challenge == b'{"status":"insufficient_scope", "scope":"write"}'


def test_the_principal_and_scope_claims_can_be_renamed() -> None:
    validator = UnsecuredValidator.from_options(
        {
            "unsecuredValidatorPrincipalClaimName": "azp",
            "unsecuredValidatorScopeClaimName": "roles",
            "unsecuredValidatorRequiredScope": "admin",
            "unsecuredValidatorAllowableClockSkewMs": "5000",
        }
    )
    token = unsecured_token(claims("ignored", NOW_S, azp="svc", roles=["admin"]))
    assert validator.validate(token, NOW_MS).principal_name == "svc"
    assert "azp" in refusal(validator, unsecured_token(claims("a", NOW_S, roles="admin"))).reason
    assert validator.allowable_clock_skew_ms == 5000


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"unsecuredValidatorAllowableClockSkewMs": "soon"}, "must be an integer"),
        ({"unsecuredValidatorAllowableClockSkewMs": "-1"}, "must not be negative"),
    ],
)
def test_unusable_options_are_named(options: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        UnsecuredValidator.from_options(options)


@pytest.mark.parametrize(
    ("token", "problem"),
    [
        (unsecured_token(claims("a", NOW_S), {"alg": "RS256"}), "'none'"),
        (unsecured_token(claims("a", NOW_S)) + "c2ln", "must not carry a signature"),
        (unsecured_token({"sub": "a", "iat": NOW_S}), "no expiration time"),
        (unsecured_token({"iat": NOW_S, "exp": NOW_S + 60}), "required claim missing: sub"),
        (unsecured_token({"sub": " ", "exp": NOW_S + 60}), "blank"),
        (unsecured_token({"sub": 7, "exp": NOW_S + 60}), "not a string"),
        (unsecured_token({"sub": "a", "exp": "tomorrow"}), "not a number"),
        (unsecured_token({"sub": "a", "exp": True}), "not a number"),
        (unsecured_token({"sub": "a", "exp": 1e300}), "no date"),
        (unsecured_token({"sub": "a", "exp": float("inf")}), "no date"),
        (unsecured_token(claims("a", NOW_S, scope=7)), "scope"),
        ("a.b", "3 dot-separated parts"),
        ("!!!.e30.", "not base64url-encoded JSON"),
        ("W10.e30.", "not a JSON object"),
    ],
)
def test_malformed_unsecured_tokens_are_refused(token: str, problem: str) -> None:
    assert problem in refusal(UnsecuredValidator(), token).reason
