"""Where a broker keeps client quotas, and how a change reaches every broker.

A cluster keeps them where Kafka does: /config/users/<user>,
/config/users/<user>/clients/<client-id> and /config/clients/<client-id>, each change
followed by a notification in /config/changes. The users' config store
(auth/credential_store.py) reads every entity's config at start and those the
notifications name, so a user's quotas and SCRAM credentials are read in one place;
the quota manager listens to it. A change is in force on every broker within a watch's
round trip.

One broker alone keeps them in its data directory, in one file of every entity's
config by its path below /config, replaced atomically. `herdless quotas --data-dir`
writes it while no broker runs (it takes the directory's lock).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from herdless.broker.auth.credential_store import ZooKeeperCredentials
from herdless.broker.quotas.manager import ClientQuotaManager
from herdless.storage import StorageError, checkpoint
from herdless.storage.manager import lock_data_dir

QUOTAS_FILE = "client-quotas.json"
_FILE_VERSION = 1

Change = Callable[[dict[str, str]], dict[str, str]]


class QuotaStore(Protocol):
    async def alter(self, entity_path: str, change: Change) -> None:
        """Apply `change` to the entity's config durably, then in this broker's quotas.
        What `change` raises propagates, with nothing written."""
        ...


def read_file(data_dir: Path, file_name: str = QUOTAS_FILE) -> dict[str, dict[str, str]]:
    """Every entity's config by path from the data directory's file; {} if there is none.
    StorageError if it cannot be read or is not one of ours. The same format holds
    other entities' configs in another file (dynamic broker configs)."""
    path = Path(data_dir) / file_name
    try:
        document = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise StorageError(f"cannot read {path}: {exc}") from None
    entities = document.get("entities") if isinstance(document, dict) else None
    if (
        not isinstance(document, dict)
        or document.get("version") != _FILE_VERSION
        or not isinstance(entities, dict)
        or not all(
            isinstance(config, dict) and all(isinstance(v, str) for v in config.values())
            for config in entities.values()
        )
    ):
        raise StorageError(f"{path} is not an entity configs file of version {_FILE_VERSION}")
    return entities


def alter_file(
    data_dir: Path, entity_path: str, change: Change, file_name: str = QUOTAS_FILE
) -> dict[str, str]:
    """Change one entity's config in the file; the config as written. Blocks (fsync)."""
    entities = read_file(data_dir, file_name)
    config = change(dict(entities.get(entity_path, {})))
    if config:
        entities[entity_path] = config
    else:
        entities.pop(entity_path, None)
    data = json.dumps({"version": _FILE_VERSION, "entities": dict(sorted(entities.items()))})
    # Readable by the broker's user alone: dynamic configs may hold encrypted passwords.
    checkpoint.atomic_write(Path(data_dir) / file_name, data.encode(), mode=0o600)
    return config


def alter_offline(data_dir: Path, entity_path: str, change: Change) -> dict[str, str]:
    """alter_file while no broker runs on the directory; StorageError if one does."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = lock_data_dir(data_dir)
    try:
        return alter_file(data_dir, entity_path, change)
    finally:
        os.close(fd)


class LocalQuotas:
    """One broker: the quotas file in its data directory."""

    def __init__(self, data_dir: Path, manager: ClientQuotaManager) -> None:
        self._data_dir = Path(data_dir)
        self._manager = manager
        self._lock = asyncio.Lock()

    def load(self) -> None:
        """Read the file; StorageError if it is unreadable."""
        for entity_path, config in read_file(self._data_dir).items():
            self._manager.apply(entity_path, config)

    async def alter(self, entity_path: str, change: Change) -> None:
        async with self._lock:
            config = await asyncio.to_thread(alter_file, self._data_dir, entity_path, change)
            self._manager.apply(entity_path, config)


class ZooKeeperQuotas:
    """A cluster: the entities' configs in ZooKeeper, read through the users' config store."""

    def __init__(self, configs: ZooKeeperCredentials, manager: ClientQuotaManager) -> None:
        self._configs = configs
        self._manager = manager
        configs.add_listener(self._changed)

    def _changed(self, entity_path: str, config: dict[str, str]) -> None:
        # The same notifications name client-metrics subscriptions (telemetry/store.py).
        if entity_path.partition("/")[0] in ("users", "clients"):
            self._manager.apply(entity_path, config)

    async def alter(self, entity_path: str, change: Change) -> None:
        await self._configs.alter_entity(entity_path, change)
