"""Whatever a client sends as its OAUTHBEARER message or token, the broker's side answers
with a challenge or refuses it: never another exception."""

from __future__ import annotations

import base64
import contextlib
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from herdless.security.oauthbearer_jwt import JsonWebKeySet, SignedJwtValidator
from herdless.security.oauthbearer_token import InvalidToken
from herdless.security.oauthbearer_unsecured import UnsecuredValidator
from herdless.security.sasl import SaslAuthenticationFailed
from herdless.security.sasl_oauthbearer import OAuthBearerServer
from tests.support.tokens import SigningKey, jwks

NOW_MS = 1_800_000_000_000


class Keys:
    location = "file:///test/jwks.json"

    def __init__(self) -> None:
        self.set = JsonWebKeySet(jwks(SigningKey.named("key-1"))["keys"])

    def current(self) -> JsonWebKeySet:
        return self.set

    def key_missing(self, kid: str | None, now_ms: int) -> None:
        pass


VALIDATORS = (UnsecuredValidator(required_scope=("read",)), SignedJwtValidator(Keys()))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
claim_sets = st.dictionaries(
    st.sampled_from(["sub", "exp", "iat", "nbf", "aud", "iss", "scope", "kid", "alg"]),
    json_values,
)


def part(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def exchange(message: bytes) -> None:
    for validator in VALIDATORS:
        server = OAuthBearerServer(validator, lambda: NOW_MS)
        try:
            if server.evaluate(message):
                server.evaluate(b"\x01")
        except SaslAuthenticationFailed:
            pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes(message: bytes) -> None:
    exchange(message)
    exchange(b"n,,\x01auth=Bearer " + message + b"\x01\x01")


@settings(max_examples=300, deadline=None)
@given(header=claim_sets, claims=json_values, signature=st.text(max_size=12))
def test_any_token_built_of_json(header: dict[str, object], claims: object, signature: str) -> None:
    token = f"{part(header)}.{part(claims)}.{signature}"
    for validator in VALIDATORS:
        with contextlib.suppress(InvalidToken):
            validator.validate(token, NOW_MS)
    exchange(f"n,,\x01auth=Bearer {token}\x01\x01".encode())


@settings(max_examples=300, deadline=None)
@given(claims=claim_sets)
def test_any_claims_signed_by_the_provider(claims: dict[str, object]) -> None:
    key = SigningKey.named("key-1")
    try:
        token = key.sign(claims)
    except (TypeError, ValueError):
        return  # PyJWT will not sign it: no client could send it either
    for validator in VALIDATORS:
        with contextlib.suppress(InvalidToken):
            validator.validate(token, NOW_MS)
