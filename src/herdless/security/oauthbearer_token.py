"""An OAUTHBEARER token once a validator has accepted it, what a validator answers when
it does not, and the claim readings both of Kafka's validators share."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

# RFC 6750's error codes, which the JSON challenge of RFC 7628 carries.
INVALID_TOKEN = "invalid_token"
INSUFFICIENT_SCOPE = "insufficient_scope"


@dataclass(frozen=True)
class OAuthBearerToken:
    principal_name: str
    scope: frozenset[str]
    # When the token expires, in ms since the epoch (its exp claim).
    lifetime_ms: int
    # When it was issued, in ms since the epoch (its iat claim), if it says.
    start_time_ms: int | None = None

    def __repr__(self) -> str:
        # The token's value is a credential: it is never kept here, so never shown.
        return (
            f"OAuthBearerToken(principal={self.principal_name!r}, scope={sorted(self.scope)},"
            f" lifetime_ms={self.lifetime_ms})"
        )


class InvalidToken(Exception):
    """A token the validator refuses. `reason` is for the broker's log; the client learns
    only `status` (and the `scope` it lacked), as RFC 7628's error challenge allows."""

    def __init__(self, reason: str, status: str = INVALID_TOKEN, scope: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.scope = scope


class TokenValidator(Protocol):
    def validate(self, token: str, now_ms: int) -> OAuthBearerToken:
        """The token's principal, scope and lifetime at wall-clock time `now_ms`.
        Raises InvalidToken."""
        ...


# Dates beyond this many seconds from 1970 are no dates (and would not fit in ms).
MAX_NUMERIC_DATE_S = 2**53 // 1000


def numeric_claim(claims: Mapping[str, Any], name: str) -> float | None:
    """A NumericDate claim (RFC 7519 §2) in seconds, None when absent."""
    value = claims.get(name)
    if value is None:
        return None
    # JSON true and false are ints to Python, and no date.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(f"the {name!r} claim is not a number: {type(value).__name__}")
    # Python's json reads NaN and Infinity, which no date is.
    if not math.isfinite(value) or abs(value) > MAX_NUMERIC_DATE_S:
        raise InvalidToken(f"the {name!r} claim is no date: {value}")
    return float(value)


def string_claim(claims: Mapping[str, Any], name: str) -> str:
    """A claim that must be a non-blank string (the principal's), trimmed."""
    value = claims.get(name)
    if value is None:
        raise InvalidToken(f"required claim missing: {name}")
    if not isinstance(value, str):
        raise InvalidToken(f"the {name!r} claim is not a string: {type(value).__name__}")
    if not value.strip():
        raise InvalidToken(f"the {name!r} claim is blank")
    return value.strip()


def scope_claim(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    """The scope a token grants: a list of strings, or one space-delimited string as
    RFC 6749 §3.3 writes it (Kafka takes such a string as one scope; herdless splits it,
    so a token from an identity provider carries each of its scopes)."""
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return frozenset(item.strip() for item in value if item.strip())
    raise InvalidToken(f"the {name!r} claim is neither a string nor a list of strings")


def seconds_to_ms(seconds: float) -> int:
    return round(seconds * 1000)
