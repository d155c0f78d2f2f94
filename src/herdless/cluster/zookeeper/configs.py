"""The znodes of configs: topics' (/config/topics), KIP-848 groups' (/config/groups),
users' with their SCRAM credentials and quotas (/config/users), client ids' quotas
(/config/clients), client-metrics subscriptions' (/config/client-metrics), and the
change notifications that tell every broker of a change to a user's, client id's or
subscription's (/config/changes)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import suppress

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from herdless.cluster import layout
from herdless.cluster.errors import MalformedZNode, StateVersionConflict
from herdless.cluster.zookeeper.session import ZooKeeperSession
from herdless.cluster.zookeeper.transactions import first_failure
from herdless.cluster.zookeeper.watches import Watch, watch_children, watch_data

logger = logging.getLogger(__name__)

# Conditional writes tried again after another writer's got in first.
_CONFLICT_RETRIES = 10


class ConfigZNodes(ZooKeeperSession):
    """Topic, group and user configs, and config change notifications."""

    # -- topic configs -------------------------------------------------------------------

    def topic_config(self, name: str) -> dict[str, str]:
        """The topic's configs as set (Kafka keeps only overrides of the defaults here)."""
        try:
            data, _ = self._run(lambda: self._client.get_async(layout.topic_config_path(name)))
        except NoNodeError:
            return {}
        return layout.decode_topic_config(name, data)

    def set_topic_config(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's configs (the whole set, as AlterConfigs leaves it)."""
        path = layout.topic_config_path(name)
        data = layout.encode_topic_config(configs)
        try:
            self._run(lambda: self._client.set_async(path, data))
        except NoNodeError:
            try:
                self._run(lambda: self._client.create_async(path, data))
            except NodeExistsError:
                self._run(lambda: self._client.set_async(path, data))

    def watch_topic_config(self, name: str, callback: Callable[[dict[str, str]], None]) -> Watch:
        return watch_data(
            self._client,
            layout.topic_config_path(name),
            lambda data, _stat: layout.decode_topic_config(name, data),
            callback,
        )

    # -- group configs (KIP-848) ---------------------------------------------------------

    def set_group_config(self, group: str, configs: Mapping[str, str]) -> None:
        """Replace the group's configs; none: remove its znode (the broker's defaults)."""
        path = layout.group_config_path(group)
        if not configs:
            with suppress(NoNodeError):
                self._run(lambda: self._client.delete_async(path))
            return
        data = layout.encode_topic_config(configs)
        try:
            self._run(lambda: self._client.set_async(path, data))
        except NoNodeError:
            self._ensure_path(layout.GROUP_CONFIGS_PATH)
            try:
                self._run(lambda: self._client.create_async(path, data))
            except NodeExistsError:
                self._run(lambda: self._client.set_async(path, data))

    def watch_group_configs(self, callback: Callable[[set[str]], None]) -> Watch:
        """The groups that have configs, now and at every change."""
        self._ensure_path(layout.GROUP_CONFIGS_PATH)
        return watch_children(
            self._client,
            layout.GROUP_CONFIGS_PATH,
            lambda children: callback({layout.group_of_config_node(c) for c in children}),
        )

    def watch_group_config(self, group: str, callback: Callable[[dict[str, str]], None]) -> Watch:
        path = layout.group_config_path(group)
        return watch_data(
            self._client,
            path,
            lambda data, _stat: layout.decode_topic_config(group, data),
            callback,
        )

    # -- users' configs: SCRAM credentials ----------------------------------------------

    def user_configs(self) -> dict[str, dict[str, str]]:
        """Every user's config, by user name; a znode whose name or data is not a user's
        config is left out, logged."""
        children = self._run(lambda: self._client.get_children_async(layout.USER_CONFIGS_PATH))
        configs = {}
        for child in children:
            try:
                user = layout.desanitize(child)
                configs[user] = self.user_config(user)
            except (ValueError, MalformedZNode) as exc:
                logger.error("skipped the config of user znode %r: %s", child, exc)
        return configs

    def user_config(self, user: str) -> dict[str, str]:
        """The user's config ({} for none); MalformedZNode if it is not one."""
        try:
            data, _ = self._run(lambda: self._client.get_async(layout.user_config_path(user)))
        except NoNodeError:
            return {}
        return layout.decode_user_config(user, data)

    def alter_user_config(
        self, user: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        """alter_entity_config of the user's config (SCRAM credentials, quotas)."""
        layout.user_config_path(user)  # ValueError for a name ZooKeeper cannot hold
        return self.alter_entity_config(layout.user_config_entity_path(user), change)

    def entity_config(self, entity_path: str) -> dict[str, str]:
        """The config of an entity by its path below /config ({} for none); MalformedZNode
        if it is not one."""
        path = layout.entity_config_path(entity_path)
        try:
            data, _ = self._run(lambda: self._client.get_async(path))
        except NoNodeError:
            return {}
        return layout.decode_entity_config(entity_path, data)

    def quota_entity_configs(self) -> dict[str, dict[str, str]]:
        """The configs of every user, user's client id and client id, by path below
        /config (users/alice, users/alice/clients/app, clients/app); an unreadable one is
        left out, logged."""
        paths = []
        for user in self._children(layout.USER_CONFIGS_PATH):
            paths.append(f"users/{user}")
            clients = self._children(f"{layout.USER_CONFIGS_PATH}/{user}/clients")
            paths.extend(f"users/{user}/clients/{client}" for client in clients)
        paths.extend(f"clients/{c}" for c in self._children(layout.CLIENT_CONFIGS_PATH))
        configs = {}
        for entity_path in paths:
            try:
                configs[entity_path] = self.entity_config(entity_path)
            except MalformedZNode as exc:
                logger.error("skipped the config at %s: %s", entity_path, exc)
        return configs

    def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        """Every client-metrics subscription's config by its name; an unreadable one is
        left out, logged."""
        configs = {}
        for name in self._children(layout.CLIENT_METRICS_CONFIGS_PATH):
            entity_path = f"{layout.CLIENT_METRICS_ENTITY_TYPE}/{name}"
            try:
                configs[name] = self.entity_config(entity_path)
            except MalformedZNode as exc:
                logger.error("skipped the config at %s: %s", entity_path, exc)
        return configs

    def _children(self, path: str) -> list[str]:
        try:
            return self._run(lambda: self._client.get_children_async(path))
        except NoNodeError:
            return []

    def alter_entity_config(
        self, entity_path: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        """Apply `change` to an entity's config (by its path below /config) and tell every
        broker, as Kafka's AdminZkClient.changeConfigs does: the config's znode and a
        change notification in /config/changes, here in one transaction conditional on
        the version read (read again and `change` applied again when another writer got
        in between). A config left empty takes its znode away unless it has children
        (a user's client ids). Returns the config written; what `change` raises
        propagates, with nothing written."""
        path = layout.entity_config_path(entity_path)
        notification = layout.encode_config_change(entity_path)
        for _ in range(_CONFLICT_RETRIES):
            try:
                data, stat = self._run(lambda: self._client.get_async(path))
            except NoNodeError:
                data, stat = None, None
            config = change(layout.decode_entity_config(entity_path, data))
            tx = self._client.transaction()
            if stat is None:
                if not config:
                    return config
                # A user's client id's config lives below the user's (Kafka's
                # createRecursive leaves the parents without data).
                self._ensure_path(path.rsplit("/", 1)[0])
                tx.create(path, layout.encode_user_config(config))
            elif not config and stat.numChildren == 0:
                tx.delete(path, stat.version)
            else:
                tx.set_data(path, layout.encode_user_config(config), stat.version)
            tx.create(
                layout.config_change_path(layout.CONFIG_CHANGE_PREFIX), notification, sequence=True
            )
            failure = first_failure(self._commit(tx))
            if failure is None:
                return config
            if not isinstance(
                failure, BadVersionError | NodeExistsError | NoNodeError | NotEmptyError
            ):
                raise failure
        raise StateVersionConflict(f"the config at {entity_path} kept changing while altered")

    def watch_config_changes(self, callback: Callable[[list[str]], None]) -> Watch:
        """The names of the config change notifications, now and at every change."""
        return watch_children(self._client, layout.CONFIG_CHANGES_PATH, callback)

    def config_change(self, name: str) -> layout.ConfigChange | None:
        """One config change notification; None once deleted. MalformedZNode if not one."""
        try:
            data, stat = self._run(lambda: self._client.get_async(layout.config_change_path(name)))
        except NoNodeError:
            return None
        return layout.ConfigChange(name, layout.decode_config_change(name, data), stat.ctime)

    def delete_config_change(self, name: str) -> None:
        """Delete a notification every broker has had time to read (every broker does so
        with the old ones, as Kafka's, so one deleted already is no error)."""
        with suppress(NoNodeError):
            self._run(lambda: self._client.delete_async(layout.config_change_path(name)))
