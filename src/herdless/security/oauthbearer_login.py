"""SASL/OAUTHBEARER on the client's side, for this broker's connections to the others,
with Kafka's unsecured login (OAuthBearerUnsecuredLoginCallbackHandler, the default of
OAuthBearerLoginModule): an unsecured JWT (alg "none") made from the JAAS options, e.g.

    org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
        unsecuredLoginStringClaim_sub="broker";

Options (Kafka's names):
  unsecuredLoginStringClaim_<name>   a string claim; the principal's is required
  unsecuredLoginNumberClaim_<name>   a number claim
  unsecuredLoginListClaim_<name>     a list of strings, split on the value's first character
  unsecuredLoginExtension_<name>     a SASL extension (KIP-342)
  unsecuredLoginPrincipalClaimName   the claim naming the principal (default sub)
  unsecuredLoginScopeClaimName       the claim holding the scope (default scope)
  unsecuredLoginLifetimeSeconds      how long each token lasts (default 3600)
`iat` and `exp` are set from the clock. Each connection gets a new token, so a token
that runs out only ends that connection's session (KIP-368), and the next logs in anew.
Such tokens prove nothing: for development, as Kafka's unsecured validator that takes them.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from herdless.security.sasl import SaslAuthenticationFailed
from herdless.security.sasl_oauthbearer import AUTH_KEY, OAUTHBEARER, SEPARATOR

STRING_CLAIM = "unsecuredLoginStringClaim_"
NUMBER_CLAIM = "unsecuredLoginNumberClaim_"
LIST_CLAIM = "unsecuredLoginListClaim_"
EXTENSION = "unsecuredLoginExtension_"
PRINCIPAL_CLAIM_NAME = "unsecuredLoginPrincipalClaimName"
SCOPE_CLAIM_NAME = "unsecuredLoginScopeClaimName"
LIFETIME_SECONDS = "unsecuredLoginLifetimeSeconds"
DEFAULT_LIFETIME_S = 3600
# RFC 7628's key and value of an extension, as Kafka's SaslExtensions checks them.
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")


@dataclass(frozen=True)
class UnsecuredLogin:
    principal: str
    lifetime_s: int = DEFAULT_LIFETIME_S
    # Every claim but iat and exp, the principal's among them.
    claims: Mapping[str, Any] = field(default_factory=dict)
    extensions: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> UnsecuredLogin:
        """From the JAAS options; ValueError names an option that cannot be used."""
        claims: dict[str, Any] = {}
        extensions: dict[str, str] = {}
        for key, value in options.items():
            for prefix, parse in _CLAIMS.items():
                if key.startswith(prefix):
                    name = key[len(prefix) :]
                    if name in ("iat", "exp") or not name:
                        raise ValueError(f"{key}: iat and exp are set from the clock")
                    claims[name] = parse(key, value)
            if key.startswith(EXTENSION):
                name = key[len(EXTENSION) :]
                if not _EXTENSION_KEY.fullmatch(name) or name == AUTH_KEY:
                    raise ValueError(f"{key}: an extension's name is letters, and not 'auth'")
                if not _EXTENSION_VALUE.fullmatch(value):
                    raise ValueError(f"{key}: an extension's value is printable ASCII")
                extensions[name] = value
        principal_claim = options.get(PRINCIPAL_CLAIM_NAME, "").strip() or "sub"
        principal = claims.get(principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise ValueError(
                f"{STRING_CLAIM}{principal_claim} must give the principal this broker logs in as"
            )
        scope_claim = options.get(SCOPE_CLAIM_NAME, "").strip() or "scope"
        if scope_claim in claims and not isinstance(claims[scope_claim], (str, list)):
            raise ValueError(f"{scope_claim}: the scope is a string or a list of strings")
        return cls(principal, _lifetime(options.get(LIFETIME_SECONDS)), claims, extensions)

    def token(self, now_s: float) -> str:
        """A new unsecured JWT, issued at `now_s` (seconds since the epoch)."""
        claims = {**self.claims, "iat": round(now_s, 3), "exp": round(now_s + self.lifetime_s, 3)}
        return f"{_part({'alg': 'none'})}.{_part(claims)}."

    def client(self, wall_s: Callable[[], float]) -> OAuthBearerClient:
        return OAuthBearerClient(self.token(wall_s()), self.extensions)


class OAuthBearerClient:
    mechanism = OAUTHBEARER

    def __init__(self, token: str, extensions: Mapping[str, str]) -> None:
        pairs = [f"{AUTH_KEY}=Bearer {token}", *(f"{k}={v}" for k, v in extensions.items())]
        self._message = f"n,,{SEPARATOR}{''.join(p + SEPARATOR for p in pairs)}{SEPARATOR}"

    def first(self) -> bytes:
        return self._message.encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if challenge:
            # RFC 7628's error challenge: the server refused the token and says why.
            raise SaslAuthenticationFailed(
                f"OAUTHBEARER: the token was refused: {challenge.decode(errors='replace')}"
            )
        return None


def _string(key: str, value: str) -> str:
    return value


def _number(key: str, value: str) -> int | float:
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{key} must be a number, not {value!r}") from None


def _list(key: str, value: str) -> list[str]:
    # "|a|b": the first character separates the items; "" and "," are empty lists.
    return [item for item in value[1:].split(value[0]) if item] if value else []


_CLAIMS: dict[str, Callable[[str, str], Any]] = {
    STRING_CLAIM: _string,
    NUMBER_CLAIM: _number,
    LIST_CLAIM: _list,
}


def _lifetime(value: str | None) -> int:
    if value is None or not value.strip():
        return DEFAULT_LIFETIME_S
    try:
        seconds = int(value)
    except ValueError:
        raise ValueError(f"{LIFETIME_SECONDS} must be an integer, not {value!r}") from None
    if seconds <= 0:
        raise ValueError(f"{LIFETIME_SECONDS} must be positive, not {seconds}")
    return seconds


def _part(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
