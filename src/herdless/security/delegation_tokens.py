"""Delegation tokens (KIP-48) as values and rules, without I/O or a clock of their own.

A token is a TokenInformation: an id, its owner (whom a connection authenticated with
it becomes), who asked for it, who else may renew it, and three times (issued, expires,
may not outlive). Its password is the HMAC-SHA512 of the id keyed with the cluster's
`delegation.token.secret.key`, written in base64: every broker that has the key can
derive it, so only the token's information is stored (in ZooKeeper, as Kafka's
DelegationTokenManagerZk stores it), never the HMAC or a credential made from it.

The rules are Kafka's: a lifetime asked for is capped at delegation.token.max.lifetime.ms;
a renewal or expiry moves the expiry time, never past the maximum; only the owner and
the renewers may renew or expire a token; the owner, the requester and the renewers see
their tokens in DescribeDelegationToken.
"""

from __future__ import annotations

import base64
import hmac
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from herdless.protocol.errors import ErrorCode
from herdless.protocol.sanitizer import desanitize, sanitize
from herdless.security.principal import KafkaPrincipal, parse_principal
from herdless.security.scram import (
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    make_credential,
)

# Kafka's defaults: a token lives at most 7 days and expires a day after issue or
# renewal unless renewed; expired tokens are removed every hour.
DEFAULT_MAX_LIFETIME_MS = 7 * 24 * 60 * 60 * 1000
DEFAULT_EXPIRY_TIME_MS = 24 * 60 * 60 * 1000
DEFAULT_EXPIRY_CHECK_INTERVAL_MS = 60 * 60 * 1000
# The version of the token JSON Kafka writes (3 added the requester).
TOKEN_JSON_VERSION = 3
# What a refused renewal or expiry answers as its timestamp (Kafka's ErrorTimestamp).
ERROR_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class TokenInformation:
    token_id: str
    owner: KafkaPrincipal
    requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_timestamp_ms: int
    max_timestamp_ms: int
    expiry_timestamp_ms: int

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """Kafka's TokenInformation.ownerOrRenewer: who sees the token without an ACL."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def may_renew(self, principal: KafkaPrincipal) -> bool:
        """Who may renew or expire it (Kafka's allowedToRenew): the owner and renewers."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp_ms < now_ms or self.expiry_timestamp_ms < now_ms

    def to_json(self) -> bytes:
        """Kafka's znode JSON (DelegationTokenManagerZk.toJsonCompatibleMap), principals
        written through Kafka's Sanitizer."""
        document = {
            "version": TOKEN_JSON_VERSION,
            "owner": sanitize(str(self.owner)),
            "tokenRequester": sanitize(str(self.requester)),
            "renewers": [sanitize(str(p)) for p in self.renewers],
            "issueTimestamp": self.issue_timestamp_ms,
            "maxTimestamp": self.max_timestamp_ms,
            "expiryTimestamp": self.expiry_timestamp_ms,
            "tokenId": self.token_id,
        }
        return json.dumps(document, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> TokenInformation:
        """Kafka's znode JSON back (versions 1 to 3); ValueError says what is wrong."""
        try:
            document = json.loads(data)
            version = int(document["version"])
            if not 0 < version <= TOKEN_JSON_VERSION:
                raise ValueError(f"unknown version {version}")
            owner = parse_principal(desanitize(document["owner"]))
            requester = owner
            if version >= 3:
                requester = parse_principal(desanitize(document["tokenRequester"]))
            return cls(
                token_id=str(document["tokenId"]),
                owner=owner,
                requester=requester,
                renewers=tuple(parse_principal(desanitize(r)) for r in document["renewers"]),
                issue_timestamp_ms=int(document["issueTimestamp"]),
                max_timestamp_ms=int(document["maxTimestamp"]),
                expiry_timestamp_ms=int(document["expiryTimestamp"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a delegation token: {type(exc).__name__} {exc}") from None


def new_token_id() -> str:
    """A random UUID in URL-safe base64 without padding (Kafka's generateUuidAsBase64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def token_hmac(token_id: str, secret_key: str) -> bytes:
    """The token's HMAC: HmacSHA512 of its id, keyed with the secret's UTF-8 bytes."""
    return hmac.digest(secret_key.encode("utf-8"), token_id.encode("utf-8"), "sha512")


def hmac_text(token_hmac_bytes: bytes) -> str:
    """The HMAC as clients use it for a password: standard base64."""
    return base64.b64encode(token_hmac_bytes).decode()


def token_credentials(
    token_id: str, secret_key: str, salt: Callable[[], bytes]
) -> dict[str, ScramCredential]:
    """The SCRAM credential of each mechanism a client logs in with as the token: its id
    for the user name and its HMAC in base64 for the password, at Kafka's minimum
    iterations. `salt()` gives SALT_BYTES random bytes."""
    password = hmac_text(token_hmac(token_id, secret_key))
    return {m: make_credential(m, password, salt(), MIN_ITERATIONS) for m in SCRAM_MECHANISMS}


@dataclass(frozen=True, slots=True)
class TokenLifetimes:
    """delegation.token.max.lifetime.ms and delegation.token.expiry.time.ms."""

    max_lifetime_ms: int = DEFAULT_MAX_LIFETIME_MS
    expiry_time_ms: int = DEFAULT_EXPIRY_TIME_MS


def new_token(
    token_id: str,
    owner: KafkaPrincipal,
    requester: KafkaPrincipal,
    renewers: Sequence[KafkaPrincipal],
    max_lifetime_ms: int,
    lifetimes: TokenLifetimes,
    now_ms: int,
) -> TokenInformation:
    """A token issued now (Kafka's createToken): a lifetime of 0 or less asks for the
    broker's maximum, and any other is capped at it; it expires at the end of the
    expiry time unless renewed."""
    lifetime = lifetimes.max_lifetime_ms
    if max_lifetime_ms > 0:
        lifetime = min(max_lifetime_ms, lifetime)
    max_timestamp = now_ms + lifetime
    return TokenInformation(
        token_id=token_id,
        owner=owner,
        requester=requester,
        renewers=tuple(renewers),
        issue_timestamp_ms=now_ms,
        max_timestamp_ms=max_timestamp,
        expiry_timestamp_ms=min(max_timestamp, now_ms + lifetimes.expiry_time_ms),
    )


@dataclass(frozen=True, slots=True)
class TokenChange:
    """What a renewal or expiry decided: the error, the timestamp to answer, and the
    token as it is to be stored (None: nothing to store; `remove`: delete it)."""

    error: ErrorCode
    timestamp_ms: int = ERROR_TIMESTAMP
    token: TokenInformation | None = None
    remove: bool = False


def renewed(
    token: TokenInformation,
    principal: KafkaPrincipal,
    renew_period_ms: int,
    lifetimes: TokenLifetimes,
    now_ms: int,
) -> TokenChange:
    """Kafka's renewToken: a negative period is the broker's expiry time."""
    if not token.may_renew(principal):
        return TokenChange(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    if token.expired(now_ms):
        return TokenChange(ErrorCode.DELEGATION_TOKEN_EXPIRED)
    period = lifetimes.expiry_time_ms if renew_period_ms < 0 else renew_period_ms
    expiry = min(token.max_timestamp_ms, now_ms + period)
    return TokenChange(ErrorCode.NONE, expiry, replace(token, expiry_timestamp_ms=expiry))


def expired(
    token: TokenInformation, principal: KafkaPrincipal, expiry_period_ms: int, now_ms: int
) -> TokenChange:
    """Kafka's expireToken: a negative period removes the token now; any other sets its
    expiry that far from now (0: it is expired, and the expiry check removes it)."""
    if not token.may_renew(principal):
        return TokenChange(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    if expiry_period_ms < 0:
        return TokenChange(ErrorCode.NONE, now_ms, token, remove=True)
    if token.expired(now_ms):
        return TokenChange(ErrorCode.DELEGATION_TOKEN_EXPIRED)
    expiry = min(token.max_timestamp_ms, now_ms + expiry_period_ms)
    return TokenChange(ErrorCode.NONE, expiry, replace(token, expiry_timestamp_ms=expiry))


def visible(
    token: TokenInformation,
    requester: KafkaPrincipal,
    owners: Sequence[KafkaPrincipal] | None,
    may_describe_token: Callable[[str], bool],
    may_describe_owner_tokens: Callable[[KafkaPrincipal], bool],
) -> bool:
    """Kafka's DelegationTokenManager.filterToken: tokens of the owners asked for (None:
    of everyone) that the requester owns, asked for or may renew, or may describe by an
    ACL (DESCRIBE on the token, or DESCRIBE_TOKENS on its owner, a User resource)."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    if token.owner_or_renewer(requester):
        return True
    return may_describe_token(token.token_id) or may_describe_owner_tokens(token.owner)
