"""Signed JWTs checked as Kafka's OIDC validator checks them (KIP-768,
OAuthBearerValidatorCallbackHandler): the signature against a key of the identity
provider's JWKS, chosen by the token's kid; exp and iat required; nbf honoured; the
expected audience and issuer when set; all dates with `clock_skew_s` of slack. The
principal is the sub claim (or the claim sasl.oauthbearer.sub.claim.name names).

PyJWT verifies signatures, audience and issuer. The dates are checked here, against the
time passed in, because PyJWT reads the system clock.

A token whose kid is not in the key set asks the key source to fetch the set again, as
Kafka's RefreshingHttpsJwks does when an identity provider rotates its keys; that token
is refused and the client's next attempt finds the new key.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Protocol

import jwt

from herdless.security.oauthbearer_token import (
    InvalidToken,
    OAuthBearerToken,
    numeric_claim,
    scope_claim,
    seconds_to_ms,
    string_claim,
)

# The signature algorithms each kind of public key verifies (RFC 7518 §3, RFC 8037).
# A JWKS is public: a symmetric key (kty oct) in one would let anyone sign, so none is
# ever taken from it.
_RSA = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_EC = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512", "secp256k1": "ES256K"}
_OKP = {"Ed25519": "EdDSA"}


def _algorithms(jwk: dict[str, Any]) -> tuple[str, ...]:
    if isinstance(jwk.get("alg"), str):
        return (jwk["alg"],)
    kty, curve = jwk.get("kty"), jwk.get("crv")
    if kty == "RSA":
        return _RSA
    if kty == "EC" and curve in _EC:
        return (_EC[curve],)
    if kty == "OKP" and curve in _OKP:
        return (_OKP[curve],)
    return ()


class JsonWebKeySet:
    """The verification keys of a JWKS (RFC 7517 §5): those PyJWT can use to verify a
    signature; encryption keys and keys it cannot read are left out."""

    def __init__(self, keys: Iterable[Any]) -> None:
        self._keys: list[dict[str, Any]] = []
        # PyJWK of each (key, algorithm) once used: reading an RSA key costs more than
        # a verification.
        self._prepared: dict[tuple[int, str], jwt.PyJWK] = {}
        for key in keys:
            if not isinstance(key, dict) or key.get("kty") == "oct" or key.get("use") == "enc":
                continue
            algorithms = [a for a in _algorithms(key) if a != "none"]
            if not algorithms:
                continue
            try:
                jwt.PyJWK(key, algorithms[0])
            except jwt.PyJWTError:
                continue
            self._keys.append(key)
        if not self._keys:
            raise ValueError("the JWKS has no key that can verify a signature")

    @classmethod
    def from_json(cls, text: bytes | str) -> JsonWebKeySet:
        """ValueError when `text` is not a JWKS with a usable key."""
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            raise ValueError("the JWKS is not JSON") from None
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise ValueError('the JWKS is not a JSON object with a "keys" list')
        return cls(document["keys"])

    @property
    def key_ids(self) -> frozenset[str]:
        return frozenset(k["kid"] for k in self._keys if isinstance(k.get("kid"), str))

    def candidates(self, kid: str | None, algorithm: str) -> list[jwt.PyJWK]:
        """The keys that may have signed a token with this kid and alg."""
        found = []
        for index, key in enumerate(self._keys):
            if kid is not None and key.get("kid") != kid:
                continue
            if algorithm not in _algorithms(key):
                continue
            prepared = self._prepared.get((index, algorithm))
            if prepared is None:
                prepared = self._prepared[index, algorithm] = jwt.PyJWK(key, algorithm)
            found.append(prepared)
        return found


class KeySource(Protocol):
    """Where the current key set comes from (broker/auth/jwks.py fetches and refreshes it)."""

    @property
    def location(self) -> str: ...

    def current(self) -> JsonWebKeySet | None:
        """The latest key set; None until one has been fetched."""
        ...

    def key_missing(self, kid: str | None, now_ms: int) -> None:
        """A token named a key the set lacks: fetch it again soon, if that may help."""
        ...


class MissingKeyIds:
    """Which unknown kids have already asked for a refresh, as Kafka's RefreshingHttpsJwks
    keeps them: a kid asks again only after `in_flight_ms`, the 16 most recent are
    remembered, and a kid longer than 1,000 characters never asks (no token can flood
    the identity provider with fetches)."""

    IN_FLIGHT_MS = 60_000
    MAX_ENTRIES = 16
    MAX_KEY_ID_LENGTH = 1000

    def __init__(self, in_flight_ms: int = IN_FLIGHT_MS) -> None:
        self._in_flight_ms = in_flight_ms
        self._next_check: OrderedDict[str, int] = OrderedDict()

    def should_refresh(self, kid: str, now_ms: int) -> bool:
        if len(kid) > self.MAX_KEY_ID_LENGTH:
            return False
        next_check = self._next_check.get(kid)
        if next_check is not None and now_ms < next_check:
            self._next_check.move_to_end(kid)
            return False
        self._next_check[kid] = now_ms + self._in_flight_ms
        self._next_check.move_to_end(kid)
        while len(self._next_check) > self.MAX_ENTRIES:
            self._next_check.popitem(last=False)
        return True

    def found(self, kids: Iterable[str]) -> None:
        """A refreshed set has these kids: they are missing no more."""
        for kid in kids:
            self._next_check.pop(kid, None)


class SignedJwtValidator:
    def __init__(
        self,
        keys: KeySource,
        *,
        expected_audience: tuple[str, ...] = (),
        expected_issuer: str | None = None,
        sub_claim_name: str = "sub",
        scope_claim_name: str = "scope",
        clock_skew_s: int = 30,
    ) -> None:
        self._keys = keys
        self._audience = expected_audience
        self._issuer = expected_issuer
        self._sub_claim_name = sub_claim_name
        self._scope_claim_name = scope_claim_name
        self._skew_ms = clock_skew_s * 1000

    def validate(self, token: str, now_ms: int) -> OAuthBearerToken:
        parts = token.split(".")
        if len(parts) != 3 or not all(parts):
            raise InvalidToken("a signed JWT has three non-empty parts: header, claims, signature")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"the JWT's header cannot be read: {exc}") from None
        algorithm, kid = header.get("alg"), header.get("kid")
        if not isinstance(algorithm, str) or algorithm.lower() == "none":
            raise InvalidToken("the JWT is not signed (alg none)")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("the JWT's kid is not a string")
        claims = self._verified_claims(token, kid, algorithm, now_ms)
        expires = numeric_claim(claims, "exp")
        issued = numeric_claim(claims, "iat")
        not_before = numeric_claim(claims, "nbf")
        assert expires is not None and issued is not None  # PyJWT required them
        if now_ms - self._skew_ms >= seconds_to_ms(expires):
            raise InvalidToken(
                f"the token expired (exp {expires:.15g} s; now {now_ms} ms, clock skew"
                f" {self._skew_ms} ms)"
            )
        if not_before is not None and seconds_to_ms(not_before) > now_ms + self._skew_ms:
            raise InvalidToken(
                f"the token is not valid yet (nbf {not_before:.15g} s; now {now_ms} ms, clock"
                f" skew {self._skew_ms} ms)"
            )
        if expires < 0 or issued < 0:
            raise InvalidToken("the token's exp and iat must not be negative")
        return OAuthBearerToken(
            string_claim(claims, self._sub_claim_name),
            scope_claim(claims, self._scope_claim_name),
            seconds_to_ms(expires),
            seconds_to_ms(issued),
        )

    def _verified_claims(
        self, token: str, kid: str | None, algorithm: str, now_ms: int
    ) -> dict[str, Any]:
        keys = self._keys.current()
        if keys is None:
            self._keys.key_missing(kid, now_ms)
            raise InvalidToken(f"no JWKS has been fetched from {self._keys.location} yet")
        candidates = keys.candidates(kid, algorithm)
        if not candidates:
            self._keys.key_missing(kid, now_ms)
            raise InvalidToken(
                f"no key for kid {kid!r} and alg {algorithm} in the JWKS from {self._keys.location}"
            )
        required = ["exp", "iat"]
        if self._audience:
            required.append("aud")
        if self._issuer is not None:
            required.append("iss")
        options: dict[str, Any] = {
            "require": required,
            # The dates are checked against the time given, not PyJWT's clock.
            "verify_exp": False,
            "verify_nbf": False,
            "verify_iat": False,
            "verify_aud": bool(self._audience),
            "verify_iss": self._issuer is not None,
            # The principal's claim is checked by its own name.
            "verify_sub": False,
            "verify_jti": False,
        }
        failure: jwt.PyJWTError | None = None
        for key in candidates:
            try:
                return jwt.decode(
                    token,
                    key,
                    algorithms=[algorithm],
                    audience=list(self._audience) or None,
                    issuer=self._issuer,
                    options=options,  # type: ignore[arg-type]
                )
            except jwt.InvalidSignatureError as exc:
                failure = exc  # another key with this kid may have signed it
            except jwt.PyJWTError as exc:
                raise InvalidToken(f"could not validate the token: {exc}") from None
        raise InvalidToken(
            f"the signature does not verify with the JWKS's key for kid {kid!r}: {failure}"
        )
