"""Creating, deleting, growing and configuring topics: on this broker's disk, or in ZooKeeper.

The admin handlers (CreateTopics, DeleteTopics, CreatePartitions, the config
APIs, auto-creation in Metadata) ask a TopicAdmin and do not know which kind
they have. One broker alone changes its LogManager directly. In a cluster a
topic is a replica assignment and a config in ZooKeeper, written by the
broker that got the request: the controller then elects leaders, and each
broker opens the replicas it is assigned (cluster_node.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from herdless.broker.limited_warnings import LimitedWarnings
from herdless.broker.topics.admin_errors import TopicAdminError
from herdless.broker.topics.partition_limits import PartitionLimits
from herdless.cluster import assignment as replica_assignment
from herdless.cluster.errors import ClusterError, StateVersionConflict, UnknownTopic
from herdless.cluster.layout import TopicAssignment
from herdless.cluster.metadata_cache import ClusterMetadata
from herdless.cluster.store import ClusterStore
from herdless.cluster.zookeeper.calls import zookeeper_call
from herdless.protocol.errors import ErrorCode
from herdless.storage import LogConfig, LogManager, StorageError, StorageIOError
from herdless.storage.config import altered_topic_configs
from herdless.storage.manager import new_topic_id, validate_topic_name

log = logging.getLogger(__name__)
# Auto-creation retried by every client at a full disk or the file limit must not flood.
_creation_warnings = LimitedWarnings(log)

DEFAULT = -1


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = DEFAULT
    replication_factor: int = DEFAULT
    # partition -> replicas, when the client assigned them itself
    assignment: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    topic_id: uuid.UUID | None  # None when only validated
    num_partitions: int
    replication_factor: int
    config: LogConfig


class TopicAdmin(Protocol):
    limits: PartitionLimits

    async def create_topic(
        self, topic: NewTopic, *, validate_only: bool = False, timeout_ms: int = 0
    ) -> CreatedTopic: ...

    async def delete_topic(self, name: str) -> None: ...

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignment: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool = False,
    ) -> None: ...

    def topic_config(self, name: str) -> LogConfig | None: ...

    async def alter_configs(
        self,
        name: str,
        changes: Mapping[str, str | None],
        *,
        replace: bool,
        validate_only: bool,
    ) -> LogConfig: ...


def _storage_error(exc: StorageError) -> TopicAdminError:
    return TopicAdminError(exc.error_code, str(exc))


def _creation_failed(name: str, exc: OSError | StorageIOError) -> TopicAdminError:
    """Out of descriptors or space: an answer, and a log line that cannot flood."""
    _creation_warnings.warn("topic creation", f"cannot create partitions of {name}: {exc}")
    return TopicAdminError(
        ErrorCode.KAFKA_STORAGE_ERROR, f"cannot create partitions of {name!r}: {exc}"
    )


class LocalTopics:
    """One broker: topics are what its LogManager holds."""

    def __init__(
        self, logs: LogManager, node_id: int, default_partitions: int, limits: PartitionLimits
    ) -> None:
        self._logs = logs
        self._node_id = node_id
        self._default_partitions = default_partitions
        self.limits = limits

    def _check_limits(self, adding: int) -> None:
        self.limits.check_request(adding)
        hosted = sum(topic.partition_count for topic in self._logs.topics.values())
        self.limits.check_broker(self._node_id, hosted, adding)

    async def create_topic(
        self, topic: NewTopic, *, validate_only: bool = False, timeout_ms: int = 0
    ) -> CreatedTopic:
        num_partitions = topic.num_partitions
        if topic.assignment:
            num_partitions = len(topic.assignment)
            if any(set(replicas) != {self._node_id} for replicas in topic.assignment.values()):
                raise TopicAdminError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"this cluster has one broker, id {self._node_id}",
                )
        elif num_partitions == DEFAULT:
            num_partitions = self._default_partitions
        if topic.replication_factor not in (DEFAULT, 1) and not topic.assignment:
            raise TopicAdminError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {topic.replication_factor} is larger than"
                " the 1 broker available",
            )
        configs = dict(topic.configs or {})
        try:
            config = self._logs.check_new_topic(topic.name, num_partitions, configs)
            self._check_limits(num_partitions)
            if validate_only:
                return CreatedTopic(None, num_partitions, 1, config)
            created = self._logs.create_topic(topic.name, num_partitions, configs)
        except (StorageIOError, OSError) as exc:
            raise _creation_failed(topic.name, exc) from None
        except StorageError as exc:
            raise _storage_error(exc) from None
        log.info("created topic %s with %d partitions", topic.name, num_partitions)
        return CreatedTopic(created.topic_id, num_partitions, 1, created.config)

    async def delete_topic(self, name: str) -> None:
        try:
            self._logs.delete_topic(name)
        except StorageError as exc:
            raise _storage_error(exc) from None
        log.info("deleted topic %s", name)

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignment: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool = False,
    ) -> None:
        topic = self._logs.topics.get(name)
        if topic is None:
            raise TopicAdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if count <= topic.partition_count:
            raise TopicAdminError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {name!r} has {topic.partition_count} partitions;"
                f" the new count {count} must be larger",
            )
        if assignment and any(set(r) != {self._node_id} for r in assignment):
            raise TopicAdminError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"this cluster has one broker, id {self._node_id}",
            )
        self._check_limits(count - topic.partition_count)
        if not validate_only:
            try:
                self._logs.create_partitions(name, count)
            except (StorageIOError, OSError) as exc:
                raise _creation_failed(name, exc) from None
            log.info("topic %s now has %d partitions", name, count)

    def topic_config(self, name: str) -> LogConfig | None:
        topic = self._logs.topics.get(name)
        return None if topic is None else topic.config

    async def alter_configs(
        self,
        name: str,
        changes: Mapping[str, str | None],
        *,
        replace: bool,
        validate_only: bool,
    ) -> LogConfig:
        try:
            return self._logs.alter_topic_configs(
                name, changes, replace=replace, validate_only=validate_only
            )
        except StorageError as exc:
            raise _storage_error(exc) from None


class ZooKeeperTopics:
    """A cluster: topics are replica assignments and configs in ZooKeeper."""

    def __init__(
        self,
        store: Callable[[], ClusterStore],
        metadata: ClusterMetadata,
        defaults: Callable[[], LogConfig],
        default_partitions: int,
        default_replication_factor: int,
        limits: PartitionLimits,
    ) -> None:
        self.limits = limits
        self._store = store
        self._metadata = metadata
        # The broker-wide topic defaults in force (dynamic broker configs change them).
        self._defaults = defaults
        self._default_partitions = default_partitions
        self._default_replication_factor = default_replication_factor

    def _live_racks(self) -> dict[int, str | None]:
        return {b.node_id: b.rack for b in self._metadata.brokers()}

    def _check_limits(self, added: Mapping[int, Sequence[int]]) -> None:
        """Partitions per request, and replicas per broker as this broker's config says."""
        self.limits.check_request(len(added))
        hosted: Counter[int] = Counter()
        for name in self._metadata.topic_names():
            current = self._metadata.assignment(name)
            if current is not None:
                hosted.update(b for replicas in current.replicas.values() for b in replicas)
        adding = Counter(b for replicas in added.values() for b in replicas)
        for node_id, count in sorted(adding.items()):
            self.limits.check_broker(node_id, hosted[node_id], count)

    async def create_topic(
        self, topic: NewTopic, *, validate_only: bool = False, timeout_ms: int = 0
    ) -> CreatedTopic:
        try:
            validate_topic_name(topic.name)
        except StorageError as exc:
            raise _storage_error(exc) from None
        configs = dict(topic.configs or {})
        try:
            config = LogConfig.from_topic_configs(configs, self._defaults())
        except ValueError as exc:
            raise TopicAdminError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        live = self._live_racks()
        try:
            if topic.assignment:
                replicas = replica_assignment.validate_new_topic_assignment(topic.assignment, live)
            else:
                num_partitions = (
                    self._default_partitions
                    if topic.num_partitions == DEFAULT
                    else topic.num_partitions
                )
                # Before the assignment is built: it takes memory per partition.
                self.limits.check_request(num_partitions)
                factor = (
                    self._default_replication_factor
                    if topic.replication_factor == DEFAULT
                    else topic.replication_factor
                )
                replicas = replica_assignment.assign_replicas(live, num_partitions, factor)
        except ClusterError as exc:
            raise _cluster_error(exc) from None
        self._check_limits(replicas)
        assignment = TopicAssignment(topic.name, new_topic_id(), replicas)
        created = CreatedTopic(None, len(replicas), assignment.replication_factor, config)
        if self._metadata.assignment(topic.name) is not None:
            raise TopicAdminError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists."
            )
        if validate_only:
            return created
        try:
            await zookeeper_call(
                self._store().create_topic, assignment, config.explicit_topic_configs()
            )
        except ClusterError as exc:
            raise _cluster_error(exc) from None
        log.info(
            "created topic %s: %d partitions, replicas %s",
            topic.name,
            len(replicas),
            {p: list(r) for p, r in replicas.items()},
        )
        if timeout_ms > 0 and not await self._wait_for_leaders(topic.name, timeout_ms):
            raise TopicAdminError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"topic {topic.name!r} was created, but not every partition had a leader"
                f" within {timeout_ms} ms",
            )
        return CreatedTopic(
            assignment.topic_id, len(replicas), assignment.replication_factor, config
        )

    async def _wait_for_leaders(self, name: str, timeout_ms: int) -> bool:
        """As Kafka's CreateTopics waits: until this broker's metadata shows every leader."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while loop.time() < deadline:
            described = self._metadata.topic(name)
            if described is not None and all(p.leader >= 0 for p in described.partitions):
                return True
            await asyncio.sleep(0.02)
        return False

    async def delete_topic(self, name: str) -> None:
        try:
            await zookeeper_call(self._store().mark_for_deletion, name)
        except UnknownTopic:
            raise TopicAdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) from None
        except ClusterError as exc:
            raise _cluster_error(exc) from None
        log.info("topic %s marked for deletion", name)

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignment: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool = False,
    ) -> None:
        store = self._store()
        found = await zookeeper_call(store.topic, name)
        if found is None:
            raise TopicAdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        current = found.value
        if current.adding or current.removing:
            # As Kafka's controller: the topic's znode is the reassignment's to write.
            raise TopicAdminError(
                ErrorCode.REASSIGNMENT_IN_PROGRESS, "A partition reassignment is in progress."
            )
        self.limits.check_request(count - len(current.replicas))
        try:
            added = replica_assignment.assign_new_partitions(
                name, current.replicas, self._live_racks(), count, assignment
            )
            self._check_limits(added)
            grown = replace(current, replicas={**current.replicas, **added})
            if validate_only:
                return
            await zookeeper_call(store.set_partitions, grown, found.version)
        except StateVersionConflict:
            raise TopicAdminError(
                ErrorCode.REASSIGNMENT_IN_PROGRESS,
                f"topic {name!r} changed while its partitions were being added; try again",
            ) from None
        except ClusterError as exc:
            raise _cluster_error(exc) from None
        log.info("topic %s now has %d partitions", name, count)

    def topic_config(self, name: str) -> LogConfig | None:
        if self._metadata.assignment(name) is None:
            return None
        return LogConfig.from_topic_configs(self._metadata.topic_configs(name), self._defaults())

    async def alter_configs(
        self,
        name: str,
        changes: Mapping[str, str | None],
        *,
        replace: bool,
        validate_only: bool,
    ) -> LogConfig:
        if self._metadata.assignment(name) is None:
            raise TopicAdminError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
            )
        store = self._store()
        current = await zookeeper_call(store.topic_config, name)
        try:
            explicit = altered_topic_configs(current, changes, replace=replace)
            config = LogConfig.from_topic_configs(explicit, self._defaults())
        except (ValueError, StorageError) as exc:
            raise TopicAdminError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if not validate_only:
            try:
                await zookeeper_call(store.set_topic_config, name, config.explicit_topic_configs())
            except ClusterError as exc:
                raise _cluster_error(exc) from None
        return config


def _cluster_error(exc: ClusterError) -> TopicAdminError:
    return TopicAdminError(exc.error_code, str(exc))
