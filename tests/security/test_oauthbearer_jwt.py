"""Signed JWTs checked as Kafka's OIDC validator checks them, rule by rule, with keys of a
test identity provider and a fake clock; and which unknown kids ask for a new JWKS."""

from __future__ import annotations

import jwt
import pytest

from herdless.security.oauthbearer_jwt import JsonWebKeySet, MissingKeyIds, SignedJwtValidator
from herdless.security.oauthbearer_token import InvalidToken
from tests.support.tokens import SigningKey, claims, jwks, unsecured_token

NOW_S = 1_800_000_000
NOW_MS = NOW_S * 1000
AUDIENCE = "kafka"
ISSUER = "https://idp.example"


class Keys:
    """A KeySource whose set the test swaps, recording each refresh asked for."""

    location = "file:///test/jwks.json"

    def __init__(self, *keys: SigningKey) -> None:
        self.set: JsonWebKeySet | None = JsonWebKeySet(jwks(*keys)["keys"]) if keys else None
        self.asked: list[str | None] = []

    def current(self) -> JsonWebKeySet | None:
        return self.set

    def key_missing(self, kid: str | None, now_ms: int) -> None:
        self.asked.append(kid)


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return SigningKey.named("key-1")


@pytest.fixture(scope="module")
def other() -> SigningKey:
    return SigningKey.named("key-2")


def validator(keys: Keys, **settings: object) -> SignedJwtValidator:
    defaults: dict[str, object] = {"expected_audience": (AUDIENCE,), "expected_issuer": ISSUER}
    return SignedJwtValidator(keys, **(defaults | settings))  # type: ignore[arg-type]


def good(sub: str = "alice", **more: object) -> dict[str, object]:
    return claims(sub, NOW_S, aud=AUDIENCE, iss=ISSUER, **more)


def refusal(check: SignedJwtValidator, token: str, now_ms: int = NOW_MS) -> str:
    with pytest.raises(InvalidToken) as refused:
        check.validate(token, now_ms)
    assert refused.value.status == "invalid_token"
    return refused.value.reason


def test_a_token_signed_by_a_key_of_the_jwks_names_its_subject(key: SigningKey) -> None:
    token = validator(Keys(key)).validate(key.sign(good(scope="read write")), NOW_MS)
    assert token.principal_name == "alice"
    assert token.scope == {"read", "write"}
    assert token.lifetime_ms == (NOW_S + 3600) * 1000


def test_an_elliptic_curve_key_and_a_token_without_kid() -> None:
    ec_key = SigningKey.named("ec-1", "EC")
    check = validator(Keys(ec_key))
    assert check.validate(ec_key.sign(good(), kid=None), NOW_MS).principal_name == "alice"


def test_any_rsa_algorithm_the_key_can_verify(key: SigningKey) -> None:
    check = validator(Keys(key))
    for alg in ("RS384", "PS256"):
        assert check.validate(key.sign(good(), alg=alg), NOW_MS).principal_name == "alice"


def test_expired_tokens_are_refused_after_the_clock_skew(key: SigningKey) -> None:
    token = key.sign(claims("alice", NOW_S - 100, lifetime_s=80, aud=AUDIENCE, iss=ISSUER))
    assert "expired" in refusal(validator(Keys(key), clock_skew_s=0), token)
    assert validator(Keys(key), clock_skew_s=30).validate(token, NOW_MS)
    assert "expired" in refusal(validator(Keys(key), clock_skew_s=30), token, NOW_MS + 11_000)


def test_tokens_not_yet_valid_are_refused_until_within_the_clock_skew(key: SigningKey) -> None:
    token = key.sign(good(nbf=NOW_S + 60))
    assert "not valid yet" in refusal(validator(Keys(key), clock_skew_s=30), token)
    assert validator(Keys(key), clock_skew_s=30).validate(token, NOW_MS + 30_000)


def test_the_expected_audience_is_one_of_the_token_s(key: SigningKey) -> None:
    check = validator(Keys(key), expected_audience=("kafka", "other"))
    assert check.validate(key.sign(good() | {"aud": ["web", "kafka"]}), NOW_MS)
    assert "audience" in refusal(check, key.sign(good() | {"aud": "web"})).lower()
    without = good()
    del without["aud"]
    assert "aud" in refusal(check, key.sign(without))
    # With no expected audience, none is checked.
    assert validator(Keys(key), expected_audience=()).validate(key.sign(without), NOW_MS)


def test_the_expected_issuer_must_match(key: SigningKey) -> None:
    check = validator(Keys(key))
    assert "issuer" in refusal(check, key.sign(good() | {"iss": "https://evil.example"})).lower()
    assert validator(Keys(key), expected_issuer=None).validate(
        key.sign(good() | {"iss": "https://any.example"}), NOW_MS
    )


def test_a_bad_signature_is_refused(key: SigningKey, other: SigningKey) -> None:
    # Signed by another key under this key's kid.
    forged = other.sign(good(), kid=key.kid)
    assert "signature" in refusal(validator(Keys(key)), forged)
    header, payload, signature = key.sign(good()).split(".")
    tampered = f"{header}.{payload[:-4]}AAAA.{signature}"
    assert refusal(validator(Keys(key)), tampered)


def test_an_unknown_kid_is_refused_and_asks_for_the_jwks_again(
    key: SigningKey, other: SigningKey
) -> None:
    keys = Keys(key)
    check = validator(keys)
    assert "no key for kid 'key-2'" in refusal(check, other.sign(good()))
    assert keys.asked == ["key-2"]
    # The refreshed set has it: the client's next attempt succeeds.
    keys.set = JsonWebKeySet(jwks(key, other)["keys"])
    assert check.validate(other.sign(good()), NOW_MS).principal_name == "alice"


def test_before_any_jwks_arrives_tokens_are_refused_and_a_fetch_is_asked_for(
    key: SigningKey,
) -> None:
    keys = Keys()
    assert "no JWKS has been fetched" in refusal(validator(keys), key.sign(good()))
    assert keys.asked == ["key-1"]


def test_unsigned_and_malformed_tokens_are_refused(key: SigningKey) -> None:
    check = validator(Keys(key))
    assert "alg none" in refusal(check, unsecured_token(good()) + "c2ln")
    assert "three non-empty parts" in refusal(check, unsecured_token(good()))
    assert "header" in refusal(check, "bm90IGpzb24.e30.c2ln")
    # HS256 with the public key as the secret: the classic confusion, refused.
    hmac_signed = jwt.encode(good(), "s" * 32, algorithm="HS256", headers={"kid": key.kid})
    assert "no key for kid 'key-1' and alg HS256" in refusal(check, hmac_signed)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"exp": None}, "exp"),
        ({"iat": None}, "iat"),
        ({"sub": None}, "required claim missing: sub"),
        ({"sub": "  "}, "blank"),
        ({"exp": "later"}, "exp"),
    ],
)
def test_claims_kafka_requires(key: SigningKey, change: dict[str, object], problem: str) -> None:
    token_claims = {k: v for k, v in (good() | change).items() if v is not None}
    assert problem in refusal(validator(Keys(key)), key.sign(token_claims))


def test_the_subject_and_scope_claims_can_be_renamed(key: SigningKey) -> None:
    check = validator(Keys(key), sub_claim_name="client_id", scope_claim_name="scp")
    token = check.validate(key.sign(good(client_id="svc-1", scp=["produce"])), NOW_MS)
    assert token.principal_name == "svc-1"
    assert token.scope == {"produce"}


def test_a_jwks_without_a_usable_key_is_refused() -> None:
    with pytest.raises(ValueError, match="no key that can verify"):
        JsonWebKeySet.from_json('{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}')
    with pytest.raises(ValueError, match="not JSON"):
        JsonWebKeySet.from_json("<html>")
    with pytest.raises(ValueError, match='"keys" list'):
        JsonWebKeySet.from_json('{"keys": 3}')


def test_an_unknown_kid_asks_again_only_after_a_minute() -> None:
    missing = MissingKeyIds()
    assert missing.should_refresh("k", 0)
    assert not missing.should_refresh("k", 59_999)
    assert missing.should_refresh("k", 60_000)
    assert not missing.should_refresh("x" * 1001, 0)
    missing.found(["k"])
    assert missing.should_refresh("k", 60_001)


def test_only_the_sixteen_latest_unknown_kids_are_remembered() -> None:
    missing = MissingKeyIds()
    for index in range(17):
        assert missing.should_refresh(f"k{index}", 0)
    assert missing.should_refresh("k0", 1)  # forgotten, so it asks again
    assert not missing.should_refresh("k16", 1)
