"""Where a broker keeps delegation tokens' information, and how it hears of changes.

A cluster keeps them where Kafka does: /delegation_token/tokens/<id> in ZooKeeper, with a
notification under /delegation_token/token_changes after every change
(cluster/zookeeper/delegation_tokens.py). Every broker reads all tokens at start, then
watches the notifications and reads again each token one names: a token created, renewed
or expired through any broker is in every broker's cache within a watch's round trip.
As Kafka's brokers do, each deletes the notifications older than 15 minutes.

One broker alone keeps them in its data directory, in one file replaced atomically.

Either way the store tells its listener each token as read (None: it is gone), and a
change made here is in this broker's cache before the request that made it is answered
(DelegationTokenManager applies it itself).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from herdless.broker.auth.change_notifications import ChangeNotifications
from herdless.cluster.errors import MalformedZNode
from herdless.cluster.zookeeper.calls import zookeeper_call
from herdless.cluster.zookeeper.delegation_tokens import token_change_number
from herdless.security.delegation_tokens import TokenInformation
from herdless.storage import StorageError, checkpoint

if TYPE_CHECKING:
    from herdless.cluster.store import ClusterStore, Watch

log = logging.getLogger(__name__)

TOKENS_FILE = "delegation-tokens.json"
_FILE_VERSION = 1
_FILE_MODE = 0o600

# Told each token as the store has it, by id; None: it was removed.
TokenListener = Callable[[str, TokenInformation | None], None]


class TokenStore(Protocol):
    async def start(self, listener: TokenListener) -> None:
        """Tell `listener` every stored token, then each change made elsewhere."""
        ...

    async def stop(self) -> None: ...

    async def put(self, token: TokenInformation) -> None:
        """Store the token (new or changed), durably, for every broker."""
        ...

    async def remove(self, token_id: str) -> None: ...


# -- one broker: a file in the data directory -------------------------------------------


def read_file(data_dir: Path) -> dict[str, TokenInformation]:
    """Every token in the data directory's file; {} if there is none. StorageError if it
    cannot be read or is not one of ours; a token that cannot be read is logged and
    left out."""
    path = Path(data_dir) / TOKENS_FILE
    try:
        document = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise StorageError(f"cannot read {path}: {exc}") from None
    tokens = document.get("tokens") if isinstance(document, dict) else None
    if document.get("version") != _FILE_VERSION or not isinstance(tokens, dict):
        raise StorageError(f"{path} is not a delegation token file of version {_FILE_VERSION}")
    found = {}
    for token_id, entry in tokens.items():
        try:
            found[token_id] = TokenInformation.from_json(json.dumps(entry).encode())
        except ValueError as exc:
            log.error("skipped delegation token %s of %s: %s", token_id, path, exc)
    return found


def write_file(data_dir: Path, tokens: Mapping[str, TokenInformation]) -> None:
    """Replace the data directory's file: a temporary file, fsync, rename, mode 0600."""
    document = {
        "version": _FILE_VERSION,
        "tokens": {i: json.loads(t.to_json()) for i, t in sorted(tokens.items())},
    }
    data = json.dumps(document, indent=1).encode()
    checkpoint.atomic_write(Path(data_dir) / TOKENS_FILE, data, mode=_FILE_MODE)


class LocalTokens:
    """One broker: the tokens file in its data directory."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = Path(data_dir)
        self._tokens: dict[str, TokenInformation] = {}
        self._lock = asyncio.Lock()

    async def start(self, listener: TokenListener) -> None:
        self._tokens = read_file(self._data_dir)
        for token_id, token in self._tokens.items():
            listener(token_id, token)

    async def stop(self) -> None:
        pass

    async def put(self, token: TokenInformation) -> None:
        async with self._lock:
            tokens = {**self._tokens, token.token_id: token}
            await asyncio.to_thread(write_file, self._data_dir, tokens)
            self._tokens = tokens

    async def remove(self, token_id: str) -> None:
        async with self._lock:
            tokens = {i: t for i, t in self._tokens.items() if i != token_id}
            await asyncio.to_thread(write_file, self._data_dir, tokens)
            self._tokens = tokens


# -- a cluster: ZooKeeper -----------------------------------------------------------------


class ZooKeeperTokens:
    """A cluster: tokens in ZooKeeper, followed through their change notifications."""

    def __init__(self, store: Callable[[], ClusterStore]) -> None:
        self._store = store
        self._listener: TokenListener | None = None
        self._watch: Watch | None = None
        self._changes = ChangeNotifications(
            "delegation token changes", self._changed_tokens, self._apply
        )

    async def start(self, listener: TokenListener) -> None:
        self._changes.bind()
        self._listener = listener
        store = self._store()
        await zookeeper_call(store.create_delegation_token_paths)
        for token_id, token in (await zookeeper_call(self._read_all)).items():
            listener(token_id, token)
        # The watch's first call hands over the notifications already there: a change
        # made between the read above and now is among them.
        self._watch = await zookeeper_call(store.watch_token_changes, self._changes.on_changes)

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        await self._changes.stop()

    async def put(self, token: TokenInformation) -> None:
        await zookeeper_call(self._store().set_delegation_token, token)

    async def remove(self, token_id: str) -> None:
        await zookeeper_call(self._store().delete_delegation_token, token_id)

    def _read_all(self) -> dict[str, TokenInformation]:
        store = self._store()
        found = {}
        for token_id in store.delegation_token_ids():
            try:
                token = store.delegation_token(token_id)
            except MalformedZNode as exc:
                log.error("skipped a delegation token: %s", exc)
                continue
            if token is not None:
                found[token_id] = token
        return found

    def _apply(self, tokens: dict[str, TokenInformation | None]) -> None:
        assert self._listener is not None
        for token_id, token in tokens.items():
            self._listener(token_id, token)

    def _changed_tokens(
        self, names: list[str], last_change: int
    ) -> tuple[int, dict[str, TokenInformation | None]]:
        """In a worker thread: each token the notifications after `last_change` name, as
        it is now, and the last notification read; old notifications are deleted."""
        store = self._store()
        numbered = sorted(
            (number, name) for name in names if (number := token_change_number(name)) is not None
        )
        last, token_ids = last_change, []
        for number, name in numbered:
            if number <= last_change:
                continue
            last = number
            try:
                token_id = store.token_change(name)
            except MalformedZNode as exc:
                log.error("skipped a delegation token notification: %s", exc)
                continue
            if token_id is not None and token_id not in token_ids:
                token_ids.append(token_id)
        tokens: dict[str, TokenInformation | None] = {}
        for token_id in token_ids:
            try:
                tokens[token_id] = store.delegation_token(token_id)
            except MalformedZNode as exc:
                log.error("a delegation token that cannot be read is dropped: %s", exc)
                tokens[token_id] = None
        store.purge_token_changes([name for _, name in numbered])
        return last, tokens
