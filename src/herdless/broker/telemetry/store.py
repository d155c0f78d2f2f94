"""Where a broker keeps client-metrics subscriptions, and how a change reaches every
broker: where it keeps client quotas (quotas/store.py).

A cluster keeps each where Kafka's ConfigType.ClientMetrics puts it,
/config/client-metrics/<name>, an entity config like a client id's quotas, each change
followed by a notification in /config/changes. The users' config store
(auth/credential_store.py) follows the notifications and tells this store of the
subscriptions they name; every subscription is read once at start.

One broker alone keeps them in its data directory, in one file of every subscription's
config by name, replaced atomically.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from herdless.broker.telemetry.manager import ClientMetricsManager
from herdless.cluster import layout
from herdless.cluster.zookeeper.calls import zookeeper_call
from herdless.storage import StorageError, checkpoint

if TYPE_CHECKING:
    from herdless.broker.auth.credential_store import ZooKeeperCredentials
    from herdless.cluster.store import ClusterStore

CLIENT_METRICS_FILE = "client-metrics.json"
_FILE_VERSION = 1

Change = Callable[[dict[str, str]], dict[str, str]]


class ClientMetricsStore(Protocol):
    async def alter(self, name: str, change: Change) -> None:
        """Apply `change` to the subscription's config durably, then in this broker's
        manager. What `change` raises propagates, with nothing written."""
        ...


def read_file(data_dir: Path) -> dict[str, dict[str, str]]:
    """Every subscription's config by name; {} if there is no file. StorageError if it
    cannot be read or is not one of ours."""
    path = Path(data_dir) / CLIENT_METRICS_FILE
    try:
        document = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise StorageError(f"cannot read {path}: {exc}") from None
    found = document.get("subscriptions") if isinstance(document, dict) else None
    if (
        not isinstance(document, dict)
        or document.get("version") != _FILE_VERSION
        or not isinstance(found, dict)
        or not all(
            isinstance(config, dict) and all(isinstance(v, str) for v in config.values())
            for config in found.values()
        )
    ):
        raise StorageError(f"{path} is not a client metrics file of version {_FILE_VERSION}")
    return found


def _alter_file(data_dir: Path, name: str, change: Change) -> dict[str, str]:
    """Blocks (fsync): from a worker thread."""
    found = read_file(data_dir)
    config = change(dict(found.get(name, {})))
    if config:
        found[name] = config
    else:
        found.pop(name, None)
    data = json.dumps({"version": _FILE_VERSION, "subscriptions": dict(sorted(found.items()))})
    checkpoint.atomic_write(Path(data_dir) / CLIENT_METRICS_FILE, data.encode())
    return config


class LocalClientMetrics:
    """One broker: the file in its data directory."""

    def __init__(self, data_dir: Path, manager: ClientMetricsManager) -> None:
        self._data_dir = Path(data_dir)
        self._manager = manager
        self._lock = asyncio.Lock()

    def load(self) -> None:
        """Read the file; StorageError if it is unreadable."""
        for name, config in read_file(self._data_dir).items():
            self._manager.apply(name, config)

    async def alter(self, name: str, change: Change) -> None:
        async with self._lock:
            config = await asyncio.to_thread(_alter_file, self._data_dir, name, change)
            self._manager.apply(name, config)


class ZooKeeperClientMetrics:
    """A cluster: the subscriptions in ZooKeeper, changes followed through the users'
    config store's notifications."""

    def __init__(
        self,
        configs: ZooKeeperCredentials,
        store: Callable[[], ClusterStore],
        manager: ClientMetricsManager,
    ) -> None:
        self._configs = configs
        self._store = store
        self._manager = manager
        configs.add_listener(self._changed, (layout.CLIENT_METRICS_ENTITY_TYPE,))

    async def start(self) -> None:
        """Read every subscription; before the users' config store starts following the
        notifications, so a change made meanwhile is among those it reads."""
        for name, config in (await zookeeper_call(self._store().client_metrics_configs)).items():
            self._manager.apply(name, config)

    async def alter(self, name: str, change: Change) -> None:
        await self._configs.alter_entity(_entity_path(name), change)

    def _changed(self, entity_path: str, config: dict[str, str]) -> None:
        self._manager.apply(entity_path.partition("/")[2], config)


def _entity_path(name: str) -> str:
    return f"{layout.CLIENT_METRICS_ENTITY_TYPE}/{name}"
