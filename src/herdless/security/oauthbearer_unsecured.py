"""Unsecured JWTs (RFC 7515 §A.5: alg "none", no signature) for development, checked as
Kafka's OAuthBearerUnsecuredValidatorCallbackHandler checks them: Kafka's validator when
a listener names none. Anyone can write such a token for any principal, so it proves
nothing; it lets OAUTHBEARER clients be tried without an identity provider.

Options, from the listener's sasl.jaas.config (Kafka's names):
  unsecuredValidatorPrincipalClaimName   the claim naming the principal (default sub)
  unsecuredValidatorScopeClaimName       the claim holding the scope (default scope)
  unsecuredValidatorRequiredScope        space-separated scopes every token must have
  unsecuredValidatorAllowableClockSkewMs how far iat and exp may be off (default 0)
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from herdless.security.oauthbearer_token import (
    INSUFFICIENT_SCOPE,
    InvalidToken,
    OAuthBearerToken,
    numeric_claim,
    scope_claim,
    seconds_to_ms,
    string_claim,
)

PRINCIPAL_CLAIM_NAME_OPTION = "unsecuredValidatorPrincipalClaimName"
SCOPE_CLAIM_NAME_OPTION = "unsecuredValidatorScopeClaimName"
REQUIRED_SCOPE_OPTION = "unsecuredValidatorRequiredScope"
ALLOWABLE_CLOCK_SKEW_MS_OPTION = "unsecuredValidatorAllowableClockSkewMs"


class UnsecuredValidator:
    def __init__(
        self,
        principal_claim_name: str = "sub",
        scope_claim_name: str = "scope",
        required_scope: tuple[str, ...] = (),
        allowable_clock_skew_ms: int = 0,
    ) -> None:
        if allowable_clock_skew_ms < 0:
            raise ValueError(
                f"{ALLOWABLE_CLOCK_SKEW_MS_OPTION} must not be negative: {allowable_clock_skew_ms}"
            )
        self.principal_claim_name = principal_claim_name
        self.scope_claim_name = scope_claim_name
        self.required_scope = required_scope
        self.allowable_clock_skew_ms = allowable_clock_skew_ms

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> UnsecuredValidator:
        """From the JAAS options; ValueError names an option that cannot be used."""
        skew = (options.get(ALLOWABLE_CLOCK_SKEW_MS_OPTION) or "").strip() or "0"
        try:
            skew_ms = int(skew)
        except ValueError:
            raise ValueError(
                f"{ALLOWABLE_CLOCK_SKEW_MS_OPTION} must be an integer, not {skew!r}"
            ) from None
        return cls(
            (options.get(PRINCIPAL_CLAIM_NAME_OPTION) or "").strip() or "sub",
            (options.get(SCOPE_CLAIM_NAME_OPTION) or "").strip() or "scope",
            tuple((options.get(REQUIRED_SCOPE_OPTION) or "").split()),
            skew_ms,
        )

    def validate(self, token: str, now_ms: int) -> OAuthBearerToken:
        header, claims = _unsecured_jws(token)
        if header.get("alg") != "none":
            raise InvalidToken("an unsecured JWS must have 'none' for its algorithm")
        expires = numeric_claim(claims, "exp")
        if expires is None:
            raise InvalidToken("no expiration time (exp) in the JWT")
        principal = string_claim(claims, self.principal_claim_name)
        issued = numeric_claim(claims, "iat")
        skew = self.allowable_clock_skew_ms
        if issued is not None and seconds_to_ms(issued) > now_ms + skew:
            raise InvalidToken(
                f"the token was issued (iat {issued:.15g} s) after now ({now_ms} ms) plus the"
                f" allowable clock skew ({skew} ms)"
            )
        if now_ms - skew >= seconds_to_ms(expires):
            raise InvalidToken(
                f"the token expired (exp {expires:.15g} s) at or before now ({now_ms} ms) minus"
                f" the allowable clock skew ({skew} ms)"
            )
        if issued is not None and expires <= issued:
            raise InvalidToken(f"the token expires (exp {expires:.15g} s) before it was issued")
        scope = scope_claim(claims, self.scope_claim_name)
        missing = [element for element in self.required_scope if element not in scope]
        if missing:
            raise InvalidToken(
                f"the token's scope {sorted(scope)} lacks the required {missing[0]!r}",
                INSUFFICIENT_SCOPE,
                " ".join(self.required_scope),
            )
        return OAuthBearerToken(
            principal,
            scope,
            seconds_to_ms(expires),
            None if issued is None else seconds_to_ms(issued),
        )


def _unsecured_jws(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of `header.claims.` (compact serialization, empty signature)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("a JWS compact serialization has 3 dot-separated parts")
    if parts[2]:
        raise InvalidToken("an unsecured JWS must not carry a signature")
    return _json_part(parts[0], "header"), _json_part(parts[1], "claims")


def _json_part(part: str, name: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError, RecursionError):
        raise InvalidToken(f"the JWT's {name} is not base64url-encoded JSON") from None
    if not isinstance(value, dict):
        raise InvalidToken(f"the JWT's {name} is not a JSON object")
    return value
