"""Where a broker keeps users' SCRAM credentials, and the cache SASL checks them against.

A cluster keeps them where Kafka does: each user's config in ZooKeeper,
`/config/users/<user>`, with a notification in `/config/changes` after every change.
Every broker reads all users at start, then watches the notifications and reads again
the config of each user one names: a change made through any broker is in every
broker's cache within a watch's round trip. As Kafka's brokers do, each deletes the
notifications older than 15 minutes.

One broker alone keeps them in its data directory, in one file of the same per-user
configs, replaced atomically and readable by the broker's user alone. `herdless users
--data-dir` writes that file while no broker runs (it takes the directory's lock).

In a cluster the same notifications name the configs of users' client ids and of client
ids (their quotas): the store reads those too and hands every entity's config to the
listeners added (the quota cache), so each entity's config is read in one place; and
they name brokers' dynamic configs (brokers/<id>, brokers/<default>), which the dynamic
broker config listens to.

Either way SASL reads the cache (CredentialCache.scram) and never waits on a disk or on
ZooKeeper; a change is in the cache of the broker that made it before it answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from herdless.broker.auth.change_notifications import ChangeNotifications
from herdless.broker.clock import wall_ms
from herdless.broker.entity_config_file import Change, EntityConfigFile, LocalEntityConfigs
from herdless.cluster import layout
from herdless.cluster.errors import MalformedZNode
from herdless.cluster.zookeeper.calls import zookeeper_call
from herdless.security.scram import ScramCredential, altered_config, credentials_of

if TYPE_CHECKING:
    from herdless.cluster.store import ClusterStore, Watch

log = logging.getLogger(__name__)

CREDENTIALS_FILE = "scram-credentials.json"
# Only the broker's own user may read the keys.
CREDENTIALS = EntityConfigFile(CREDENTIALS_FILE, "users", "a credentials", mode=0o600, indent=1)
# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class ScramCredentials:
    """Users' SCRAM credentials in memory: the CredentialCache SASL reads."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """Every user with a credential: user -> mechanism -> credential."""
        return {user: dict(found) for user, found in self._users.items()}

    def of(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def _apply(self, user: str, config: Mapping[str, str]) -> None:
        """The user's credentials as its config now holds them. One that cannot be read
        leaves the user with none: better refused than let in on a half-read credential."""
        try:
            found = credentials_of(config)
        except ValueError as exc:
            log.error("the SCRAM credentials of user %r are unreadable, so unused: %s", user, exc)
            found = {}
        if found:
            self._users[user] = found
        else:
            self._users.pop(user, None)


class CredentialStore(Protocol):
    """What the admin APIs use: the cache, and a durable change of one user's credentials."""

    def scram(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def users(self) -> dict[str, dict[str, ScramCredential]]: ...

    def of(self, user: str) -> dict[str, ScramCredential]: ...

    async def alter(
        self,
        user: str,
        upsertions: Mapping[str, ScramCredential],
        deletions: Collection[str],
    ) -> None:
        """Delete then set the user's credentials, durably, then in the cache.
        CredentialNotFound if one to delete is not there (then nothing changes)."""
        ...


# -- one broker: a file in the data directory -------------------------------------------


def alter_offline(
    data_dir: Path,
    user: str,
    upsertions: Mapping[str, ScramCredential],
    deletions: Collection[str],
) -> None:
    """Change one user's credentials while no broker runs on the directory: StorageError
    if a broker (which would not see the change) holds its lock."""
    CREDENTIALS.alter_offline(data_dir, user, _altered(upsertions, deletions))


def _altered(upsertions: Mapping[str, ScramCredential], deletions: Collection[str]) -> Change:
    return lambda config: altered_config(config, upsertions, deletions)


class LocalCredentials(ScramCredentials):
    """One broker: the credentials file in its data directory."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__()
        self._file = LocalEntityConfigs(CREDENTIALS, data_dir, self._apply)

    def load(self) -> None:
        """Read the file; StorageError if it is unreadable (the broker does not start
        without the users it was given)."""
        self._file.load()

    async def alter(
        self,
        user: str,
        upsertions: Mapping[str, ScramCredential],
        deletions: Collection[str],
    ) -> None:
        await self._file.alter(user, _altered(upsertions, deletions))


# -- a cluster: ZooKeeper -----------------------------------------------------------------


class ZooKeeperCredentials(ScramCredentials):
    """A cluster: users' configs in ZooKeeper, followed through /config/changes."""

    def __init__(self, store: Callable[[], ClusterStore]) -> None:
        super().__init__()
        self._store = store
        self._watch: Watch | None = None
        self._changes = ChangeNotifications(
            "credential changes", self._changed_users, self._apply_changes
        )
        # Told the configs of entities of their types (path below /config, config): at
        # start for users and client ids, and at every change.
        self._listeners: list[tuple[frozenset[str], Callable[[str, dict[str, str]], None]]] = []

    def add_listener(
        self,
        listener: Callable[[str, dict[str, str]], None],
        entity_types: Collection[str] = ("users", "clients"),
    ) -> None:
        """Before start: `listener` is told the config of each entity of these types (by
        its path below /config, as users/alice/clients/app or brokers/<default>) as it
        changes, and, for users and client ids, each as read at start."""
        self._listeners.append((frozenset(entity_types), listener))

    async def start(self) -> None:
        """Read every user's config, then follow the notifications (once connected)."""
        self._changes.bind()
        store = self._store()
        for user, config in (await zookeeper_call(store.user_configs)).items():
            self._apply(user, config)
        if self._followed() & {"users", "clients"}:
            for entity_path, config in (await zookeeper_call(store.quota_entity_configs)).items():
                self._tell(entity_path, config)
        # The watch's first call hands over the notifications already there: a change
        # made between the read above and now is among them.
        self._watch = await zookeeper_call(store.watch_config_changes, self._changes.on_changes)

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        await self._changes.stop()

    async def alter(
        self,
        user: str,
        upsertions: Mapping[str, ScramCredential],
        deletions: Collection[str],
    ) -> None:
        config = await zookeeper_call(
            self._store().alter_user_config,
            user,
            _altered(upsertions, deletions),
        )
        self._apply(user, config)
        self._tell(layout.user_config_entity_path(user), config)

    async def alter_entity(self, entity_path: str, change: Change) -> dict[str, str]:
        """Change any entity's config (a user's quotas, a client id's) for every broker;
        in this broker's listeners before it returns."""
        config = await zookeeper_call(self._store().alter_entity_config, entity_path, change)
        self._changed_entity(entity_path, config)
        return config

    def _followed(self) -> set[str]:
        return {entity_type for types, _ in self._listeners for entity_type in types}

    def _tell(self, entity_path: str, config: dict[str, str]) -> None:
        entity_type = entity_path.partition("/")[0]
        for types, listener in self._listeners:
            if entity_type not in types:
                continue
            try:
                listener(entity_path, dict(config))
            except Exception:
                log.exception("the config at %s was not applied", entity_path)

    def _changed_entity(self, entity_path: str, config: dict[str, str]) -> None:
        entity_type, _, entity = entity_path.partition("/")
        if entity_type == "users" and "/" not in entity:
            try:
                self._apply(layout.desanitize(entity), config)
            except ValueError as exc:
                log.error("skipped the config of user znode %r: %s", entity, exc)
        self._tell(entity_path, config)

    def _apply_changes(self, configs: dict[str, dict[str, str]]) -> None:
        for entity_path, config in configs.items():
            self._changed_entity(entity_path, config)

    def _changed_users(
        self, names: list[str], last_change: int
    ) -> tuple[int, dict[str, dict[str, str]]]:
        """In a worker thread: the configs of the users (and, when listened to, of the
        users' client ids and client ids) the notifications after `last_change` name, as
        they are now, by path below /config, and the last notification read; old
        notifications are deleted."""
        store = self._store()
        numbered = sorted(
            (number, name)
            for name in names
            if (number := layout.config_change_number(name)) is not None
        )
        last, entities = last_change, set()
        now = wall_ms()
        for number, name in numbered:
            fresh = number > last_change
            try:
                change = store.config_change(name)
            except MalformedZNode as exc:
                if fresh:
                    log.error("skipped a config change notification: %s", exc)
                change = None
            if fresh:
                last = number
                if change is not None and self._follows(change.entity_path):
                    entities.add(change.entity_path)
            if change is not None and now - change.created_ms > CHANGE_EXPIRATION_MS:
                store.delete_config_change(name)
        configs = {}
        for entity_path in entities:
            try:
                configs[entity_path] = store.entity_config(entity_path)
            except MalformedZNode as exc:
                log.error("skipped the config at %s: %s", entity_path, exc)
        return last, configs

    def _follows(self, entity_path: str) -> bool:
        entity_type, _, entity = entity_path.partition("/")
        if entity_type == "users" and "/" not in entity:
            return True
        # Configs of users' clients (users/<user>/clients/<id>) and of client ids hold
        # quotas alone; brokers' are dynamic broker configs; client-metrics' telemetry
        # subscriptions.
        return entity_type in self._followed()
