"""The znodes of ACLs (/kafka-acl and /kafka-acl-extended, Kafka's paths, acl_layout
has them) and their change notifications, read and written as Kafka's AclAuthorizer
does through KafkaZkClient."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from herdless.cluster import acl_layout
from herdless.cluster.errors import MalformedZNode, StateVersionConflict
from herdless.cluster.layout import Versioned
from herdless.cluster.zookeeper.session import ZooKeeperSession
from herdless.cluster.zookeeper.watches import Watch, watch_children
from herdless.security.acls import AccessControlEntry, ResourcePattern

logger = logging.getLogger(__name__)


class AclZNodes(ZooKeeperSession):
    """ACLs by resource pattern, and their change notifications."""

    # -- ACLs ----------------------------------------------------------------------------

    def create_acl_paths(self) -> None:
        """The znodes ACLs and their change notifications go under, as Kafka's brokers
        create them at start (KafkaZkClient.createAclPaths)."""
        for path in acl_layout.paths_to_create():
            self._ensure_path(path)

    def all_acls(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every pattern's ACLs (Kafka's loadAllAcls); znodes that are not ACLs, or of
        resource types Kafka would ignore, are logged and left out."""
        found: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for pattern_type in acl_layout.STORED_PATTERN_TYPES:
            root = acl_layout.acls_root(pattern_type)
            try:
                type_names = self._run(lambda r=root: self._client.get_children_async(r))
            except NoNodeError:
                continue
            for type_name in sorted(type_names):
                resource_type = acl_layout.resource_type_of_path_name(type_name)
                if resource_type is None:
                    logger.warning("ignoring ACLs of unknown resource type %s/%s", root, type_name)
                    continue
                parent = acl_layout.resource_type_path(pattern_type, resource_type)
                try:
                    names = self._run(lambda p=parent: self._client.get_children_async(p))
                except NoNodeError:
                    continue
                for name in sorted(names):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    try:
                        versioned = self.resource_acls(pattern)
                    except MalformedZNode as exc:
                        logger.error("ignoring ACLs that cannot be read: %s", exc)
                        continue
                    if versioned is not None and versioned.value:
                        found[pattern] = versioned.value
        return found

    def resource_acls(
        self, pattern: ResourcePattern
    ) -> Versioned[frozenset[AccessControlEntry]] | None:
        """A pattern's ACLs and its znode's version; None if it has no znode."""
        path = acl_layout.resource_path(pattern)
        try:
            data, stat = self._run(lambda: self._client.get_async(path))
        except NoNodeError:
            return None
        return Versioned(acl_layout.decode_acls(pattern, data), stat.version)

    def update_resource_acls(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
        attempts: int = 10,
    ) -> tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]:
        """Apply `change` to the pattern's ACLs as ZooKeeper holds them, with a write
        conditional on the version read (re-read and re-applied when another broker
        wrote meanwhile, so neither loses the other's ACLs), then announce the change
        to every broker. Returns the ACLs before and after; a pattern left without ACLs
        loses its znode. StateVersionConflict after `attempts` lost races."""
        path = acl_layout.resource_path(pattern)
        for _ in range(attempts):
            current = self.resource_acls(pattern)
            before = current.value if current is not None else frozenset()
            after = frozenset(change(before))
            if after == before:
                return before, after
            if self._write_acls(path, current, after):
                self._announce_acl_change(pattern)
                return before, after
        raise StateVersionConflict(f"{path} kept changing: gave up after {attempts} attempts")

    def _write_acls(
        self,
        path: str,
        current: Versioned[frozenset[AccessControlEntry]] | None,
        acls: frozenset[AccessControlEntry],
    ) -> bool:
        """Write a pattern's ACLs if its znode is still as read; False if it is not."""
        data = acl_layout.encode_acls(acls)
        try:
            if current is None:
                self._run(lambda: self._client.create_async(path, data))
            elif not acls:
                self._run(lambda: self._client.delete_async(path, current.version))
            else:
                self._run(lambda: self._client.set_async(path, data, current.version))
        except NoNodeError:
            if current is None:  # the resource type's znode is missing
                self._ensure_path(path.rpartition("/")[0])
            return False
        except (BadVersionError, NodeExistsError):
            return False
        return True

    def _announce_acl_change(self, pattern: ResourcePattern) -> None:
        prefix = f"{acl_layout.changes_path(pattern.pattern_type)}/{acl_layout.CHANGE_PREFIX}"
        data = acl_layout.encode_change(pattern)
        self._run(lambda: self._client.create_async(prefix, data, sequence=True))

    def watch_acl_changes(self, changes_root: str, callback: Callable[[list[str]], None]) -> Watch:
        """The names of the change notifications under one of the two change paths, now
        and at every change."""
        return watch_children(self._client, changes_root, callback)

    def acl_change(self, changes_root: str, name: str) -> ResourcePattern | None:
        """The pattern a change notification names; None once deleted. MalformedZNode if
        it names none."""
        try:
            data, _ = self._run(lambda: self._client.get_async(f"{changes_root}/{name}"))
        except NoNodeError:
            return None
        return acl_layout.decode_change(changes_root, name, data)

    def purge_acl_changes(self, changes_root: str, names: list[str]) -> None:
        """Delete the notifications older than Kafka's 15 minutes, by their creation time
        (ZooKeeper's clock), as each Kafka broker does after reading notifications."""
        oldest = self._wall_ms() - acl_layout.CHANGE_EXPIRATION_MS
        for name in names:
            path = f"{changes_root}/{name}"
            stat = self._run(lambda p=path: self._client.exists_async(p))
            if stat is not None and stat.ctime < oldest:
                with suppress(NoNodeError):
                    self._run(lambda p=path: self._client.delete_async(p))
