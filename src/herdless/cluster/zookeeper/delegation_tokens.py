"""The znodes of delegation tokens (KIP-48), in Kafka's paths: each token's information
at /delegation_token/tokens/<token id> (never its HMAC: every broker derives that from
the secret key), and a sequential notification under /delegation_token/token_changes
naming the token after every change, as Kafka's DelegationTokenManagerZk writes them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress

from kazoo.exceptions import NodeExistsError, NoNodeError

from herdless.cluster.errors import MalformedZNode
from herdless.cluster.zookeeper.session import ZooKeeperSession
from herdless.cluster.zookeeper.watches import Watch, watch_children
from herdless.security.delegation_tokens import TokenInformation

TOKEN_ROOT_PATH = "/delegation_token"
TOKENS_PATH = f"{TOKEN_ROOT_PATH}/tokens"
TOKEN_CHANGES_PATH = f"{TOKEN_ROOT_PATH}/token_changes"
TOKEN_CHANGE_PREFIX = "token_change_"
# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs.
TOKEN_CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def token_path(token_id: str) -> str:
    return f"{TOKENS_PATH}/{token_id}"


def token_change_number(name: str) -> int | None:
    """The sequence number of a notification's znode name; None if it is not one."""
    digits = name.removeprefix(TOKEN_CHANGE_PREFIX)
    return int(digits) if digits != name and digits.isdigit() else None


class DelegationTokenZNodes(ZooKeeperSession):
    """Delegation tokens and their change notifications."""

    def create_delegation_token_paths(self) -> None:
        """As Kafka's brokers create them at start (createDelegationTokenPaths)."""
        self._ensure_path(TOKENS_PATH)
        self._ensure_path(TOKEN_CHANGES_PATH)

    def delegation_token_ids(self) -> list[str]:
        try:
            return sorted(self._run(lambda: self._client.get_children_async(TOKENS_PATH)))
        except NoNodeError:
            return []

    def delegation_token(self, token_id: str) -> TokenInformation | None:
        """The token's information; None if there is no such token. MalformedZNode if its
        znode holds no token."""
        path = token_path(token_id)
        try:
            data, _ = self._run(lambda: self._client.get_async(path))
        except NoNodeError:
            return None
        try:
            return TokenInformation.from_json(data)
        except ValueError as exc:
            raise MalformedZNode(f"{path}: {exc}") from None

    def set_delegation_token(self, token: TokenInformation) -> None:
        """Write the token (set or create), then tell every broker."""
        path, data = token_path(token.token_id), token.to_json()
        try:
            self._run(lambda: self._client.set_async(path, data))
        except NoNodeError:
            self._ensure_path(TOKENS_PATH)
            try:
                self._run(lambda: self._client.create_async(path, data))
            except NodeExistsError:
                self._run(lambda: self._client.set_async(path, data))
        self._announce_token_change(token.token_id)

    def delete_delegation_token(self, token_id: str) -> None:
        """Delete the token (if there), then tell every broker."""
        with suppress(NoNodeError):
            self._run(lambda: self._client.delete_async(token_path(token_id)))
        self._announce_token_change(token_id)

    def _announce_token_change(self, token_id: str) -> None:
        prefix = f"{TOKEN_CHANGES_PATH}/{TOKEN_CHANGE_PREFIX}"
        data = token_id.encode("utf-8")
        try:
            self._run(lambda: self._client.create_async(prefix, data, sequence=True))
        except NoNodeError:
            self._ensure_path(TOKEN_CHANGES_PATH)
            self._run(lambda: self._client.create_async(prefix, data, sequence=True))

    def watch_token_changes(self, callback: Callable[[list[str]], None]) -> Watch:
        """The names of the change notifications, now and at every change."""
        self._ensure_path(TOKEN_CHANGES_PATH)
        return watch_children(self._client, TOKEN_CHANGES_PATH, callback)

    def token_change(self, name: str) -> str | None:
        """The token id a notification names; None once it is deleted."""
        try:
            data, _ = self._run(lambda: self._client.get_async(f"{TOKEN_CHANGES_PATH}/{name}"))
        except NoNodeError:
            return None
        try:
            return bytes(data or b"").decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedZNode(f"{TOKEN_CHANGES_PATH}/{name} names no token") from None

    def purge_token_changes(self, names: list[str]) -> None:
        """Delete the notifications older than Kafka's 15 minutes (ZooKeeper's clock)."""
        oldest = self._wall_ms() - TOKEN_CHANGE_EXPIRATION_MS
        for name in names:
            path = f"{TOKEN_CHANGES_PATH}/{name}"
            stat = self._run(lambda p=path: self._client.exists_async(p))
            if stat is not None and stat.ctime < oldest:
                with suppress(NoNodeError):
                    self._run(lambda p=path: self._client.delete_async(p))
