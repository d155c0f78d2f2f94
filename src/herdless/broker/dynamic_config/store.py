"""Where dynamic broker configs live, and how a change reaches every broker.

A cluster keeps them where Kafka does: a broker's own in `/config/brokers/<id>`, the
cluster-wide defaults in `/config/brokers/<default>`, each change followed by a
notification in `/config/changes` naming `brokers/<id>` or `brokers/<default>`. Each
broker reads its own and the defaults at start, then the users' config store
(auth/credential_store.py), which follows the notifications, hands it those two as they
change: a default set through one broker is in force on every broker within a watch's
round trip.

One broker alone keeps them in its data directory, in a file of the same entity
configs by path (entity_config_file.py), replaced atomically and readable by the
broker's user alone.

Either way a password config is stored encrypted with `password.encoder.secret`
(passwords.py); one that secret cannot decode is left out, logged, as Kafka does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from herdless.broker.dynamic_config.layers import DynamicBrokerConfig, entity_path
from herdless.broker.dynamic_config.passwords import (
    PasswordDecodeError,
    decode_password,
    encode_password,
)
from herdless.broker.dynamic_config.rules import PASSWORD_ENCODER_SECRET, is_sensitive
from herdless.broker.entity_config_file import Change, EntityConfigFile, LocalEntityConfigs
from herdless.cluster.zookeeper.calls import zookeeper_call

if TYPE_CHECKING:
    from herdless.broker.auth.credential_store import ZooKeeperCredentials
    from herdless.cluster.store import ClusterStore

log = logging.getLogger(__name__)

DYNAMIC_CONFIGS_FILE = "dynamic-broker-configs.json"
# Readable by the broker's user alone: passwords are encrypted only with a secret set.
DYNAMIC_CONFIGS = EntityConfigFile(
    DYNAMIC_CONFIGS_FILE, "entities", "an entity configs", mode=0o600
)


class BrokerConfigStore(Protocol):
    async def alter(self, per_broker: bool, change: Change) -> None:
        """Apply `change` to this broker's own configs (per_broker) or the cluster-wide
        defaults, durably, then in force here before it returns. `change` sees and
        returns passwords in clear."""
        ...


class _Codec:
    """Passwords encrypted on the way to the store and decrypted on the way back."""

    def __init__(self, dynamic: DynamicBrokerConfig) -> None:
        self._secret = dynamic.static.security.get(PASSWORD_ENCODER_SECRET)

    def encode(self, config: Mapping[str, str]) -> dict[str, str]:
        if self._secret is None:
            return dict(config)
        return {
            k: encode_password(self._secret, v) if is_sensitive(k) else v for k, v in config.items()
        }

    def decode(self, path: str, config: Mapping[str, str]) -> dict[str, str]:
        decoded = {}
        for key, value in config.items():
            if not is_sensitive(key):
                decoded[key] = value
            elif self._secret is None:
                log.error("%s: %s left out: no %s to decode it", path, key, PASSWORD_ENCODER_SECRET)
            else:
                try:
                    decoded[key] = decode_password(self._secret, value)
                except PasswordDecodeError as exc:
                    log.error("%s: %s is left out: %s", path, key, exc)
        return decoded

    def change(self, path: str, change: Change) -> Callable[[dict[str, str]], dict[str, str]]:
        return lambda stored: self.encode(change(self.decode(path, stored)))


class LocalBrokerConfigs:
    """One broker: the dynamic configs file in its data directory."""

    def __init__(self, data_dir: Path, dynamic: DynamicBrokerConfig) -> None:
        self._dynamic = dynamic
        self._codec = _Codec(dynamic)
        self._file = LocalEntityConfigs(DYNAMIC_CONFIGS, data_dir, self._stored)

    def load(self) -> None:
        """Read the file; StorageError if it is unreadable."""
        self._file.load()

    async def alter(self, per_broker: bool, change: Change) -> None:
        path = entity_path(self._dynamic.node_id if per_broker else None)
        await self._file.alter(path, self._codec.change(path, change))

    def _stored(self, path: str, config: dict[str, str]) -> None:
        self._dynamic.apply(path, self._codec.decode(path, config))


class ZooKeeperBrokerConfigs:
    """A cluster: the configs in ZooKeeper, followed through the users' config store."""

    def __init__(
        self,
        configs: ZooKeeperCredentials,
        store: Callable[[], ClusterStore],
        dynamic: DynamicBrokerConfig,
    ) -> None:
        self._configs = configs
        self._store = store
        self._dynamic = dynamic
        self._codec = _Codec(dynamic)
        configs.add_listener(self._stored, ("brokers",))

    async def start(self) -> None:
        """Read this broker's configs and the defaults (changes from now on arrive by
        notification; older notifications may be gone)."""
        for path in (entity_path(None), entity_path(self._dynamic.node_id)):
            config = await zookeeper_call(self._store().entity_config, path)
            self._stored(path, config)

    async def alter(self, per_broker: bool, change: Change) -> None:
        path = entity_path(self._dynamic.node_id if per_broker else None)
        await self._configs.alter_entity(path, self._codec.change(path, change))

    def _stored(self, path: str, config: dict[str, str]) -> None:
        if path in (entity_path(None), entity_path(self._dynamic.node_id)):
            self._dynamic.apply(path, self._codec.decode(path, config))
