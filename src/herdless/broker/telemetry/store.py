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

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from herdless.broker.entity_config_file import Change, EntityConfigFile, LocalEntityConfigs
from herdless.broker.telemetry.manager import ClientMetricsManager
from herdless.cluster import layout
from herdless.cluster.zookeeper.calls import zookeeper_call

if TYPE_CHECKING:
    from herdless.broker.auth.credential_store import ZooKeeperCredentials
    from herdless.cluster.store import ClusterStore

CLIENT_METRICS = EntityConfigFile("client-metrics.json", "subscriptions", "a client metrics")


class ClientMetricsStore(Protocol):
    async def alter(self, name: str, change: Change) -> None:
        """Apply `change` to the subscription's config durably, then in this broker's
        manager. What `change` raises propagates, with nothing written."""
        ...


class LocalClientMetrics(LocalEntityConfigs):
    """One broker: the file in its data directory."""

    def __init__(self, data_dir: Path, manager: ClientMetricsManager) -> None:
        super().__init__(CLIENT_METRICS, data_dir, manager.apply)


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
