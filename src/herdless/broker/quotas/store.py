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

from pathlib import Path
from typing import Protocol

from herdless.broker.auth.credential_store import ZooKeeperCredentials
from herdless.broker.entity_config_file import Change, EntityConfigFile, LocalEntityConfigs
from herdless.broker.quotas.manager import ClientQuotaManager

QUOTAS_FILE = "client-quotas.json"
# Readable by the broker's user alone, as the dynamic broker configs in the same format.
QUOTAS = EntityConfigFile(QUOTAS_FILE, "entities", "an entity configs", mode=0o600)


class QuotaStore(Protocol):
    async def alter(self, entity_path: str, change: Change) -> None:
        """Apply `change` to the entity's config durably, then in this broker's quotas.
        What `change` raises propagates, with nothing written."""
        ...


class LocalQuotas(LocalEntityConfigs):
    """One broker: the quotas file in its data directory."""

    def __init__(self, data_dir: Path, manager: ClientQuotaManager) -> None:
        super().__init__(QUOTAS, data_dir, manager.apply)


class ZooKeeperQuotas:
    """A cluster: the entities' configs in ZooKeeper, read through the users' config store."""

    def __init__(self, configs: ZooKeeperCredentials, manager: ClientQuotaManager) -> None:
        self._configs = configs
        configs.add_listener(manager.apply, ("users", "clients"))

    async def alter(self, entity_path: str, change: Change) -> None:
        await self._configs.alter_entity(entity_path, change)
