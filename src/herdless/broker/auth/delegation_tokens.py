"""A broker's delegation tokens (KIP-48), as Kafka's DelegationTokenManager keeps them:
the tokens in memory with each one's HMAC and SCRAM credentials (Kafka's
DelegationTokenCache, which SCRAM logins read and never wait on), and the changes the
four token APIs and the expiry check make, stored through a TokenStore.

A broker has one only when `delegation.token.secret.key` is set: every broker of a
cluster must have the same key, since each derives a token's HMAC, and from it the
token's SCRAM credentials, from the token's id and the key.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from herdless.broker.auth.token_store import TokenStore
from herdless.security.delegation_tokens import (
    TokenChange,
    TokenInformation,
    TokenLifetimes,
    expired,
    hmac_text,
    new_token,
    new_token_id,
    renewed,
    token_credentials,
    token_hmac,
)
from herdless.security.principal import KafkaPrincipal
from herdless.security.scram import SALT_BYTES, ScramCredential

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DelegationToken:
    """A token with its HMAC (Kafka's DelegationToken), as the APIs answer it."""

    info: TokenInformation
    hmac: bytes


class DelegationTokenManager:
    def __init__(
        self,
        secret_key: str,
        lifetimes: TokenLifetimes,
        store: TokenStore,
        wall_ms: Callable[[], int],
    ) -> None:
        self._secret_key = secret_key
        self.lifetimes = lifetimes
        self._store = store
        self._wall_ms = wall_ms
        self._tokens: dict[str, TokenInformation] = {}
        self._by_hmac: dict[str, str] = {}
        self._credentials: dict[str, dict[str, ScramCredential]] = {}
        # One change at a time, as Kafka's manager changes tokens under one lock: a renewal
        # and an expiry of the same token do not interleave.
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        await self._store.start(self._apply)

    async def stop(self) -> None:
        await self._store.stop()

    # -- the cache SCRAM reads ---------------------------------------------------------------

    def token_credential(
        self, token_id: str, mechanism: str
    ) -> tuple[ScramCredential, TokenInformation] | None:
        token = self._tokens.get(token_id)
        credential = self._credentials.get(token_id, {}).get(mechanism)
        return None if token is None or credential is None else (credential, token)

    def tokens(self, eligible: Callable[[TokenInformation], bool]) -> list[DelegationToken]:
        return [
            DelegationToken(t, self._hmac(t.token_id))
            for t in sorted(self._tokens.values(), key=lambda t: t.issue_timestamp_ms)
            if eligible(t)
        ]

    def _hmac(self, token_id: str) -> bytes:
        return token_hmac(token_id, self._secret_key)

    def _apply(self, token_id: str, token: TokenInformation | None) -> None:
        """The token as stored now (None: gone), into the cache."""
        if token is None:
            self._tokens.pop(token_id, None)
            self._credentials.pop(token_id, None)
            self._by_hmac = {h: i for h, i in self._by_hmac.items() if i != token_id}
            return
        if token_id not in self._credentials:
            # Derived once per token: the HMAC stays the same when a token is renewed.
            self._credentials[token_id] = token_credentials(
                token_id, self._secret_key, lambda: os.urandom(SALT_BYTES)
            )
            self._by_hmac[hmac_text(self._hmac(token_id))] = token_id
        self._tokens[token_id] = token

    # -- changes -----------------------------------------------------------------------------

    async def create(
        self,
        owner: KafkaPrincipal,
        requester: KafkaPrincipal,
        renewers: Sequence[KafkaPrincipal],
        max_lifetime_ms: int,
    ) -> DelegationToken:
        async with self._lock:
            token = new_token(
                new_token_id(),
                owner,
                requester,
                renewers,
                max_lifetime_ms,
                self.lifetimes,
                self._wall_ms(),
            )
            await self._store.put(token)
            self._apply(token.token_id, token)
        log.info("created delegation token %s for owner %s", token.token_id, owner)
        return DelegationToken(token, self._hmac(token.token_id))

    def find(self, token_hmac_bytes: bytes) -> TokenInformation | None:
        token_id = self._by_hmac.get(hmac_text(token_hmac_bytes))
        return None if token_id is None else self._tokens.get(token_id)

    async def renew(
        self, principal: KafkaPrincipal, token_hmac_bytes: bytes, renew_period_ms: int
    ) -> TokenChange | None:
        """None: no token has this HMAC."""
        async with self._lock:
            token = self.find(token_hmac_bytes)
            if token is None:
                return None
            change = renewed(token, principal, renew_period_ms, self.lifetimes, self._wall_ms())
            await self._store_change(change)
        return change

    async def expire(
        self, principal: KafkaPrincipal, token_hmac_bytes: bytes, expiry_period_ms: int
    ) -> TokenChange | None:
        """None: no token has this HMAC."""
        async with self._lock:
            token = self.find(token_hmac_bytes)
            if token is None:
                return None
            change = expired(token, principal, expiry_period_ms, self._wall_ms())
            await self._store_change(change)
        return change

    async def _store_change(self, change: TokenChange) -> None:
        token = change.token
        if token is None:
            return
        if change.remove:
            await self._store.remove(token.token_id)
            self._apply(token.token_id, None)
            log.info("expired delegation token %s of owner %s", token.token_id, token.owner)
        else:
            await self._store.put(token)
            self._apply(token.token_id, token)
            log.info(
                "delegation token %s of owner %s now expires at %d",
                token.token_id,
                token.owner,
                token.expiry_timestamp_ms,
            )

    async def expire_tokens(self) -> int:
        """Remove every token past its expiry or maximum (Kafka's expireTokens, every
        delegation.token.expiry.check.interval.ms); how many were removed."""
        removed = 0
        async with self._lock:
            now = self._wall_ms()
            for token in [t for t in self._tokens.values() if t.expired(now)]:
                await self._store.remove(token.token_id)
                self._apply(token.token_id, None)
                log.info("delegation token %s of owner %s expired", token.token_id, token.owner)
                removed += 1
        return removed
